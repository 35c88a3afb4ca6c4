"""deploy/kubernetes/deployment.yaml played by `podman kube play` on the image `make image-test` builds.

Marked `image`, like tests/test_image.py, and run after it by `make image-test` (root, podman from
Debian, the stand-in base cached in .tools/image). One pod, one test per check, in order: the
played copy is the manifest but for what one host needs; the pod becomes ready through the
manifest's own readiness probe and passes its liveness probe; it runs as the manifest locks it
down; it answers an MCP session; and last the stop: SIGTERM with the manifest's grace period while
members keep calling, the pre-stop (unready, still serving), the drain (the call in flight
answered), exit 0, and `podman kube down`.

Debian 12's podman (4.3.1) falls short of a kubelet in four ways, each made up for here and said
in docs/deploy.md ("How this is checked"): it runs no readiness probe and would run an `httpGet`
liveness probe as a `curl` the image lacks, so the probes are run by this test as the kubelet runs
them; on the host's network it refuses the `ports` list, so the played copy has none (the probes
still resolve the manifest's named port); `kube down` stops a pod with no grace at all, so the pod
is stopped first with the manifest's `terminationGracePeriodSeconds`; and its default open-file
limit is more than this machine grants, so a containers.conf sets the image test's limits.
"""

from __future__ import annotations

import copy
import http.client
import json
import pathlib
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import pytest

from tests.conftest import client_for
from tests.image.podman import Podman, free_port, ulimits
from tests.manifests import KUBERNETES, load, pod_spec, server_in, the_container
from tests.mcp_http import ACCEPT_BOTH, LegacyClient
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.secret_canaries import record_output
from tests.test_image import say

pytestmark = pytest.mark.image

RUN_ID: Final = uuid.uuid4().hex[:10]
IMAGE: Final = f"localhost/fairwins-mcp-kube:{RUN_ID}"
NAME: Final = f"fairwins-mcp-kube-{RUN_ID}"
READY_TIMEOUT: Final = 60.0  # seconds from `podman kube play` to the readiness probe passing
# How long the sandbox gateway holds each call of the two members calling through the stop:
# different, so that the moments between one member's answer and its next call never coincide,
# and one of them always has a call in flight when the drain begins.
HOLDS: Final = {"/status": 3.0, "/v1/member/me": 2.3}
STOPPING_LINE: Final = re.compile(r"^stopping: /healthz answers 503 for (\d+) s while requests are still served$")
STOP_LINE: Final = re.compile(r"stopped: all (\d+) requests in flight at the signal were answered")
STARTED_LINE: Final = re.compile(r"^(\d+) workers started \(pids ([\d, ]+)\)$")
DRAINED_LINE: Final = re.compile(r"^worker (\d+) \(pid (\d+)\) drained and exited$")


@pytest.fixture(scope="module")
def deployment() -> dict[str, Any]:
    (document,) = load(KUBERNETES / "deployment.yaml")
    return document


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    """Podman on the image test's storage, with the open-file and process limits this machine grants
    for every container it starts (`kube play` has no --ulimit)."""
    limits = dict(flag.split("=", 1) for flag in ulimits() if flag != "--ulimit")
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    listed = ", ".join(f'"{kind}={value}"' for kind, value in limits.items())
    conf.write_text(f"[containers]\ndefault_ulimits = [{listed}]\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONTAINERS_CONF", str(conf))
        tool = Podman()
        assert tool("version", "--format", "{{.Client.Version}}").stdout.strip()
        yield tool


@pytest.fixture(scope="module")
def image(podman: Podman, request: pytest.FixtureRequest) -> Iterator[str]:
    """The real Dockerfile on the stand-in base (cached by the image test), offline; removed afterwards."""
    podman.ensure_base()
    try:
        say(request, f"built {IMAGE} in {podman.build(IMAGE):.1f} s")
        yield IMAGE
    finally:
        podman.remove(IMAGE)


@pytest.fixture(scope="module")
def gateway() -> Iterator[SandboxGateway]:
    with SandboxGateway() as sandbox:
        yield sandbox


