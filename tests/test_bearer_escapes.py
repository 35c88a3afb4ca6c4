"""A bearer that holds escapes (issue 34, finding 1): refused where it enters, so no echo can bring it back.

The definition of a credential in a text (docs/security.md) decodes the text and looks for the
bearer as written. A bearer that itself holds `%XX` or `\\uXXXX` (URL-encoded on the member's side,
or copied out of a JSON string) decodes, in an echo, into something else, and nothing found it:
the gateway writing back what it received returned the whole token. Such a bearer is refused
before anything is sent (RFC 6750's b64token holds no `%` and no `\\`): over HTTP `400` with a
sentence, over stdio (and `check`, and `install`) a start-up sentence naming FAIRWINS_API_TOKEN.
A bearer whose `%` starts no escape is taken, and its echo scrubbed, as before.

The gateway here is a double that writes back the bearer it was sent: as the profile's
`tokenId`, and in the `message` of a 400 and of a 500.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

import pytest

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from tests.conftest import ROOT, WAIT, run_stdio, server_env
from tests.mcp_http import post, serving
from tests.test_credential_spellings import client_reads, reference_decoded, reference_holds
from tests.test_install import desktop_file, install

# Each holds escapes the definition decodes: URL-encoding, JSON's \u, JSON's two-character escapes.
ESCAPED: Final = {
    "url-encoded": "fw1.Zq8%2FKt3R%2BmXp7%3ALwYd%3D2NcB",
    "json-u-escaped": "fw1.Zq8\\u002fKt3R\\u002BmXp7LwYd2NcB",
    "json-slash": "fw1.Zq8\\/Kt3R\\/mXp7LwYd2NcB",
}
# A `%` or a `\` that starts no escape: taken as today, and its echo scrubbed.
NO_ESCAPE: Final = "fw1.Zq8%zzKt3R%G+mXp7\\qLwYd2NcB%"
PLACES: Final = ("tokenId", "400", "500")
PROFILE_CALL: Final = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "get_profile"}}
INITIALIZE: Final = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
}


class EchoGateway:
    """A gateway that writes back the bearer it received, where `place` says; counts what it was sent."""

    def __init__(self) -> None:
        self.place = "tokenId"
        self.seen: list[str] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                bearer = (self.headers.get("Authorization") or "").partition(" ")[2]
                gateway.seen.append(self.path)
                if gateway.place == "tokenId":
                    status, body = (
                        200,
                        {
                            "account": "0x" + "ab" * 20,
                            "scopes": ["read"],
                            "expiresAt": "2030-01-01T00:00:00Z",
                            "tokenId": bearer,
                        },
                    )
                else:
                    status, body = int(gateway.place), {"error": "bad_token", "message": f"rejected {bearer}"}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> EchoGateway:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(WAIT)


@pytest.fixture
def gateway() -> Iterator[EchoGateway]:
    with EchoGateway() as started:
        yield started


def leaked(texts: list[str], bearer: str) -> list[str]:
    """The texts that hold a run of the bearer as sent, or as the definition decodes it."""
    decoded = reference_decoded(bearer).decode("utf-8", "surrogatepass")
    return [t[:160] for t in texts if bearer in t or reference_holds(t, bearer) or reference_holds(t, decoded)]


# ---- HTTP ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ESCAPED))
def test_over_http_a_bearer_holding_escapes_is_refused_with_400_and_nothing_is_sent(
    gateway: EchoGateway, name: str
) -> None:
    bearer = ESCAPED[name]
    with serving(build_dispatcher(Config(api_url=gateway.url, timeout=5.0))) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        for place in PLACES:
            gateway.place = place
            answer = post(url, PROFILE_CALL, {"Authorization": f"Bearer {bearer}"}, timeout=WAIT)
            texts = [*client_reads(json.loads(answer.body)), answer.body.decode()]
            assert not leaked(texts, bearer), (place, answer.status, answer.body[:300])
            assert answer.status == 400, (place, answer.body[:300])
            error = answer.response["error"]
            assert answer.response["id"] == 7 and error["data"]["error"] == "escaped_bearer"
            assert "holds an escape" in error["message"] and "Nothing was sent to the gateway" in error["message"]
            assert answer.headers["www-authenticate"].startswith('Bearer error="invalid_request"')
    assert gateway.seen == []


def test_over_http_a_bearer_whose_percent_starts_no_escape_is_taken_and_its_echo_scrubbed(
    gateway: EchoGateway,
) -> None:
    with serving(build_dispatcher(Config(api_url=gateway.url, timeout=5.0))) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        for place in PLACES:
            gateway.place = place
            answer = post(url, PROFILE_CALL, {"Authorization": f"Bearer {NO_ESCAPE}"}, timeout=WAIT)
            assert answer.status == 200 and "result" in answer.response, answer.body[:300]
            assert not leaked([*client_reads(answer.response), answer.body.decode()], NO_ESCAPE), place
    assert gateway.seen == ["/v1/member/me"] * len(PLACES)


# ---- stdio, check, install ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ESCAPED))
def test_over_stdio_a_token_holding_escapes_stops_the_start_with_a_sentence_naming_the_variable(
    gateway: EchoGateway, name: str
) -> None:
    bearer = ESCAPED[name]
    for place in PLACES:
        gateway.place = place
        proc = run_stdio([INITIALIZE, PROFILE_CALL], FAIRWINS_API_URL=gateway.url, FAIRWINS_API_TOKEN=bearer)
        out, err = proc.stdout.decode(), proc.stderr.decode()
        texts = [err] + [t for line in out.splitlines() for t in client_reads(json.loads(line))]
        assert not leaked(texts, bearer), (place, out[:300])
        assert proc.returncode == 2 and out == "", (place, out[:300])
        assert "FAIRWINS_API_TOKEN holds an escape" in err, err
    assert gateway.seen == []


def test_over_stdio_a_token_whose_percent_starts_no_escape_is_taken_and_its_echo_scrubbed(
    gateway: EchoGateway,
) -> None:
    for place in PLACES:
        gateway.place = place
        proc = run_stdio([INITIALIZE, PROFILE_CALL], FAIRWINS_API_URL=gateway.url, FAIRWINS_API_TOKEN=NO_ESCAPE)
        assert proc.returncode == 0, proc.stderr.decode()
        messages = [json.loads(line) for line in proc.stdout.splitlines()]
        assert [m["id"] for m in messages] == [0, 7] and "result" in messages[1]
        texts = [proc.stderr.decode()] + [t for m in messages for t in client_reads(m)]
        assert not leaked(texts, NO_ESCAPE), place
    assert gateway.seen == ["/v1/member/me"] * len(PLACES)


@pytest.mark.parametrize(
    "command", [["check"], ["--http", "0", "--allow-shared-token"]], ids=["check", "http-shared-token"]
)
def test_check_and_a_shared_http_token_refuse_a_token_holding_escapes_at_start(
    gateway: EchoGateway, command: list[str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_server", *command],
        cwd=ROOT,
        env=server_env(FAIRWINS_API_URL=gateway.url, FAIRWINS_API_TOKEN=ESCAPED["url-encoded"]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "FAIRWINS_API_TOKEN holds an escape (%2F)" in done.stderr, done.stderr
    assert "listening" not in done.stderr  # refused before it serves
    assert not leaked([done.stdout, done.stderr], ESCAPED["url-encoded"])
    assert gateway.seen == []


def test_install_refuses_a_token_holding_escapes_from_stdin_and_writes_nothing(tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    bearer = ESCAPED["json-u-escaped"]
    done = install(home, "claude-desktop", "--token-stdin", stdin=bearer + "\n")
    assert done.returncode == 1 and "holds an escape (\\u002f)" in done.stderr, done.stderr
    assert not leaked([done.stdout, done.stderr], bearer)
    assert not desktop_file(home).exists()
