"""The OAuth settings (issue 60): both set is OAuth mode; a setting that breaks a rule refuses to start."""

from __future__ import annotations

import pytest

from mcp_server.setup.config import ConfigError, OAuth, from_env, parse_args

PUBLIC = "https://mcp.fairwins.example/mcp"
ISSUER = "https://auth.fairwins.example"


def oauth(argv: list[str], env: dict[str, str] | None = None) -> OAuth | None:
    return from_env(env or {}, parse_args(argv)).oauth


def refusal(argv: list[str], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as raised:
        from_env(env or {}, parse_args(argv))
    return str(raised.value)


def test_without_either_setting_the_door_is_todays() -> None:
    assert oauth(["--http", "0"]) is None
    assert oauth([]) is None


def test_both_set_is_oauth_mode_with_the_public_url_as_the_resource() -> None:
    got = oauth(["--http", "0", "--public-url", PUBLIC, "--authorization-server", ISSUER])
    assert got == OAuth(PUBLIC, ISSUER, PUBLIC)
    assert got.metadata_url == "https://mcp.fairwins.example/.well-known/oauth-protected-resource/mcp"


def test_the_variables_set_it_too_and_a_flag_wins_over_its_variable() -> None:
    env = {
        "FAIRWINS_MCP_PUBLIC_URL": "https://other.example/mcp",
        "FAIRWINS_AUTHORIZATION_SERVER": ISSUER,
        "FAIRWINS_MCP_RESOURCE": "https://mcp.fairwins.example/",
    }
    got = oauth(["--http", "0", "--public-url", PUBLIC], env)
    assert got == OAuth(PUBLIC, ISSUER, "https://mcp.fairwins.example/")
    assert got.metadata_url == "https://mcp.fairwins.example/.well-known/oauth-protected-resource"


def test_the_variables_are_unused_over_stdio_and_the_flags_need_http() -> None:
    assert oauth([], {"FAIRWINS_MCP_PUBLIC_URL": PUBLIC, "FAIRWINS_AUTHORIZATION_SERVER": ISSUER}) is None
    assert refusal(["--public-url", PUBLIC]) == (
        "--public-url needs --http: an OAuth resource server is a hosted HTTP server"
    )


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        (["--public-url", PUBLIC], {}, "--public-url needs --authorization-server (or FAIRWINS_AUTHORIZATION_SERVER"),
        ([], {"FAIRWINS_AUTHORIZATION_SERVER": ISSUER}, "needs --public-url (or FAIRWINS_MCP_PUBLIC_URL)"),
        (["--resource", PUBLIC], {}, "--resource needs --public-url"),
        (["--public-url", "http://mcp.fairwins.example/mcp", "--authorization-server", ISSUER], {}, "--public-url"),
        (
            ["--public-url", PUBLIC, "--authorization-server", "http://auth.fairwins.example"],
            {},
            "--authorization-server",
        ),
        (
            ["--public-url", PUBLIC, "--authorization-server", f"{ISSUER}/?tenant=1"],
            {},
            "no user name, password, query",
        ),
        (["--public-url", f"{PUBLIC}#x", "--authorization-server", ISSUER], {}, "fragment"),
        (["--public-url", "https://me:pw@mcp.fairwins.example/mcp", "--authorization-server", ISSUER], {}, "user name"),
        (["--public-url", "mcp.fairwins.example/mcp", "--authorization-server", ISSUER], {}, "absolute https://"),
        (["--public-url", "https://mcp.fairwins.example:99999/", "--authorization-server", ISSUER], {}, "not a URL"),
    ],
)
def test_a_setting_that_breaks_the_rules_is_refused_naming_it(argv: list[str], env: dict[str, str], says: str) -> None:
    assert says in refusal(["--http", "0", *argv], env)


@pytest.mark.parametrize(
    ("resource", "why"),
    [
        ("https://api.fairwins.example/", "must be on the public URL's origin (https://mcp.fairwins.example)"),
        ("http://mcp.fairwins.example/", "must be https://"),
        ("https://mcp.fairwins.example:8443/mcp", "must be on the public URL's origin"),
        ("https://mcp.fairwins.example/mc", "must be the public URL (https://mcp.fairwins.example/mcp) or a parent"),
        ("https://mcp.fairwins.example/mcp/v2", "or a parent of its path"),
    ],
)
def test_a_resource_that_does_not_cover_this_server_is_refused(resource: str, why: str) -> None:
    argv = ["--http", "0", "--public-url", PUBLIC, "--authorization-server", ISSUER, "--resource", resource]
    said = refusal(argv)
    assert said.startswith(f"--resource ({resource}) ") and why in said


@pytest.mark.parametrize("resource", [PUBLIC, "https://mcp.fairwins.example/", "https://MCP.fairwins.example:443"])
def test_the_public_url_or_a_parent_on_its_origin_is_a_resource(resource: str) -> None:
    argv = ["--http", "0", "--public-url", PUBLIC, "--authorization-server", ISSUER, "--resource", resource]
    assert oauth(argv) == OAuth(PUBLIC, ISSUER, resource)


@pytest.mark.parametrize("host", ["127.0.0.1:8790", "localhost:8790", "[::1]:8790"])
def test_plain_http_is_for_loopback_addresses(host: str) -> None:
    public = f"http://{host}/mcp"
    argv = ["--http", "0", "--public-url", public, "--authorization-server", "http://127.0.0.1:9000"]
    assert oauth(argv) == OAuth(public, "http://127.0.0.1:9000", public)


def test_a_shared_token_cannot_stand_in_for_a_members_sign_in() -> None:
    argv = ["--http", "0", "--public-url", PUBLIC, "--authorization-server", ISSUER, "--allow-shared-token"]
    assert "--allow-shared-token cannot be used with --authorization-server" in refusal(argv)


def test_both_doors_are_open_only_by_their_own_setting_and_only_beside_oauth_mode() -> None:
    argv = ["--http", "0", "--public-url", PUBLIC, "--authorization-server", ISSUER]
    assert not from_env({}, parse_args(argv)).both_doors
    assert from_env({}, parse_args([*argv, "--accept-fw1-tokens"])).both_doors
    assert "--accept-fw1-tokens opens a second door beside OAuth mode" in refusal(
        ["--http", "0", "--accept-fw1-tokens"]
    )
