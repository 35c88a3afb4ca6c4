# Every target creates the local virtual environment (.venv) with the dev tools when it is missing.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
PACKAGES := mcp_server assistant_contract

.PHONY: test lint snapshot snapshot-check run

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
