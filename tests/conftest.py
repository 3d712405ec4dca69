"""Shared fixtures: one local SparkSession for the whole run, the standalone cluster, the
S3 server and the headless browser (each started once, on first use), demo inputs; the
run's Hypothesis profile.

Markers say what a test costs (pyproject.toml lists them): a test that uses the
``spark`` fixture (directly or through another fixture) is marked ``spark`` here, one
that uses the cluster ``cluster`` and ``spark``, one that uses the S3 server ``s3``, one
that uses the browser ``browser``; a test that starts a JVM another way (a command in a
subprocess) says ``spark`` itself, and a long one ``slow``. ``make test-fast`` leaves all
of them out. A test without the ``spark`` mark that starts a SparkSession anyway fails at
once, saying so: the fast run never starts a JVM by accident.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.jvm_archive import archive_path, ensure_archive, jvm_options
from tests.support.profiles import chosen_profile, register_profiles

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

JVM_ARCHIVE = archive_path()
"""Spark's classes archived for the run's JVMs (see :mod:`tests.support.jvm_archive`)."""
os.environ.setdefault("SPARK_SUBMIT_OPTS", jvm_options(JVM_ARCHIVE))  # read by spark-submit

register_profiles()
settings.load_profile(chosen_profile(os.environ))

FIXTURE_MARKS = {
    "spark": ("spark",),
    "spark_cluster": ("cluster", "spark"),
    "s3_server": ("s3",),
    "browser": ("browser",),
    "serve_server": ("spark",),
    "connect_server": ("spark", "connect"),
}
"""The markers a test gets for the fixtures it uses (directly or through others)."""

SERVERS = ("spark_cluster", "connect_server", "serve_server", "browser", "s3_server")
"""Fixtures that start a server once per run: ``make test`` runs on two workers
(pytest-xdist, ``--dist loadgroup``), and the tests that take one of these run on one
worker (the first server of this list a test takes names its group), so each of the
costly servers starts once, not once per worker (the S3 server, quick to start, may
start on both)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test by the costly fixtures it uses (:data:`FIXTURE_MARKS`), and keep
    the tests of the run's servers on one worker (:data:`SERVERS`). It runs first: a
    worker's xdist plugin names each item by its ``xdist_group`` in its own hook."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        for fixture, marks in FIXTURE_MARKS.items():
            if fixture in fixtures:
                for mark in marks:
                    item.add_marker(mark)
        server = next((fixture for fixture in SERVERS if fixture in fixtures), None)
        if server is not None:
            item.add_marker(pytest.mark.xdist_group(server))


@pytest.fixture(autouse=True)
def _spark_only_in_spark_tests(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refuse to start Spark in a test that is not marked ``spark``."""
    if request.node.get_closest_marker("spark") is not None:
        return
    from pyspark.sql.session import SparkSession

    def refuse(_builder: object) -> None:
        raise AssertionError(
            f"{request.node.nodeid} starts Spark: take the `spark` fixture so it is marked"
        )

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The one local SparkSession of the test run (2 cores, small settings, UTC)."""
    from treestore.spark import get_session

    ensure_archive(JVM_ARCHIVE)  # once per install: every later JVM of the run starts faster
    session = get_session("local[2]", app_name="treestore-tests")
    yield session
    session.stop()


@pytest.fixture
def demo_dir(tmp_path: Path) -> Path:
    """A folder holding the seed-004 inputs and job file."""
    from shell.demo import write_demo_inputs

    write_demo_inputs(tmp_path)
    return tmp_path


@pytest.fixture
def clicks(tmp_path: Path) -> Path:
    """A folder with the clicks job (a source with dedup keys) and an empty clicks/ folder
    (see :mod:`tests.support.jobs`)."""
    from tests.support.jobs import CLICKS_JOB

    (tmp_path / "clicks").mkdir()
    (tmp_path / "job.json").write_text(json.dumps(CLICKS_JOB))
    return tmp_path


@pytest.fixture(scope="session")
def demo_store(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed-004 demo loaded once for the whole run (version 1): its store folder.

    Shared by every test that takes it, so it is for reading only: a test that loads
    more, collects garbage or damages files makes its own store from ``demo_dir``.
    """
    from loaders import load_job, run_load
    from shell.demo import write_demo_inputs

    folder = tmp_path_factory.mktemp("demo-store")
    write_demo_inputs(folder)
    run_load(spark, load_job(folder / "job.json"), folder / "store")  # type: ignore[arg-type]
    return folder / "store"


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A Spark standalone cluster on loopback (a master, two 1-core workers).

    Started once for the run from the pyspark install, stopped by pid at the end,
    also when tests fail. A cluster that does not come up fails the test with its logs.
    """
    from tests.support.spark_cluster import start_cluster

    ensure_archive(JVM_ARCHIVE)
    try:
        cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"), secured=True)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A Spark Connect server on loopback (``local[2]``, the project's Python for its
    workers) for the whole run, started from the pyspark install and stopped by pid at
    the end. Clients talk to it from processes of their own (see
    :mod:`tests.support.connect_server`)."""
    from tests.support.connect_server import start_connect_server

    ensure_archive(JVM_ARCHIVE)
    try:
        server = start_connect_server(tmp_path_factory.mktemp("connect-server"))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One headless Chromium (Selenium) for the run, 1280x800, quit at the end; its
    screenshots go to a ``page-shots`` folder of the run's temp folder."""
    from tests.support.browser import BrowserMissing, start_browser

    try:
        chromium = start_browser(tmp_path_factory.mktemp("page-shots"))
    except BrowserMissing as exc:
        pytest.fail(str(exc))
    try:
        yield chromium
    finally:
        chromium.quit()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real S3-compatible server (moto's) on loopback for the whole run, stopped by pid."""
    from tests.support.s3_server import start_s3_server

    try:
        server = start_s3_server(tmp_path_factory.mktemp("s3-server"))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(
    s3_server: object, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> str:
    """A new bucket on the S3 server, with the AWS settings that reach it set: its URI.

    A test that asks for it without the ``s3`` mark (``request.getfixturevalue``, which
    the marking at collection cannot see) fails, saying so.
    """
    from tests.support.s3_server import S3Server

    if request.node.get_closest_marker("s3") is None:
        pytest.fail(f"{request.node.nodeid} takes the S3 server: mark it s3")
    assert isinstance(s3_server, S3Server)
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    return f"s3://{s3_server.new_bucket()}"


@pytest.fixture(scope="session")
def serve_server(
    spark: object, demo_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """A real ``treestore serve`` of the demo store (named ``demo``) and of another copy of
    the demo (``growing``, its folder beside its job: a test loads more into it) on a free
    loopback port, for the whole run: its own process and JVM, stopped by pid at the end
    (see :mod:`tests.support.serve_server`). Tests that take it are marked ``spark``."""
    from loaders import load_job, run_load
    from shell.demo import write_demo_inputs
    from tests.support.serve_server import start_serve

    growing = tmp_path_factory.mktemp("growing-store")  # a store a test loads into
    write_demo_inputs(growing)
    run_load(spark, load_job(growing / "job.json"), growing / "store")  # type: ignore[arg-type]
    stores = {"demo": demo_store, "growing": growing / "store"}
    try:
        server = start_serve(stores, folder=tmp_path_factory.mktemp("serve"))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        status = server.stop()
    assert status == 0, f"treestore serve ended with {status} on SIGTERM: {server.output()}"
