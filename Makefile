# Every target creates the local virtual environment (.venv) with the dev tools when it is missing.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
PACKAGES := mcp_server assistant_contract

.PHONY: test lint snapshot snapshot-check run run-sandbox

$(VPY): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e '.[dev]'
	touch $(VPY)

test: $(VPY)
	$(VPY) -m pytest

lint: $(VPY)
	$(VPY) -m mypy $(PACKAGES)
	$(VPY) -m ruff check $(PACKAGES) tests
	$(VPY) -m ruff format --check $(PACKAGES)

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
