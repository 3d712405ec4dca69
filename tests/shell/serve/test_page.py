"""The page at ``/`` in a real browser: headless Chromium (Selenium) against a real
``treestore serve`` of the demo store.

Each test takes the steps a user takes (pick, click, type, run, cancel) and waits for
what the page shows with explicit waits; a screenshot of each step is kept under the
run's temp folder (``page-shots*/``). The rows the page shows are compared with what
``treestore query`` gives on the same store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from shell.demo import DEMO_ANSWER_OPS, DEMO_ANSWER_ROPS, DEMO_PATH
from tests.support.browser import Browser
from tests.support.serve_server import ServeProcess

pytestmark = [pytest.mark.browser, pytest.mark.spark]

SEED_ROPS = DEMO_ANSWER_ROPS  # cross=0,1,2,M,A,list
SEED_OPS = DEMO_ANSWER_OPS  # gather=kJ;sort
STORE = "demo"
SLOW_PATH = "+/+/+/+"
SLOW_ROPS = "sleep=600000"
"""A Spark job whose tasks hold each row for ten minutes: it ends only when cancelled (the
test waits for the job to go at most 60 s, before its first row could come)."""

ROWS_JS = """
return [...document.querySelectorAll('#results tbody tr')].map(
    tr => [...tr.cells].slice(1).map(td => td.textContent));
"""
COLUMNS_JS = """
return [...document.querySelectorAll('#results thead th[data-column]')].map(th => th.textContent);
"""


@pytest.fixture
def server(serve_server: object) -> ServeProcess:
    """The run's ``treestore serve`` (the demo store is ``demo``)."""
    assert isinstance(serve_server, ServeProcess)
    return serve_server


@pytest.fixture
def page(browser: Browser, server: ServeProcess) -> Iterator[Browser]:
    """The browser on a freshly opened page of the demo store (1280x800); no script error
    may happen on it."""
    browser.resize(1280, 800)
    browser.open(f"{server.url}/#store={STORE}")
    browser.console_errors()  # what earlier tests left
    yield browser
    errors = [e for e in browser.console_errors() if "Failed to load resource" not in e]
    assert errors == [], errors


def state(browser: Browser) -> str:
    """The query's state as the status line shows it (ready, running, done, ...)."""
    script = "return document.getElementById('status').dataset.state"
    return str(browser.driver.execute_script(script))


def wait_state(browser: Browser, *wanted: str) -> str:
    """Wait until the query's state is one of ``wanted``: that state."""
    return str(browser.wait(lambda _: state(browser) if state(browser) in wanted else None))


def run(browser: Browser, path: str, rops: str = "", ops: str = "") -> None:
    """Type a query into the three boxes and press Run (Escape first closes the list of
    completions that typing may have opened over the button)."""
    from selenium.webdriver.common.keys import Keys

    browser.fill("#path", path)
    browser.fill("#rops", rops)
    browser.fill("#ops", ops)
    browser.find("#ops").send_keys(Keys.ESCAPE)
    browser.find("#run").click()


def shown_rows(browser: Browser) -> list[list[str]]:
    """The result table's rows, as the page shows them."""
    rows: list[list[str]] = browser.driver.execute_script(ROWS_JS)
    return rows


def cli_rows(
    spark: object, store: Path, path: str, rops: str, ops: str
) -> tuple[list[str], list[list[str]]]:
    """What ``treestore query`` gives on ``store``: its columns and its rows as text."""
    import treestore

    opened = treestore.open(store, spark)  # type: ignore[arg-type]
    rows = opened.query(path, rops=rops or None, ops=ops or None)
    text = [["null" if v is None else str(v) for v in row] for row in rows]
    return list(rows.column_names()), text


def click_node(browser: Browser, name: str) -> None:
    """Click the node ``name`` in the tree browser."""
    browser.find(f'#children tr.child[data-name="{name}"]').click()


