"""deploy/'s manifests and docs/deploy.md, checked offline: the schemas, Cloud Run's limits, the timings.

`kubernetes-validate` (installed by `make test` into .venv-k8s) checks every Kubernetes manifest
against the Kubernetes schemas, strictly. It has no Knative schema, so the Cloud Run service's
revision template is validated as the core Pod it embeds, and its Knative and Cloud Run fields
against Cloud Run's documented limits. The timings that must agree (grace period, drain, pre-stop,
probes, request timeout) are computed by the server's own configuration code from each
container's environment and arguments, and each check is shown failing on a manifest that breaks
it. Every block of docs/deploy.md is checked here. The manifests played by podman: test_kube_play.py.
"""

from __future__ import annotations

import copy
import json
import pathlib
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, Final

import pytest

from mcp_server.setup.config import argument_parser
from tests.manifests import (
    CLOUD_RUN,
    KUBERNETES,
    MISSING,
    ROOT,
    VALIDATE,
    cloud_run_service,
    cloud_run_timing_problems,
    image_defaults,
    kubernetes_manifests,
    kubernetes_timing_problems,
    pod_spec,
    server_in,
    the_container,
)

pytestmark = pytest.mark.linux_tier(
    "reads deploy/'s manifests with .venv-k8s (kubernetes-validate and PyYAML), which only the Linux tier installs"
)

DOC: Final = ROOT / "docs" / "deploy.md"
OLDEST, NEWEST = "1.25.0", "1.37.0"  # the Kubernetes schemas kubernetes-validate 1.37.0 bundles, first and last
_FENCE: Final = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.M | re.S)


def validate(*paths: pathlib.Path, version: str = NEWEST) -> subprocess.CompletedProcess[str]:
    assert VALIDATE.exists(), MISSING
    return subprocess.run(
        [str(VALIDATE), "--strict", "--kubernetes-version", version, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def written(tmp_path: pathlib.Path, name: str, document: dict[str, Any]) -> pathlib.Path:
    """A document as a file the validator reads (JSON is YAML)."""
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def kube() -> dict[str, dict[str, Any]]:
    return kubernetes_manifests()


@pytest.fixture(scope="module")
def run_service() -> dict[str, Any]:
    return cloud_run_service()


def with_env(workload: dict[str, Any], **values: str) -> dict[str, Any]:
    """A copy of a workload whose one container has these environment variables set."""
    changed = copy.deepcopy(workload)
    env = the_container(changed).setdefault("env", [])
    for name, value in values.items():
        env[:] = [e for e in env if e["name"] != name] + [{"name": name, "value": value}]
    return changed


# --- the schemas ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
def test_every_kubernetes_manifest_validates_strictly(version: str) -> None:
    paths = sorted(KUBERNETES.glob("*.yaml"))
    assert {p.name for p in paths} == {"deployment.yaml", "service.yaml", "pdb.yaml", "hpa.yaml"}
    done = validate(*paths, version=version)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(" passed for resource ") == len(paths), done.stdout


def test_the_validator_refuses_what_kubernetes_would(tmp_path: pathlib.Path, kube: dict[str, dict[str, Any]]) -> None:
    # The tool really reads what it validates: a port as a string, and a field Kubernetes does
    # not have (strict mode), are each refused.
    quoted = copy.deepcopy(kube["Deployment"])
    the_container(quoted)["ports"][0]["containerPort"] = "8790"
    unknown = copy.deepcopy(kube["Deployment"])
    pod_spec(unknown)["terminationGracePeriod"] = 45
    for name, document in (("quoted.json", quoted), ("unknown.json", unknown)):
        done = validate(written(tmp_path, name, document))
        assert done.returncode != 0 and "did not validate" in done.stdout, done.stdout + done.stderr


def test_knative_is_not_in_the_bundled_schemas() -> None:
    # Why the Cloud Run service is checked in two parts below. If a later kubernetes-validate
    # learns Knative, this fails, and the file should then be validated whole.
    done = validate(CLOUD_RUN)
    assert "Couldn't find schema for kind Service with api version serving.knative.dev/v1" in done.stdout, done.stdout


def test_cloud_run_revision_template_validates_as_a_core_pod(
    tmp_path: pathlib.Path, run_service: dict[str, Any]
) -> None:
    # A Knative revision template is a Kubernetes pod spec plus two Knative fields.
    template = run_service["spec"]["template"]
    spec = {k: v for k, v in template["spec"].items() if k not in ("containerConcurrency", "timeoutSeconds")}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "template", **template["metadata"]}, "spec": spec}
    done = validate(written(tmp_path, "template-pod.json", pod))
    assert done.returncode == 0 and " passed for resource pod/template" in done.stdout, done.stdout + done.stderr


