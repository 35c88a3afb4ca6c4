"""A real nginx in front of a test server: pooled upstream keep-alive, in a temp dir, on a free port.

nginx is Debian's `nginx-light`, installed by `make test` (tests/tools/apt.sh) when it is missing;
a missing nginx fails the test that needs it, loudly. It runs as one unprivileged-safe process
(`master_process off`, no user switch, no privileged port): its config, pid file, error log and
temp paths all live in its own temp dir, and `Nginx.close()` stops it, from a `finally`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Final

START_TIMEOUT: Final = 10.0
ATTEMPTS: Final = 5  # a free port can be taken by someone else before nginx binds it: try again

CONFIG: Final = """\
master_process off;
daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 1024; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream mcp {{
        server 127.0.0.1:{upstream};
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host localhost;
        }}
    }}
}}
"""


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if found is None:
        raise AssertionError(
            "nginx is not installed: `make test` installs it (bash tests/tools/apt.sh nginx nginx-light)"
        )
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Nginx:
    """nginx proxying 127.0.0.1:`port` to the server on 127.0.0.1:`upstream`, keep-alive pooled."""

    def __init__(self, upstream: int) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="fairwins-nginx-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        binary = nginx_binary()
        try:
            for _ in range(ATTEMPTS):
                self.port = _free_port()
                conf = self.dir / "nginx.conf"
                conf.write_text(CONFIG.format(dir=self.dir, upstream=upstream, port=self.port))
                self.proc = subprocess.Popen(
                    [binary, "-p", str(self.dir), "-c", str(conf), "-e", str(self.dir / "error.log")],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
                if self._wait_listening():
                    return
                self._stop()
            raise AssertionError(f"nginx did not start in {ATTEMPTS} attempts:\n{self.error_log()}")
        except BaseException:
            self.close()
            raise

    def _wait_listening(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False  # most likely the port was taken meanwhile
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                return True
            except OSError:
                time.sleep(0.02)
        return False

    def error_log(self) -> str:
        stderr = b""
        if self.proc is not None and self.proc.stderr is not None and self.proc.poll() is not None:
            stderr = self.proc.stderr.read()
        try:
            log = (self.dir / "error.log").read_text(errors="replace")
        except OSError:
            log = ""
        return (stderr.decode(errors="replace") + log)[-3000:]

    def _stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)  # graceful: finish what is in flight, then exit
            try:
                proc.wait(START_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(START_TIMEOUT)
        if proc.stderr is not None:
            proc.stderr.close()

    def close(self) -> None:
        try:
            self._stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Nginx:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
