"""Every block an operator or member copies from the docs is checked by the program that reads it.

tests/handed_out.py finds every fenced block in the docs and says what kind it is. Here every kind
has its checker, and a block of a kind without one fails:

- nginx: `nginx -t` on it as the http-level config it is, then nginx runs it in front of the
  server started as its page (README.md or docs/) starts it there, and real clients hold MCP
  sessions through it;
- Prometheus scrape configs: `promtool check config`;
- JSON: parsed (a Claude Desktop config is then checked by tests/test_readme.py);
- shell: `bash -n`; `sh runnable` blocks are run by tests/test_readme.py and `sh container` blocks
  (docker and podman lines) by tests/test_image.py (`make image-test`), after this file checks that
  their lines fit together;
- Python: compiled;
- prose (`text`, a bare fence): must look like no config at all.

nginx and promtool are Debian's (`make test` installs them: tests/tools/apt.sh); the Inspector is
the pinned one `make test` installs into .tools/.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

import pytest

from tests import nginx
from tests.balancer import Process, get
from tests.conftest import ROOT, client_for, server_env
from tests.handed_out import (
    DOCS,
    Block,
    blocks_in,
    commands,
    container_commands,
    every_block,
    of_kind,
    tracked_docs,
    unseen_fences,
)
from tests.inspector import LAUNCHER, NODE, VERSION
from tests.mcp_http import LegacyClient
from tests.sandbox_gateway import ACCOUNT_A, TOKEN_MEMBER_A, SandboxGateway
from tests.test_readme import PAGES, env_names_the_server_reads

pytestmark = pytest.mark.linux_tier(
    "checks the handed-out configs with nginx, promtool, bash and the Inspector, which the Linux tier installs"
)

BINDIR: Final = pathlib.Path(sys.executable).parent
TIMEOUT: Final = 120.0
START_TIMEOUT: Final = 30.0
TOOLS: Final = client_for(None).request("tools/list")["result"]["tools"]  # what this checkout serves

# Each kind a block can be, and what checks it. A kind missing here fails the inventory.
CHECKED_BY: Final = {
    "nginx": "nginx -t, then MCP sessions through it (here)",
    "prometheus": "promtool check config (here)",
    "claude-desktop": "parsed (here); launches the real server over stdio (tests/test_readme.py)",
    "json": "parsed (here)",
    "runnable": "bash -n (here); run against a sandbox gateway (tests/test_readme.py)",
    "container": "bash -n (here); built and run with podman (tests/test_image.py, make image-test)",
    "commands": "bash -n (here)",
    "deploy": "bash -n (here); each line against the manifests it names (tests/test_deploy.py)",
    "python": "compiled (here)",
    "prose": "looks like no config (here)",
}
# A deploy block builds and pushes the image for a registry: container lines, checked with the manifests.
DEPLOYING: Final = {"deploy": {"container"}}
# Kinds whose checker reads only README.md and the pages under docs/ (tests/test_readme.py PAGES).
README_ONLY: Final = ("runnable", "container", "claude-desktop")


def ids(found: list[Block]) -> list[str]:
    return [f"{block.doc}:{block.line}" for block in found]


# --- the inventory ---------------------------------------------------------------------------------


def test_every_doc_an_operator_or_member_copies_from_is_read() -> None:
    assert tracked_docs() == set(DOCS), "a Markdown file was added or removed: list it in tests/handed_out.py DOCS"
    for doc in DOCS:
        assert unseen_fences((ROOT / doc).read_text(encoding="utf-8")) == [], doc


def inventory_problems(found: list[Block]) -> list[str]:
    problems = []
    for block in found:
        if block.kind not in CHECKED_BY:
            problems.append(f"{block.where}: no checker for a block of kind {block.kind!r}")
        elif block.looks_like() - {block.kind} - DEPLOYING.get(block.kind, set()):
            problems.append(f"{block.where}: looks like {sorted(block.looks_like())} but is marked {block.kind!r}")
        elif block.kind in README_ONLY and block.doc not in PAGES:
            problems.append(f"{block.where}: {block.kind!r} blocks are checked in README.md and docs/*.md only")
    return problems


def test_every_block_is_of_a_kind_that_is_checked() -> None:
    found = every_block()
    assert inventory_problems(found) == []
    kinds = {block.kind for block in found}
    assert {"nginx", "prometheus", "container", "claude-desktop", "runnable"} <= kinds


UNCHECKED: Final = """\
# A doc

