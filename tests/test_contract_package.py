"""The contract as its own distribution: built and installed offline from a wheel, typed, dependency-free,
with the snapshot's format shipped as a JSON Schema the snapshot validates against.
"""

from __future__ import annotations

import email.parser
import json
import pathlib
import subprocess
import zipfile
from collections.abc import Iterator

import pytest

from assistant_contract import __version__
from assistant_contract.export import SNAPSHOT_SCHEMA_PATH, render
from mcp_server.core import schema
from tests.conftest import ROOT, venv_python
from tests.test_packaging import run, wheel_and_venv

CONTRACT = ROOT / "assistant_contract"
SNAPSHOT = ROOT / "toolDefs.snapshot.json"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[pathlib.Path, pathlib.Path]]:
    """(the contract's wheel, a fresh venv it is installed in), built from its own folder, with no network."""
    yield wheel_and_venv(CONTRACT, tmp_path_factory.mktemp("contract"))


def probe(venv: pathlib.Path, code: str) -> subprocess.CompletedProcess[str]:
    """`code` run by the venv's isolated interpreter (-I: the checkout cannot stand in for the package)."""
    return run([str(venv_python(venv)), "-I", "-c", code], venv)


def test_the_wheel_is_named_and_versioned_and_declares_no_dependency(built: tuple[pathlib.Path, pathlib.Path]) -> None:
    wheel, _ = built
    assert wheel.name == f"fairwins_assistant_contract-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    fields = email.parser.Parser().parsestr(metadata)
    assert fields["Name"] == "fairwins-assistant-contract" and fields["Version"] == __version__
    assert fields["Requires-Python"] == ">=3.11"
    assert fields.get_all("Requires-Dist") is None, "the contract depends on nothing"
    assert "Typing :: Typed" in (fields.get_all("Classifier") or [])


def test_the_wheel_holds_the_package_typed_with_its_snapshot_schema_and_nothing_else(
    built: tuple[pathlib.Path, pathlib.Path],
) -> None:
    wheel, _ = built
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert archive.read("assistant_contract/snapshot.schema.json") == SNAPSHOT_SCHEMA_PATH.read_bytes()
    package = {n.removeprefix("assistant_contract/") for n in names if n.startswith("assistant_contract/")}
    sources = {p.name for p in CONTRACT.iterdir() if p.suffix == ".py"}
    assert package == sources | {"py.typed", "snapshot.schema.json"}
    assert {n.split("/")[0] for n in names} == {
        "assistant_contract",
        f"fairwins_assistant_contract-{__version__}.dist-info",
    }


def test_the_installed_package_renders_this_repositorys_snapshot_byte_for_byte(
    built: tuple[pathlib.Path, pathlib.Path],
) -> None:
    _, venv = built
    code = (
        "import assistant_contract as c, assistant_contract.export as e, json, sys; "
        "print(c.__file__, c.__version__, file=sys.stderr); sys.stdout.write(e.render())"
    )
    done = probe(venv, code)
    where, version = done.stderr.split()
    assert pathlib.Path(where).is_relative_to(venv) and version == __version__
    assert done.stdout == SNAPSHOT.read_text(encoding="utf-8") == render()


def test_the_installed_export_checks_a_snapshot_and_writes_one_in_the_current_directory(
    built: tuple[pathlib.Path, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    _, venv = built
    python = str(venv_python(venv))
    run([python, "-I", "-m", "assistant_contract.export", "--check", "--output", str(SNAPSHOT)], tmp_path)
    run([python, "-I", "-m", "assistant_contract.export"], tmp_path)  # installed: no checkout to write into
    assert (tmp_path / "toolDefs.snapshot.json").read_bytes() == SNAPSHOT.read_bytes()


def test_the_installed_package_gives_the_openapi_fragment_and_the_failure_sentences(
    built: tuple[pathlib.Path, pathlib.Path],
) -> None:
    _, venv = built
    code = (
        "import json, assistant_contract as c; from assistant_contract.results import failure_sentence; "
        "sentence = failure_sentence('unavailable', 'x', status=503, code='unavailable'); "
        "print(json.dumps([c.x_fairwins_tools(), sentence]))"
    )
    fragment, sentence = json.loads(probe(venv, code).stdout)
    assert len(fragment["x-fairwins-tools"]) == len(json.loads(SNAPSHOT.read_text(encoding="utf-8"))["tools"])
    assert "(HTTP 503, unavailable)" in sentence


# ---- the snapshot's format --------------------------------------------------------------------------


def test_the_snapshot_validates_against_the_schema_shipped_with_the_contract() -> None:
    format_schema = json.loads(SNAPSHOT_SCHEMA_PATH.read_text(encoding="utf-8"))
    assert format_schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema.check(json.loads(SNAPSHOT.read_text(encoding="utf-8")), format_schema) is None


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda s: s.pop("outputSchemas"), "`outputSchemas` is required"),
        (lambda s: s["tools"][0].update(description="x" * 601), "`tools[0].description` must be at most 600"),
        (lambda s: s["tools"][0]["exec"].pop("route", None) or s["tools"][1]["exec"].pop("route"), "is required"),
        (lambda s: s["wording"]["failures"].update(oops="Could not see {what}."), "`wording.failures.oops`"),
        (lambda s: s["routes"]["member.me"].update(method="PUT"), "`routes.member.me.method` must be one of"),
    ],
    ids=["no-output-schemas", "description-too-long", "route-exec-without-a-route", "a-failure-off-template", "put"],
)
def test_the_format_schema_refuses_a_snapshot_that_is_not_one(change: object, said: str) -> None:
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    change(snapshot)  # type: ignore[operator]
    problem = schema.check(snapshot, json.loads(SNAPSHOT_SCHEMA_PATH.read_text(encoding="utf-8")))
    assert problem is not None and said in problem, problem
