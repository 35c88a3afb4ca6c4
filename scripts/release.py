"""`python -m scripts.release COMMAND`: every release artifact, built reproducibly, and its checks.

    build        every artifact into dist/, built twice from two clean copies of the tree (the
                 files git tracks, as they are now): both distributions' wheel and sdist (the server,
                 fairwins-mcp, and assistant_contract, fairwins-assistant-contract), both MCP
                 Bundles, dist/server.json (the registry entry with the uv bundle's URL and SHA-256)
                 and dist/SHA256SUMS. The two builds must be byte for byte the same, or nothing is
                 written to dist/.
    check        build, then everything a release does before its uploads: twine check; the
                 registry entry against the registry's pinned schema; one version in every place
                 that states it; the wheel installed offline into a fresh virtual environment and
                 started over stdio by the official MCP Python SDK client (.venv-sdk); `uvx --from
                 dist/<wheel> fairwins-mcp --version` offline (.venv-uv); the README as PyPI
                 renders it, every link absolute and every link into this repository to a file in it.
    sign         both bundles signed with `mcpb sign` when MCPB_SIGNING_CERT and MCPB_SIGNING_KEY (PEM
                 text, the release workflow's secrets) are set, then `mcpb verify`; `--self-signed`
                 rehearses it with a throwaway certificate. Either way dist/server.json and
                 dist/SHA256SUMS are written again for the bundles' new bytes, and
                 build/release-notes.markdown holds CHANGELOG.md's entry and whether the bundles are signed.
    remotes      each hosted door dist/server.json names asked for its resource metadata, which
                 must name that URL as its resource: the release publishes no remote that does not
                 serve (the workflow runs it before the registry's publisher).
    image-tags   the image's tags on GHCR, as a `tags=` line for the workflow's outputs.
    tag TAG      refuses a git tag that is not `v` followed by the version.

Reproducible: SOURCE_DATE_EPOCH is the last commit's time, every file of the copy carries it with
the mode git records (0644 or 0755), the wheels are built by pip offline without build isolation
(setuptools stamps their entries with SOURCE_DATE_EPOCH), each sdist is written again with its
members sorted, owned by nobody and stamped with that time (gzip's header too), and the bundles
are scripts/mcpb.py's (sorted entries, one fixed time, fixed modes). Two copies in different
folders, so a build that depends on where it ran shows up as a difference.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html.parser
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import urllib.parse
import venv
import zipfile
from collections.abc import Iterator, Sequence
from typing import Final

from scripts import registry
from scripts.ci import ENVIRONMENTS, executable, interpreter

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
DIST: Final = ROOT / "dist"
REPOSITORY: Final = "https://github.com/fairwins/fairwins-mcp"
# The server and assistant_contract: each project folder (relative to the tree) and its distribution.
PROJECTS: Final = {".": "fairwins_mcp", "assistant_contract": "fairwins_assistant_contract"}
UV_BUNDLE: Final = "fairwins-mcp-{version}.mcpb"
STEP_TIMEOUT: Final = 600.0
SESSION_TIMEOUT: Final = 120.0


class ReleaseError(Exception):
    """A check failed: the message says what and where."""


def say(text: str) -> None:
    sys.stdout.write(f"scripts.release: {text}\n")
    sys.stdout.flush()


def step(argv: Sequence[str | os.PathLike[str]], *, cwd: pathlib.Path, env: dict[str, str] | None = None) -> str:
    """Run one build or check command; its stdout is returned, and a failure names the command."""
    done = subprocess.run(
        [str(part) for part in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        shown = " ".join(str(part) for part in argv)
        raise ReleaseError(f"{shown} failed ({done.returncode}) in {cwd}:\n{done.stdout}{done.stderr}")
    return done.stdout


# --- the clean tree ---------------------------------------------------------------------------------


def source_date_epoch() -> int:
    return int(step(["git", "log", "-1", "--format=%ct"], cwd=ROOT).strip())


def tracked() -> Iterator[tuple[str, int]]:
    """Every file git tracks that is in the work tree: its path and the mode git records (0o644 or 0o755)."""
    listing = step(["git", "ls-files", "--stage", "-z"], cwd=ROOT)
    for record in listing.split("\0"):
        if not record:
            continue
        meta, path = record.split("\t", 1)
        mode = meta.split()[0]
        if mode in ("100644", "100755") and (ROOT / path).is_file():
            yield path, 0o755 if mode == "100755" else 0o644


def clean_copy(target: pathlib.Path, epoch: int) -> None:
    for path, mode in tracked():
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / path, destination)
        destination.chmod(mode)
        os.utime(destination, (epoch, epoch))


# --- one build --------------------------------------------------------------------------------------


def build_env(epoch: int, tree: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "SOURCE_DATE_EPOCH"))}
    env.update(
        SOURCE_DATE_EPOCH=str(epoch),
        PYTHONHASHSEED="0",
        PYTHONPATH=str(tree),  # scripts.mcpb imports the copy's mcp_server, not the editable install
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return env


SDIST_HOOK: Final = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"


def normalized_sdist(data: bytes, epoch: int) -> bytes:
    """The sdist's tar.gz written again: members sorted, owned by nobody, stamped `epoch`, gzip's header too."""
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            extracted = archive.extractfile(member) if member.isfile() else None
            members.append((member, extracted.read() if extracted is not None else None))
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member, content in sorted(members, key=lambda pair: pair[0].name):
            member.mtime = epoch
            member.uid = member.gid = 0
            member.uname = member.gname = ""
            member.pax_headers = {}
            if member.isdir():
                member.mode = 0o755
            elif member.isfile():
                member.mode = 0o755 if member.mode & 0o111 else 0o644
            archive.addfile(member, io.BytesIO(content) if content is not None else None)
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=epoch, compresslevel=9) as stream:
        stream.write(raw.getvalue())
    return packed.getvalue()


def build_once(tree: pathlib.Path, out: pathlib.Path, epoch: int) -> None:
    """Every artifact of one clean copy `tree` into `out`."""
    env = build_env(epoch, tree)
    python = interpreter(ROOT / ENVIRONMENTS["dev"][0])
    for folder in PROJECTS:
        project = tree / folder
        step([python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", out, project],
             cwd=tree, env=env)  # fmt: skip
        with tempfile.TemporaryDirectory() as scratch:
            name = step([python, "-c", SDIST_HOOK, scratch], cwd=project, env=env).strip().splitlines()[-1]
            data = (pathlib.Path(scratch) / name).read_bytes()
        (out / name).write_bytes(normalized_sdist(data, epoch))
    step([python, "-m", "scripts.mcpb", "--out", out], cwd=tree, env=env)


def version() -> str:
    text = (ROOT / "mcp_server" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if found is None:
        raise ReleaseError("mcp_server/__init__.py holds no __version__ line")
    return found[1]


def download_base(tag: str) -> str:
    return f"{REPOSITORY}/releases/download/{tag}"


def write_server_json(out: pathlib.Path) -> pathlib.Path:
    bundle = out / UV_BUNDLE.format(version=version())
    entry = registry.release_entry(bundle, download_base(f"v{version()}"))
    target = out / "server.json"
    target.write_text(registry.dumps(entry), encoding="utf-8")
    return target


def write_sums(out: pathlib.Path) -> None:
    lines = [
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n"
        for path in sorted(out.iterdir())
        if path.name != "SHA256SUMS"
    ]
    (out / "SHA256SUMS").write_text("".join(lines), encoding="utf-8")


def build(out: pathlib.Path = DIST) -> list[pathlib.Path]:
    """Both builds, compared; the first copied into `out` (emptied first) when they are the same."""
    epoch = source_date_epoch()
    with tempfile.TemporaryDirectory(prefix="fairwins-release-") as scratch:
        builds = []
        for n in (1, 2):
            tree, built = pathlib.Path(scratch, f"tree-{n}"), pathlib.Path(scratch, f"dist-{n}")
            built.mkdir()
            clean_copy(tree, epoch)
            build_once(tree, built, epoch)
            builds.append({path.name: path.read_bytes() for path in built.iterdir()})
        first, second = builds
        if first.keys() != second.keys():
            raise ReleaseError(f"the two builds made different files: {sorted(first)} and {sorted(second)}")
        differing = sorted(name for name in first if first[name] != second[name])
        if differing:
            raise ReleaseError(f"the two builds differ in {', '.join(differing)}: the build is not reproducible")
        expected = {f"{dist}-" for dist in PROJECTS.values()} | {"fairwins-mcp-"}
        if len(first) != 6 or not all(any(name.startswith(p) for p in expected) for name in first):
            raise ReleaseError(f"expected two wheels, two sdists and two bundles, built {sorted(first)}")
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for name, data in sorted(first.items()):
            (out / name).write_bytes(data)
    write_server_json(out)
    write_sums(out)
    made = sorted(out.iterdir())
    for path in made:
        say(f"built {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}\t{path.stat().st_size} bytes")
    say(f"both builds identical (SOURCE_DATE_EPOCH={epoch})")
    return made


# --- the checks -------------------------------------------------------------------------------------


def only(out: pathlib.Path, pattern: str) -> pathlib.Path:
    found = sorted(out.glob(pattern))
    if len(found) != 1:
        raise ReleaseError(f"expected one {pattern} in {out}, found {[p.name for p in found]}")
    return found[0]


def wheel_metadata(wheel: pathlib.Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name).decode("utf-8")


def metadata_field(metadata: str, field: str) -> str:
    found = re.search(rf"^{field}: (.*)$", metadata, re.M)
    if found is None:
        raise ReleaseError(f"the metadata has no {field} field")
    return found[1].strip()


def bundle_version(bundle: pathlib.Path) -> str:
    with zipfile.ZipFile(bundle) as archive:
        value: str = json.loads(archive.read("manifest.json"))["version"]
        return value


def changelog_version() -> str:
    """The version of CHANGELOG.md's first released entry (`## [x.y.z] - date`, after `## [Unreleased]`)."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    if not headings or headings[0] != "Unreleased" or len(headings) < 2:
        raise ReleaseError("CHANGELOG.md must open with `## [Unreleased]`, then the newest release's entry")
    if not re.search(rf"^## \[{re.escape(headings[1])}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M):
        raise ReleaseError(f"CHANGELOG.md's entry for {headings[1]} needs its date: `## [{headings[1]}] - YYYY-MM-DD`")
    return str(headings[1])


def image_label_version() -> str:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    found = re.findall(r'org\.opencontainers\.image\.version="([^"]+)"', text)
    if len(found) != 1:
        raise ReleaseError("the Dockerfile must label the image once with org.opencontainers.image.version")
    return str(found[0])


def check_versions(out: pathlib.Path) -> str:
    """One version in every place that states it; the places and what each says when they disagree."""
    ours = version()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    if pyproject["tool"]["setuptools"]["dynamic"]["version"] != {"attr": "mcp_server.__version__"}:
        raise ReleaseError("pyproject.toml's version must come from mcp_server.__version__")
    data = registry.server_json()
    stated = {
        "mcp_server/__init__.py": ours,
        "pyproject.toml (the wheel's metadata)": metadata_field(
            wheel_metadata(only(out, "fairwins_mcp-*.whl")), "Version"
        ),
        "server.json version": data["version"],
        **{f"server.json {p['registryType']} package": p.get("version", "") for p in data["packages"]},
        **{f"{b.name} manifest": bundle_version(b) for b in sorted(out.glob("*.mcpb"))},
        "Dockerfile image label": image_label_version(),
        "CHANGELOG.md top entry": changelog_version(),
    }
    wrong = {place: value for place, value in stated.items() if value != ours}
    if wrong:
        raise ReleaseError(f"the version is {ours} in mcp_server/__init__.py but {wrong}")
    say(f"version {ours} in {len(stated)} places: {', '.join(stated)}")
    return ours


def check_twine(out: pathlib.Path) -> None:
    twine = executable(ROOT / ENVIRONMENTS["ci"][0], "twine")
    files = sorted([*out.glob("*.whl"), *out.glob("*.tar.gz")])
    step([twine, "check", "--strict", *files], cwd=ROOT)
    say(f"twine check --strict passed on {len(files)} distributions")


def check_registry_entry(out: pathlib.Path) -> None:
    entry = json.loads((out / "server.json").read_text(encoding="utf-8"))
    if entry["$schema"] != registry.SCHEMA["$id"]:
        raise ReleaseError(f"server.json names {entry['$schema']}, the pinned schema is {registry.SCHEMA['$id']}")
    errors = registry.validate(entry, registry.SCHEMA, registry.SCHEMA)
    if errors:
        raise ReleaseError("dist/server.json breaks the registry's schema:\n" + "\n".join(errors))
    (mcpb,) = [p for p in entry["packages"] if p["registryType"] == "mcpb"]
    bundle = out / UV_BUNDLE.format(version=version())
    if mcpb["fileSha256"] != registry.sha256(bundle) or not mcpb["identifier"].endswith(f"/{bundle.name}"):
        raise ReleaseError(f"dist/server.json's mcpb package does not describe {bundle.name} as built")
    for remote in entry.get("remotes", []):
        problems = registry.remote_problems(remote, entry["name"])
        if problems:
            raise ReleaseError(f"dist/server.json's remote {remote.get('url')!r}: " + "; ".join(problems))
    say(f"dist/server.json valid against {registry.SCHEMA_FILE.name}; mcpb {mcpb['identifier']} {mcpb['fileSha256']}")


def check_remotes(out: pathlib.Path) -> None:
    """Every remote dist/server.json names answers as this server's door: run before publishing it."""
    entry = json.loads((out / "server.json").read_text(encoding="utf-8"))
    for remote in entry.get("remotes", []):
        problems = registry.door_problems(remote["url"])
        if problems:
            raise ReleaseError(
                f"the remote {remote['url']} does not serve as this server yet, so it is not published: "
                + "; ".join(problems)
            )
        say(f"the remote {remote['url']} serves its resource metadata")


def check_installed_wheel(out: pathlib.Path, scratch: pathlib.Path) -> None:
    """The wheel into a fresh venv, offline; the official SDK client starts it over stdio and calls a tool."""
    wheel = only(out, "fairwins_mcp-*.whl")
    fresh = scratch / "fresh-venv"
    venv.EnvBuilder(with_pip=True).create(fresh)
    python = interpreter(fresh)
    step([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--disable-pip-version-check", wheel],
         cwd=scratch)  # fmt: skip
    elsewhere = scratch / "client-cwd"  # not the repository: `-m mcp_server` must find the installed copy
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRWINS_", "PYTHON"))}
    sdk = interpreter(ROOT / ENVIRONMENTS["sdk"][0])
    done = subprocess.run(
        [str(sdk), str(ROOT / "tests" / "sdk" / "session.py"), "calls", "legacy", str(python)],
        cwd=elsewhere,
        env=env,
        input=json.dumps(["get_gateway_status", {}]) + "\n",
        capture_output=True,
        text=True,
        timeout=SESSION_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise ReleaseError(f"the SDK client could not hold a session with the installed wheel:\n{done.stderr}")
    report = json.loads(done.stdout)
    (call,) = report["calls"]
    # No gateway is configured: the tool answers, as an error that names the missing setting.
    text = json.dumps(call)
    if not report["schemas"] or "FAIRWINS_API_URL" not in text:
        raise ReleaseError(f"the installed server answered the SDK client unexpectedly: {done.stdout[:2000]}")
    located = step([python, "-c", "import mcp_server; print(mcp_server.__file__)"], cwd=elsewhere, env=env).strip()
    if not pathlib.Path(located).is_relative_to(fresh):
        raise ReleaseError(f"the session imported {located}, not the installed wheel")
    say(f"wheel installed offline into a fresh venv; the SDK client listed {len(report['schemas'])} tools")


def check_uvx(out: pathlib.Path, scratch: pathlib.Path) -> None:
    wheel = only(out, "fairwins_mcp-*.whl")
    uvx = executable(ROOT / ENVIRONMENTS["uv"][0], "uvx")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRWINS_", "PYTHON", "UV_", "VIRTUAL_ENV"))}
    env.update(
        UV_OFFLINE="1",
        UV_NO_CONFIG="1",
        UV_PYTHON_DOWNLOADS="never",
        UV_PYTHON=sys.executable,
        UV_CACHE_DIR=str(scratch / "uv-cache"),
        UV_TOOL_DIR=str(scratch / "uv-tools"),
    )
    printed = step([uvx, "--from", wheel, "fairwins-mcp", "--version"], cwd=scratch, env=env).strip()
    if printed != f"fairwins-mcp {version()}":
        raise ReleaseError(f"uvx --from {wheel.name} fairwins-mcp --version printed {printed!r}")
    say(f"uvx --from dist/{wheel.name} fairwins-mcp --version (offline): {printed}")


class Links(html.parser.HTMLParser):
    """Every link and image source of a rendered page, and every id an in-page link can land on."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if (tag, name) in (("a", "href"), ("img", "src")) and value is not None:
                self.found.append(value)
            elif name == "id" and value is not None:
                self.ids.add(value)


RENDER: Final = (
    "import sys, readme_renderer.markdown as m; text = sys.stdin.read(); out = m.render(text)\n"
    "sys.exit('readme_renderer could not render the description') if out is None else sys.stdout.write(out)"
)


def check_readme(out: pathlib.Path) -> None:
    """Each distribution's description as PyPI renders it: every link absolute (or to a heading on the page), every
    one into the repository to a file in it."""
    files = {path for path, _ in tracked()}
    ci = interpreter(ROOT / ENVIRONMENTS["ci"][0])
    for wheel in sorted(out.glob("*.whl")):
        metadata = wheel_metadata(wheel)
        description = metadata.split("\n\n", 1)[1]
        rendered = subprocess.run(
            [str(ci), "-c", RENDER], input=description, capture_output=True, text=True, timeout=STEP_TIMEOUT
        )
        if rendered.returncode != 0 or not rendered.stdout.strip():
            raise ReleaseError(f"{wheel.name}: readme_renderer refused the description: {rendered.stderr}")
        parser = Links()
        parser.feed(rendered.stdout)
        problems = []
        for link in parser.found:
            if link.startswith("#"):  # a heading on the same page: PyPI renders its anchor too
                if link[1:] not in parser.ids:
                    problems.append(f"{link}: no heading on the page has this anchor")
                continue
            parts = urllib.parse.urlsplit(link)
            if parts.scheme not in ("https", "http", "mailto"):
                problems.append(f"{link}: not absolute (PyPI would resolve it against its own pages)")
                continue
            prefix = f"{REPOSITORY}/"
            if link.startswith(prefix):
                path = urllib.parse.unquote(parts.path.removeprefix(urllib.parse.urlsplit(REPOSITORY).path + "/"))
                kind, _, rest = path.partition("/")
                if kind in ("blob", "raw", "tree"):
                    _, _, inside = rest.partition("/")  # past the tag or branch
                    if inside not in files and not any(f.startswith(inside.rstrip("/") + "/") for f in files):
                        problems.append(f"{link}: {inside} is not a file in the repository")
        if problems:
            raise ReleaseError(f"{wheel.name}'s description as PyPI renders it:\n" + "\n".join(problems))
        say(f"{wheel.name}: the description renders as on PyPI; {len(parser.found)} link(s), each absolute and live")


def check(out: pathlib.Path = DIST) -> None:
    build(out)
    check_versions(out)
    check_twine(out)
    check_registry_entry(out)
    check_readme(out)
    with tempfile.TemporaryDirectory(prefix="fairwins-release-check-") as scratch:
        check_installed_wheel(out, pathlib.Path(scratch))
        check_uvx(out, pathlib.Path(scratch))
    say("release check passed")


# --- after the build: signing, the notes, the image's tags --------------------------------------------


NOTES: Final = ROOT / "build" / "release-notes.markdown"
SIGNATURE_HEADER: Final = b"MCPB_SIG_V1"  # what `mcpb sign` appends after the zip (mcpb's node/sign.js)


def mcpb_cli() -> list[str]:
    """The pinned mcpb CLI under Node 22, installed by tests/tools/ into .tools/ when missing."""
    node = step(["bash", "tests/tools/node22.sh"], cwd=ROOT).strip().splitlines()[-1]
    cli = step(["bash", "tests/tools/npm_tool.sh", "mcpb"], cwd=ROOT).strip().splitlines()[-1]
    return [node, cli]


def changelog_entry(ours: str) -> str:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    found = re.search(rf"^## \[{re.escape(ours)}\][^\n]*\n(.*?)(?=^## \[|^\[[^\]]+\]: |\Z)", text, re.M | re.S)
    if found is None:
        raise ReleaseError(f"CHANGELOG.md has no entry for {ours}")
    return found[1].strip()


def sign(out: pathlib.Path, self_signed: bool) -> str:
    """Sign both bundles (or leave them unsigned); the sentence the release notes carry about it."""
    cert, key = os.environ.get("MCPB_SIGNING_CERT", ""), os.environ.get("MCPB_SIGNING_KEY", "")
    bundles = sorted(out.glob("*.mcpb"))
    if not self_signed and not (cert and key):
        return (
            "The two `.mcpb` bundles are **unsigned**: no signing certificate is configured for this "
            "repository's releases. Check a download against `SHA256SUMS`, or the registry entry's `fileSha256`."
        )
    cli = mcpb_cli()
    with tempfile.TemporaryDirectory(prefix="fairwins-sign-") as scratch:
        cert_path, key_path = pathlib.Path(scratch, "cert.pem"), pathlib.Path(scratch, "key.pem")
        if not self_signed:
            for path, text in ((cert_path, cert), (key_path, key)):
                path.touch(mode=0o600)
                path.write_text(text, encoding="utf-8")
        for bundle in bundles:
            before = zipfile.ZipFile(bundle).namelist()
            flags = ["--self-signed"] if self_signed else []
            step([*cli, "sign", bundle, "--cert", cert_path, "--key", key_path, *flags], cwd=ROOT)
            with zipfile.ZipFile(bundle) as signed:
                if signed.namelist() != before or signed.testzip() is not None:
                    raise ReleaseError(f"{bundle.name} no longer holds what was built after mcpb sign")
            if SIGNATURE_HEADER not in bundle.read_bytes()[-65536:]:
                raise ReleaseError(f"mcpb sign left {bundle.name} without a signature block")
            if not self_signed:
                # `mcpb verify` holds the certificate to the operating system's trust store, which a
                # throwaway self-signed one never meets: only the real certificate is verified.
                step([*cli, "verify", bundle], cwd=ROOT)
    if self_signed:
        return "The two `.mcpb` bundles carry a **self-signed** rehearsal signature: not a release."
    return "The two `.mcpb` bundles are **signed** with `mcpb sign`; `mcpb verify` checked each signature."


def after_signing(out: pathlib.Path, self_signed: bool) -> None:
    statement = sign(out, self_signed)
    write_server_json(out)
    write_sums(out)
    ours = version()
    NOTES.parent.mkdir(parents=True, exist_ok=True)
    NOTES.write_text(f"{changelog_entry(ours)}\n\n### Bundles\n\n{statement}\n", encoding="utf-8")
    say(f"{statement} Wrote {out / 'server.json'}, {out / 'SHA256SUMS'} and {NOTES.relative_to(ROOT)}")


def image_tags() -> str:
    image = "ghcr.io/" + urllib.parse.urlsplit(REPOSITORY).path.strip("/").lower()
    return f"tags={image}:{version()},{image}:latest"


def check_tag(tag: str) -> None:
    if tag != f"v{version()}":
        raise ReleaseError(f"the tag is {tag}, but the version is {version()}: tag v{version()}")
    say(f"tag {tag} is the version")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.release", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["build", "check", "server-json", "remotes", "sign", "image-tags", "tag"])
    parser.add_argument("tag", nargs="?", help="tag: the git tag being released, which must be v<version>")
    parser.add_argument("--out", type=pathlib.Path, default=DIST, help="the directory of the artifacts (dist/)")
    parser.add_argument("--self-signed", action="store_true", help="sign: rehearse with a throwaway certificate")
    args = parser.parse_args(argv)
    try:
        match args.command:
            case "build":
                build(args.out)
            case "check":
                check(args.out)
            case "server-json":
                path = write_server_json(args.out)
                write_sums(args.out)
                say(f"wrote {path} for {UV_BUNDLE.format(version=version())} as it is now")
            case "remotes":
                check_remotes(args.out)
            case "sign":
                after_signing(args.out, args.self_signed)
            case "image-tags":
                sys.stdout.write(image_tags() + "\n")
            case "tag":
                if args.tag is None:
                    parser.error("tag needs the git tag being released")
                check_tag(args.tag)
    except (ReleaseError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
        sys.stderr.write(f"scripts.release: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
