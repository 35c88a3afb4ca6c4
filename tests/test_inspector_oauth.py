"""The MCP Inspector's own OAuth flow, in headless Chromium, signs in to the server in OAuth mode (issue 60).

The real server process in OAuth mode, an authorization server (the sandbox's, tests/sandbox_auth.py,
or node-oidc-provider, tests/oidc/) and the sandbox gateway that trusts it; the pinned Inspector's
web UI pointed at the server's URL over Streamable HTTP; Debian's chromium driven through
playwright-core by tests/browser_host/inspector_oauth.mjs, as a person uses the page: connect
(initialize and tools/list need no sign-in), Tools tab, get_wagers with chainId 137, "Execute
Tool". The call's 401 is all the Inspector is told: it reads the challenge, discovers (the
resource's metadata, then the authorization server's), registers itself, and sends the browser to
the consent page, which the test answers (member A, "Approve"; node-oidc-provider's one button,
"Allow"). Back on its /oauth/callback the Inspector exchanges the code and asks for the action
again; "Execute Tool" a second time reads member A's wagers, shown on the page.

What must hold: that trail in that order, one registration and one consent for the scope the
challenge named and this resource, member A's wagers in the Results and Structured Output panels,
the gateway saw exactly one token on the one member read and it is the token the authorization
server answered the Inspector (for the sandbox, the one access token it issued), and no token is
in the server's log. The Inspector is installed by `make test` (tests/tools/npm_tool.sh), the
browser by tests/apps_host.py; a missing one is installed or the test fails, naming it.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import urllib.parse
from typing import Any, Final

import pytest

from tests import apps_host
from tests.conftest import BROWSER, NODE_TOOLS, ROOT
from tests.hosts import tool
from tests.inspector import LAUNCHER, NODE
from tests.oidc import harness as oidc
from tests.secret_canaries import record_output
from tests.test_inspector import WebInspector
from tests.test_sdk_oauth import (
    Setup,
    gateway_saw_exactly_the_token_issued,
    member_wagers,
    oauth_server,
)

pytestmark = [BROWSER, NODE_TOOLS]

SCRIPT: Final = ROOT / "tests/browser_host/inspector_oauth.mjs"
STEP_WAIT_MS: Final = 30000  # any one step the page shows; a loaded machine makes the Inspector slow, not wrong
RUN_TIMEOUT: Final = 180.0  # the whole browser run
WAIT: Final = 10.0
SCOPE: Final = "read:wagers"  # what get_wagers needs, and what the 401 names
# How each authorization server's consent page is answered: the radio chosen, the button pressed.
CONSENT: Final = {
    "sandbox": {"choose": "Member A", "submit": "Approve"},
    "node-oidc-provider": {"choose": None, "submit": "Allow"},
}


def browse(setup: Setup, kind: str, tmp_path: pathlib.Path) -> tuple[dict[str, Any], int]:
    """The Inspector's web UI on the server, and one browser run of the flow: its report, and the UI's port."""
    tool("inspector")  # installs the pinned Inspector when it is missing
    chromium = apps_host.install()
    line = [str(NODE), str(LAUNCHER), "--web", "--transport", "http", "--server-url", setup.public]
    web = WebInspector(line, tmp_path)
    try:
        web.wait_until_up()
        plan = {
            "url": f"http://localhost:{web.port}/?MCP_INSPECTOR_API_TOKEN={web.TOKEN}",
            "modules": str(apps_host.MODULES),
            "chromium": chromium,
            "authorizationServer": setup.issuer,
            "consent": CONSENT[kind],
            "tool": "get_wagers",
            "arguments": {"chainId": 137},
            "waitMs": STEP_WAIT_MS,
            "screenshot": str(tmp_path / f"inspector-oauth-{kind}.png"),
            "failure": str(tmp_path / f"inspector-oauth-{kind}-failed.png"),
        }
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(plan), encoding="utf-8")
        done = subprocess.run(
            [str(NODE), str(SCRIPT), str(path)], capture_output=True, cwd=ROOT, timeout=RUN_TIMEOUT, check=False
        )
    finally:
        web.stop()
    record_output("test_inspector_oauth: the browser run's report (inspector_oauth.mjs)", done.stdout)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    report: dict[str, Any] = json.loads(done.stdout.decode().splitlines()[-1])
    assert "error" not in report, (
        json.dumps({k: report.get(k) for k in ("error", "notes", "trail", "challenge")}, indent=1)
        + f"\npage:\n{(report.get('page') or '')[:3000]}\nscreenshot: {plan['failure']}"
    )
    return report, web.port


def milestones(report: dict[str, Any], metadata: dict[str, Any], setup: Setup, port: int) -> list[str]:
    """The trail's steps that make the flow, named, in the order they happened."""
    named = []
    for step in report["trail"]:
        kind, url = step["step"], step.get("url", "")
        if kind == "challenge":
            named.append("challenge")
        elif kind == "fetch" and url == setup.metadata_url:
            named.append("resource metadata")
        elif kind == "fetch" and url.startswith(f"{setup.issuer}/.well-known/"):
            named.append("authorization server metadata")
        elif kind == "fetch" and url == metadata["registration_endpoint"] and step["method"] == "POST":
            named.append("registration")
        elif kind == "navigate" and url.startswith(f"{setup.issuer}/"):
            named.append("consent page")  # the authorization endpoint's page, or where it redirected
        elif kind == "navigate" and url == f"http://localhost:{port}/oauth/callback":
            named.append("callback")
        elif kind == "fetch" and url == metadata["token_endpoint"] and step["method"] == "POST":
            named.append("token")
    return [name for i, name in enumerate(named) if i == 0 or named[i - 1] != name]  # repeats folded