def test_browse_two_levels_by_clicking(page: Browser, demo_store: Path) -> None:
    """Clicking root, then a UID: the breadcrumb, the children with their counts, and the
    query box holding the clicked node's path."""
    page.find('#children tr.child[data-name="root"]')
    page.shot("opened")
    assert page.find("#store").get_attribute("value") == STORE
    click_node(page, "root")
    page.wait(lambda _: page.texts("#crumbs .crumb") == [STORE, "root"])
    page.find('#children tr.child[data-name="11111"]')  # the children come after the crumbs
    names = page.texts("#children tr.child td.name")
    assert names == ["11111", "12345", "22222", "67890"]
    page.shot("browsed-root")
    click_node(page, "12345")
    page.wait(lambda _: page.texts("#crumbs .crumb") == [STORE, "root", "12345"])
    page.find('#children tr.child[data-name="M"]')
    cells = [row.split() for row in page.texts("#children tbody tr")]
    assert [c[0] for c in cells] == ["A", "M"]
    assert all(c[1].isdigit() and c[2].isdigit() for c in cells)  # hits, nodes
    assert page.find("#path").get_attribute("value") == "root/12345"
    page.shot("browsed-uid")
    page.driver.execute_script("state.childrenPage = 3")  # pages of 3: a "more" to click
    page.find('#crumbs .crumb[data-depth="1"]').click()
    page.wait(lambda _: page.texts("#crumbs .crumb") == [STORE, "root"])
    page.wait(lambda _: page.texts("#children tr.child td.name") == names[:3])
    page.find("#tree-more").click()
    page.wait(lambda _: page.texts("#children tr.child td.name") == names)
    assert not page.driver.find_element("css selector", "#tree-more").is_displayed()


def test_seed_query_streams_its_three_rows(page: Browser, demo_store: Path, spark: object) -> None:
    """The seed's query: its three rows, as ``treestore query`` gives them, with the row
    count and the version; the downloads point at the same query."""
    run(page, DEMO_PATH, SEED_ROPS, SEED_OPS)
    assert wait_state(page, "done", "failed") == "done", page.find("#status").text
    columns, rows = cli_rows(spark, demo_store, DEMO_PATH, SEED_ROPS, SEED_OPS)
    assert page.driver.execute_script(COLUMNS_JS) == columns
    assert shown_rows(page) == rows
    assert len(rows) == 3
    assert page.find("#row-count").text == "3 rows"
    assert page.find("#version").text == "version 1"
    csv = page.find("#download-csv").get_attribute("href")
    fields = parse_qs(urlsplit(csv).query)
    assert fields["format"] == ["csv"]
    assert (fields["path"], fields["rops"], fields["ops"]) == ([DEMO_PATH], [SEED_ROPS], [SEED_OPS])
    assert "format=json" in page.find("#download-json").get_attribute("href")
    page.shot("seed-query")
    page.resize(800, 800)
    page.find("#results tbody tr")
    page.shot("seed-query-800px")


def test_a_bad_path_shows_its_caret(page: Browser) -> None:
    """A path the grammar refuses: the server's message and caret under the path box."""
    run(page, "root/+:nodes>>1")
    assert wait_state(page, "done", "failed") == "failed"
    caret = page.find("#path-error pre.caret").text
    assert "root/+:nodes>>1" in caret
    assert "^" in caret
    assert "invalid" in (page.find("#path").get_attribute("class") or "")
    assert page.find("#path-error .message").text
    page.shot("bad-path")
    page.find("#path").send_keys("x")  # typing clears the error
    page.wait(lambda d: not d.find_element("css selector", "#path-error").is_displayed())


def test_cancel_a_slow_query(page: Browser, server: ServeProcess) -> None:
    """A Spark job that would run for hours: Cancel stops it (the service cancels the job
    as soon as the page goes away, before any row is ready); the page says so and runs the
    next query."""
    server.wait_for_spark()
    run(page, SLOW_PATH, SLOW_ROPS)
    wait_state(page, "running")
    page.wait(lambda _: spark_jobs(server) >= 1)
    page.shot("slow-query-running")
    page.find("#cancel").click()
    assert wait_state(page, "cancelled", "done", "failed") == "cancelled"
    assert not page.find("#cancel").is_enabled()
    page.shot("cancelled")
    page.wait(lambda _: spark_jobs(server) == 0)
    run(page, "root/+")
    assert wait_state(page, "done", "failed") == "done"


