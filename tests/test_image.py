"""The container image, built from the real Dockerfile on the stand-in base and run with podman (`make image-test`).

Marked `image`: the default run (`make test`) deselects it; `make image-test` installs podman, runc
and mmdebstrap when missing and runs it. Each check is its own test, in order, on one image and
one container: the stand-in and how it differs from python:3.11-slim, the build context, the
build and its size, what the final image holds, no credential in it, then the running container
(non-root, HEALTHCHECK, /healthz, an MCP session against the sandbox gateway on the host), and
last SIGTERM. The container shares the host's network (`--network host`), so the server takes a
free port through PORT and reaches the sandbox gateway at a loopback URL, as the server's own
rules for a plain-http gateway expect.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest

from tests.conftest import client_for
from tests.handed_out import container_commands, of_kind
from tests.image.podman import BASE_TAG, BUILD_TIMEOUT, CACHE, ROOT, Podman, disk_use, free_port, ulimits
from tests.mcp_http import LegacyClient, post
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.secret_canaries import record_output, secrets

pytestmark = pytest.mark.image

RUN_ID: Final = uuid.uuid4().hex[:10]
IMAGE: Final = f"localhost/fairwins-mcp-test:{RUN_ID}"
PROBE: Final = f"localhost/fairwins-mcp-context-probe:{RUN_ID}"
CONTAINER: Final = f"fairwins-mcp-test-{RUN_ID}"
README_IMAGE: Final = f"localhost/fairwins-mcp-readme:{RUN_ID}"  # what the README's lines build and run
READY_TIMEOUT: Final = 60.0  # seconds from `podman run` to /healthz answering 200
STOP_GRACE: Final = 30  # `podman stop -t`: longer than the server's own drain (gateway timeout + 5 s)
IN_FLIGHT_DELAY: Final = 2.0  # seconds the sandbox gateway holds the call that is in flight at SIGTERM
STOP_LINE: Final = re.compile(r"stopped: all (\d+) requests in flight at the signal were answered")
STARTED_LINE: Final = re.compile(r"^(\d+) workers started \(pids ([\d, ]+)\)$")
DRAINED_LINE: Final = re.compile(r"^worker (\d+) \(pid (\d+)\) drained and exited$")
# `podman run --cpus`: the CFS quota `--workers auto` must follow (as it must Cloud Run's), where
# the CPU count would say the host's. Two, so that "every worker" is more than one.
CPUS: Final = 2
TRACE_ID: Final = "4bf92f3577b34da6a3ce929d0e0e4736"

# python:3.11-slim as docker-library/python builds it (3.11/slim-trixie: the Debian variant the tag
# points at), and where the stand-in differs, on purpose and by necessity: no registry reachable
# here serves that image, and Debian trixie has no python3.11 package.
REAL_BASE: Final[dict[str, str]] = {
    "debian": "13",
    "python": "3.11.15",
    "pip": "24.0",
    "setuptools": "79.0.1",
    "wheel": "0.45.1",
    "PATH": "/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "python3 in PATH": "/usr/local/bin/python3",
    "python in PATH": "/usr/local/bin/python",
    "pip in PATH": "/usr/local/bin/pip",
    "stdlib": "/usr/local/lib/python3.11",
    "purelib": "/usr/local/lib/python3.11/site-packages",
    "CMD": '["python3"]',
}
KNOWN_DIFFERENCES: Final = {"python", "stdlib", "purelib"}  # docs/hosting.md says what they could hide

PROBE_BASE: Final = """
import json, os, platform, shutil, sysconfig
from importlib.metadata import version
print(json.dumps({
    "debian": open("/etc/debian_version").read().split(".")[0].strip(),
    "python": platform.python_version(),
    "pip": version("pip"), "setuptools": version("setuptools"), "wheel": version("wheel"),
    "PATH": os.environ["PATH"], "LANG": os.environ.get("LANG", ""),
    "python3 in PATH": shutil.which("python3"), "python in PATH": shutil.which("python"),
    "pip in PATH": shutil.which("pip"),
    "stdlib": sysconfig.get_paths()["stdlib"], "purelib": sysconfig.get_paths()["purelib"],
}))
"""
DISTRIBUTIONS: Final = (
    "import json, importlib.metadata as m; "
    "print(json.dumps(sorted(d.metadata['Name'].lower() for d in m.distributions())))"
)
IMPORT_ALL: Final = (
    "import importlib, pkgutil, mcp_server; "
    "names = [m.name for m in pkgutil.walk_packages(mcp_server.__path__, 'mcp_server.') if '._' not in m.name]; "
    "[importlib.import_module(n) for n in names]; print(len(names))"
)


def say(request: pytest.FixtureRequest, line: str) -> None:
    """A line of the image test's report, printed as the run goes (not captured)."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    assert capture is not None and reporter is not None
    with capture.global_and_fixture_disabled():
        reporter.write_line(f"    image: {line}")


