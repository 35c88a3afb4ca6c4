"""`python -m scripts.ci TIER`: one CI tier, run the same way here and on every runner, with no make.

Standard library only, so any Python 3.11+ can run it before a virtual environment exists: it makes
each environment a tier needs when it is missing (never rebuilding one that is there), then runs
the tier's commands one after another and stops at the first that fails. The Makefile's targets
and both workflows (.github/workflows/) call it; docs/releasing.md says what each tier proves.

    lint           mypy --strict for linux, darwin and win32, import-linter, ruff, and the workflows
                   checked by actionlint and zizmor
    format         ruff format and ruff check --fix on what lint checks (not a CI tier: what to run when
                   lint's ruff steps fail; `make format`)
    types          the type checks alone (the macOS and Windows jobs: the rest is the same anywhere)
    portable       every test that needs only Python and the official SDK client (pytest markers
                   linux_tier and, on Windows, posix deselected; pyproject.toml says why each exists)
    release-check  every release artifact built twice from a clean tree and checked (scripts/release.py)
    linux          .ci/run: the whole Linux tier (nginx, Prometheus, podman, the Node tools); Linux only
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import venv
from collections.abc import Sequence
from typing import Final

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
PLATFORMS: Final = ("linux", "darwin", "win32")
TYPED: Final = ("mcp_server", "assistant_contract", "demo", "scripts", "mcpb")
LINTED: Final = ("mcp_server", "assistant_contract", "demo", "scripts", "tests", "bench", "mcpb")
WORKFLOWS: Final = ".github/workflows"


def interpreter(environment: pathlib.Path) -> pathlib.Path:
    """The Python of a virtual environment, where venv puts it on this platform."""
    if sys.platform == "win32":
        return environment / "Scripts" / "python.exe"
    return environment / "bin" / "python"


def executable(environment: pathlib.Path, name: str) -> pathlib.Path:
    """A console script of a virtual environment (ruff, lint-imports, actionlint, ...)."""
    if sys.platform == "win32":
        return environment / "Scripts" / f"{name}.exe"
    return environment / "bin" / name


# Each environment: its folder, what is installed into it, and the file that says it is done. The
# Makefile's rules make the same ones (.venv first, for the editable install and the dev tools).
ENVIRONMENTS: Final = {
    "dev": (".venv", ["-e", ".[dev]", "-e", "./assistant_contract"], None),
    "sdk": (".venv-sdk", ["-r", "tests/sdk/requirements.txt"], ".installed"),
    "uv": (".venv-uv", ["-r", "tests/uv/requirements.txt"], ".installed"),
    "ci": (".venv-ci", ["-r", ".ci/requirements.txt"], ".installed"),
}


def run(argv: Sequence[str | os.PathLike[str]], env: dict[str, str] | None = None, fix: str = "") -> None:
    """Run one step in the repository, its output passed through; a failed step ends the tier (with `fix`, what
    to run about it)."""
    shown = " ".join(str(part) for part in argv)
    sys.stdout.write(f"scripts.ci: {shown}\n")
    sys.stdout.flush()
    done = subprocess.run([str(part) for part in argv], cwd=ROOT, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"scripts.ci: failed ({done.returncode}): {shown}" + (f"\n{fix}" if fix else ""))


def environment(name: str) -> pathlib.Path:
    """The named environment's folder, made and installed first when it is not there yet."""
    folder, requirements, stamp = ENVIRONMENTS[name]
    path = ROOT / folder
    done = interpreter(path).exists() if stamp is None else (path / stamp).exists()
    if not done:
        venv.EnvBuilder(with_pip=True, clear=False).create(path)
        python = interpreter(path)
        run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--upgrade", "pip"])
        run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements])
        if stamp is not None:
            (path / stamp).touch()
    return path


def types() -> None:
    python = interpreter(environment("dev"))
    for platform in PLATFORMS:
        run([python, "-m", "mypy", "--platform", platform, *TYPED])


def lint() -> None:
    types()
    dev, ci = environment("dev"), environment("ci")
    python = interpreter(dev)
    run([executable(dev, "lint-imports")])
    fix = "fix what it can with: make format   (python -m scripts.ci format)"
    run([python, "-m", "ruff", "check", *LINTED], fix=fix)
    run([python, "-m", "ruff", "format", "--check", *LINTED], fix=fix)
    workflows = sorted(str(path.relative_to(ROOT)) for path in (ROOT / WORKFLOWS).glob("*.yml"))
    run([executable(ci, "actionlint"), *workflows])
    # --offline: the audits that ask GitHub's API about each action need a token and the network.
    run([executable(ci, "zizmor"), "--offline", "--persona", "pedantic", WORKFLOWS])


def portable_markers(platform: str = sys.platform) -> str:
    """The pytest -m expression of the portable tier on `platform`."""
    kept_out = ["image", "linux_tier"] if platform != "win32" else ["image", "linux_tier", "posix"]
    return " and ".join(f"not {marker}" for marker in kept_out)


def portable(extra: Sequence[str]) -> None:
    python = interpreter(environment("dev"))
    environment("sdk")
    environment("uv")
    run([python, "-m", "pytest", "-p", "no:cacheprovider", "-m", portable_markers(), *extra])


def release_check() -> None:
    python = interpreter(environment("dev"))
    environment("sdk")
    environment("uv")
    environment("ci")
    run([python, "-m", "scripts.release", "check"])


def linux() -> None:
    if sys.platform != "linux":
        raise SystemExit("scripts.ci: the linux tier needs Linux (nginx, Prometheus, podman from Debian's packages)")
    run(["bash", ".ci/run"])


def format_code() -> None:
    python = interpreter(environment("dev"))
    run([python, "-m", "ruff", "format", *LINTED])
    run([python, "-m", "ruff", "check", "--fix", *LINTED])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.ci", description=__doc__.split("\n")[0])
    parser.add_argument("tier", choices=["lint", "format", "types", "portable", "release-check", "linux"])
    parser.add_argument("pytest_args", nargs="*", help="portable only: more pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.pytest_args and args.tier != "portable":
        parser.error("only the portable tier takes pytest arguments")
    match args.tier:
        case "lint":
            lint()
        case "format":
            format_code()
        case "types":
            types()
        case "portable":
            portable(args.pytest_args)
        case "release-check":
            release_check()
        case "linux":
            linux()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
