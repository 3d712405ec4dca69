"""treestore's wheel built from the checkout and installed into a fresh environment, as a
user does with ``python -m build --wheel`` and ``pip install dist/...whl``.

Offline: the wheel is built with the build backend of the running environment
(``--no-isolation``, from a copy of the sources, so the checkout gets no ``build/`` or
``*.egg-info``), and the fresh environment takes treestore's dependencies from the running
one through a ``.pth`` file while the wheel itself is installed ``--no-deps``: pip fetches
nothing. A ``.pth`` file's folder is added to ``sys.path`` as it is, without running the
``.pth`` files inside it, so the running environment's editable install of the checkout
is not seen there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

__all__ = [
    "DISTRIBUTION",
    "PACKAGES",
    "ROOT",
    "build_wheel",
    "install_wheel",
    "package_files",
    "run_installed",
    "wheel_files",
]

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "treestore-spark"
"""The distribution's name (``treestore`` on PyPI is another project)."""
PACKAGES = ("treestore", "query", "loaders", "shell")
"""The import names the wheel installs."""
_BUILD_INPUTS = ("pyproject.toml", "README.md", *PACKAGES)
_JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


def package_files(root: Path = ROOT) -> set[str]:
    """Every file of the packages in the checkout (paths relative to ``root``), bytecode
    and hidden files aside: what the wheel must hold, data files included."""
    return {
        path.relative_to(root).as_posix()
        for package in PACKAGES
        for path in (root / package).rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix != ".pyc"
        and not path.name.startswith(".")
    }


def build_wheel(folder: Path) -> Path:
    """Build the wheel from a copy of the checkout's sources under ``folder``; its path."""
    source, dist = folder / "source", folder / "dist"
    source.mkdir(parents=True)
    for name in _BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=_JUNK)
        else:
            shutil.copy2(ROOT / name, source / name)
    command = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist]
    built = subprocess.run(
        [*command, source], capture_output=True, text=True, timeout=300, check=False
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    [wheel] = dist.glob("*.whl")
    return wheel


def wheel_files(wheel: Path) -> set[str]:
    """The names of the files in ``wheel``."""
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def install_wheel(wheel: Path, env: Path) -> Path:
    """A new virtual environment at ``env`` with ``wheel`` installed (``--no-deps``) and the
    running environment's packages behind its own; the new environment's ``bin`` folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env], check=True, timeout=120)
    bin_folder = env / "bin"
    python = bin_folder / "python"
    found = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    paths = sysconfig.get_paths()
    deps = dict.fromkeys([paths["purelib"], paths["platlib"]])  # in order, once each
    Path(found.stdout.strip(), "running-environment.pth").write_text("\n".join(deps) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    installed = subprocess.run(
        [*pip, "install", "--quiet", "--no-deps", "--no-index", wheel],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return bin_folder


def run_installed(command: list[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (a program of the installed environment) in ``cwd``, with no
    ``PYTHONPATH`` that could reach the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
