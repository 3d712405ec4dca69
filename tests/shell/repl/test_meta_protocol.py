"""Meta-commands and the toolbar work on any object with the session's protocol (no store)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shell.repl.meta import COMMANDS, MetaSession, run_meta
from shell.repl.toolbar import toolbar


@dataclass
class _Store:
    version: int = 3
    shards: int = 8


@dataclass
class _FakeSession:
    store_dir: str = "somewhere"
    format: str = "tsv"
    limit: int = 0
    timing: bool = False
    done: bool = False
    store: _Store = field(default_factory=_Store)
    said: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    reloads: int = 0
    newest: int = 3

    def say(self, text: str) -> None:
        self.said.append(text)

    def note(self, text: str) -> None:
        self.said.append(text)

    def fail(self, text: str) -> None:
        self.failed.append(text)

    def info(self) -> None:
        self.said.append("(info)")

    def reload(self) -> None:
        self.reloads += 1
        self.store = _Store(version=self.newest)

    def newest_version(self) -> int:
        return self.newest


def _session() -> _FakeSession:
    session = _FakeSession()
    _typed: MetaSession = session  # the fake has every member of the protocol
    return session


def test_format_limit_and_timing_change_the_settings() -> None:
    session = _session()
    run_meta(session, "\\format json")
    run_meta(session, "\\limit 20")
    run_meta(session, "\\timing on")
    assert (session.format, session.limit, session.timing) == ("json", 20, True)
    assert session.said == ["format is json", "limit is 20", "timing is on"]
    run_meta(session, "\\timing")
    assert session.timing is False


def test_bad_arguments_fail_without_changing_anything() -> None:
    session = _session()
    run_meta(session, "\\format xml")
    run_meta(session, "\\limit ten")
    run_meta(session, "\\timing maybe")
    run_meta(session, "\\nosuch")
    assert (session.format, session.limit, session.timing) == ("tsv", 0, False)
    assert [text.split()[0] for text in session.failed] == [
        "Unknown",
        "\\limit",
        "Use",
        "Unknown",
    ]


def test_refresh_info_quit_and_the_toolbar() -> None:
    session = _session()
    assert "version 3, 8 shards" in toolbar(session)()
    session.newest = 4  # a follower published a version: the toolbar says so
    assert "version 3 (version 4 is out: \\refresh), 8 shards" in toolbar(session)()
    run_meta(session, "\\refresh")
    assert session.reloads == 1 and session.said[-1] == "store version 4 (was 3)"
    run_meta(session, "\\reload")  # the same command
    assert session.reloads == 2 and session.said[-1] == "store version 4"
    run_meta(session, "\\info")
    assert session.said[-1] == "(info)"
    assert "version 4, 8 shards" in toolbar(session)()
    assert "limit off" in toolbar(session)()
    run_meta(session, "\\q")
    assert session.done


def test_help_lists_every_meta_command() -> None:
    session = _session()
    run_meta(session, "\\help")
    listed = {line.split()[0] for line in session.said if line.startswith("  \\")}
    assert listed == {f"\\{name}" for name in COMMANDS} - {"\\reload"}  # an alias
