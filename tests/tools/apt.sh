#!/usr/bin/env bash
# Install a Debian package when the command a test needs is missing (CI starts on a fresh machine;
# a test that needs real infrastructure never skips). Idempotent: nothing happens when it is there.
#
#   bash tests/tools/apt.sh COMMAND PACKAGE [PACKAGE ...]     e.g. apt.sh nginx nginx-light
set -euo pipefail
[ "$#" -ge 2 ] || { echo "usage: apt.sh COMMAND PACKAGE [PACKAGE ...]" >&2; exit 2; }
cmd="$1"; shift
if command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "apt.sh: $cmd is missing; installing $* from Debian's packages" >&2
# One apt run at a time on this machine: parallel make targets may ask together.
exec 9>/tmp/fairwins-mcp-apt.lock
flock 9
if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
fi
command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || { echo "apt.sh: $cmd is still missing after installing $*" >&2; exit 1; }
