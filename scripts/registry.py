"""The MCP Registry's server.json: our small validator of its published schema, and the entry a release publishes.

The schema is the registry's 2025-12-11 `server.schema.json`, pinned byte for byte under
tests/registry/ (SOURCE.md there says where from). `validate` is a draft-07 validator written for
the keywords that schema uses; it refuses any keyword it does not know (UnsupportedSchema), so a
newer schema cannot pass by being half-read. tests/test_server_json.py holds its refusals to
broken copies; `python -m scripts.release` validates the entry it writes with it.

`remote_problems` holds a declared remote to what the official registry takes and to this
server's door; `door_problems` asks the hosted door itself, before a release publishes its URL.

`release_entry` is server.json as a release publishes it (dist/server.json): the repository's
file plus the `mcpb` package, the bundle's download URL on the GitHub release and its SHA-256,
which the registry requires of an MCPB package and which a client checks before running it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import pathlib
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Final

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
SCHEMA_FILE: Final = ROOT / "tests" / "registry" / "server.schema.2025-12-11.json"
SCHEMA: Final[dict[str, Any]] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


class UnsupportedSchema(ValueError):
    """The schema uses a keyword, format or reference this validator was not written for."""


ANNOTATIONS: Final = frozenset(
    {"$comment", "$id", "$schema", "title", "description", "default", "example", "examples", "definitions"}
)
TYPES: Final = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def validate(value: Any, schema: dict[str, Any] | bool, root: dict[str, Any] = SCHEMA, at: str = "$") -> list[str]:
    """Every way `value` breaks `schema` (draft-07, the subset the registry's schema uses), as 'path: why'."""
    if schema is True:
        return []
    if schema is False:
        return [f"{at}: no value is allowed here"]
    errors: list[str] = []
    for key, rule in schema.items():
        if key in ANNOTATIONS:
            continue
        if key == "$ref":
            if not rule.startswith("#/"):
                raise UnsupportedSchema(f"only local $ref is supported, not {rule}")
            target: Any = root
            for part in rule[2:].split("/"):
                target = target[part]
            errors += validate(value, target, root, at)
        elif key == "allOf":
            for sub in rule:
                errors += validate(value, sub, root, at)
        elif key == "anyOf":
            if all(validate(value, sub, root, at) for sub in rule):
                errors.append(f"{at}: matches none of the {len(rule)} allowed shapes")
        elif key == "oneOf":
            if sum(not validate(value, sub, root, at) for sub in rule) != 1:
                errors.append(f"{at}: must match exactly one of {len(rule)} shapes")
        elif key == "not":
            if not validate(value, rule, root, at):
                errors.append(f"{at}: matches a shape that is forbidden here")
        elif key == "const":
            if value != rule:
                errors.append(f"{at}: must be {rule!r}")
        elif key == "enum":
            if value not in rule:
                errors.append(f"{at}: {value!r} is not one of {rule}")
        elif key == "type":
            names = rule if isinstance(rule, list) else [rule]
            if not any(_is_type(value, n) for n in names):
                errors.append(f"{at}: must be of type {rule}")
        elif key == "required":
            if isinstance(value, dict):
                errors += [f"{at}: {name!r} is required" for name in rule if name not in value]
        elif key == "properties":
            if isinstance(value, dict):
                for name, sub in rule.items():
                    if name in value:
                        errors += validate(value[name], sub, root, f"{at}.{name}")
        elif key == "additionalProperties":
            if isinstance(value, dict):
                known = set(schema.get("properties", {}))
                for name in value:
                    if name not in known:
                        errors += validate(value[name], rule, root, f"{at}.{name}")
        elif key == "items":
            if isinstance(value, list):
                for i, item in enumerate(value):
                    errors += validate(item, rule, root, f"{at}[{i}]")
        elif key == "pattern":
            if isinstance(value, str) and not re.search(rule, value):
                errors.append(f"{at}: {value!r} does not match {rule}")
        elif key == "minLength":
            if isinstance(value, str) and len(value) < rule:
                errors.append(f"{at}: shorter than {rule} characters")
        elif key == "maxLength":
            if isinstance(value, str) and len(value) > rule:
                errors.append(f"{at}: longer than {rule} characters ({len(value)})")
        elif key == "format":
            if rule == "uri" and isinstance(value, str):
                parts = urllib.parse.urlsplit(value)
                if not parts.scheme or not (parts.netloc or parts.path):
                    errors.append(f"{at}: {value!r} is not a URI")
            elif rule != "uri":
                raise UnsupportedSchema(f"format {rule!r} is not supported by this validator")
        else:
            raise UnsupportedSchema(f"schema keyword {key!r} is not supported by this validator: teach it first")
    return errors


def server_json() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    return data


def remote_problems(remote: dict[str, Any], server_name: str) -> list[str]:
    """Why the official registry would refuse `remote`, or why it would not be this server's door.

    The registry reads a remote's host from the URL as written and holds it to the namespace's
    domain (internal/validators in modelcontextprotocol/registry), so a template has no host to
    read. A remote can say nothing of OAuth (its one credential field is `headers`): a client
    learns to sign in from a member call's 401 and the resource metadata.
    """
    domain = ".".join(reversed(server_name.split("/", 1)[0].split(".")))
    parts = urllib.parse.urlsplit(remote.get("url", ""))
    host = parts.hostname or ""
    problems = []
    if remote.get("type") != "streamable-http":
        problems.append("this server speaks Streamable HTTP only")
    if parts.scheme != "https":
        problems.append("a remote is https (the registry; and a token never crosses the network in clear)")
    if not re.fullmatch(r"[a-z0-9.-]+", host):
        problems.append(f"the host {host!r} is a template or not a host name: the registry cannot match it")
    elif host != domain and not host.endswith("." + domain):
        problems.append(f"the host {host!r} is not {domain} or under it, as the namespace requires")
    if not parts.path.endswith("/mcp") or parts.query or parts.fragment:
        problems.append("the URL is the MCP endpoint, /mcp, as --public-url names it")
    if remote.get("headers"):
        problems.append("members sign in with OAuth: no header carries a credential")
    return problems


def door_problems(url: str, timeout: float = 10.0) -> list[str]:
    """Why the server at `url` is not yet the door a remote may name: its resource metadata, asked.

    A door that serves publishes, at the path-aware RFC 9728 address, `resource` exactly `url`
    and the authorization server members sign in with; anything else (no answer, a redirect,
    another resource) and a registry entry would send members to a door that is not there.
    """
    parts = urllib.parse.urlsplit(url)
    metadata = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    try:
        with opener.open(
            urllib.request.Request(metadata, headers={"Accept": "application/json"}), timeout=timeout
        ) as r:
            document = json.loads(r.read(65536))
    except (OSError, ValueError) as exc:  # urllib's errors are OSErrors; a body not JSON, ValueError
        return [f"{metadata} did not answer with the resource metadata: {exc}"]
    if not isinstance(document, dict):
        return [f"{metadata} answered {type(document).__name__}, not the resource metadata"]
    problems = []
    if document.get("resource") != url:
        problems.append(f"{metadata} names the resource {document.get('resource')!r}, not {url!r}")
    servers = document.get("authorization_servers")
    if not isinstance(servers, list) or not servers:
        problems.append(f"{metadata} names no authorization server to sign in with")
    return problems


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer to report, not one to follow: the metadata lives at its address."""

    def redirect_request(self, *args: Any) -> None:
        return None


def sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def release_entry(bundle: pathlib.Path, download_base: str) -> dict[str, Any]:
    """server.json with the `mcpb` package of `bundle`, downloaded from `download_base`/<its name>."""
    data = copy.deepcopy(server_json())
    if any(p.get("registryType") == "mcpb" for p in data["packages"]):
        raise ValueError("server.json already lists an mcpb package: the release adds it, with the bundle's hash")
    data["packages"].append(
        {
            "registryType": "mcpb",
            "registryBaseUrl": "https://github.com",
            "identifier": f"{download_base.rstrip('/')}/{bundle.name}",
            "version": data["version"],
            "fileSha256": sha256(bundle),
            # The bundle's own manifest asks the host for the gateway and the token (user_config).
            "transport": {"type": "stdio"},
        }
    )
    return data


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
