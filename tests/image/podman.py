"""Podman for the image test: private storage in .tools/image, the flags this sandbox needs, the cached stand-in.

Everything lives in <repo>/.tools/image (git-ignored): the image storage, podman's run and tmp
state, and the key of the stand-in base it holds. Nothing touches the machine's own podman
storage. What this sandbox needs, found by trying (issue 16): runc with cgroupfs (crun refuses
the hybrid cgroup layout), rlimits no higher than the hard limits granted here, and the file
events backend (no journald, no systemd).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from typing import Any, Final

if sys.platform != "win32":
    import resource  # the image test runs on Linux only; Windows still imports this module to collect it

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent.parent
CACHE: Final = ROOT / ".tools" / "image"
RECIPE: Final = pathlib.Path(__file__).resolve().with_name("standin.sh")
BASE_TAG: Final = "docker.io/library/python:3.11-slim"
TIMEOUT: Final = 60.0  # seconds for a podman command that starts, stops or inspects something
BUILD_TIMEOUT: Final = 900.0  # seconds for building the stand-in base (mmdebstrap) or the image


class PodmanError(AssertionError):
    """A podman command failed: its argv, exit status and stderr, for the test's failure message."""


class Podman:
    """The podman command line on the private storage; `podman("images")` runs `podman … images`."""

    def __init__(self, cache: pathlib.Path = CACHE) -> None:
        self.cache = cache
        self.argv = [
            "podman",
            "--root",
            str(cache / "storage"),
            "--runroot",
            str(cache / "run"),
            "--tmpdir",
            str(cache / "tmp"),
            "--runtime",
            "runc",
            "--cgroup-manager",
            "cgroupfs",
            "--events-backend",
            "file",
        ]

    def __call__(
        self, *args: str, timeout: float = TIMEOUT, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = [*self.argv, *args]
        try:
            done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise PodmanError(f"podman {' '.join(args)}: no answer within {timeout:.0f} s") from exc
        if check and done.returncode != 0:
            raise PodmanError(f"podman {' '.join(args)} exited {done.returncode}:\n{done.stderr.strip()}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self(*args).stdout)

    def run_in(self, image: str, *argv: str) -> str:
        """What `argv` prints in a throw-away container of `image`, without a network."""
        return self("run", "--rm", "--network", "none", *ulimits(), image, *argv).stdout

    def exists(self, image: str) -> bool:
        return self("image", "exists", image, check=False).returncode == 0

    def ensure_base(self, python: str = sys.executable) -> tuple[bool, float]:
        """The stand-in tagged BASE_TAG, rebuilt when standin.sh changed: (whether it was built now, seconds)."""
        started = time.monotonic()
        listed = self("images", check=False)
        if listed.returncode != 0 and "database configuration mismatch" in listed.stderr:
            # The storage records its absolute paths: the checkout moved. It is only this cache.
            shutil.rmtree(self.cache)
        key = hashlib.sha256(RECIPE.read_bytes()).hexdigest()
        key_file = self.cache / "standin.sha256"
        if self.exists(BASE_TAG) and key_file.exists() and key_file.read_text().strip() == key:
            return False, time.monotonic() - started
        key_file.unlink(missing_ok=True)
        if self.exists(BASE_TAG):
            self("rmi", "--force", BASE_TAG)
        self.cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["bash", str(RECIPE), python, BASE_TAG, "--", *self.argv],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
            check=False,
        )
        if done.returncode != 0 or not self.exists(BASE_TAG):
            raise PodmanError(
                f"the stand-in base could not be built (standin.sh exited {done.returncode}):\n{done.stderr}"
            )
        key_file.write_text(key + "\n")
        return True, time.monotonic() - started

    def build(self, tag: str) -> float:
        """The real Dockerfile on the stand-in base, offline (`--network none`), as `tag`; its seconds.

        The docker format: the OCI format has no HEALTHCHECK.
        """
        started = time.monotonic()
        self(
            "build",
            "--pull=never",
            "--format",
            "docker",
            "--network",
            "none",
            *ulimits(),
            "--tag",
            tag,
            "--file",
            str(ROOT / "Dockerfile"),
            str(ROOT),
            timeout=BUILD_TIMEOUT,
        )
        return time.monotonic() - started

    def remove(self, image: str) -> None:
        """`image` gone, and the build stage's dangling layers with it."""
        self("rmi", "--force", image, check=False)
        self("image", "prune", "--force", check=False)

    def layers(self, image: str, skip: int = 0) -> Iterator[tuple[int, tarfile.TarInfo]]:
        """Every entry of every layer of `image` after the first `skip` (the base's), whiteouts included."""
        with tempfile.TemporaryDirectory(prefix="fairwins-image-") as tmp:
            archive = pathlib.Path(tmp) / "image.tar"
            self(
                "save", "--quiet", "--format", "docker-archive", "--output", str(archive), image, timeout=BUILD_TIMEOUT
            )
            with tarfile.open(archive) as outer:
                manifest_file = outer.extractfile("manifest.json")
                assert manifest_file is not None
                manifest = json.load(manifest_file)
                for index, name in enumerate(manifest[0]["Layers"]):
                    if index < skip:
                        continue
                    layer_file = outer.extractfile(name)
                    assert layer_file is not None
                    with tarfile.open(fileobj=layer_file) as layer:
                        for member in layer:
                            yield index, member


def ulimits() -> list[str]:
    """`--ulimit` flags within what this sandbox grants: asking for more is refused ("setrlimit … not permitted")."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    nofile = 65536 if nofile == resource.RLIM_INFINITY else min(nofile, 65536)
    nproc = 4096 if nproc == resource.RLIM_INFINITY else min(nproc, 4096)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


def free_port() -> int:
    """A loopback port free at the time of asking (a container on the host's network binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def disk_use(path: pathlib.Path) -> int:
    """Bytes allocated under `path` (du -s), the cache's footprint."""
    done = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, timeout=TIMEOUT, check=True)
    return int(done.stdout.split()[0]) * 1024