```text
server {
    location / { proxy_pass http://127.0.0.1:8790; }
}
```

```ini
[fairwins]
port = 8790
```

```sh
docker run --rm -p 8790:8790 fairwins-mcp
```

```yaml
services:
  mcp:
    image: fairwins-mcp
```

```yaml
scrape_configs:
  - job_name: fairwins-mcp
```

```
[Unit]
Description=fairwins-mcp
```
"""


def test_the_inventory_fails_a_config_that_no_checker_reads() -> None:
    # An nginx block as text, an ini file, container lines as plain shell, a compose file, a unit.
    problems = inventory_problems(blocks_in("README.md", UNCHECKED))
    assert [p.split(":", 2)[1].split(" ")[0] for p in problems] == ["3", "9", "14", "18", "29"], problems
    assert "no checker" in problems[1] and "looks like ['container']" in problems[2], problems
    assert unseen_fences("text\n  ```nginx\n  server {}\n  ```\n") != []  # indented: it would not be seen
    assert unseen_fences("```sh\nmake test\n") != []  # left open


# --- the simple readers ----------------------------------------------------------------------------

SHELL: Final = [b for b in every_block() if b.kind in ("commands", "runnable", "container", "deploy")]
JSON_BLOCKS: Final = of_kind("json") + of_kind("claude-desktop")
PYTHON: Final = of_kind("python")


@pytest.mark.parametrize("block", SHELL, ids=ids(SHELL))
def test_every_shell_block_parses_in_bash(block: Block) -> None:
    done = subprocess.run(["bash", "-n"], input=block.body, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{block.where}: {done.stderr}"


@pytest.mark.parametrize("block", JSON_BLOCKS, ids=ids(JSON_BLOCKS))
def test_every_json_block_parses(block: Block) -> None:
    json.loads(block.body)


@pytest.mark.parametrize("block", PYTHON, ids=ids(PYTHON))
def test_every_python_block_compiles(block: Block) -> None:
    compile(block.body, block.where, "exec")


# --- container lines (run by tests/test_image.py; here, that they fit together) ---------------------

CONTAINER: Final = of_kind("container")


@pytest.mark.parametrize("block", CONTAINER, ids=ids(CONTAINER))
def test_the_container_lines_build_one_image_and_reach_it_where_it_listens(block: Block) -> None:
    lines = container_commands(block)
    builds = [words for words in lines if words[1:2] == ["build"]]
    (run,) = [words for words in lines if words[1:2] == ["run"]]
    (probe,) = [words for words in lines if words[0] == "curl"]
    assert len(builds) + 2 == len(lines), f"{block.where}: a line tests/test_image.py would not know how to run"
    assert sorted(words[0] for words in builds) == ["docker", "podman"]
    # The checkout is the context (its Dockerfile and .dockerignore), and podman keeps the HEALTHCHECK
    # only in the docker format; otherwise the two lines are the same command.
    (tag,) = {words[words.index("-t") + 1] for words in builds}
    for words in builds:
        assert words[-1] == "." and set(words[2:-1]) <= {"-t", tag, "--format", "docker"}, words
    assert "--format" in next(words for words in builds if words[0] == "podman")
    assert run[0] == "docker" and run[-1] == tag
    # The port it publishes is the one the image listens on, and the probe asks that published port.
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    listens = re.search(r"\bPORT=(\d+)", dockerfile)
    assert listens and re.search(rf"^EXPOSE {listens[1]}$", dockerfile, re.M)
    host, inside = run[run.index("-p") + 1].rsplit(":", 1)
    assert inside == listens[1]
    assert probe[-1] == f"http://127.0.0.1:{host}/healthz"
    names = {run[i + 1].split("=", 1)[0] for i, word in enumerate(run) if word == "-e"}
    assert names and names <= env_names_the_server_reads() and "FAIRWINS_API_TOKEN" not in names


# --- Prometheus ------------------------------------------------------------------------------------

PROMETHEUS: Final = of_kind("prometheus")


def promtool_check_config(text: str) -> subprocess.CompletedProcess[str]:
    """`promtool check config` on `text` as prometheus.yml; Debian's promtool (`make test` installs it)."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run `bash tests/tools/apt.sh promtool prometheus` (make test does)"
    with tempfile.TemporaryDirectory(prefix="fairwins-promtool-") as tmp:
        path = pathlib.Path(tmp) / "prometheus.yml"
        path.write_text(text, encoding="utf-8")
        return subprocess.run(
            [promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=60, check=False
        )


@pytest.mark.parametrize("block", PROMETHEUS, ids=ids(PROMETHEUS))
def test_every_prometheus_config_passes_promtool(block: Block) -> None:
    done = promtool_check_config(block.body)
    assert done.returncode == 0, f"{block.where}:\n{done.stdout}{done.stderr}"
    assert "SUCCESS" in done.stdout + done.stderr


def test_promtool_refuses_a_scrape_config_with_a_mistake() -> None:
    block = PROMETHEUS[0]
    done = promtool_check_config(block.body.replace("static_configs", "static_config"))
    assert done.returncode != 0 and "static_config" in done.stdout + done.stderr


# --- nginx -----------------------------------------------------------------------------------------

NGINX: Final = of_kind("nginx")
_LISTEN: Final = re.compile(r"^(\s*listen\s+)([^;\s]+)([^;]*;)", re.M)
_UPSTREAM: Final = re.compile(r"^(\s*server\s+)127\.0\.0\.1:(\d+)([^;]*;)", re.M)


def nginx_t(check: Callable[[str], subprocess.CompletedProcess[str]], block: Block, body: str | None = None) -> str:
    """`check` (`nginx -t`, which binds every `listen` address) on the block listening on a free loopback
    port, tried again when that port was taken meanwhile; its verdict."""
    for _ in range(nginx.ATTEMPTS):
        done = check(runnable(block, free_port(), None, body))
        if "Address already in use" not in done.stderr:
            break
    assert done.returncode == 0, f"{block.where}:\n{done.stderr}"
    return done.stderr


@pytest.mark.parametrize("block", NGINX, ids=ids(NGINX))
def test_every_nginx_block_passes_nginx_t(block: Block) -> None:
    verdict = nginx_t(nginx.check, block)
    assert not re.search(r"\[(warn|error|crit|alert|emerg)\]", verdict), verdict


@pytest.mark.parametrize("block", NGINX, ids=ids(NGINX))
def test_every_nginx_block_passes_nginx_t_in_debians_conf_d(block: Block) -> None:
    nginx_t(nginx.check_in_conf_d, block)


def test_nginx_t_refuses_the_readme_block_as_it_was() -> None:
    # Issue 23: client_header_timeout sat in `location`, where nginx does not allow it.
    block = next(b for b in NGINX if "client_header_timeout" in b.body)
    moved = re.sub(r"^client_header_timeout 10s;.*\n", "", block.body, flags=re.M)
    moved = moved.replace("proxy_buffering off;", "proxy_buffering off;\n        client_header_timeout 10s;")
    assert moved != block.body
    with pytest.raises(AssertionError, match='"client_header_timeout" directive is not allowed here'):
        nginx_t(nginx.check, block, moved)


def server_command(block: Block) -> tuple[dict[str, str], list[str]]:
    """The environment and argv of the one `fairwins-mcp --http` line in the block's section: what it fronts."""
    found = [
        words
        for other in every_block()
        if other.doc == block.doc and other.section == block.section and other.kind == "commands"
        for words in commands(other.body)
        if "--http" in words and any(pathlib.Path(w).name == "fairwins-mcp" for w in words)
    ]
    assert len(found) == 1, f"{block.where}: no single `fairwins-mcp --http` line beside it: {found}"
    (words,) = found
    env = {}
    while re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


def runnable(block: Block, listen: int, upstream: int | None, body: str | None = None) -> str:
    """The block (or `body`, a variant of it) as it runs here: listening on 127.0.0.1:`listen`, its
    upstream 127.0.0.1:`upstream` (None: where it says). Nothing else in it changes."""
    original = block.body if body is None else body
    text, listens = _LISTEN.subn(rf"\g<1>127.0.0.1:{listen}\g<3>", original)
    servers = 1
    if upstream is not None:
        text, servers = _UPSTREAM.subn(rf"\g<1>127.0.0.1:{upstream}\g<3>", text)
    assert listens == 1 and servers == 1, f"{block.where}: expected one listen and one upstream server"
    changed = [(a, b) for a, b in zip(original.splitlines(), text.splitlines(), strict=True) if a != b]
    assert len(changed) == (1 if upstream is None else 2)
    return text


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def started(argv: list[str], env: dict[str, str]) -> Iterator[Process]:
    """The server process, until SIGTERM has stopped it (its output is then scanned for secrets)."""
    process = Process("server", argv, env)
    try:
        yield process
    finally:
        process.signal(signal.SIGTERM)
        try:
            process.wait()
        finally:
            process.kill()


@dataclass
class Behind:
    """The sandbox gateway, the server as the README starts it, and nginx running the block in front of it."""

    gateway: SandboxGateway
    server: Process
    proxy: nginx.Nginx

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}/mcp"

    def errors(self) -> list[str]:
        """nginx's error log at level error and above (it logs at info), and any traceback of the server's."""
        found = re.findall(r"^.*\[(?:error|crit|alert|emerg)\].*$", self.proxy.error_log(), re.M)
        return found + (["the server printed a traceback"] if "Traceback" in self.server.output else [])


