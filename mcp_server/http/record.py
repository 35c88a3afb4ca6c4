"""One request as the access log sees it: who asked, what, the answer's status and how long it took."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

access = logging.getLogger("fairwins_mcp.access")


@dataclass(slots=True)
class Exchange:
    """Made when a request's first byte arrives, filled in as it is read and answered, logged once."""

    peer: str
    started: float  # time.monotonic() of the request's first byte
    method: str = "-"
    path: str = "-"
    status: int = 0
    logged: bool = False

    def log(self) -> None:
        """One access line (method, path, status, duration; never a header, so never a credential)."""
        if self.logged:
            return
        self.logged = True
        took = (time.monotonic() - self.started) * 1000
        path = "".join(ch if 32 < ord(ch) < 127 else "?" for ch in self.path[:200])
        access.info("%s %s %d %.1fms", self.method or "-", path or "-", self.status, took)