# --- Cloud Run's documented limits ---------------------------------------------------------------


def quantity_mib(text: str) -> float:
    match = re.fullmatch(r"(\d+)(Mi|Gi)", text)
    assert match is not None, f"not a quantity in Mi or Gi: {text}"
    return int(match[1]) * (1024 if match[2] == "Gi" else 1)


def test_cloud_run_service_keeps_within_cloud_runs_limits(run_service: dict[str, Any]) -> None:
    # Each limit as Cloud Run's documentation states it (docs/deploy.md, "How this is checked").
    assert run_service["apiVersion"] == "serving.knative.dev/v1" and run_service["kind"] == "Service"
    spec = pod_spec(run_service)
    annotations = run_service["spec"]["template"]["metadata"]["annotations"]
    container = the_container(run_service)
    limits = container["resources"]["limits"]
    cpu = float(limits["cpu"])
    assert 1 <= spec["containerConcurrency"] <= 1000
    assert cpu >= 1 or spec["containerConcurrency"] == 1, "concurrency above 1 needs at least one CPU"
    assert cpu <= 1 or (cpu == int(cpu) and cpu <= 8), "above 1, a whole number of CPUs, at most 8"
    if annotations.get("run.googleapis.com/execution-environment") == "gen2":
        assert quantity_mib(limits["memory"]) >= 512, "the second generation needs at least 512 MiB"
    assert 1 <= spec["timeoutSeconds"] <= 3600
    (port,) = container["ports"]
    assert port["name"] in ("http1", "h2c")
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] <= 240
    for probe in (startup, container["livenessProbe"]):
        assert probe["httpGet"]["port"] == port["containerPort"] and port["name"] == "http1", "HTTP probes need HTTP/1"
    reserved = {"PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION"}
    assert not reserved & {e["name"] for e in container["env"]}
    assert int(annotations["autoscaling.knative.dev/minScale"]) == 0  # scale to zero: nothing is held


# --- the server as the manifests start it ---------------------------------------------------------


def test_cli_still_gives_a_request_the_limit_the_timings_assume() -> None:
    # tests/manifests.py repeats how the server sizes a request's limit in the drain; if cli.py
    # changes it, the timings checked here must change with it.
    source = (ROOT / "mcp_server" / "setup" / "cli.py").read_text(encoding="utf-8")
    assert "grace = config.timeout + SLOT_WAIT + 5\n" in source


def test_kubernetes_server_runs_workers_auto_on_the_mcp_port(kube: dict[str, dict[str, Any]]) -> None:
    container = the_container(kube["Deployment"])
    server = server_in(container)
    (port,) = container["ports"]
    assert server.config.http_port == port["containerPort"] and port["name"] == "http"
    assert server.config.host == "0.0.0.0"
    assert server.config.http_workers == 0, "--workers auto: one worker per CPU of the limit"
    assert server.config.log_format == "json"
    assert container["resources"]["limits"]["cpu"] == container["resources"]["requests"]["cpu"] == "2"
    for probe in (container["readinessProbe"], container["livenessProbe"]):
        assert probe["httpGet"] == {"path": "/healthz", "port": "http"}


