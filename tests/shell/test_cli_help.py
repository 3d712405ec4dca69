"""``--help`` of every command, ``--version``, and a subcommand's unknown option."""

from __future__ import annotations

import argparse
from importlib.metadata import version

import pytest

from shell.cli import build_parser, main


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


COMMANDS = sorted(_subcommands())


def test_every_command_is_covered() -> None:
    assert COMMANDS == [
        "check", "demo", "gc", "info", "load", "ops", "query", "serve", "shell", "sweep"
    ]  # fmt: skip


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_a_description_every_option_its_default_and_examples(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main([name, "--help"])
    assert stop.value.code == 0
    shown = capsys.readouterr().out
    sub = _subcommands()[name]
    assert sub.description and sub.description.split()[0] in shown
    examples = shown.split("examples:\n", 1)[1].splitlines()
    assert 2 <= len([line for line in examples if line.startswith("  treestore ")]) <= 3
    for action in sub._actions:
        assert action.help, (name, action.dest)
        text = sub._get_formatter()._expand_help(action)
        if isinstance(action.default, bool):  # a flag: "--no-header (default: True)" misleads
            assert "(default: True)" not in text and "(default: False)" not in text, text
        elif action.option_strings and action.default not in (None, argparse.SUPPRESS):
            assert "default" in text and str(action.default) in text, (name, action.dest, text)
    assert all(len(line) <= 100 for line in shown.splitlines()), shown  # no 400-char sentence


def test_version_comes_from_the_package(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"treestore {version('treestore-spark')}\n"


@pytest.mark.parametrize("name", ["query", "gc", "load"])
def test_an_unknown_option_prints_the_subcommands_usage(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = {
        "query": ["query", "s", "root"],
        "gc": ["gc", "s"],
        "load": ["load", "j", "--store", "s"],
    }
    with pytest.raises(SystemExit) as stop:
        main([*argv[name], "--bogus"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: treestore {name} ")
    assert err.endswith(f"treestore {name}: error: unrecognized arguments: --bogus\n")


@pytest.mark.parametrize(
    ("argv", "command", "expected"),
    [
        (["load", "j", "--store", "s"], "command_load", "loaders.load.options:LoadOptions"),
        (
            ["load", "j", "--store", "s", "--follow"],
            "command_follow",
            "loaders.follow.options:FollowOptions",
        ),
        (
            ["sweep", "--events", "e", "--intervals", "i", "--store", "s", "--name", "n"],
            "command_sweep",
            "loaders.sweep.options:SweepOptions",
        ),
    ],
)
def test_a_command_without_options_runs_with_its_rooms_defaults(
    argv: list[str], command: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The options value the command line builds from its defaults is the room's own."""
    import importlib

    from shell import commands

    given: list[object] = []
    monkeypatch.setattr(commands, command, lambda *args: given.append(args[-1]) or 0)
    assert main(argv) == 0
    module, name = expected.split(":")
    assert given == [getattr(importlib.import_module(module), name)()]
