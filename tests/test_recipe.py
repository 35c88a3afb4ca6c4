"""What CONTRIBUTING.md's "Adding a tool" leaves to derivation is derived, and a forgotten step names its file.

A tool is its record and its answer in the contract, its sandbox route, its sample arguments and
a line in the changelog; the scopes, the relayed set, which tools a view draws, the guide's lists
and the docs' tables follow. What cannot follow (a view's drawing, a scope's meaning, a new
version of the contract) fails here with the file to edit. scripts/add_tool_check.py shows the
whole recipe on a copy of the tree.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Final

import pytest

from assistant_contract import ALL_SCOPES, ROUTES, SCOPE_MEANINGS, TOOL_DEFS, export, versions
from assistant_contract.tools import FAIRWINS, RELAYED, ToolDef, _relayed
from mcp_server.fairwins import views
from mcp_server.fairwins.snapshot import load
from mcp_server.fairwins.tools import BUILD_INTENT
from tests.conftest import ROOT

PAGE: Final = ROOT / "mcp_server" / "fairwins" / "ui" / "app.html"
SNAPSHOT: Final = ROOT / "toolDefs.snapshot.json"


# ---- derived, not listed -------------------------------------------------------------------------


def test_the_scopes_are_the_routes_scopes_and_each_has_its_meaning() -> None:
    assert ALL_SCOPES == tuple(sorted({r["scope"] for r in ROUTES.values() if r["scope"]}))
    missing = [s for s in ALL_SCOPES if s not in SCOPE_MEANINGS]
    assert not missing, f"assistant_contract/prompt.py: SCOPE_MEANINGS says nothing of {missing}"


def test_every_public_read_says_whose_shape_its_answer_is_and_the_relayed_set_follows() -> None:
    public = [t for t in TOOL_DEFS if t["exec"]["kind"] == "public"]
    assert public and all(t["exec"].get("source") for t in public)
    assert RELAYED == {t["name"]: t["exec"]["source"] for t in public if t["exec"]["source"] != FAIRWINS}
    assert {"get_prediction_markets", "get_perps_pairs", "get_token_news"} <= set(RELAYED)
    assert "get_gateway_status" not in RELAYED  # FairWins' own /status is pinned whole


def test_a_public_read_without_a_source_is_refused_naming_the_file() -> None:
    (status,) = [t for t in TOOL_DEFS if t["name"] == "get_gateway_status"]
    forgotten: ToolDef = copy.deepcopy(status)
    del forgotten["exec"]["source"]
    with pytest.raises(ValueError, match=r"assistant_contract/tools\.py: the public read get_gateway_status names no"):
        _relayed((forgotten,))


def test_which_tools_a_view_draws_is_each_tools_record() -> None:
    entries: list[dict[str, Any]] = [*load().tools, BUILD_INTENT]
    drawn = {name: v.name for v in views.VIEWS for name in v.tools}
    assert drawn == {e["name"]: e["view"] for e in entries if "view" in e}
    assert drawn["get_wagers"] == "wagers" and drawn["build_intent"] == "intent"


def test_every_view_a_record_names_is_one_the_page_draws() -> None:
    names = {v.name for v in views.DRAWN}
    for entry in [*load().tools, BUILD_INTENT]:
        view = entry.get("view")
        assert view is None or view in names, (
            f"{entry['name']} names the view {view!r}, which mcp_server/fairwins/views.py's DRAWN does not hold: "
            "a new view is a View there and a drawing in mcp_server/fairwins/ui/app.html (CONTRIBUTING.md)"
        )


def test_the_page_draws_each_view_and_dispatches_to_it() -> None:
    page = PAGE.read_text(encoding="utf-8")
    (dispatch,) = re.findall(r"\(\{ ([^}]*) \}\)\[VIEW\]", page)
    mapped = dict(entry.replace(" ", "").split(":") for entry in dispatch.split(","))
    for view in views.DRAWN:
        assert re.search(rf"^  function {view.name}\(data, result\)", page, re.M), (
            f"mcp_server/fairwins/ui/app.html has no drawing function `{view.name}(data, result)` for the view "
            f"{view.name} that views.py declares"
        )
        assert mapped.get(view.name) == view.name, (
            f"mcp_server/fairwins/ui/app.html: show()'s dispatch map lacks `{view.name}: {view.name}`"
        )
    assert set(mapped) == {v.name for v in views.DRAWN}, "app.html dispatches to a view views.py does not declare"


# ---- the contract's version -----------------------------------------------------------------------


def test_the_snapshot_is_the_table_recorded_for_the_contracts_version() -> None:
    table = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    problem = export.unrecorded(table)
    assert problem is None, problem


def test_the_recorded_versions_rise_and_never_repeat_a_table() -> None:
    numbers = [tuple(int(p) for p in v.split(".")) for v in versions.FINGERPRINTS]
    assert all(len(n) == 3 for n in numbers) and numbers == sorted(set(numbers))
    prints = list(versions.FINGERPRINTS.values())
    assert all(re.fullmatch(r"[0-9a-f]{64}", p) for p in prints) and len(set(prints)) == len(prints)


def test_a_changed_table_without_a_new_version_fails_naming_the_file_and_the_next_versions() -> None:
    table = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    table["tools"][0] = {**table["tools"][0], "title": "Another title"}
    problem = export.unrecorded(table)
    assert problem is not None and "assistant_contract/versions.py" in problem
    major, minor, patch = (int(p) for p in versions.__version__.split("."))
    now = export.fingerprint(table)
    for version in (f"{major + 1}.0.0", f"{major}.{minor + 1}.0", f"{major}.{minor}.{patch + 1}"):
        assert f'"{version}": "{now}"' in problem
    # generatedBy is the command's name, not the table: it changes no version.
    assert export.fingerprint({**table, "generatedBy": "another"}) == now
