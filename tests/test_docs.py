"""The README and the docs cannot drift from the program: every command and Python
snippet they show runs here and prints what they show (see
:mod:`tests.support.doc_snippets` for how a page's blocks run and what is masked), the
few that cannot run here say why, and the site builds with ``mkdocs build --strict``
(a broken link or anchor is an error), as ``make docs`` builds it.

``TREESTORE_DOCS_REGEN=1`` writes the program's outputs into the pages where they
differ (read the diff before committing it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_snippets import (
    NOT_RUN_LANGUAGES,
    RUN_LANGUAGES,
    PageRun,
    blocks_of,
    has_command,
    parse_transcript,
    venv_bin,
)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
HOME = ROOT / "docs" / "index.md"  # the README, on the site
PAGES = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p != HOME)]
RUN = [page for page in PAGES if any(b.runs for b in blocks_of(page.read_text()))]
REGENERATE = os.environ.get("TREESTORE_DOCS_REGEN") == "1"
README_LINES = 400


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", RUN, ids=_name)
def test_the_page_s_snippets_print_what_it_shows(page: Path, spark: object, tmp_path: Path) -> None:
    if "curl" in page.read_text() and not has_command("curl"):
        pytest.fail("the page's examples need curl (Debian's package curl)")
    run = PageRun(page, tmp_path, venv_bin())
    run.run(blocks_of(page.read_text()))
    if REGENERATE and run.mismatches:
        run.rewrite()
    assert run.ran, f"{_name(page)}: nothing ran"
    assert not run.mismatches, "\n\n".join(m.report() for m in run.mismatches)


def _counts() -> dict[str, tuple[int, list[str]]]:
    """Per page: how many blocks run, and the reasons of those that do not."""
    counts = {}
    for page in PAGES:
        blocks = blocks_of(page.read_text())
        counts[_name(page)] = (
            sum(b.runs for b in blocks),
            [f"line {b.start}: {b.not_run}" for b in blocks if b.not_run is not None],
        )
    return counts


def test_every_block_that_does_not_run_says_why() -> None:
    problems = []
    for page in PAGES:
        for block in blocks_of(page.read_text()):
            where = f"{_name(page)} line {block.start}"
            if block.not_run == "":
                problems.append(f"{where}: 'not run' without a reason")
            if block.language in NOT_RUN_LANGUAGES and block.not_run is None:
                problems.append(f"{where}: a {block.language} block must say why it is not run")
            first = block.text.lstrip().split("\n", 1)[0]
            prompt = first.startswith(("$ ", ">>> "))
            if prompt and block.language not in RUN_LANGUAGES and block.not_run is None:
                problems.append(f"{where}: a prompt in a {block.language or 'plain'} block")
    assert problems == []


def test_most_snippets_run_and_the_tour_runs_whole(capsys: pytest.CaptureFixture[str]) -> None:
    counts = _counts()
    ran = sum(n for n, _ in counts.values())
    skipped = [f"{page} {why}" for page, (_, whys) in counts.items() for why in whys]
    with capsys.disabled():
        print(f"\ndocs snippets: {ran} blocks run, {len(skipped)} not run:")
        print("\n".join(f"  {line}" for line in skipped))
    assert ran >= 3 * len(skipped), (ran, skipped)
    text = README.read_text()
    tour = text.split("\n## A tour\n", 1)[1].split("\n## ", 1)[0]
    blocks = blocks_of(tour)
    assert all(b.not_run is None for b in blocks), [b.text for b in blocks if b.not_run]
    commands = [s.command for b in blocks if b.language == "console" for s in parse_transcript(b)]
    assert len(commands) >= 12, commands
    assert {"treestore demo", "treestore load visits.json --store visits-store"} <= set(commands)
    assert sum(b.language == "pycon" for b in blocks) >= 3


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_LINES
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings[:3] == ["When to use it, and when not", "Two commands", "A tour"]
    setup = blocks_of(text.split("\n## Two commands\n", 1)[1])[0]
    assert [line.split("#")[0].strip() for line in setup.text.splitlines()] == [
        "make demo",
        "make test",
    ]


def test_the_site_builds_with_broken_links_as_errors(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # the theme's banner about its future
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "WARNING" not in said, said
    home = (site / "index.html").read_text()
    assert "Your own first job, step by step" in home  # the README is the home page
    assert 'href="hydra-users/' in home or 'href="hydra-users/index.html' in home
    for page in PAGES[1:]:
        assert (site / page.stem / "index.html").exists(), page.stem


def test_make_docs_builds_the_site_strictly() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    assert "mkdocs build --strict" in recipe
    assert "build/" in (ROOT / ".gitignore").read_text().split()
