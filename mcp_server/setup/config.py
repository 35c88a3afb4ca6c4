"""One frozen Config, the only reader of environment variables and flags."""

from __future__ import annotations

import argparse
import ipaddress
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from mcp_server import __version__

LOG_LEVELS: Final = ("debug", "info", "warning", "error")
LOG_FORMATS: Final = ("text", "json")
# `--metrics` alone: a listener of its own on loopback, at the port OpenTelemetry's Prometheus
# exporter uses, so a scraper beside the server (a sidecar, an agent) finds it and nobody else can.
METRICS_DEFAULT: Final = ("127.0.0.1", 9464)
WELL_KNOWN_RESOURCE: Final = "/.well-known/oauth-protected-resource"


class ConfigError(ValueError):
    """A setting that cannot be served; the message is one sentence for stderr."""


@dataclass(frozen=True)
class OAuth:
    """The hosted door as an OAuth resource server: where members sign in.

    `public_url` is the MCP endpoint as clients reach it, `issuer` the authorization server that
    issues the access tokens, `resource` the audience they carry: the public URL, or a parent of
    it on the same origin (docs/authorization.md).
    """

    public_url: str
    issuer: str
    resource: str

    @property
    def metadata_url(self) -> str:
        """Where the resource's metadata is (RFC 9728 §3.1: well-known name first)."""
        parts = urllib.parse.urlsplit(self.resource)
        path = parts.path.rstrip("/")
        return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN_RESOURCE}{path}"


@dataclass(frozen=True)
class Config:
    api_url: str | None = None
    api_token: str | None = field(default=None, repr=False)
    timeout: float = 10.0
    max_response_bytes: int = 4 * 1024 * 1024
    log_level: str = "info"
    log_format: str = "text"
    trace_project: str | None = None  # names traces as Cloud Trace does in JSON records
    workers: int = 16
    send_token_in_clear: bool = False  # an http:// gateway that is not on this machine
    # HTTP mode only
    http_port: int | None = None
    host: str = "127.0.0.1"
    allowed_origins: tuple[str, ...] = ()
    allow_shared_token: bool = False
    max_concurrency: int = 1024
    max_body_bytes: int = 1024 * 1024
    max_peer_connections: int | None = None  # None: half the connection bound; 0: no per-peer cap
    max_peer_heads: int = 8  # 0: no per-peer cap
    http_workers: int | None = None  # worker processes on one port; None: this process alone; 0: auto
    prestop_delay: float = 0.0  # after SIGTERM: /healthz answers 503 this long before the drain
    idle_timeout: float = 30.0  # an idle keep-alive connection is closed after this long
    drain_idle: float = 10.0  # while draining, once idle this long (the balancer's keep-alive must be shorter)
    cloud_run: bool = False
    metrics_address: tuple[str, int] | None = None  # a listener of their own for GET /metrics (--metrics)
    metrics_on_mcp_port: bool = False  # GET /metrics on the MCP port too (--metrics-on-mcp-port)
    oauth: OAuth | None = None  # HTTP mode as an OAuth resource server (--public-url, --authorization-server)
    both_doors: bool = False  # OAuth mode also forwards a member's fw1. token as it is (--accept-fw1-tokens)

    @property
    def metrics(self) -> bool:
        """Metrics are counted (and served somewhere)."""
        return self.metrics_address is not None or self.metrics_on_mcp_port