def wager_ids(text: str | None) -> list[str]:
    assert text, "no result on the page"
    answer = json.loads(text)
    (chain,) = answer["chains"]
    assert (chain["chainId"], chain["state"]) == (137, "read"), answer
    return [wager["id"] for wager in chain["wagers"]]


@pytest.mark.parametrize("authorization_server", ["sandbox", "node-oidc-provider"])
def test_the_inspectors_own_oauth_flow_signs_in_from_the_401_and_reads_the_members_wagers(
    authorization_server: str, tmp_path: pathlib.Path
) -> None:
    with oauth_server(authorization_server, "test_inspector_oauth") as setup:
        metadata = oidc.discover(setup.issuer)  # RFC 8414, as the Inspector reads it
        expected = member_wagers(setup.gateway)
        report, port = browse(setup, authorization_server, tmp_path)
        seen = list(setup.gateway.seen)
        issued = setup.auth.access_tokens() if setup.auth is not None else None
        registered = list(setup.auth.clients) if setup.auth is not None else None
    trail = json.dumps(report["trail"], indent=1)

    # The 401 is where the Inspector learned where to sign in, for which scope.
    challenge = report["challenge"]
    assert challenge["raw"]["httpStatus"] == 401, challenge
    assert challenge["resourceMetadataUrl"] == setup.metadata_url and challenge["requiredScopes"] == [SCOPE]
    assert milestones(report, metadata, setup, port) == [
        "challenge",
        "resource metadata",
        "authorization server metadata",
        "registration",
        "consent page",
        "callback",
        "token",
    ], trail

    # Registered once, dynamically; one consent, for this resource and the challenge's scope.
    request = urllib.parse.urlsplit(report["authorizationUrl"])
    assert urllib.parse.urlunsplit(request._replace(query="")) == metadata["authorization_endpoint"], request
    query = dict(urllib.parse.parse_qsl(request.query))
    assert query["client_id"] == report["clientId"] and report["clientId"], query
    # The scope the challenge named; the Inspector adds offline_access (for a refresh token) when
    # the authorization server lists it, as node-oidc-provider does.
    extra = {"offline_access"} if "offline_access" in metadata.get("scopes_supported", []) else set()
    assert query["resource"] == setup.public and set(query["scope"].split()) == {SCOPE} | extra, query
    assert (query["response_type"], query["code_challenge_method"]) == ("code", "S256"), query
    assert query["redirect_uri"] == f"http://localhost:{port}/oauth/callback", query
    if registered is not None:
        assert registered == [report["clientId"]]
    assert "MCP Inspector" in report["consentPage"] and setup.public in report["consentPage"], report["consentPage"]
    assert SCOPE in report["consentPage"]
    assert report["callback"]["params"] == ["code", "iss", "state"] and report["callback"]["iss"] == setup.issuer
    assert report["tokenAnswers"] == 1, trail

    # The Inspector asked for the action again, and the retried call showed member A's wagers.
    assert any("Authentication succeeded" in note for note in report["notes"]), report["notes"]
    assert expected and wager_ids(report["result"]) == expected, report["result"]
    assert wager_ids(report["structured"]) == expected, report["structured"]

    # The gateway saw one token, on the one member read, and it is the token the Inspector was issued.
    gateway_saw_exactly_the_token_issued(setup, seen, report, issued)
    assert (tmp_path / f"inspector-oauth-{authorization_server}.png").read_bytes().startswith(b"\x89PNG")
