"""The contract's version, and the fingerprint of the snapshot each version published.

A version is the table a consumer can rely on: every change to what `assistant_contract.export`
writes (tools, routes, answers, wording) is a new version, recorded here by hand in the change
that makes it. Semantic versioning, seen from a consumer: a tool, a route or an optional field
added is minor; a tool, route or field removed or renamed, or an answer or argument narrowed, is
major; wording alone (a description, a title, a sentence) is a patch. `python -m
assistant_contract.export --check` (`make snapshot-check`) and tests/test_contract_versions.py
fail while the snapshot is not the one recorded for __version__, and print the line to add.
"""

from __future__ import annotations

from typing import Final

__version__ = "1.2.0"

# Each version, oldest first, and the sha256 of its snapshot without `generatedBy` (export.fingerprint).
# A recorded line is never changed: a table that changes again is the next version.
FINGERPRINTS: Final[dict[str, str]] = {
    "1.0.0": "8c11f76607bb4dd667da5d5a5bc1a92ff296f9e97e7ce46dd66c97bba76e1a63",
    "1.1.0": "2fffc8ce44913cfe5b199ce88bf8c3ea4cfab4ac47f1e4484342455cedeca558",
    "1.2.0": "8c5fcdcb8185b001ccab3a851ff3f5d20112c75287ebd79215f582d94f205569",
}