@pytest.fixture(scope="module")
def podman() -> Podman:
    tool = Podman()
    version = tool("version", "--format", "{{.Client.Version}}").stdout.strip()
    assert version, "podman answered no version"
    return tool


@pytest.fixture(scope="module")
def base(podman: Podman, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The stand-in base, built (or found cached) once; its inspect record."""
    built, seconds = podman.ensure_base()
    say(request, f"stand-in base {BASE_TAG}: {'built' if built else 'cached'} in {seconds:.1f} s")
    record: dict[str, Any] = podman.json("image", "inspect", BASE_TAG)[0]
    return record


@pytest.fixture(scope="module")
def image(podman: Podman, base: dict[str, Any], request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The real Dockerfile built on the stand-in, offline (`--network none`); removed afterwards."""
    try:
        seconds = podman.build(IMAGE)
        say(request, f"built {IMAGE} from Dockerfile in {seconds:.1f} s")
        record: dict[str, Any] = podman.json("image", "inspect", IMAGE)[0]
        yield record
    finally:
        podman.remove(IMAGE)
        say(request, f"cache {CACHE.relative_to(ROOT)}: {disk_use(CACHE) / 1e6:.0f} MB on disk")


@pytest.fixture(scope="module")
def gateway() -> Iterator[SandboxGateway]:
    with SandboxGateway() as sandbox:
        yield sandbox


@dataclass
class Container:
    """The image's own CMD, running: where it listens, and its output for the checks that read it."""

    podman: Podman
    name: str
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        """Everything the container wrote so far, stdout and stderr (the server logs to stderr)."""
        done = self.podman("logs", self.name)
        return done.stdout + done.stderr

    def log_lines(self) -> list[str]:
        return [line for line in self.logs().splitlines() if line.strip()]

    def log_entries(self) -> list[dict[str, Any]]:
        """Every line the container logged, each parsed as the one JSON object it must be."""
        entries = []
        for line in self.log_lines():
            entry = json.loads(line)  # the image logs JSON: a line that is not fails here
            assert isinstance(entry, dict), line
            entries.append(entry)
        return entries

    def messages(self) -> list[str]:
        return [str(entry["message"]) for entry in self.log_entries()]

    def wait_for_log(self, found: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The log entries once `found(entries)` is true. Lines reach stderr within 0.1 s of being
        made (a writer thread of their own), so they are waited for, not assumed to be there."""
        deadline = time.monotonic() + timeout
        while not found(entries := self.log_entries()):
            if time.monotonic() > deadline:
                raise AssertionError(f"not logged within {timeout:.0f} s; logs:\n{self.logs()}")
            time.sleep(0.1)
        return entries

    def exec(self, *argv: str) -> str:
        return self.podman("exec", self.name, *argv).stdout

    def state(self) -> dict[str, Any]:
        inspected: dict[str, Any] = self.podman.json("container", "inspect", self.name)[0]
        return inspected

    def healthz(self, timeout: float = 2.0) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


def wait_ready(container: Container) -> bool:
    """True once /healthz answers 200; False if the container exited first. Fails after READY_TIMEOUT."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            if container.healthz(timeout=1.0)[0] == 200:
                return True
        except OSError:
            pass
        if not container.state()["State"]["Running"]:
            return False
        time.sleep(0.1)
    raise AssertionError(f"/healthz did not answer 200 within {READY_TIMEOUT:.0f} s; logs:\n{container.logs()}")


@pytest.fixture(scope="module")
def container(
    podman: Podman, image: dict[str, Any], gateway: SandboxGateway, request: pytest.FixtureRequest
) -> Iterator[Container]:
    """The image run as it ships (its CMD, its user), on the host network, against the sandbox gateway."""
    names: list[str] = []
    try:
        for attempt in range(3):  # a free port can be taken between picking it and binding it
            name = f"{CONTAINER}-{attempt}"
            names.append(name)
            running = Container(podman, name, free_port())
            started = time.monotonic()
            podman(
                "run",
                "--detach",
                "--name",
                name,
                "--network",
                "host",
                "--log-driver",
                "k8s-file",
                "--cpus",
                str(CPUS),
                *ulimits(),
                "--env",
                f"PORT={running.port}",
                "--env",
                f"FAIRWINS_API_URL={gateway.url}",
                IMAGE,
            )
            if wait_ready(running):
                say(
                    request, f"container {name} answered /healthz {time.monotonic() - started:.1f} s after `podman run`"
                )
                yield running
                record_output(f"container {name} logs", running.logs())
                return
            logs = running.logs()
            if "Address already in use" not in logs:
                raise AssertionError(f"the container exited before answering /healthz; logs:\n{logs}")
        raise AssertionError("three free ports were taken before the container could bind one")
    finally:
        for name in names:
            podman("rm", "--force", "--time", "0", name, check=False)


# --- the stand-in base ---------------------------------------------------------------------------


def test_stand_in_base_matches_python_3_11_slim_where_it_can(
    podman: Podman, base: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    found = json.loads(podman.run_in(BASE_TAG, "python3", "-c", PROBE_BASE))
    found["CMD"] = json.dumps(base["Config"]["Cmd"])
    differs = {key for key, real in REAL_BASE.items() if found.get(key) != real}
    say(request, f"stand-in base same as python:3.11-slim: {', '.join(k for k in REAL_BASE if k not in differs)}")
    for key in sorted(differs):
        say(request, f"stand-in base differs in {key}: {found.get(key)} here, {REAL_BASE[key]} in python:3.11-slim")
    assert differs == KNOWN_DIFFERENCES, (
        f"the stand-in now differs from python:3.11-slim in {sorted(differs - KNOWN_DIFFERENCES)} and no longer in "
        f"{sorted(KNOWN_DIFFERENCES - differs)}: update tests/image/standin.sh or KNOWN_DIFFERENCES and docs/hosting.md"
    )
    assert found["python"].startswith("3.11.")
    assert base["Config"]["Env"] and f"PYTHON_VERSION={found['python']}" in base["Config"]["Env"]


# --- the build -----------------------------------------------------------------------------------

CONTEXT_KEPT_OUT: Final = (".git", ".venv", ".tools", "tests", "bench", "demo", "assistant_contract", "dist", "build")


def test_build_context_is_only_the_package_sources(podman: Podman, base: dict[str, Any], tmp_path: Any) -> None:
    # What a build of this directory is sent, with .dockerignore applied: a probe Containerfile
    # copies the whole context into an image, whose one layer is then listed.
    for name in (".git", ".venv", ".tools", "tests"):
        assert (ROOT / name).exists(), f"{name} is missing, so its exclusion proves nothing"
    (ROOT / "mcp_server" / "__pycache__").mkdir(exist_ok=True)  # a cache to keep out, even on a fresh clone
    probe = tmp_path / "Containerfile"
    probe.write_text("FROM scratch\nCOPY . /context/\n")
    try:
        podman("build", "--pull=never", "--network", "none", "--tag", PROBE, "--file", str(probe), str(ROOT))
        paths = {member.name.removeprefix("context/") for _, member in podman.layers(PROBE) if member.name != "context"}
    finally:
        podman("rmi", "--force", PROBE, check=False)
    top = {path.split("/")[0] for path in paths}
    assert top == {
        "pyproject.toml",
        "LICENSE",
        "setup.py",
        "MANIFEST.in",
        "README.md",
        "toolDefs.snapshot.json",
        "mcp_server",
    }
    assert not top & set(CONTEXT_KEPT_OUT)
    assert not [p for p in paths if "__pycache__" in p or p.endswith(".pyc") or ".egg-info" in p]
    assert {"mcp_server/__init__.py", "mcp_server/setup/cli.py", "mcp_server/fairwins/guide.md"} <= paths


def test_image_builds_from_the_dockerfile_and_reports_its_size(
    podman: Podman, base: dict[str, Any], image: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    base_layers = base["RootFS"]["Layers"]
    assert image["RootFS"]["Layers"][: len(base_layers)] == base_layers, "the image is not built on the stand-in"
    added = image["Size"] - base["Size"]
    say(request, f"size {image['Size'] / 1e6:.1f} MB: the base {base['Size'] / 1e6:.1f} MB + {added / 1e3:.0f} kB")
    for step in podman.json("history", "--format", "json", IMAGE):
        if step["size"]:
            say(request, f"  layer {step['size'] / 1e3:9.1f} kB  {step['CreatedBy'][:90]}")
    assert 0 < added < 5_000_000, f"the image adds {added} bytes to its base"
    config = image["Config"]
    assert config["User"] and config["User"] not in ("root", "0")
    healthcheck = image.get("Healthcheck") or config.get("Healthcheck")  # podman's place, or docker's
    assert healthcheck and healthcheck["Test"][0] == "CMD", "no HEALTHCHECK: was the image built --format oci?"
    assert "8790/tcp" in config["ExposedPorts"]


# Besides the venv, the final stage's layers may hold only what `useradd` writes (and the /run
# mount point a RUN step leaves).
OUTSIDE_THE_VENV: Final = re.compile(r"opt|etc|run|etc/(passwd|group|shadow|gshadow)-?|etc/\.pwd\.lock")


def test_final_image_holds_the_package_and_nothing_else(
    podman: Podman, base: dict[str, Any], image: dict[str, Any]
) -> None:
    ours = [member for _, member in podman.layers(IMAGE, skip=len(base["RootFS"]["Layers"]))]
    names = [member.name for member in ours]
    outside = [n for n in names if n != "opt/fairwins-mcp" and not n.startswith("opt/fairwins-mcp/")]
    assert not [n for n in outside if not OUTSIDE_THE_VENV.fullmatch(n)], "a layer adds more than the venv and the user"
    assert not [n for n in names if "/.wh." in f"/{n}"], "a layer deletes files: they still ship in the layer below"
    assert not [n for n in names if n.startswith(("src", "wheels", "tmp/", "root/")) or n.endswith(".whl")]
    assert not [n for n in names if re.search(r"(^|/)(tests?|\.git|\.venv|\.tools|build|dist)(/|$)", n)]
    packages = {n.split("/")[5] for n in names if n.startswith("opt/fairwins-mcp/lib/python3.11/site-packages/")}
    assert packages == {"mcp_server", "fairwins_mcp-0.1.0.dist-info"}, packages  # no pip, setuptools or wheel
    assert "opt/fairwins-mcp/lib/python3.11/site-packages/mcp_server/toolDefs.snapshot.json" in names
    # Compiled at install: the server's user cannot write bytecode caches, so each start would compile.
    assert "opt/fairwins-mcp/lib/python3.11/site-packages/mcp_server/setup/__pycache__/cli.cpython-311.pyc" in names
    # The base's own tools are the base's: the system interpreter sees exactly what it saw before.
    in_base = podman.run_in(BASE_TAG, "python3", "-c", DISTRIBUTIONS)
    in_image = podman.run_in(IMAGE, "/usr/local/bin/python3", "-c", DISTRIBUTIONS)
    assert json.loads(in_image) == json.loads(in_base) == ["pip", "setuptools", "wheel"]
    in_venv = podman.run_in(IMAGE, "python", "-c", DISTRIBUTIONS)
    assert json.loads(in_venv) == ["fairwins-mcp"]
    leftovers = 'for p in /src /wheels /tmp/*; do [ -e "$p" ] && echo "$p"; done; true'
    assert podman.run_in(IMAGE, "sh", "-c", leftovers) == ""


def scan(where: str, text: str) -> list[str]:
    """Every canary secret of the test run, and any `fw1.` token, found in `text`."""
    found = [f"{name} in {where}" for name, secret in secrets().items() if secret in text]
    found += [f"a token ({m.group()[:8]}…) in {where}" for m in re.finditer(r"fw1\.[A-Za-z0-9_-]{4,}", text)]
    return found


def test_no_credential_in_the_image(podman: Podman, image: dict[str, Any]) -> None:
    env = image["Config"]["Env"]
    assert not [e for e in env if e.startswith("FAIRWINS_API_TOKEN")], env
    history = podman("history", "--no-trunc", "--format", "json", IMAGE).stdout
    inspected = podman("image", "inspect", IMAGE).stdout
    assert "HEALTHCHECK" in history or "useradd" in history  # the history is really there to scan
    assert scan("podman history", history) + scan("podman image inspect", inspected) == []


# --- the running container -----------------------------------------------------------------------


def test_runs_as_a_non_root_user(container: Container) -> None:
    status = container.exec("cat", "/proc/1/status")
    uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
    gids = next(line for line in status.splitlines() if line.startswith("Gid:")).split()[1:]
    assert uids and all(uid != "0" for uid in uids), uids  # real, effective, saved and filesystem
    assert gids and all(gid != "0" for gid in gids), gids
    command = container.exec("cat", "/proc/1/cmdline").split("\0")
    assert any(part.endswith("fairwins-mcp") for part in command), command  # the server itself is PID 1


def test_every_server_module_imports_in_the_image(container: Container) -> None:
    # The stand-in's interpreter is Debian's, which splits parts of the standard library into
    # other packages: every module the server has must import here all the same.
    count = int(container.exec("python", "-c", IMPORT_ALL).strip())
    assert count >= 20


def test_image_healthcheck_reports_healthy(podman: Podman, container: Container) -> None:
    done = podman("healthcheck", "run", container.name, check=False)
    assert done.returncode == 0, f"healthcheck run exited {done.returncode}: {done.stdout}{done.stderr}"
    health = container.state()["State"]["Health"]
    assert health["Status"] == "healthy", health
    assert health["Log"][-1]["ExitCode"] == 0


def test_healthz_from_the_host(container: Container) -> None:
    status, body = container.healthz()
    assert status == 200
    assert json.loads(body)["status"] == "ok"


def test_mcp_session_over_http_against_the_sandbox_gateway(container: Container, gateway: SandboxGateway) -> None:
    client = LegacyClient(f"{container.url}/mcp")
    info = client.initialize().result
    assert info["serverInfo"]["name"] == "fairwins-mcp"
    tools = client.request("tools/list").result["tools"]
    expected = client_for(None).request("tools/list")["result"]["tools"]  # this checkout's snapshot
    assert [t["name"] for t in tools] == [t["name"] for t in expected]
    assert tools == expected
    gateway.clear_seen()
    status = client.request("tools/call", {"name": "get_gateway_status", "arguments": {}}).result
    assert status["isError"] is False, status
    seen = gateway.wait_for_requests(1, timeout=10)
    assert [(r.method, r.path) for r in seen] == [("GET", "/status")]
    assert seen[0].header("Authorization") is None  # a public read carries no credential
    # A member's call: their own token, on their own request, and no other.
    member = LegacyClient(f"{container.url}/mcp", bearer=TOKEN_MEMBER_A)
    member.initialize()
    gateway.clear_seen()
    profile = member.request("tools/call", {"name": "get_profile", "arguments": {}}).result
    assert profile["isError"] is False, profile
    assert gateway.wait_for_requests(1, timeout=10)[0].header("Authorization") == f"Bearer {TOKEN_MEMBER_A}"


def test_every_worker_is_up_and_logs_json(container: Container) -> None:
    # --workers auto inside the container: as many workers as the container's CPU quota allows
    # (what the server's own reading of its cgroup says, here, in the container), each serving.
    expected = int(container.exec("python", "-c", "from mcp_server.ops import cpus; print(cpus.available())").strip())
    assert expected == min(CPUS, int(container.exec("nproc").strip()))
    entries = container.wait_for_log(
        lambda entries: sum(str(e["message"]).endswith(" serving") for e in entries) >= expected
    )
    started = [m for e in entries if (m := STARTED_LINE.match(str(e["message"])))]
    assert len(started) == 1 and int(started[0].group(1)) == expected
    pids = sorted(int(pid) for pid in started[0].group(2).split(", "))
    serving = sorted(int(m.group(1)) for e in entries if (m := re.match(r"^worker (\d+) serving$", str(e["message"]))))
    assert serving == pids
    for entry in entries:  # Cloud Logging's fields on every line, the supervisor's and the workers'
        assert entry["severity"] in ("INFO", "WARNING") and entry["time"].endswith("Z"), entry
    # One call with a trace context: its record, from whichever worker took it, is a structured
    # entry with the method, tool, outcome, the gateway's answer and the caller's trace id.
    message = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "get_gateway_status"}}
    headers = {"MCP-Protocol-Version": "2025-11-25", "traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"}
    assert post(f"{container.url}/mcp", message, headers).status == 200
    records = container.wait_for_log(lambda entries: any(e.get("traceId") == TRACE_ID for e in entries))
    record = next(e for e in records if e.get("traceId") == TRACE_ID)
    assert (record["method"], record["tool"], record["outcome"], record["rpcId"]) == (
        "tools/call",
        "get_gateway_status",
        "result",
        9,
    )
    assert [u["status"] for u in record["upstream"]] == [200]
    assert record["httpRequest"]["status"] == 200 and record["httpRequest"]["requestMethod"] == "POST"


def test_no_credential_in_the_container(podman: Podman, container: Container) -> None:
    inspected = podman("container", "inspect", container.name).stdout
    assert "FAIRWINS_API_TOKEN" not in inspected
    # The session above was logged, and its token was not.
    container.wait_for_log(lambda entries: any(e.get("tool") == "get_profile" for e in entries))
    logs = container.logs()
    assert scan("podman container inspect", inspected) + scan("the container's logs", logs) == []


def test_sigterm_drains_and_exits_0(podman: Podman, container: Container, gateway: SandboxGateway) -> None:
    # A call in flight at the signal: the sandbox gateway holds it, SIGTERM arrives, and the
    # server must still answer it before exiting 0, within the grace period.
    gateway.clear_seen()
    gateway.fault("/status", "delay", seconds=IN_FLIGHT_DELAY, times=1)
    answers: list[Any] = []
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_gateway_status"}}

    def call() -> None:
        try:
            answers.append(post(f"{container.url}/mcp", message, {"MCP-Protocol-Version": "2025-11-25"}, timeout=30))
        except OSError as exc:
            answers.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    gateway.wait_for_requests(1, timeout=10)  # the call reached the gateway: it is in flight
    started = time.monotonic()
    podman("stop", "--time", str(STOP_GRACE), container.name, timeout=STOP_GRACE + 30)
    elapsed = time.monotonic() - started
    caller.join(30)
    state = container.state()["State"]
    assert state["ExitCode"] == 0, f"exit code {state['ExitCode']}; logs:\n{container.logs()}"
    assert elapsed < STOP_GRACE, f"podman stop took {elapsed:.1f} s: the grace period ran out"
    assert len(answers) == 1 and not isinstance(answers[0], Exception), answers
    assert answers[0].status == 200 and answers[0].result["isError"] is False
    # Every worker drained (the one call was in flight in one of them), and the supervisor saw
    # each one exit.
    messages = container.messages()
    started = [m for line in messages if (m := STARTED_LINE.match(line))]
    pids = {int(pid) for pid in started[-1].group(2).split(", ")}
    stopped = [int(m.group(1)) for line in messages if (m := STOP_LINE.search(line))]
    assert len(stopped) == len(pids) and sum(stopped) == 1, container.logs()
    drained = {int(m.group(2)) for line in messages if (m := DRAINED_LINE.match(line))}
    assert drained == pids, container.logs()


# --- the container lines of docs/hosting.md -------------------------------------------------------


def readme_lines(
    block_lines: list[list[str]], host_port: int, podman: Podman
) -> tuple[list[str], list[str], list[str]]:
    """The README's podman build, docker run and curl lines as they run here (checked to fit together by
    tests/test_handed_out_configs.py): the image name is README_IMAGE, the published port a free
    one on loopback, `docker` is podman (its private storage), and the flags this sandbox needs
    are added (rlimits it grants; no registry, so never pull). Nothing else changes."""
    (build,) = [w for w in block_lines if w[:2] == ["podman", "build"]]
    (run,) = [w for w in block_lines if w[:2] == ["docker", "run"]]
    (probe,) = [w for w in block_lines if w[0] == "curl"]
    tag = build[build.index("-t") + 1]
    published = run[run.index("-p") + 1]
    old_host = published.rsplit(":", 1)[0]
    build = [*podman.argv, "build", "--pull=never", *ulimits(), *(README_IMAGE if w == tag else w for w in build[2:])]
    run = [*podman.argv, "run", *ulimits(), *run[2:]]
    run[run.index(published)] = f"127.0.0.1:{host_port}:{published.rsplit(':', 1)[1]}"
    assert run[-1] == tag, "the run line runs another image than the build line builds"
    run[-1] = README_IMAGE
    probe = [w.replace(f"127.0.0.1:{old_host}/", f"127.0.0.1:{host_port}/") for w in probe]
    return build, run, probe


def test_the_readme_container_lines_build_this_image_run_it_and_answer_healthz(
    podman: Podman, image: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    (block,) = of_kind("container")
    build, run, probe = readme_lines(container_commands(block), free_port(), podman)
    server: subprocess.Popen[str] | None = None
    try:
        done = subprocess.run(build, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
        assert done.returncode == 0, f"the README's build line failed:\n{done.stderr[-3000:]}"
        # The same Dockerfile and context as the image this module checks: every step comes from its
        # build, so the README's line names that very image.
        assert podman.json("image", "inspect", README_IMAGE)[0]["Id"] == image["Id"]
        # `docker run` in the foreground, as typed; the probe from "another terminal" until it answers.
        server = subprocess.Popen(
            run, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        started = time.monotonic()
        while (answered := subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)).returncode:
            assert server.poll() is None, f"the README's run line exited {server.returncode} before /healthz answered"
            assert time.monotonic() - started < READY_TIMEOUT, f"/healthz did not answer within {READY_TIMEOUT:.0f} s"
            time.sleep(0.2)
        assert json.loads(answered.stdout)["status"] == "ok"
        say(
            request,
            f"README lines: built {block.doc}:{block.line}'s image, /healthz answered through the published port",
        )
        # Ctrl-C: podman hands the signal to the server, which drains and exits 0; --rm removes it.
        server.send_signal(signal.SIGINT)
        output, _ = server.communicate(timeout=STOP_GRACE + 30)
        record_output("the README's run line", output)
        assert server.returncode == 0, f"the README's run line exited {server.returncode}:\n{output[-3000:]}"
        assert "stopped: all 0 requests in flight at the signal were answered" in output
        left = podman("ps", "--all", "--quiet", "--filter", f"ancestor={README_IMAGE}").stdout.split()
        assert left == [], "--rm left the container behind"
    finally:
        if server is not None and server.poll() is None:
            server.kill()
            server.communicate(timeout=STOP_GRACE)
        for name in podman(
            "ps", "--all", "--quiet", "--filter", f"ancestor={README_IMAGE}", check=False
        ).stdout.split():
            podman("rm", "--force", "--time", "0", name, check=False)
        podman("rmi", README_IMAGE, check=False)  # a tag of the checked image: removing it keeps that one
