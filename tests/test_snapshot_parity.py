"""toolDefs.snapshot.json equals assistant_contract rendered, in both directions."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from assistant_contract import TOOL_DEFS
from assistant_contract.export import FIX_COMMAND, main, render

ROOT = pathlib.Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "toolDefs.snapshot.json"
FIX = f"the snapshot is stale; regenerate it with: {FIX_COMMAND}"


def test_snapshot_file_equals_the_rendered_table_byte_for_byte() -> None:
    assert SNAPSHOT.read_bytes() == render().encode("utf-8"), FIX


def test_snapshot_and_package_agree_by_name_in_both_directions() -> None:
    vendored = {t["name"]: t for t in json.loads(SNAPSHOT.read_text(encoding="utf-8"))["tools"]}
    package = {t["name"]: dict(t) for t in TOOL_DEFS}
    missing_from_snapshot = sorted(set(package) - set(vendored))
    missing_from_package = sorted(set(vendored) - set(package))
    assert not missing_from_snapshot, f"in the package, not the snapshot: {missing_from_snapshot}; {FIX}"
    assert not missing_from_package, f"in the snapshot, not the package: {missing_from_package}; {FIX}"
    for name, tool in package.items():
        assert vendored[name] == json.loads(json.dumps(tool)), f"{name} differs; {FIX}"


def test_render_is_byte_canonical() -> None:
    text = render()
    assert text.endswith("}\n") and "\r" not in text
    assert json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n" == text
    assert render() == text


def test_check_mode_reports_the_diff_and_the_fix(tmp_path: pathlib.Path, capsys) -> None:  # type: ignore[no-untyped-def]
    stale = tmp_path / "toolDefs.snapshot.json"
    stale.write_text(render().replace("Reading your wagers", "Reading wagers"), encoding="utf-8")
    assert main(["--check", "--output", str(stale)]) == 1
    out = capsys.readouterr().out
    assert '-      "progress": "Reading wagers…"' in out
    assert FIX_COMMAND in out
    assert main(["--output", str(stale)]) == 0
    assert main(["--check", "--output", str(stale)]) == 0


def test_check_mode_from_the_command_line_on_the_real_file() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "assistant_contract.export", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