def spark_jobs(server: ServeProcess) -> float:
    """The Spark jobs running in the service (its /metrics)."""
    import urllib.request

    with urllib.request.urlopen(server.url + "/metrics", timeout=30) as answer:
        text = answer.read().decode()
    line = next(x for x in text.splitlines() if x.startswith("treestore_spark_jobs_running"))
    return float(line.split()[-1])


def test_a_link_reproduces_the_query(page: Browser, demo_store: Path, spark: object) -> None:
    """The address after a run says the query: opening it again restores the boxes and
    runs it, with the same rows."""
    run(page, DEMO_PATH, SEED_ROPS, SEED_OPS)
    wait_state(page, "done")
    link = page.driver.current_url
    hash_fields = parse_qs(urlsplit(link).fragment)
    assert hash_fields["path"] == [DEMO_PATH]
    assert hash_fields["store"] == [STORE]
    page.open(link)
    assert wait_state(page, "done", "failed") == "done"
    values = [page.find(f"#{box}").get_attribute("value") for box in ("path", "rops", "ops")]
    assert values == [DEMO_PATH, SEED_ROPS, SEED_OPS]
    assert shown_rows(page) == cli_rows(spark, demo_store, DEMO_PATH, SEED_ROPS, SEED_OPS)[1]
    page.shot("from-link")


def test_bar_chart_for_a_text_and_a_number_column(
    page: Browser, demo_store: Path, spark: object
) -> None:
    """Each UID with its count of children: one text and one number column, so a bar
    chart with a bar per row."""
    run(page, "root/+:+nodes")
    assert wait_state(page, "done", "failed") == "done"
    bars: list[Any] = page.wait(
        lambda d: d.find_elements("css selector", "#chart svg rect.bar") or None
    )
    columns, rows = cli_rows(spark, demo_store, "root/+:+nodes", "", "")
    assert len(bars) == len(rows) == 4
    assert page.texts("#chart svg text.label") == [row[0] for row in rows]
    assert page.find("#results thead th.num").text == columns[1]
    page.shot("bar-chart")


def test_completion_and_op_help(page: Browser) -> None:
    """Tab in the path box offers the node names there; an op's help shows beside the box."""
    page.fill("#path", "root/1")
    page.find("#path").send_keys("\t")
    offered = page.wait(lambda _: page.texts("#completions li .code") or None)
    assert offered == ["11111", "12345"]
    page.shot("completion")
    page.find("#path").send_keys("\t")  # takes the first
    assert page.find("#path").get_attribute("value") == "root/11111"
    page.fill("#ops", "gather=kJ")
    page.wait(lambda _: "gather=" in page.find("#op-help pre").text)
    page.shot("op-help")


@pytest.fixture(scope="module")
def token_server(demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``treestore serve`` of the demo store with ``--token-file``: its address."""
    from tests.support.serve_server import start_serve

    folder = tmp_path_factory.mktemp("serve-token")
    (folder / "token.txt").write_text(TOKEN + "\n")
    try:
        served = start_serve({STORE: demo_store}, ["--token-file", "token.txt"], folder=folder)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield served.url
    finally:
        served.stop()


TOKEN = "page-test-token-0123456789"


def test_the_page_asks_for_the_token(browser: Browser, token_server: str) -> None:
    """A service with a token: the page asks for it (a wrong one is refused and asked
    again), keeps it for the tab and sends it with each call."""
    browser.resize(1280, 800)
    browser.driver.get("about:blank")
    browser.driver.get(token_server + "/")
    browser.driver.execute_script("sessionStorage.clear()")
    browser.driver.get(token_server + "/#store=demo")
    browser.find("#token-input").send_keys("wrong")
    browser.shot("token-asked")
    browser.find("#token-submit").click()
    browser.find("#token-error")  # refused: asked again, saying so
    browser.find("#token-input").send_keys(TOKEN)
    browser.find("#token-submit").click()
    browser.find('#children tr.child[data-name="root"]')
    kept = browser.driver.execute_script("return sessionStorage.getItem('treestore.token')")
    assert kept == TOKEN
    run(browser, "root/+:+nodes")
    assert wait_state(browser, "done", "failed") == "done"
    browser.shot("token-given")
    browser.driver.execute_script("sessionStorage.clear()")