def test_cloud_run_server_takes_its_port_from_PORT_and_runs_workers_auto(run_service: dict[str, Any]) -> None:
    container = the_container(run_service)
    assert "command" not in container and "args" not in container, "the image's CMD is what reads $PORT"
    _, image_args = image_defaults()
    assert image_args[:2] == ["--http", "$PORT"] and image_args[-2:] == ["--workers", "auto"]
    server = server_in(container, platform_env={"K_SERVICE": "fairwins-mcp"})
    assert server.config.http_port == container["ports"][0]["containerPort"]  # Cloud Run sets PORT to it
    assert server.config.http_workers == 0 and server.config.host == "0.0.0.0"
    assert server.config.log_format == "json"


def test_no_manifest_sets_a_secret(kube: dict[str, dict[str, Any]], run_service: dict[str, Any]) -> None:
    for workload in (kube["Deployment"], run_service):
        container = the_container(workload)
        names = {e["name"] for e in container["env"]}
        assert "FAIRWINS_API_TOKEN" not in names
        assert not [e for e in container["env"] if "valueFrom" in e]
        assert "envFrom" not in container
        assert not [v for v in pod_spec(workload).get("volumes", []) if "secret" in v]
        server = server_in(container, platform_env={"K_SERVICE": "x"} if workload is run_service else None)
        assert server.config.api_token is None and not server.config.allow_shared_token
        text = json.dumps(workload)
        assert "fw1." not in text and "secretKeyRef" not in text and '"secret"' not in text


def test_the_pod_is_locked_down(kube: dict[str, dict[str, Any]]) -> None:
    pod = pod_spec(kube["Deployment"])
    container = the_container(kube["Deployment"])
    security = container["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False and security["privileged"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert pod["automountServiceAccountToken"] is False
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}
    (mount,) = container["volumeMounts"]
    (volume,) = pod["volumes"]
    assert mount == {"name": volume["name"], "mountPath": "/tmp"} and "emptyDir" in volume


def test_service_budget_and_autoscaler_hold_the_deployments_pods(kube: dict[str, dict[str, Any]]) -> None:
    deployment = kube["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service, budget, scaler = kube["Service"], kube["PodDisruptionBudget"], kube["HorizontalPodAutoscaler"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == the_container(deployment)["ports"][0]["name"]
    target = scaler["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    # The budget lets one pod go; the autoscaler never leaves fewer than two, so one always serves.
    assert budget["spec"]["maxUnavailable"] == 1 and scaler["spec"]["minReplicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def metrics_problems(container: dict[str, Any], service_ports: set[object]) -> list[str]:
    """Whether a container serves metrics where the members' door is."""
    args = container.get("args", [])
    problems = []
    if "--metrics-on-mcp-port" in args:
        problems.append("--metrics-on-mcp-port serves /metrics on the public port")
    if "--metrics" in args:
        where = args[args.index("--metrics") + 1] if args.index("--metrics") + 1 < len(args) else ""
        port = where.rpartition(":")[2]
        if not port.isdigit():
            problems.append("--metrics without HOST:PORT")
        else:
            named = {p.get("name") for p in container.get("ports", []) if p["containerPort"] == int(port)}
            if int(port) in service_ports or named & service_ports:
                problems.append(f"the metrics port {port} is in the Service")
    return problems


def test_metrics_stay_off_the_public_port(kube: dict[str, dict[str, Any]], run_service: dict[str, Any]) -> None:
    service_ports = {p["targetPort"] for p in kube["Service"]["spec"]["ports"]}
    container = the_container(kube["Deployment"])
    assert metrics_problems(container, service_ports) == []
    assert not server_in(container).config.metrics
    assert "--metrics" not in image_defaults()[1]  # what the Cloud Run service runs
    # The check refuses what it is for.
    public = {**container, "args": [*container["args"], "--metrics-on-mcp-port"]}
    listed = {
        **container,
        "args": [*container["args"], "--metrics", "0.0.0.0:9464"],
        "ports": [*container["ports"], {"name": "metrics", "containerPort": 9464}],
    }
    assert metrics_problems(public, service_ports) != []
    assert metrics_problems(listed, service_ports) == []
    assert metrics_problems(listed, {*service_ports, "metrics"}) != []


# --- the timings -----------------------------------------------------------------------------------


def test_kubernetes_timings_agree(kube: dict[str, dict[str, Any]]) -> None:
    assert kubernetes_timing_problems(kube["Deployment"]) == []
    timings = server_in(the_container(kube["Deployment"])).timings
    # The figures docs/deploy.md's table shows.
    assert (timings.prestop, timings.idle_limit(True), timings.requests, timings.total) == (10, 10, 17, 42)
    assert pod_spec(kube["Deployment"])["terminationGracePeriodSeconds"] == 45


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"grace": 30}, "terminationGracePeriodSeconds (30) must be longer"),
        ({"FAIRWINS_MCP_TIMEOUT": "20"}, "terminationGracePeriodSeconds (45) must be longer"),
        ({"FAIRWINS_MCP_PRESTOP_DELAY": "5"}, "FAIRWINS_MCP_PRESTOP_DELAY (5 s) must outlast"),
        ({"FAIRWINS_MCP_PRESTOP_DELAY": "20"}, "terminationGracePeriodSeconds (45) must be longer"),
        ({"no readiness": True}, "no readinessProbe"),
    ],
)
def test_kubernetes_timings_that_disagree_fail(
    kube: dict[str, dict[str, Any]], change: dict[str, Any], complaint: str
) -> None:
    deployment = with_env(kube["Deployment"], **{k: v for k, v in change.items() if k.startswith("FAIRWINS_")})
    if "grace" in change:
        pod_spec(deployment)["terminationGracePeriodSeconds"] = change["grace"]
    if "no readiness" in change:
        del the_container(deployment)["readinessProbe"]
    problems = kubernetes_timing_problems(deployment)
    assert len(problems) == 1 and problems[0].startswith(complaint), problems