@pytest.fixture(params=NGINX, ids=ids(NGINX))
def behind(request: pytest.FixtureRequest) -> Iterator[Behind]:
    block: Block = request.param
    env, words = server_command(block)
    port = words[words.index("--http") + 1]
    assert {m[2] for m in _UPSTREAM.finditer(block.body)} == {port}, f"{block.where}: not where the server listens"
    argv = [str(BINDIR / pathlib.Path(words[0]).name), *words[1:]]
    argv[argv.index("--http") + 1] = "0"  # a free port, which it prints
    with SandboxGateway() as gateway, started(argv, server_env(FAIRWINS_API_URL=gateway.url, **env)) as server:
        upstream = int(server.wait_output(r"listening on http://127\.0\.0\.1:(\d+)/mcp", START_TIMEOUT)[1])
        with nginx.Nginx(http=lambda listen: runnable(block, listen, upstream)) as proxy:
            yield Behind(gateway, server, proxy)


def test_an_mcp_session_through_each_nginx_block(behind: Behind) -> None:
    client = LegacyClient(behind.url)
    info = client.initialize().result
    assert info["serverInfo"]["name"] == "fairwins-mcp"
    assert client.request("tools/list").result["tools"] == TOOLS
    behind.gateway.clear_seen()
    status = client.request("tools/call", {"name": "get_gateway_status", "arguments": {}}).result
    assert status["isError"] is False and status["structuredContent"]["status"] == "ok", status
    assert [(r.method, r.path) for r in behind.gateway.wait_for_requests(1, timeout=10)] == [("GET", "/status")]
    # A member's call: their token crosses nginx to the gateway, and the answer streams back as SSE
    # with its progress (proxy_buffering off).
    member = LegacyClient(behind.url, bearer=TOKEN_MEMBER_A)
    member.initialize()
    behind.gateway.clear_seen()
    answer = member.request("tools/call", {"name": "get_profile", "arguments": {}, "_meta": {"progressToken": "p"}})
    assert answer.content_type == "text/event-stream", answer.headers
    assert any(n["method"] == "notifications/progress" for n in answer.notifications), answer.messages
    assert answer.result["isError"] is False and answer.result["structuredContent"]["account"] == ACCOUNT_A
    assert behind.gateway.wait_for_requests(1, timeout=10)[0].header("Authorization") == f"Bearer {TOKEN_MEMBER_A}"
    assert behind.errors() == []