def rehearsal(
    deployment: dict[str, Any], *, name: str, image: str, port: int, gateway_url: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Deployment podman plays, its container as the manifest has it with the port moved).

    One host instead of a cluster: one replica, the host's network (so the server reaches the
    sandbox gateway on loopback) on a free port, no `ports` list (podman 4.3.1 makes port mappings of
    it, which the host's network refuses), no probes (run by the test instead); the test's image,
    gateway, and names that cannot collide with another run's.
    """
    played = copy.deepcopy(deployment)
    played["metadata"]["name"] = name
    played["spec"]["replicas"] = 1
    pod = pod_spec(played)
    pod["hostNetwork"] = True
    container = the_container(played)
    container["image"] = image
    args = container["args"]
    manifest_port = int(args[args.index("--http") + 1])
    args[args.index("--http") + 1] = str(port)
    for item in container["env"]:
        if item["name"] == "FAIRWINS_API_URL":
            item["value"] = gateway_url
    for volume in pod["volumes"]:
        for mount in container["volumeMounts"]:
            if mount["name"] == volume["name"]:
                mount["name"] = f"{name}-{volume['name']}"
        volume["name"] = f"{name}-{volume['name']}"
    probed = copy.deepcopy(container)
    for item in probed["ports"]:
        if item["containerPort"] == manifest_port:
            item["containerPort"] = port
    for key in ("ports", "readinessProbe", "livenessProbe"):
        del container[key]
    return played, probed


def leaves(value: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    """Every scalar of a JSON value by its path; list items of named things by their name."""
    if isinstance(value, dict):
        found: dict[tuple[Any, ...], Any] = {}
        for key, item in value.items():
            found.update(leaves(item, (*path, key)))
        return found
    if isinstance(value, list):
        found = {}
        for index, item in enumerate(value):
            key = item.get("name", index) if isinstance(item, dict) else index
            found.update(leaves(item, (*path, key)))
        return found
    return {path: value}


@dataclass(frozen=True)
class HttpProbe:
    """An `httpGet` probe of the manifest, run as the kubelet runs it."""

    path: str
    port: int
    period: float
    timeout: float
    failure_threshold: int
    success_threshold: int
    initial_delay: float

    @classmethod
    def of(cls, probe: dict[str, Any], container: dict[str, Any]) -> HttpProbe:
        get = probe["httpGet"]
        port = get["port"]
        if isinstance(port, str):  # a named port: the container's port of that name
            (port,) = [p["containerPort"] for p in container["ports"] if p.get("name") == port]
        return cls(
            get["path"],
            port,
            probe.get("periodSeconds", 10),
            probe.get("timeoutSeconds", 1),
            probe.get("failureThreshold", 3),
            probe.get("successThreshold", 1),
            probe.get("initialDelaySeconds", 0),
        )

    def once(self) -> int | None:
        """One probe: the status, or None when nothing answered within the timeout (a failure)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            conn.request("GET", self.path, headers={"User-Agent": "kube-probe/1.37", "Accept": "*/*"})
            response = conn.getresponse()
            response.read()
            return response.status
        except OSError:
            return None
        finally:
            conn.close()

    @staticmethod
    def passed(status: int | None) -> bool:
        return status is not None and 200 <= status < 400  # the kubelet's httpGet success


@dataclass
class Recorder:
    """A probe run every period on its own thread, each result kept with when it came."""

    probe: HttpProbe
    results: list[tuple[float, int | None]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        def run() -> None:
            while True:
                self.results.append((time.monotonic(), self.probe.once()))
                if self._stop.wait(self.probe.period):  # the probe's own period, as the kubelet keeps it
                    return

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(self.probe.timeout + 5)


@dataclass
class Pod:
    """The played pod: where it listens, its one container, and what the manifest says of both."""

    podman: Podman
    played: dict[str, Any]
    probed: dict[str, Any]
    port: int
    file: pathlib.Path

    @property
    def name(self) -> str:
        return f"{self.played['metadata']['name']}-pod-0"  # podman's name for a Deployment's pod

    @property
    def container(self) -> str:
        return f"{self.name}-{self.probed['name']}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def probe(self, kind: str) -> HttpProbe:
        return HttpProbe.of(self.probed[kind], self.probed)

    def logs(self) -> str:
        done = self.podman("logs", self.container)
        return done.stdout + done.stderr

    def messages(self) -> list[str]:
        messages = []
        for line in self.logs().splitlines():
            if line.strip():
                entry = json.loads(line)  # the manifest asks for JSON logs: a line that is not fails here
                messages.append(str(entry["message"]))
        return messages

    def wait_for_log(self, found: Callable[[list[str]], bool], timeout: float = 10.0) -> list[str]:
        """The log's messages once `found(messages)`; log lines reach stderr within 0.1 s of being made."""
        deadline = time.monotonic() + timeout
        while not found(messages := self.messages()):
            if time.monotonic() > deadline:
                raise AssertionError(f"not logged within {timeout:.0f} s; logs:\n{self.logs()}")
            time.sleep(0.1)
        return messages

    def state(self) -> dict[str, Any]:
        inspected: dict[str, Any] = self.podman.json("container", "inspect", self.container)[0]
        return inspected["State"]

    def exec(self, *argv: str) -> str:
        return self.podman("exec", self.container, *argv).stdout


def wait_ready(pod: Pod) -> float:
    """Seconds until the readiness probe passed successThreshold times in a row, probing as the
    kubelet does (after initialDelaySeconds, every periodSeconds). Fails if the container exits or
    READY_TIMEOUT passes."""
    probe = pod.probe("readinessProbe")
    started = time.monotonic()
    waiting = threading.Event()
    waiting.wait(probe.initial_delay)
    passed = 0
    while time.monotonic() - started < READY_TIMEOUT:
        passed = passed + 1 if probe.passed(probe.once()) else 0
        if passed >= probe.success_threshold:
            return time.monotonic() - started
        if not pod.state()["Running"]:
            raise AssertionError(f"the container exited before it was ready; logs:\n{pod.logs()}")
        waiting.wait(probe.period)
    raise AssertionError(f"not ready within {READY_TIMEOUT:.0f} s; logs:\n{pod.logs()}")


@pytest.fixture(scope="module")
def pod(
    podman: Podman,
    image: str,
    gateway: SandboxGateway,
    deployment: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Pod]:
    """The Deployment played, and ready through its readiness probe; removed afterwards."""
    directory = tmp_path_factory.mktemp("kube")
    played_pods: list[Pod] = []
    try:
        for attempt in range(3):  # a free port can be taken between picking it and binding it
            port = free_port()
            played, probed = rehearsal(
                deployment, name=f"{NAME}-{attempt}", image=image, port=port, gateway_url=gateway.url
            )
            file = directory / f"deployment-{attempt}.json"  # JSON is YAML
            file.write_text(json.dumps(played, indent=2), encoding="utf-8")
            played_pod = Pod(podman, played, probed, port, file)
            played_pods.append(played_pod)
            started = time.monotonic()
            podman("kube", "play", str(file))
            try:
                ready = wait_ready(played_pod)
            except AssertionError:
                if "Address already in use" in played_pod.logs():
                    continue
                raise
            say(request, f"pod {played_pod.name} ready {time.monotonic() - started:.1f} s after `podman kube play`")
            say(request, f"  (the readiness probe passed {ready:.1f} s after its first try)")
            yield played_pod
            return
        raise AssertionError("three free ports were taken before the pod could bind one")
    finally:
        for played_pod in played_pods:
            if podman("pod", "exists", played_pod.name, check=False).returncode == 0:
                record_output(f"pod {played_pod.name} logs", played_pod.logs())
            podman("pod", "rm", "--force", "--time", "0", played_pod.name, check=False)
            for volume in pod_spec(played_pod.played)["volumes"]:
                podman("volume", "rm", "--force", volume["name"], check=False)


# --- the played copy -------------------------------------------------------------------------------


def test_the_played_copy_is_the_manifest_but_for_one_host(deployment: dict[str, Any]) -> None:
    played, probed = rehearsal(deployment, name="n", image="i", port=1, gateway_url="http://127.0.0.1:2")
    volumes, mounts = pod_spec(played)["volumes"], the_container(played)["volumeMounts"]
    assert [v["name"] for v in volumes] == [m["name"] for m in mounts] and all(
        v["name"].startswith("n-") for v in volumes
    )
    unnamed = copy.deepcopy(played)
    for item in pod_spec(unnamed)["volumes"] + the_container(unnamed)["volumeMounts"]:
        item["name"] = item["name"].removeprefix("n-")
    manifest, copied = leaves(deployment), leaves(unnamed)
    container = ("spec", "template", "spec", "containers", "fairwins-mcp")
    assert {path for path in manifest.keys() & copied.keys() if manifest[path] != copied[path]} == {
        ("metadata", "name"),
        ("spec", "replicas"),
        (*container, "image"),
        (*container, "args", 1),
        (*container, "env", "FAIRWINS_API_URL", "value"),
    }
    assert copied.keys() - manifest.keys() == {("spec", "template", "spec", "hostNetwork")}
    removed = manifest.keys() - copied.keys()
    assert all(path[: len(container)] == container for path in removed)
    assert {path[len(container)] for path in removed} == {"ports", "readinessProbe", "livenessProbe"}
    # The probes the test runs are the manifest's, with the port the pod listens on.
    expected = copy.deepcopy(the_container(deployment))
    for key in ("image", "args", "env", "volumeMounts"):
        expected[key] = the_container(played)[key]
    expected["ports"][0]["containerPort"] = 1
    assert probed == expected


# --- the running pod -------------------------------------------------------------------------------


def test_pod_is_ready_and_live_through_the_manifests_probes(pod: Pod) -> None:
    # Ready already (the fixture waited on the readiness probe); the liveness probe passes too.
    assert pod.state()["Running"]
    live = pod.probe("livenessProbe")
    assert live.passed(live.once())
    status = pod.probe("readinessProbe").once()
    assert status == 200


def test_pod_runs_as_the_manifest_locks_it_down(pod: Pod, deployment: dict[str, Any]) -> None:
    security = pod_spec(deployment)["securityContext"]
    status = dict(line.split(":", 1) for line in pod.exec("cat", "/proc/1/status").splitlines() if ":" in line)
    assert set(status["Uid"].split()) == {str(security["runAsUser"])}
    assert set(status["Gid"].split()) == {str(security["runAsGroup"])}
    assert status["NoNewPrivs"].strip() == "1"  # allowPrivilegeEscalation: false
    for kind in ("CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[kind], 16) == 0, (kind, status[kind])  # capabilities: drop ALL
    command = pod.exec("cat", "/proc/1/cmdline").split("\0")
    assert any(part.endswith("fairwins-mcp") for part in command), command  # the server is PID 1
    # readOnlyRootFilesystem, and the one writable path the manifest mounts.
    tries = 'for d in /opt/fairwins-mcp /home /var/tmp /tmp; do touch "$d/.w" 2>/dev/null && echo "$d"; done; true'
    assert pod.exec("sh", "-c", tries).split() == ["/tmp"]
    # --workers auto against the CPU limit: the server's own reading of the cgroup, and its workers.
    limit = int(the_container(deployment)["resources"]["limits"]["cpu"])
    assert int(pod.exec("python", "-c", "from mcp_server.ops import cpus; print(cpus.available())")) == limit
    messages = pod.wait_for_log(lambda found: sum(m.endswith(" serving") for m in found) >= limit)
    (started,) = [m for line in messages if (m := STARTED_LINE.match(line))]
    assert int(started.group(1)) == limit


def test_pod_answers_an_mcp_session(pod: Pod, gateway: SandboxGateway) -> None:
    client = LegacyClient(f"{pod.url}/mcp")
    assert client.initialize().result["serverInfo"]["name"] == "fairwins-mcp"
    assert client.request("tools/list").result["tools"] == client_for(None).request("tools/list")["result"]["tools"]
    member = LegacyClient(f"{pod.url}/mcp", bearer=TOKEN_MEMBER_A)
    member.initialize()
    gateway.clear_seen()
    profile = member.request("tools/call", {"name": "get_profile", "arguments": {}}).result
    assert profile["isError"] is False, profile
    (seen,) = gateway.wait_for_requests(1, timeout=10)
    assert seen.header("Authorization") == f"Bearer {TOKEN_MEMBER_A}"  # their own token, no other


# --- the stop --------------------------------------------------------------------------------------


@dataclass
class Member:
    """A member calling one tool over and over on one kept-alive connection, until an answer closes it."""

    port: int
    tool: str
    bearer: str | None = None
    answers: list[tuple[float, int, str, dict[str, Any]]] = field(default_factory=list)
    error: BaseException | None = None

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH, "MCP-Protocol-Version": "2025-11-25"}
        if self.bearer is not None:
            headers["Authorization"] = f"Bearer {self.bearer}"
        try:
            for rpc_id in range(1, 1000):
                message = {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": {"name": self.tool}}
                conn.request("POST", "/mcp", body=json.dumps(message), headers=headers)
                response = conn.getresponse()
                body = json.loads(response.read())
                connection = (response.getheader("Connection") or "").lower()
                self.answers.append((time.monotonic(), response.status, connection, body))
                if connection == "close":
                    return
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self.error = exc
        finally:
            conn.close()


def test_stop_serves_through_the_pre_stop_drains_and_exits_0_within_the_grace_period(
    pod: Pod, gateway: SandboxGateway, deployment: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    grace = pod_spec(deployment)["terminationGracePeriodSeconds"]
    prestop = server_in(the_container(deployment)).timings.prestop
    assert prestop > 0, "the manifest's pre-stop delay is what this test watches"
    gateway.clear_seen()
    for path, seconds in HOLDS.items():
        gateway.fault(path, "delay", seconds=seconds)
    members = [Member(pod.port, "get_gateway_status"), Member(pod.port, "get_profile", TOKEN_MEMBER_A)]
    threads = []
    for count, member in enumerate(members, start=1):
        threads.append(threading.Thread(target=member.run, daemon=True))
        threads[-1].start()
        gateway.wait_for_requests(count, timeout=10)  # its first call is held at the gateway
    readiness = Recorder(pod.probe("readinessProbe"))
    stopped: list[subprocess.CompletedProcess[str]] = []
    stopping = threading.Thread(
        target=lambda: stopped.append(pod.podman("pod", "stop", "--time", str(grace), pod.name, timeout=grace + 60)),
        daemon=True,
    )
    try:
        signalled = time.monotonic()
        stopping.start()  # SIGTERM, then SIGKILL after the grace period: the kubelet's stop
        readiness.start()
        for thread in threads:
            thread.join(grace + 30)
        stopping.join(grace + 60)
        took = time.monotonic() - signalled
    finally:
        readiness.stop()
        gateway.clear_faults()
    say(request, f"pod stop with a {grace} s grace period: {took:.1f} s, {sum(len(m.answers) for m in members)} calls")
    logs = pod.logs()
    record_output(f"pod {pod.name} logs", logs)
    # The server exited by itself, and cleanly: a SIGKILL at the end of the grace period is 137.
    assert stopped and not stopping.is_alive(), "podman pod stop did not return"
    state = pod.state()
    assert state["ExitCode"] == 0 and not state["OOMKilled"], f"exit {state['ExitCode']}; logs:\n{logs}"
    # Every call was answered, and each member's last answer closed its connection: the drain.
    for member in members:
        assert member.error is None, (member.tool, member.error)
        assert [status for _, status, _, _ in member.answers] == [200] * len(member.answers)
        assert [body["result"]["isError"] for *_, body in member.answers] == [False] * len(member.answers)
        assert [c for _, _, c, _ in member.answers[:-1] if c == "close"] == [] and member.answers[-1][2] == "close"
    drained_at = min(member.answers[-1][0] for member in members)
    # The pre-stop: the readiness probe failed with 503 (the endpoints drop the pod) while calls
    # were still answered on the open connections, before anything was closed.
    unready = [when for when, status in readiness.results if status == 503 and when < drained_at]
    assert unready, readiness.results
    served_unready = [when for member in members for when, *_ in member.answers[:-1] if when > unready[0]]
    assert served_unready, "no call was answered while the pod was unready and still serving"
    messages = pod.messages()
    (started,) = [m for line in messages if (m := STARTED_LINE.match(line))]
    pids = {int(pid) for pid in started.group(2).split(", ")}
    pre_stops = [int(m.group(1)) for line in messages if (m := STOPPING_LINE.match(line))]
    assert pre_stops == [int(prestop)] * len(pids), messages  # each worker, for the manifest's delay
    # The drain: at least one call was in flight when it began, and each worker answered all it had.
    in_flight = [int(m.group(1)) for line in messages if (m := STOP_LINE.search(line))]
    assert len(in_flight) == len(pids) and sum(in_flight) >= 1, messages
    drained = {int(m.group(2)) for line in messages if (m := DRAINED_LINE.match(line))}
    assert drained == pids, messages
    # And `podman kube down` removes what is left, as `kubectl delete` would.
    pod.podman("kube", "down", str(pod.file))
    assert pod.podman("pod", "exists", pod.name, check=False).returncode != 0
