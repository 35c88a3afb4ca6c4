#!/usr/bin/env bash
# Run the official MCP conformance suite against an already-running server.
#
#   tests/conformance/run.sh http://127.0.0.1:PORT/mcp
#
# Two runs, both with Node 22 from tests/conformance/install.sh:
#   2025-11-25: @modelcontextprotocol/conformance@0.1.16
#               (0.1.16 has no --requirements; its "active" suite filtered with
#               --spec-version 2025-11-25 is exactly the 30 server scenarios of
#               the frozen 2025-11-25 requirement set, run on the 2025-11-25 wire)
#   2026-07-28: @modelcontextprotocol/conformance@0.2.0-alpha.12 --requirements 2026-07-28
# each with --expected-failures tests/conformance/expected-failures-<set>.yaml.
#
# Results: .tools/conformance/results/<set>/server-<scenario>-<timestamp>/checks.json
# and the console log .tools/conformance/results/<set>.log (each set's folder is
# emptied first). Exits non-zero if either run fails (the CLI's own verdict:
# unexpected failure, or a stale expected-failures entry).
#
# This script does not start the server.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 http://127.0.0.1:PORT/mcp" >&2
  exit 2
fi
url="$1"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="$root/.tools/conformance"
node="$(bash "$root/tests/tools/node22.sh")"
pkg="node_modules/@modelcontextprotocol/conformance"
cli_2025="$tools/v0.1.16/$pkg/dist/index.js"
cli_2026="$tools/v0.2.0-alpha.12/$pkg/dist/index.js"
results="$tools/results"

for f in "$node" "$cli_2025" "$cli_2026"; do
  if [ ! -e "$f" ]; then
    echo "run.sh: $f is missing; run tests/conformance/install.sh first" >&2
    exit 2
  fi
done
command -v python3 >/dev/null || { echo "run.sh: python3 is required for the summary" >&2; exit 2; }

cd "$root"
mkdir -p "$results"

run_set() {  # <set> <suite version> <cli> <selection args...>
  local set="$1" version="$2" cli="$3"
  shift 3
  local out="$results/$set"
  rm -rf "$out"
  mkdir -p "$out"
  echo "== conformance $set: @modelcontextprotocol/conformance@$version against $url" >&2
  set +e
  "$node" "$cli" server --url "$url" "$@" \
    --expected-failures "tests/conformance/expected-failures-$set.yaml" \
    -o "$out" > "$results/$set.log" 2>&1
  local rc=$?
  set -e
  # The suite's own console output stays in the log (its "Total: N passed, M failed" line counts
  # expected failures as failures); on a failure its end is shown here.
  if [ "$rc" -ne 0 ]; then
    tail -n 80 "$results/$set.log" >&2
  fi
  return "$rc"
}

rc_2025=0
rc_2026=0
run_set 2025-11-25 0.1.16 "$cli_2025" --spec-version 2025-11-25 || rc_2025=$?
run_set 2026-07-28 0.2.0-alpha.12 "$cli_2026" --requirements 2026-07-28 || rc_2026=$?

# Summary, computed from the checks.json files. A scenario counts as failed if
# any check is FAILURE or WARNING (the rule the CLI applies with a baseline);
# only scored scenarios (the requirement set's `server:` list, taken from the
# requirements/ folder shipped in 0.2.0-alpha.12) are counted; a scored scenario
# with no checks.json counts as failed. K = failed scenarios the expected-failures
# file covers (whole-scenario entry, or every failing check listed as
# `scenario:check-id`).
python3 - "$results" "$tools/v0.2.0-alpha.12/$pkg/requirements" "$root/tests/conformance" <<'PY'
import json, os, re, sys

results, reqdir, basedir = sys.argv[1:4]
DIR_RE = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")


def yaml_list(path, key):
    """The `key:` top-level list of a simple YAML file (one `- item` per line)."""
    items, inside = [], False
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
            if not line.strip():
                continue
            if not line[0].isspace():
                inside = line.strip() == key + ":"
                continue
            if inside and line.strip().startswith("- "):
                items.append(line.strip()[2:].strip().strip("'\""))
    return items


def load_checks(setdir):
    by_scenario = {}
    if os.path.isdir(setdir):
        for name in sorted(os.listdir(setdir)):
            m = DIR_RE.match(name)
            path = os.path.join(setdir, name, "checks.json")
            if m and os.path.isfile(path):
                with open(path, encoding="utf-8") as fh:
                    by_scenario[m.group(1)] = json.load(fh)
    return by_scenario


for revision in ("2025-11-25", "2026-07-28"):
    scored = yaml_list(os.path.join(reqdir, revision + ".yaml"), "server")
    baseline = yaml_list(os.path.join(basedir, "expected-failures-%s.yaml" % revision), "server")
    whole = {e for e in baseline if ":" not in e}
    per_check = {}
    for e in baseline:
        if ":" in e:
            scen, check = e.split(":", 1)
            per_check.setdefault(scen, set()).add(check)
    checks = load_checks(os.path.join(results, revision))
    passed = failed = expected = 0
    for scenario in scored:
        got = checks.get(scenario)
        bad = None if got is None else [c for c in got if c.get("status") in ("FAILURE", "WARNING")]
        if got is not None and not bad:
            passed += 1
            continue
        failed += 1
        if scenario in whole or (bad and scenario in per_check
                                 and all(c.get("id") in per_check[scenario] for c in bad)):
            expected += 1
    print("conformance %s: %d passed, %d failed (%d expected)" % (revision, passed, failed, expected))
PY

echo "results: $results" >&2
if [ "$rc_2025" -ne 0 ] || [ "$rc_2026" -ne 0 ]; then
  echo "conformance: FAILED (2025-11-25 exit $rc_2025, 2026-07-28 exit $rc_2026)" >&2
  exit 1
fi
