"""`fairwins-mcp --help` as a member reads it: every command listed, each with a line saying what it does."""

from __future__ import annotations

import re

import pytest

from mcp_server.setup.cli import main


def help_text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_help_lists_serve_check_and_install_each_with_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(capsys)
    _, _, listed = text.partition("\ncommands:\n")
    said = dict(re.findall(r"^  ([a-z-]+) +(\S.*)$", listed, re.M))
    assert list(said) == ["serve", "check", "install"], text
    assert "Claude Desktop or Claude Code" in said["install"]
    assert "gateway and the token work" in said["check"]
    assert re.search(r"\[\{serve,check,install\}\]", text), "the usage line names every command"


def test_install_as_listed_is_the_installer_with_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(capsys, "install")
    assert text.startswith("usage: fairwins-mcp install ") and "claude-desktop" in text


def test_a_misspelt_command_is_refused_naming_the_three(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["instal"])
    assert exited.value.code == 2
    refusal = capsys.readouterr().err
    assert "invalid choice" in refusal and all(
        name in refusal.split("choose from")[1] for name in ("serve", "check", "install")
    )