def test_cloud_run_timings_agree(run_service: dict[str, Any]) -> None:
    assert cloud_run_timing_problems(run_service) == []


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"FAIRWINS_MCP_DRAIN_IDLE": "10"}, "an idle instance's stop"),
        ({"FAIRWINS_MCP_PRESTOP_DELAY": "5"}, "an idle instance's stop"),
        ({"FAIRWINS_MCP_TIMEOUT": "30"}, "timeoutSeconds (30) must be longer"),
    ],
)
def test_cloud_run_timings_that_disagree_fail(
    run_service: dict[str, Any], change: dict[str, str], complaint: str
) -> None:
    problems = cloud_run_timing_problems(with_env(run_service, **change))
    assert len(problems) == 1 and problems[0].startswith(complaint), problems


# --- docs/deploy.md --------------------------------------------------------------------------------


def doc_blocks() -> list[tuple[str, str]]:
    return [(m[1].strip(), m[2]) for m in _FENCE.finditer(DOC.read_text(encoding="utf-8"))]


def command_lines(text: str) -> Iterator[list[str]]:
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            yield words


def flags(words: list[str]) -> dict[str, str]:
    """`--name value` pairs of a command line (each flag here takes one value)."""
    found = {}
    for i, word in enumerate(words):
        if word.startswith("--"):
            assert i + 1 < len(words) and not words[i + 1].startswith("--"), words
            found[word] = words[i + 1]
    return found


