#!/usr/bin/env bash
# What `make conformance` runs: install the suite (idempotent), start the fixture server on a
# free port, run both requirement sets against it (run.sh), stop the server, exit with run.sh's
# status. The two summary lines are printed again at the end.
#
#   tests/conformance/make_conformance.sh          (PYTHON=... to choose the interpreter)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
start_timeout="${CONFORMANCE_START_TIMEOUT:-30}"   # seconds to wait for the server's URL line

bash "$here/install.sh"

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  exec 3<&- 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The server's stdout goes through a FIFO so its one URL line can be awaited with a timeout
# (read -t) instead of polling a file.
mkfifo "$work/stdout"
(cd "$root" && exec "$python" -m tests.conformance.server --port 0) >"$work/stdout" 2>"$work/stderr" &
server_pid=$!
exec 3<"$work/stdout"

line=""
read_status=0
IFS= read -r -t "$start_timeout" -u 3 line || read_status=$?
if [ "$read_status" -ne 0 ]; then
  if [ "$read_status" -gt 128 ]; then
    echo "make_conformance: the fixture server printed no URL within ${start_timeout} s; its stderr:" >&2
  else
    echo "make_conformance: the fixture server exited before printing its URL; its stderr:" >&2
  fi
  cat "$work/stderr" >&2
  exit 1
fi
url="${line##* on }"
case "$url" in
  http://127.0.0.1:*/mcp) ;;
  *) echo "make_conformance: unexpected first line from the fixture server: $line" >&2; exit 1 ;;
esac
echo "make_conformance: $line" >&2

status=0
bash "$here/run.sh" "$url" | tee "$work/run.log" || status=$?
# `set -o pipefail` makes $status run.sh's (tee does not fail).

if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "make_conformance: the fixture server died during the run; its stderr:" >&2
  cat "$work/stderr" >&2
  status=1
fi

echo
grep -E '^conformance [0-9]{4}-[0-9]{2}-[0-9]{2}: ' "$work/run.log" || echo "make_conformance: no summary lines (run.sh failed early)"
if [ "$status" -eq 0 ]; then
  echo "make_conformance: OK"
else
  echo "make_conformance: FAILED (run.sh exit $status); results in .tools/conformance/results/" >&2
fi
exit "$status"