def _number(env: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        # float() also reads "١٢" and "１２" as 12: a setting is written in ASCII digits or refused.
        if not raw.isascii():
            raise ValueError
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, not {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low:g} and {high:g}, not {raw}")
    return value


def _peer_cap(env: Mapping[str, str], args: argparse.Namespace | None, flag: str, name: str) -> int | None:
    """A per-peer cap from its flag (which wins) or variable; 0 means no cap."""
    given = getattr(args, flag, None)
    if given is not None:
        if given < 0:
            raise ConfigError(f"--{flag.replace('_', '-')} must be 0 (no cap) or more, not {given}")
        return int(given)
    if not env.get(name, "").strip():
        return None
    value = _number(env, name, 0, 0, 1_000_000)
    if value != int(value):
        raise ConfigError(f"{name} must be a whole number, not {env[name].strip()}")
    return int(value)


def _setting(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    # A host that fills in a template (an MCP Bundle's `${user_config.member_token}`) may pass the
    # template itself when the member gave no value: that is no value.
    if value.startswith("${") and value.endswith("}"):
        return None
    return value or None


def token_refusal(token: str, where: str) -> str | None:
    """Why a member token cannot be used as it is; None when it can.

    `where` names where it came from. Every way a token enters (FAIRWINS_API_TOKEN, so a bundle's
    user_config too; `install`'s stdin or prompt) is held to this; an HTTP caller's bearer to the
    same two rules (transports/http/routes.py).
    """
    if not all("!" <= ch <= "~" for ch in token):
        # It goes upstream in an HTTP header: a space, a control character or anything outside
        # ASCII (bytes that are not UTF-8 arrive as lone surrogates) cannot be sent as it is.
        return (
            f"{where} must be printable ASCII without whitespace, and it holds whitespace, a "
            "control character or a non-ASCII character; paste the token alone"
        )
    if "%" not in token and "\\" not in token:
        return None
    from mcp_server.core.redaction import escape_in  # the definition's own decoding, loaded only when it may apply

    escape = escape_in(token)
    if escape is not None:
        return (
            f"{where} holds an escape ({escape}), which no bearer token holds (RFC 6750): it was URL-encoded "
            "or copied out of a JSON string on the way; paste the token exactly as FairWins issued it"
        )
    return None


def from_env(env: Mapping[str, str], args: argparse.Namespace | None = None) -> Config:
    """The settings from environment and flags; ConfigError names a bad one."""
    idle_timeout, drain_idle = _idle(env)
    token = _setting(env, "FAIRWINS_API_TOKEN")
    refusal = None if token is None else token_refusal(token, "FAIRWINS_API_TOKEN")
    if refusal is not None:
        raise ConfigError(refusal)
    cloud_run = bool(env.get("K_SERVICE"))
    level, log_format = _logging(env, args, cloud_run)
    http_port = getattr(args, "http", None)
    metrics_address = _metrics_address(env, args)
    on_mcp_port = bool(getattr(args, "metrics_on_mcp_port", False))
    if on_mcp_port and http_port is None:
        raise ConfigError("--metrics-on-mcp-port needs --http: it serves GET /metrics on the HTTP port")
    host = getattr(args, "host", None) or ("0.0.0.0" if cloud_run else "127.0.0.1")
    oauth, both_doors = _doors(env, args)
    heads = _peer_cap(env, args, "max_peer_heads", "FAIRWINS_MCP_MAX_PEER_HEADS")
    return Config(
        api_url=_setting(env, "FAIRWINS_API_URL"),
        api_token=token,
        timeout=_number(env, "FAIRWINS_MCP_TIMEOUT", 10.0, 0.1, 300.0),
        max_response_bytes=int(_number(env, "FAIRWINS_MCP_MAX_RESPONSE_BYTES", 4 * 1024 * 1024, 1024, 1 << 30)),
        log_level=level,
        log_format=log_format,
        trace_project=env.get("GOOGLE_CLOUD_PROJECT", "").strip() or None,
        http_port=http_port,
        host=host,
        allowed_origins=_origins(env, args),
        allow_shared_token=bool(getattr(args, "allow_shared_token", False)),
        send_token_in_clear=bool(getattr(args, "send_token_in_clear", False)),
        max_concurrency=int(_number(env, "FAIRWINS_MCP_MAX_CONCURRENCY", 1024, 1, 8192)),
        max_peer_connections=_peer_cap(env, args, "max_peer_connections", "FAIRWINS_MCP_MAX_PEER_CONNECTIONS"),
        max_peer_heads=8 if heads is None else heads,
        cloud_run=cloud_run,
        http_workers=_workers(env, args),
        prestop_delay=_number(env, "FAIRWINS_MCP_PRESTOP_DELAY", 0.0, 0.0, 300.0),
        idle_timeout=idle_timeout,
        drain_idle=drain_idle,
        metrics_address=metrics_address if http_port is not None else None,
        metrics_on_mcp_port=on_mcp_port,
        oauth=oauth,
        both_doors=both_doors,
    )


def _idle(env: Mapping[str, str]) -> tuple[float, float]:
    """The idle timeout and the drain's idle wait, which must not exceed it."""
    idle_timeout = _number(env, "FAIRWINS_MCP_IDLE_TIMEOUT", 30.0, 1.0, 3600.0)
    drain_idle = _number(env, "FAIRWINS_MCP_DRAIN_IDLE", min(10.0, idle_timeout), 0.0, 3600.0)
    if drain_idle > idle_timeout:
        raise ConfigError(
            f"FAIRWINS_MCP_DRAIN_IDLE ({drain_idle:g}) must not exceed FAIRWINS_MCP_IDLE_TIMEOUT ({idle_timeout:g})"
        )
    return idle_timeout, drain_idle


def _logging(env: Mapping[str, str], args: argparse.Namespace | None, cloud_run: bool) -> tuple[str, str]:
    """The log level and format: JSON lines for Cloud Run, text elsewhere."""
    level = env.get("FAIRWINS_MCP_LOG_LEVEL", "info").strip().lower() or "info"
    if level not in LOG_LEVELS:
        raise ConfigError(f"FAIRWINS_MCP_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    log_format = getattr(args, "log_format", None) or env.get("FAIRWINS_MCP_LOG_FORMAT", "").strip().lower()
    log_format = log_format or ("json" if cloud_run else "text")
    if log_format not in LOG_FORMATS:
        raise ConfigError(f"FAIRWINS_MCP_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    return level, log_format


def _origins(env: Mapping[str, str], args: argparse.Namespace | None) -> tuple[str, ...]:
    """The browser origins allowed besides loopback, from variable and flags."""
    origins = [o.strip() for o in env.get("FAIRWINS_MCP_ALLOWED_ORIGINS", "").split(",") if o.strip()]
    origins += list(getattr(args, "allowed_origin", None) or [])
    for origin in origins:
        if origin == "*" or origin.lower() == "null":
            raise ConfigError(f"allowed origin {origin!r} is refused: there is no wildcard and null is never allowed")
    return tuple(dict.fromkeys(o.rstrip("/") for o in origins))


def _doors(env: Mapping[str, str], args: argparse.Namespace | None) -> tuple[OAuth | None, bool]:
    """OAuth mode's settings, and whether its flag keeps the fw1 door open."""
    oauth = _oauth(env, args)
    both_doors = bool(getattr(args, "accept_fw1_tokens", False))
    if both_doors and oauth is None:
        raise ConfigError(
            "--accept-fw1-tokens opens a second door beside OAuth mode: it needs --public-url and "
            "--authorization-server"
        )
    if oauth is not None and getattr(args, "allow_shared_token", False):
        raise ConfigError(
            "--allow-shared-token cannot be used with --authorization-server: every caller without a token "
            "would act as FAIRWINS_API_TOKEN's member, whose token was not issued for this server"
        )
    return oauth, both_doors


# Each OAuth setting: its flag's attribute, its flag, its variable.
_OAUTH_SETTINGS: Final = (
    ("public_url", "--public-url", "FAIRWINS_MCP_PUBLIC_URL"),
    ("authorization_server", "--authorization-server", "FAIRWINS_AUTHORIZATION_SERVER"),
    ("resource", "--resource", "FAIRWINS_MCP_RESOURCE"),
)


def _oauth(env: Mapping[str, str], args: argparse.Namespace | None) -> OAuth | None:
    """The OAuth settings, checked together; None when none is set.

    A flag wins over its variable. The variables are read in HTTP mode only (one environment may
    serve both); a flag needs --http.
    """
    http = getattr(args, "http", None) is not None
    given: dict[str, tuple[str, str]] = {}  # attribute -> (value, the name it was given under)
    for attribute, flag, variable in _OAUTH_SETTINGS:
        flagged = getattr(args, attribute, None)
        if flagged is not None:
            if not http:
                raise ConfigError(f"{flag} needs --http: an OAuth resource server is a hosted HTTP server")
            given[attribute] = (flagged.strip(), flag)
        elif http and (value := _setting(env, variable)) is not None:
            given[attribute] = (value, variable)
    if not given:
        return None
    for attribute, flag, variable in _OAUTH_SETTINGS[:2]:
        if attribute not in given:
            named = ", ".join(name for _, name in given.values())
            raise ConfigError(f"{named} needs {flag} (or {variable}) too: OAuth mode takes both")
    public, public_name = given["public_url"]
    issuer, issuer_name = given["authorization_server"]
    resource, resource_name = given.get("resource", (public, public_name))
    public_parts = _secure_url(public, public_name)
    _secure_url(issuer, issuer_name)
    resource_parts = _secure_url(resource, resource_name)
    if _origin(resource_parts) != _origin(public_parts):
        raise ConfigError(
            f"{resource_name} ({resource}) must be on the public URL's origin ({_origin(public_parts)}): "
            "a token for another origin's resource is not one issued for this server"
        )
    parent = resource_parts.path.rstrip("/")
    if public_parts.path.rstrip("/") != parent and not public_parts.path.startswith(parent + "/"):
        raise ConfigError(
            f"{resource_name} ({resource}) must be the public URL ({public}) or a parent of its path: "
            "a token whose audience does not cover this server is not one issued for it"
        )
    return OAuth(public, issuer, resource)


def _secure_url(value: str, name: str) -> urllib.parse.SplitResult:
    """`value` as an absolute https URL (http on loopback), or ConfigError."""
    try:
        parts = urllib.parse.urlsplit(value)
        host = (parts.hostname or "").lower()
        parts.port  # noqa: B018 - a port out of range raises here
    except ValueError:
        raise ConfigError(f"{name} ({value!r}) is not a URL") from None
    if parts.scheme not in ("https", "http") or not host:
        raise ConfigError(f"{name} ({value!r}) must be an absolute https:// URL")
    if parts.username is not None or parts.password is not None or parts.fragment or parts.query:
        raise ConfigError(f"{name} ({value!r}) must hold no user name, password, query or fragment")
    if parts.scheme == "http":
        from mcp_server.upstream.gateway import is_loopback_host  # only an http:// setting pays for it

        if not is_loopback_host(host):
            raise ConfigError(
                f"{name} ({value}) must be https://: http:// is for loopback addresses only, and elsewhere "
                "tokens and sign-ins would cross the network unencrypted"
            )
    return parts


def _origin(parts: urllib.parse.SplitResult) -> str:
    """`scheme://host[:port]`, lower case, the scheme's default port left out."""
    host = (parts.hostname or "").lower()
    shown = f"[{host}]" if ":" in host else host
    port = parts.port
    default = 443 if parts.scheme == "https" else 80
    return f"{parts.scheme}://{shown}" + (f":{port}" if port is not None and port != default else "")


def _metrics_address(env: Mapping[str, str], args: argparse.Namespace | None) -> tuple[str, int] | None:
    """Where the metrics listener binds: `--metrics` (which wins) or variable.

    FAIRWINS_MCP_METRICS is read and unused over stdio (one environment may serve both); the flag needs --http.
    """
    given = getattr(args, "metrics", None)
    if given is not None:
        if getattr(args, "http", None) is None:
            raise ConfigError("--metrics needs --http: the metrics count what the HTTP server does")
        address: tuple[str, int] = given
        return address
    raw = env.get("FAIRWINS_MCP_METRICS", "").strip()
    if not raw:
        return None
    try:
        return metrics_address(raw)
    except ValueError as exc:
        raise ConfigError(f"FAIRWINS_MCP_METRICS: {exc}") from None


def metrics_address(text: str) -> tuple[str, int]:
    """A metrics address → (host, port); ValueError saying why not.

    `HOST:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT` (loopback). The host is an IP address (or
    `localhost`, read as 127.0.0.1): a name that resolves elsewhere could put the metrics on an
    interface the operator did not mean.
    """
    value = text.strip()
    host, port = "", value
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or value[end + 1 : end + 2] != ":":
            raise ValueError(f"{text!r} is not HOST:PORT (an IPv6 address goes in brackets: [::1]:9464)")
        host, port = value[1:end], value[end + 2 :]
        if ":" not in host:
            raise ValueError(f"{text!r}: brackets are for an IPv6 address")
    elif ":" in value:
        host, _, port = value.rpartition(":")
        if ":" in host:
            raise ValueError(f"{text!r}: an IPv6 address goes in brackets ([::1]:9464)")
    if not _is_port(port):
        raise ValueError(f"{text!r} has no port number (0-65535) after the host")
    if host in ("", "localhost"):
        host = METRICS_DEFAULT[0]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{text!r}: the host must be an IP address (127.0.0.1, 0.0.0.0, [::1]) or localhost") from None
    return host, int(port)


def _metrics_flag(text: str) -> tuple[str, int]:
    try:
        return metrics_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _workers(env: Mapping[str, str], args: argparse.Namespace | None) -> int | None:
    """The worker count, 1 to 256 or `auto` (0): `--workers` or its variable."""
    raw, name = getattr(args, "workers", None), "--workers"
    if raw is not None and getattr(args, "http", None) is None:
        raise ConfigError("--workers runs HTTP worker processes: it needs --http PORT")
    if raw is None:
        raw, name = env.get("FAIRWINS_MCP_WORKERS", "").strip() or None, "FAIRWINS_MCP_WORKERS"
    if raw is None:
        return None
    raw = raw.strip()
    if raw.lower() == "auto":
        return 0
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 3 or not 1 <= int(raw) <= 256:
        raise ConfigError(f"{name} must be a number of processes from 1 to 256, or auto, not {raw!r}")
    return int(raw)


def _is_port(text: str) -> bool:
    """Whether `text` is a TCP port in ASCII digits (int() also takes "٨٠")."""
    return text.isascii() and text.isdigit() and len(text) <= 5 and int(text) <= 65535


def _port(text: str) -> int:
    if not _is_port(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return int(text)


def _count(text: str) -> int:
    """A whole number in ASCII digits, 0 or more (int() also takes "٨")."""
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0 or more)")
    return int(text)


# The commands and what each does: the parser's choices, and the list --help ends with.
COMMANDS: Final = {
    "serve": "run the server (the default when no command is given)",
    "check": "report whether the gateway and the token work, then exit",
    "install": "put the server into Claude Desktop or Claude Code\n(fairwins-mcp install --help: its own options)",
}


def _command_list() -> str:
    width = max(map(len, COMMANDS)) + 3
    lines = ["commands:"]
    for name, what in COMMANDS.items():
        first, *rest = what.split("\n")
        lines += [f"  {name:<{width}}{first}", *(" " * (width + 2) + line for line in rest)]
    return "\n".join(lines)


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairwins-mcp",
        description="MCP server for the FairWins gateway.\nstdio by default; --http PORT serves Streamable HTTP.",
        epilog=_command_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # `install` never reaches this parser (cli.main hands it to the installer's own parser); it is a
    # choice here so that the usage line and an unknown command's error name it.
    parser.add_argument(
        "command",
        nargs="?",
        choices=tuple(COMMANDS),
        default="serve",
        help="serve (the default), check or install: see the commands below",
    )
    # The one line a release check and a member's `uvx fairwins-mcp --version` read: nothing is started.
    parser.add_argument("--version", action="version", version=f"fairwins-mcp {__version__}")
    parser.add_argument("--http", type=_port, metavar="PORT", help="serve Streamable HTTP on PORT (0: any free port)")
    parser.add_argument("--host", help="interface to bind in HTTP mode (default 127.0.0.1; 0.0.0.0 on Cloud Run)")
    parser.add_argument(
        "--allowed-origin", action="append", metavar="ORIGIN", help="a browser origin to serve (repeatable)"
    )
    parser.add_argument(
        "--allow-shared-token",
        action="store_true",
        help="allow FAIRWINS_API_TOKEN in HTTP mode (every caller without a header acts as that member)",
    )
    parser.add_argument(
        "--workers",
        metavar="N|auto",
        help="HTTP mode: N worker processes on the one port (auto: one per CPU this process may use, "
        "from its affinity and cgroup quota); a worker that dies is replaced",
    )
    parser.add_argument(
        "--max-peer-connections",
        type=_count,
        metavar="N",
        help="open HTTP connections one client address may hold (default: half the connection bound; 0: no cap, "
        "as behind a reverse proxy, where every request comes from the proxy's address)",
    )
    parser.add_argument(
        "--max-peer-heads",
        type=_count,
        metavar="N",
        help="HTTP request heads one client address may have arriving at once (default 8; 0: no cap)",
    )
    parser.add_argument(
        "--send-token-in-clear",
        action="store_true",
        help="accept an http:// FAIRWINS_API_URL that is not on this machine: member tokens and payments "
        "then cross the network unencrypted (without it, http:// is for loopback gateways only)",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="stderr log lines: text (the default) or one JSON object per line (Cloud Logging's fields)",
    )
    parser.add_argument(
        "--metrics",
        nargs="?",
        const=METRICS_DEFAULT,
        type=_metrics_flag,
        metavar="HOST:PORT",
        help="HTTP mode: serve Prometheus metrics at GET /metrics on a listener of their own (default "
        "127.0.0.1:9464; :PORT is loopback; port 0: any free port). Anyone who reaches it reads the counts",
    )
    parser.add_argument(
        "--metrics-on-mcp-port",
        action="store_true",
        help="HTTP mode: serve GET /metrics on the MCP port too, to everyone who reaches that port",
    )
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="HTTP mode, OAuth: the MCP endpoint's URL as clients reach it (with --authorization-server)",
    )
    parser.add_argument(
        "--authorization-server",
        metavar="URL",
        help="HTTP mode, OAuth: the issuer of the members' access tokens, where clients sign in",
    )
    parser.add_argument(
        "--accept-fw1-tokens",
        action="store_true",
        help="HTTP mode, OAuth: also forward a member's own fw1. token, unchecked here, as without OAuth "
        "(two doors; docs/authorization.md says the risk)",
    )
    parser.add_argument(
        "--resource",
        metavar="URL",
        help="HTTP mode, OAuth: the audience the tokens carry (default: the public URL; or a parent of it)",
    )
    return parser


# What argument_parser() yields for no arguments (tests/test_start_path.py holds the two equal).
NO_ARGUMENTS: Final = {
    "command": "serve",
    "http": None,
    "host": None,
    "allowed_origin": None,
    "allow_shared_token": False,
    "max_peer_connections": None,
    "max_peer_heads": None,
    "workers": None,
    "send_token_in_clear": False,
    "log_format": None,
    "metrics": None,
    "metrics_on_mcp_port": False,
    "public_url": None,
    "authorization_server": None,
    "resource": None,
    "accept_fw1_tokens": False,
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args:
        # How MCP clients launch the server: building the parser would cost a few ms of every start.
        return argparse.Namespace(**NO_ARGUMENTS)
    return argument_parser().parse_args(args)