def check_command(words: list[str], kube: dict[str, dict[str, Any]], run_service: dict[str, Any]) -> None:
    """One command of the doc against what it names: files, names and options that exist."""
    image = the_container(run_service)["image"]
    name = run_service["metadata"]["name"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    match words:
        case ["docker", "build", "-t", tag, "."]:
            assert tag == image
        case ["docker", "push", tag]:
            assert tag == image
        case ["gcloud", "run", "services", "replace", path, *rest]:
            # `gcloud run services replace FILE [--async] [--dry-run] [--region=REGION]`
            assert (ROOT / path).resolve() == CLOUD_RUN and set(flags(rest)) == {"--region"}
        case ["gcloud", "run", "services", "add-iam-policy-binding", service, *rest]:
            assert service == name
            assert flags(rest) == {"--region": "REGION", "--member": "allUsers", "--role": "roles/run.invoker"}
        case ["kubectl", "apply", "-f", path]:
            assert (ROOT / path).resolve() == KUBERNETES
        case ["kubectl", "rollout", "status", target]:
            assert target == f"deployment/{kube['Deployment']['metadata']['name']}"
        case ["make", target]:
            assert re.search(rf"^{re.escape(target)}:", makefile, re.M), target
        case _:
            raise AssertionError(f"docs/deploy.md runs a command no test checks: {shlex.join(words)}")


def test_every_block_of_the_doc_is_checked(kube: dict[str, dict[str, Any]], run_service: dict[str, Any]) -> None:
    kinds = [info for info, _ in doc_blocks()]
    assert kinds == ["sh deploy", "sh deploy", "python", "text", "sh"], kinds
    for info, body in doc_blocks():
        if info in ("sh", "sh deploy"):
            for words in command_lines(body):
                check_command(words, kube, run_service)
    for test_file in re.findall(r"tests/test_\w+\.py", DOC.read_text(encoding="utf-8")):
        assert (ROOT / test_file).exists(), test_file


def test_the_deploy_command_beside_the_cloud_run_file_is_the_docs(
    kube: dict[str, dict[str, Any]], run_service: dict[str, Any]
) -> None:
    lines = [line[1:].strip() for line in CLOUD_RUN.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    commands = [line.split(":", 1)[1] for line in lines if line.startswith("Deploy:")]
    assert len(commands) == 1
    words = shlex.split(commands[0])
    check_command(words, kube, run_service)
    assert any(shlex.join(words) in body for info, body in doc_blocks() if info == "sh deploy")


def test_the_sizing_block_prints_what_the_doc_shows(
    kube: dict[str, dict[str, Any]], run_service: dict[str, Any]
) -> None:
    blocks = doc_blocks()
    (index,) = [i for i, (info, _) in enumerate(blocks) if info == "python"]
    script, shown = blocks[index][1], blocks[index + 1][1]
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown
    # Its inputs are the manifests' own, and the manifests are sized by its worst case.
    inputs = dict(re.findall(r"^([A-Z_]+) = ([\d._e-]+)", script, re.M))
    limits = the_container(run_service)["resources"]["limits"]
    assert (
        float(inputs["VCPU"])
        == float(limits["cpu"])
        == float(the_container(kube["Deployment"])["resources"]["limits"]["cpu"])
    )
    assert (
        f"{inputs['MEMORY_MIB']}Mi"
        == limits["memory"]
        == the_container(kube["Deployment"])["resources"]["limits"]["memory"]
    )
    assert int(inputs["CONCURRENCY"]) == pod_spec(run_service)["containerConcurrency"]
    assert int(inputs["PER_WORKER"]) == server_in(the_container(kube["Deployment"])).config.max_concurrency
    # Each measured figure it cites, as BENCHMARKS.md has it.
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    cited = re.findall(r"\(([\d.]+) to ([\d.]+)", script)
    assert len(cited) == 4
    for low, high in cited:
        for figure in (low, high):
            assert re.search(rf"(?<![\d.]){re.escape(figure)}(?!\d)", benchmarks), figure
    found = re.search(r"gateway  200 ms: .*; (\d+) instances", shown)
    assert found is not None, shown
    worst = int(found[1])
    assert worst <= int(run_service["spec"]["template"]["metadata"]["annotations"]["autoscaling.knative.dev/maxScale"])
    assert worst <= kube["HorizontalPodAutoscaler"]["spec"]["maxReplicas"]
    assert kube["HorizontalPodAutoscaler"]["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == round(
        100 * float(inputs["TARGET"])
    )


def test_the_servers_flags_in_the_doc_exist() -> None:
    # The doc names settings an operator will type: each must be the server's.
    text = DOC.read_text(encoding="utf-8")
    known = {a for action in argument_parser()._actions for a in action.option_strings}
    config = (ROOT / "mcp_server" / "setup" / "config.py").read_text(encoding="utf-8")
    for variable in set(re.findall(r"FAIRWINS_[A-Z_]+", text)):
        assert f'"{variable}"' in config, variable
    for flag in set(re.findall(r"`(--[a-z-]+)", text)) - {"--dry-run", "--pod-max-pids"}:
        assert flag in known, flag
