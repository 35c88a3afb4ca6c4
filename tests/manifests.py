"""The manifests in deploy/, read for the tests: parsed, and what the server will make of them.

YAML is read by the PyYAML of .venv-k8s (installed with kubernetes-validate by `make test`), so the
project's own environment needs no YAML parser. What the server makes of a container's settings is
asked of the server itself: its argument parser, its `config.from_env` and its drain `Timings`.
"""

from __future__ import annotations

import json
import pathlib
import re
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcp_server.setup.config import Config, argument_parser, from_env
from mcp_server.transports.http.admission import SLOT_WAIT
from mcp_server.transports.http.drain import SETTLE_LIMIT, Timings

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
DEPLOY: Final = ROOT / "deploy"
KUBERNETES: Final = DEPLOY / "kubernetes"
CLOUD_RUN: Final = DEPLOY / "cloudrun" / "service.yaml"
K8S_VENV: Final = ROOT / ".venv-k8s"
K8S_PYTHON: Final = K8S_VENV / "bin" / "python"
VALIDATE: Final = K8S_VENV / "bin" / "kubernetes-validate"
MISSING: Final = f"kubernetes-validate is not installed in {K8S_VENV}: run `make test` (it installs it)"

# What the server gives a request before the drain gives up on it, as `cli._serve_http` computes it
# (`grace = config.timeout + SLOT_WAIT + 5`): the gateway deadline, a wait for a slot, and writing the
# answer. tests/test_deploy.py checks cli.py still says so.
ANSWER_WRITE: Final = 5.0
# Cloud Run's container contract: SIGTERM, then SIGKILL 10 s later; a service cannot change it.
CLOUD_RUN_SIGKILL_AFTER: Final = 10.0
# Kubernetes' default when a pod does not set terminationGracePeriodSeconds.
DEFAULT_GRACE: Final = 30