def test_the_inspector_through_each_nginx_block(behind: Behind, tmp_path: pathlib.Path) -> None:
    assert LAUNCHER.exists() and NODE.exists(), f"the MCP Inspector {VERSION} is not installed: run `make test`"
    base = [str(NODE), str(LAUNCHER), "--cli", behind.url, "--transport", "http"]
    member = ["--header", f"Authorization: Bearer {TOKEN_MEMBER_A}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRWINS_", "MCP_"))}
    env.update(HOME=str(tmp_path), MCP_INSPECTOR_SECRET_STORE="memory", MCP_AUTO_OPEN_ENABLED="false")
    answers = []
    for extra in (["--method", "tools/list"], [*member, "--method", "tools/call", "--tool-name", "get_profile"]):
        done = subprocess.run(
            [*base, *extra], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=TIMEOUT, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        answers.append(json.loads(done.stdout))
    assert [tool["name"] for tool in answers[0]["tools"]] == [tool["name"] for tool in TOOLS]
    assert answers[1]["isError"] is False and answers[1]["structuredContent"]["account"] == ACCOUNT_A
    assert behind.errors() == []


def test_metrics_are_not_served_through_each_nginx_block(behind: Behind) -> None:
    # Issue 23: through the README's nginx, /metrics answered 200. The server started as the README
    # starts it behind the proxy serves none there.
    assert get(behind.proxy.port, "/metrics")[0] == 404
    assert get(behind.proxy.port, "/healthz")[0] == 200
