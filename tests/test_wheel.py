"""The distribution: a wheel named ``treestore-spark`` (``treestore`` on PyPI is another
project) that holds every package with the files its code reads at run time, and that,
installed into a fresh environment, gives the ``treestore`` command and the four import
names from anywhere, the checkout out of sight."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

import treestore
from tests.support.wheel import (
    DISTRIBUTION,
    PACKAGES,
    build_wheel,
    install_wheel,
    package_files,
    run_installed,
    wheel_files,
)

PROBE = Path(__file__).resolve().parent / "support" / "wheel_probe.py"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_is_treestore_spark_with_every_file_of_the_packages(wheel: Path) -> None:
    name = DISTRIBUTION.replace("-", "_")
    assert wheel.name == f"{name}-{treestore.__version__}-py3-none-any.whl"
    inside = wheel_files(wheel)
    needed = package_files()
    assert {"treestore/log4j2.properties", "query/syntax/path.lark"} <= needed
    assert {"loaders/job/text/jsonpos.lark", "shell/serve/page/index.html"} <= needed
    assert sorted(needed - inside) == []  # data files too: grammars, the page, log4j's
    top = {n.split("/")[0] for n in inside if not n.startswith(f"{name}-")}
    assert top == set(PACKAGES)  # no tests, no stray folders
    info = f"{name}-{treestore.__version__}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"{info}/METADATA").decode()
        scripts = archive.read(f"{info}/entry_points.txt").decode()
    assert f"Name: {DISTRIBUTION}\n" in metadata
    assert f"Version: {treestore.__version__}\n" in metadata
    assert "[console_scripts]\ntreestore = shell.entry:run\n" in scripts


def test_the_installed_wheel_runs_from_anywhere(wheel: Path, tmp_path: Path) -> None:
    env = tmp_path / "env"
    bin_folder = install_wheel(wheel, env)
    elsewhere = tmp_path / "elsewhere"  # not the checkout: its folders are not on sys.path
    elsewhere.mkdir()
    [site] = env.glob("lib/python*/site-packages")  # PyPI's treestore beside it changes nothing
    other = site / "treestore-0.1.2.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: treestore\nVersion: 0.1.2\n")
    version = run_installed([bin_folder / "treestore", "--version"], elsewhere)
    assert (version.returncode, version.stdout) == (0, f"treestore {treestore.__version__}\n")
    shown = run_installed([bin_folder / "treestore", "--help"], elsewhere)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: treestore"), shown
    module = run_installed([bin_folder / "python", "-m", "treestore", "--version"], elsewhere)
    assert module.stdout == version.stdout, module
    probe = run_installed([bin_folder / "python", "-I", PROBE], elsewhere)
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout)
    for name, file in found["modules"].items():  # each package from the wheel, none else
        assert Path(file).resolve().is_relative_to(site.resolve()), (name, file)
    checkout = Path(treestore.__file__).resolve().parents[1]
    assert all(Path(p or ".").resolve() != checkout for p in found["sys_path"])
    assert found["version"] == treestore.__version__
    assert Path(found["dist_files"]).resolve() == site.resolve()
    assert found["path"] == "root/+:nodes>1/+/+" and found["ops"] == 2
    assert found["job"] == {"shards": 2, "x": [1]}
    assert Path(found["log4j"]).resolve().is_relative_to(site.resolve())
    assert found["page"] == {"/": 200, "/static/app.js": 200, "/static/style.css": 200}