def load(source: pathlib.Path | str) -> list[dict[str, Any]]:
    """Every document of a YAML file (a path) or text (a str), parsed by .venv-k8s's PyYAML."""
    assert K8S_PYTHON.exists(), MISSING
    text = source.read_text(encoding="utf-8") if isinstance(source, pathlib.Path) else source
    done = subprocess.run(
        [str(K8S_PYTHON), "-c", "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(sys.stdin))))"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"not YAML: {done.stderr}"
    documents: list[dict[str, Any]] = [d for d in json.loads(done.stdout) if d is not None]
    return documents


def kubernetes_manifests() -> dict[str, dict[str, Any]]:
    """deploy/kubernetes/, by kind: every file one document."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(KUBERNETES.glob("*.yaml")):
        (document,) = load(path)
        assert document["kind"] not in found, f"two {document['kind']}s in deploy/kubernetes/"
        found[document["kind"]] = document
    return found


def cloud_run_service() -> dict[str, Any]:
    (document,) = load(CLOUD_RUN)
    return document


def pod_spec(workload: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template's spec of a Deployment or a Knative Service."""
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def the_container(workload: Mapping[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec(workload)["containers"]
    assert isinstance(container, dict)
    return container


def image_defaults() -> tuple[dict[str, str], list[str]]:
    """The final stage of the Dockerfile: its ENV, and the server's arguments in its CMD (`$PORT` left in)."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    final = re.split(r"^FROM ", text, flags=re.M)[-1]
    joined = re.sub(r"\\\n\s*", " ", final)
    env: dict[str, str] = {}
    for line in joined.splitlines():
        if line.startswith("ENV "):
            env.update(dict(word.split("=", 1) for word in shlex.split(line[4:])))
    (cmd,) = [json.loads(line[4:]) for line in joined.splitlines() if line.startswith("CMD ")]
    assert cmd[:2] == ["sh", "-c"], cmd
    words = shlex.split(cmd[2])
    assert words[:2] == ["exec", "fairwins-mcp"], words
    return env, words[2:]


@dataclass(frozen=True)
class Server:
    """What the server in a container will run with: its Config, and the clock of its drain."""

    config: Config
    timings: Timings
    argv: list[str]

    @property
    def request_limit(self) -> float:
        return self.timings.requests


def server_in(container: Mapping[str, Any], *, platform_env: Mapping[str, str] | None = None) -> Server:
    """The container's server as the server itself reads it: the image's ENV under the container's env,
    the container's args (or the image's CMD, `$PORT` filled in), through the server's own parser."""
    image_env, image_args = image_defaults()
    env = {**image_env, **(platform_env or {})}
    for item in container.get("env", []):
        assert "valueFrom" not in item, f"{item['name']} comes from elsewhere: a secret has no place here"
        env[item["name"]] = item["value"]
    if "command" in container or "args" in container:
        assert container.get("command") == ["fairwins-mcp"], container.get("command")
        argv = list(container.get("args", []))
    else:
        argv = [env["PORT"] if word == "$PORT" else word for word in image_args]
    config = from_env(env, argument_parser().parse_args(argv))
    timings = Timings(
        config.idle_timeout, config.drain_idle, config.prestop_delay, config.timeout + SLOT_WAIT + ANSWER_WRITE
    )
    return Server(config, timings, argv)


def stop_sum(timings: Timings) -> str:
    """The whole stop, term by term, for a failure message an operator can act on."""
    return (
        f"pre-stop {timings.prestop:g} + settling up to {SETTLE_LIMIT:g} + drain idle {timings.idle_limit(True):g} "
        f"+ a request's limit {timings.requests:g} (gateway timeout + {SLOT_WAIT:g} + {ANSWER_WRITE:g}) "
        f"= {timings.total:g} s"
    )


def kubernetes_timing_problems(deployment: Mapping[str, Any]) -> list[str]:
    """Where a Deployment's timings disagree with each other or with the server's: [] when they fit."""
    pod = pod_spec(deployment)
    container = the_container(deployment)
    server = server_in(container)
    timings = server.timings
    problems = []
    grace = pod.get("terminationGracePeriodSeconds", DEFAULT_GRACE)
    if not grace > timings.total:
        problems.append(
            f"terminationGracePeriodSeconds ({grace}) must be longer than the server's whole stop, "
            f"{stop_sum(timings)}: the kubelet's SIGKILL would cut the drain short"
        )
    readiness = container.get("readinessProbe")
    if readiness is None:
        problems.append("no readinessProbe: nothing takes the pod out of the endpoints during the pre-stop")
    else:
        # The kubelet marks the pod unready after failureThreshold failed probes, each at most
        # periodSeconds apart and timeoutSeconds long; only then do the endpoints drop it.
        unready = readiness.get("periodSeconds", 10) * readiness.get("failureThreshold", 3)
        unready += readiness.get("timeoutSeconds", 1)
        if not timings.prestop > unready:
            problems.append(
                f"FAIRWINS_MCP_PRESTOP_DELAY ({timings.prestop:g} s) must outlast the readiness probe's "
                f"verdict (period x failureThreshold + timeout = {unready:g} s): new connections would still "
                "be routed to a pod that has stopped accepting them"
            )
    return problems


def cloud_run_timing_problems(service: Mapping[str, Any]) -> list[str]:
    """Where a Cloud Run service's timings disagree with each other, the server's or Cloud Run's."""
    server = server_in(the_container(service), platform_env={"K_SERVICE": service["metadata"]["name"]})
    timings = server.timings
    problems = []
    # Cloud Run stops routing to an instance before its SIGTERM, so nothing is in flight: the
    # drain is the pre-stop, settling, and the idle connections' last seconds.
    idle_stop = timings.prestop + SETTLE_LIMIT + timings.idle_limit(True)
    if not idle_stop < CLOUD_RUN_SIGKILL_AFTER:
        problems.append(
            f"an idle instance's stop (pre-stop {timings.prestop:g} + settling up to {SETTLE_LIMIT:g} + drain "
            f"idle {timings.idle_limit(True):g} = {idle_stop:g} s) must end within the {CLOUD_RUN_SIGKILL_AFTER:g} s "
            "Cloud Run allows between SIGTERM and SIGKILL"
        )
    timeout = pod_spec(service).get("timeoutSeconds", 300)
    if not timeout > server.request_limit:
        problems.append(
            f"timeoutSeconds ({timeout}) must be longer than a request may take in the server "
            f"({server.request_limit:g} s: gateway timeout + {SLOT_WAIT:g} + {ANSWER_WRITE:g}), or Cloud Run "
            "answers 504 for a call the server would still answer"
        )
    return problems
