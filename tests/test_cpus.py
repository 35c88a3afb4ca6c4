"""`--workers auto`: CPUs from affinity and cgroup quotas, read from sample cgroup layouts (v1, v2, hybrid)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mcp_server.ops import cpus
from tests.conftest import ROOT, WAIT

# This sandbox's own layout: v1 controllers, the cpu controller among them, plus a v2 mount.
HYBRID_CGROUP = """9:name=systemd:/
8:pids:/
4:memory:/process_api/561c6a84423e0fc7e3cef8a03869103e
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
"""
HYBRID_MOUNTINFO = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""

# Docker on a v1 host without a cgroup namespace: the full host path, the container's own cgroup mounted at the root.
DOCKER_V1_CGROUP = "12:cpu,cpuacct:/docker/3f2a\n11:memory:/docker/3f2a\n"
DOCKER_V1_MOUNTINFO = (
    "600 590 0:55 /docker/3f2a /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
    "601 590 0:56 /docker/3f2a /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n"
)

# Pure v2 with a cgroup namespace (Kubernetes, Cloud Run second generation, docker on a v2 host).
V2_CGROUP = "0::/\n"
V2_MOUNTINFO = "700 690 0:60 / /sys/fs/cgroup ro,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate\n"

# Pure v2 without a namespace: a systemd slice whose parent holds the tighter quota.
SLICE_CGROUP = "0::/system.slice/app.service\n"
SLICE_MOUNTINFO = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"


def files(mapping: dict[str, str]) -> cpus.Reader:
    """A read-only fake filesystem: the sample files, None for everything else."""
    return mapping.get


def test_proc_cgroup_lines_map_each_controller_and_the_unified_path() -> None:
    paths = cpus.parse_proc_cgroup(HYBRID_CGROUP + DOCKER_V1_CGROUP.replace("12:", "13:"))
    assert paths["cpu"] == "/docker/3f2a"  # the later line wins for a controller named twice
    assert paths["cpuacct"] == "/docker/3f2a"
    assert paths["memory"] == "/docker/3f2a"
    assert paths["name=systemd"] == "/"
    assert paths[""] == "/"
    assert cpus.parse_proc_cgroup("garbage\n1:cpu\n2:cpu:relative\n") == {}


def test_mountinfo_keeps_only_cgroup_mounts_with_their_version_root_and_controllers() -> None:
    mounts = cpus.parse_mountinfo(HYBRID_MOUNTINFO + DOCKER_V1_MOUNTINFO)
    assert cpus.Mount("/", "/sys/fs/cgroup/cpu", 1, frozenset({"rw", "cpu"})) in mounts
    assert cpus.Mount("/", "/sys/fs/cgroup/unified", 2, frozenset()) in mounts
    assert cpus.Mount("/docker/3f2a", "/sys/fs/cgroup/cpu,cpuacct", 1, frozenset({"rw", "cpu", "cpuacct"})) in mounts
    assert all(m.point != "/sys/fs/cgroup" for m in mounts)  # the tmpfs is not a cgroup
    assert len(mounts) == 7


def test_mountinfo_unescapes_octal_escapes_in_paths() -> None:
    line = r"40 31 0:38 /a\040b /mnt/with\040space rw - cgroup2 cgroup2 rw" + "\n"
    assert cpus.parse_mountinfo(line) == [cpus.Mount("/a b", "/mnt/with space", 2, frozenset())]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max 100000\n", None),
        ("200000 100000\n", 2.0),
        ("50000 100000\n", 0.5),
        ("150000 100000", 1.5),
        ("", None),
        ("1 2 3", None),
        ("abc 100000", None),
        ("100000 0", None),
        (None, None),
    ],
)
def test_cpu_max(text: str | None, expected: float | None) -> None:
    assert cpus.parse_cpu_max(text) == expected


@pytest.mark.parametrize(
    ("quota", "period", "expected"),
    [("-1\n", "100000\n", None), ("100000\n", "100000\n", 1.0), ("250000", "100000", 2.5), ("x", "1", None)],
)
def test_cfs_quota_and_period(quota: str, period: str, expected: float | None) -> None:
    assert cpus.parse_cfs(quota, period) == expected
    assert cpus.parse_cfs(None, period) is None


@pytest.mark.parametrize(
    ("affinity", "quota", "expected"),
    [(8, None, 8), (8, 2.0, 2), (8, 0.5, 1), (8, 1.5, 2), (1, 4.0, 1), (0, None, 1), (4, 4.0000000001, 4)],
)
def test_usable_is_affinity_cut_to_the_quota_rounded_up(affinity: int, quota: float | None, expected: int) -> None:
    assert cpus.usable(affinity, quota) == expected


def test_hybrid_layout_reads_the_v1_cpu_controller() -> None:
    fs = {
        cpus.PROC_CGROUP: HYBRID_CGROUP,
        cpus.PROC_MOUNTINFO: HYBRID_MOUNTINFO,
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "150000\n",
        "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
    }
    assert cpus.cgroup_quota(files(fs)) == 1.5
    assert cpus.available(files(fs), cpus=8) == 2
    fs["/sys/fs/cgroup/cpu/cpu.cfs_quota_us"] = "-1\n"  # as on this sandbox: no quota, so affinity decides
    assert cpus.cgroup_quota(files(fs)) is None
    assert cpus.available(files(fs), cpus=2) == 2


def test_docker_v1_resolves_the_host_path_against_the_mount_root() -> None:
    fs = {
        cpus.PROC_CGROUP: DOCKER_V1_CGROUP,
        cpus.PROC_MOUNTINFO: DOCKER_V1_MOUNTINFO,
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "100000",
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000",
    }
    assert cpus.available(files(fs), cpus=16) == 1


def test_v2_namespaced_reads_cpu_max_at_the_mount_point() -> None:
    fs = {cpus.PROC_CGROUP: V2_CGROUP, cpus.PROC_MOUNTINFO: V2_MOUNTINFO, "/sys/fs/cgroup/cpu.max": "200000 100000\n"}
    assert cpus.available(files(fs), cpus=32) == 2
    fs["/sys/fs/cgroup/cpu.max"] = "max 100000\n"
    assert cpus.available(files(fs), cpus=32) == 32


def test_v2_a_parents_quota_binds_its_child() -> None:
    fs = {
        cpus.PROC_CGROUP: SLICE_CGROUP,
        cpus.PROC_MOUNTINFO: SLICE_MOUNTINFO,
        "/sys/fs/cgroup/system.slice/app.service/cpu.max": "max 100000\n",
        "/sys/fs/cgroup/system.slice/cpu.max": "300000 100000\n",
    }
    assert cpus.cgroup_quota(files(fs)) == 3.0
    fs["/sys/fs/cgroup/system.slice/app.service/cpu.max"] = "100000 100000\n"  # the tighter one wins
    assert cpus.cgroup_quota(files(fs)) == 1.0


def test_a_path_outside_the_mount_root_falls_back_to_the_mount_point() -> None:
    fs = {
        cpus.PROC_CGROUP: "0::/../outside\n",
        cpus.PROC_MOUNTINFO: "700 690 0:60 /inside /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        "/sys/fs/cgroup/cpu.max": "100000 100000\n",
    }
    assert cpus.cgroup_quota(files(fs)) == 1.0


def test_no_cgroup_files_at_all_means_no_quota() -> None:
    assert cpus.cgroup_quota(files({})) is None
    assert cpus.available(files({}), cpus=3) == 3


@pytest.mark.linux_tier("os.sched_getaffinity: only Linux's scheduler tells it")
def test_affinity_is_read_from_the_real_scheduler() -> None:
    # Pinned to one CPU with taskset, a fresh interpreter counts one, whatever the host has.
    code = "from mcp_server.ops import cpus; print(cpus.affinity(), cpus.available(lambda path: None))"
    pinned = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=True,
    )
    assert pinned.stdout.split() == ["1", "1"]
    assert cpus.affinity() == len(os.sched_getaffinity(0))
