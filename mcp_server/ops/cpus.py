"""How many CPUs this process may use: its affinity and cgroup CPU quota.

`os.cpu_count()` counts the host's CPUs. A container (Cloud Run, Kubernetes, `docker --cpus`) is
held to fewer by a CFS quota, and a process pinned with taskset to fewer by its affinity; both
must be read to size `--workers auto`. The parsers are pure (text in, a value or None out);
`available()` reads the files through an injectable `read`, so any layout can be tested from
sample files.
"""

from __future__ import annotations

import math
import os
import posixpath
import sys
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Final

PROC_CGROUP: Final = "/proc/self/cgroup"
PROC_MOUNTINFO: Final = "/proc/self/mountinfo"
MAX_ANCESTORS: Final = 64  # deeper nesting than any real hierarchy; a bound, not a limit that matters

Reader = Callable[[str], str | None]


@dataclass(frozen=True, slots=True)
class Mount:
    """One cgroup line of /proc/self/mountinfo: which hierarchy part is where."""

    root: str  # the hierarchy path shown at the mount point ("/" unless namespaced or bind-mounted)
    point: str  # where it is mounted
    version: int  # 1 or 2
    controllers: frozenset[str]  # v1: the controllers of this hierarchy ("cpu", "cpuacct", …); v2: empty


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """`/proc/self/cgroup` → {controller: path}, v2's (unified) path under "".

    Lines are `hierarchy-id:controller-list:path` (cgroups(7)); v1 lists controllers, v2 is `0::path`.
    """
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            paths[""] = path
            continue
        for name in controllers.split(","):
            if name:
                paths[name] = path
    return paths


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal (proc(5)).
    out, i = [], 0
    while i < len(field):
        digits = field[i + 1 : i + 4]
        if field[i] == "\\" and len(digits) == 3 and all(d in "01234567" for d in digits):
            out.append(chr(int(digits, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """The cgroup mounts of `/proc/self/mountinfo`.

    proc(5): `… root mount-point … - fstype source super-options`.
    """
    mounts: list[Mount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 1:
            continue
        fstype = tail[0]
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if fstype == "cgroup2":
            mounts.append(Mount(root, point, 2, frozenset()))
        elif fstype == "cgroup" and len(tail) >= 3:
            mounts.append(Mount(root, point, 1, frozenset(tail[2].split(","))))
    return mounts


def parse_cpu_max(text: str | None) -> float | None:
    """cgroup v2 `cpu.max` (`$MAX $PERIOD`) → CPUs allowed; None for no limit."""
    if text is None:
        return None
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    return _ratio(parts[0], parts[1])


def parse_cfs(quota: str | None, period: str | None) -> float | None:
    """cgroup v1 CFS quota and period → CPUs allowed, or None for no limit.

    The files are `cpu.cfs_quota_us` and `cpu.cfs_period_us`; a quota of -1 is no limit.
    """
    if quota is None or period is None:
        return None
    return _ratio(quota.strip(), period.strip())


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    if q <= 0 or p <= 0:
        return None
    return q / p


def usable(affinity: int, quota: float | None) -> int:
    """Whole CPUs a process can keep busy: affinity cut to quota, at least 1.

    The quota rounded up, as Go's GOMAXPROCS does: a quota of 1.5 CPUs keeps two workers busy
    part-time rather than leaving half a CPU unused.
    """
    count = max(1, affinity)
    if quota is not None:
        count = min(count, max(1, math.ceil(quota - 1e-9)))
    return count


def _directory(mount: Mount, path: str) -> str:
    """Where cgroup `path` (from /proc/self/cgroup) lives under `mount`."""
    root = mount.root.rstrip("/")
    if root == "":
        relative = path
    elif path == root or path.startswith(root + "/"):
        relative = path[len(root) :]
    else:
        # A namespaced view that does not contain our own path: the mount point is the nearest
        # cgroup we can read (what the JDK does too).
        relative = "/"
    return posixpath.normpath(mount.point + "/" + relative.lstrip("/"))


def _ancestors(directory: str, stop: str) -> list[str]:
    """`directory` and each parent up to and including the mount point `stop`."""
    chain = [directory]
    while directory != stop and len(chain) < MAX_ANCESTORS:
        parent = posixpath.dirname(directory)
        if parent == directory or not parent.startswith(stop):
            break
        directory = parent
        chain.append(directory)
    return chain


def cgroup_quota(read: Reader) -> float | None:
    """The tightest CPU quota, v1 or v2, of this cgroup and visible ancestors.

    A hybrid layout (v1 controllers plus a v2 unified mount) holds the cpu controller in one of
    the two, so both are read and the smaller limit wins; a parent's quota binds its children.
    """
    paths = parse_proc_cgroup(read(PROC_CGROUP) or "")
    mounts = parse_mountinfo(read(PROC_MOUNTINFO) or "")
    limits: list[float] = []
    for mount in mounts:
        if mount.version == 2:
            path = paths.get("")
            files: tuple[str, ...] = ("cpu.max",)
        elif "cpu" in mount.controllers:
            path = paths.get("cpu")
            files = ("cpu.cfs_quota_us", "cpu.cfs_period_us")
        else:
            continue
        if path is None:
            continue
        directory = _directory(mount, path)
        for level in _ancestors(directory, posixpath.normpath(mount.point)):
            texts = [read(posixpath.join(level, name)) for name in files]
            limit = parse_cpu_max(texts[0]) if mount.version == 2 else parse_cfs(texts[0], texts[1])
            if limit is not None:
                limits.append(limit)
    return min(limits) if limits else None


def affinity() -> int:
    """CPUs the scheduler lets this process run on (every CPU off Linux)."""
    if sys.platform == "linux":
        with suppress(OSError):
            return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def read_text(path: str) -> str | None:
    """A small file's text; None if absent, unreadable, or not a file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(65536)
    except OSError:
        return None


def available(read: Reader = read_text, cpus: int | None = None) -> int:
    """`--workers auto`: the CPUs this process may actually keep busy."""
    return usable(affinity() if cpus is None else cpus, cgroup_quota(read))
