#!/usr/bin/env bash
# The stand-in for python:3.11-slim, which no registry reachable here serves: a Debian rootfs made
# with mmdebstrap from Debian's packages, imported into a private podman storage under the real
# image's name. tests/image/podman.py keys its cache on this file's hash, so any change here
# rebuilds it. Needs root (mmdebstrap's root mode), mmdebstrap, podman, and PyPI for three wheels.
#
#   bash tests/image/standin.sh PYTHON TAG -- PODMAN_ARGV...
#
# How it matches the real image (docker-library/python, 3.11/slim-trixie, the Debian variant the
# 3.11-slim tag points at): Debian 13 "trixie" minbase with ca-certificates, netbase and tzdata;
# docs, man pages and locales left out as debian:trixie-slim does; PATH with /usr/local/bin first;
# LANG=C.UTF-8; python, python3, pip and pip3 in /usr/local/bin; pip, setuptools and wheel at the
# versions that image installs; no PEP 668 marker; CMD ["python3"].
# Where it differs (tests/test_image.py prints it; docs/hosting.md, "The container image", says what it could hide):
# CPython is Debian bookworm's python3.11 package (3.11.2 plus Debian's patches, in /usr/bin and
# /usr/lib/python3.11, packages in /usr/local/lib/python3.11/dist-packages), not 3.11.15 built from
# source into /usr/local (site-packages); Debian splits out ensurepip/venv, tkinter and distutils.
set -euo pipefail

[ "$#" -ge 4 ] && [ "$3" = "--" ] || { echo "usage: standin.sh PYTHON TAG -- PODMAN_ARGV..." >&2; exit 2; }
python="$1"; tag="$2"; shift 3
podman=("$@")

SUITE="trixie"                 # what python:3.11-slim is built FROM (debian:trixie-slim)
PYTHON_SUITE="bookworm"        # the last Debian release with a python3.11 package
PIP_VERSION="24.0"             # what CPython 3.11's ensurepip bundles (3.11.9 on, security-only since)
SETUPTOOLS_VERSION="79.0.1"    # pinned by docker-library/python for 3.11
WHEEL_VERSION="0.45.1"         # 'wheel<0.46' in docker-library/python
MIRROR="http://deb.debian.org/debian"
SECURITY="http://deb.debian.org/debian-security"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --dest "$work/wheels" "pip==$PIP_VERSION" "setuptools==$SETUPTOOLS_VERSION" "wheel==$WHEEL_VERSION" >&2

# path-exclude/-include as debuerreotype slims debian:*-slim (documentation, man pages, locales).
mmdebstrap --variant=minbase --format=tar --quiet \
  --include=ca-certificates,netbase,tzdata,python3.11 \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --customize-hook='rm -f "$1/usr/lib/python3.11/EXTERNALLY-MANAGED"' \
  --customize-hook='ln -s /usr/bin/python3.11 "$1/usr/local/bin/python3" && ln -s python3 "$1/usr/local/bin/python"' \
  --customize-hook="copy-in $work/wheels /tmp" \
  --customize-hook='chroot "$1" sh -c "python3 /tmp/wheels/pip-'"$PIP_VERSION"'-py3-none-any.whl/pip install --quiet --disable-pip-version-check --no-cache-dir --no-compile --no-index /tmp/wheels/*.whl"' \
  --customize-hook='rm -rf "$1/tmp/wheels" && find "$1/usr/local" -name __pycache__ -prune -exec rm -rf {} +' \
  --customize-hook='chroot "$1" /usr/local/bin/python3 -c "import platform; print(platform.python_version())" > '"$work/version" \
  "$SUITE" "$work/rootfs.tar" \
  "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" "deb $SECURITY $SUITE-security main" \
  "deb $MIRROR $PYTHON_SUITE main" "deb $SECURITY $PYTHON_SUITE-security main" >&2

version="$(cat "$work/version")"
"${podman[@]}" import --quiet \
  --message "fairwins-mcp stand-in for python:3.11-slim: Debian $SUITE minbase, Debian $PYTHON_SUITE's python3.11 ($version), pip $PIP_VERSION, setuptools $SETUPTOOLS_VERSION, wheel $WHEEL_VERSION" \
  --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change "ENV PYTHON_VERSION=$version" \
  --change 'CMD ["python3"]' \
  "$work/rootfs.tar" "$tag" >/dev/null
echo "standin.sh: $tag is Debian $SUITE with python $version" >&2
