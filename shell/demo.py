"""``treestore demo``: the seed-004 join (attributes x UID->PUID mapping), end to end.

Writes the two input tables and the job file into a work folder, loads them,
runs the query, and turns its rows into the final join. Every step prints the
command that does the same by hand.

The work folder is never someone else's: the demo only writes into a new or empty
folder, and marks the folders it makes with a ``.treestore-demo`` file (which also
records the store version the demo published). A later demo rebuilds a marked folder
after saying so; when the folder changed since (files added or edited, more loaded
into its store) it refuses unless ``--force``. A non-empty folder without the mark
is refused, whatever the options: nothing of it is deleted.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import TextIO

from treestore.errors import TreestoreError
from treestore.store.layout import CURRENT

__all__ = [
    "DEMO_ANSWER_OPS",
    "DEMO_ANSWER_ROPS",
    "DEMO_JOB",
    "DEMO_MARKER",
    "DEMO_OPS",
    "DEMO_PATH",
    "prepare_demo_folder",
    "run_demo",
    "write_demo_inputs",
]

DEMO_MARKER = ".treestore-demo"
"""The file that marks a folder ``treestore demo`` made (JSON: the store version it published)."""

ATTRIBUTES = """TIME\tUID\tATTRIBUTE_IDS
1419441590000\t12345\t1
1419441610000\t67890\t1,2
1419441610000\t12345\t3,4,5
1419441620000\t11111\t1,2
1419441630000\t22222\t3
"""

MAPPING = """TIME\tUID\tPUID
1419441590000\t12345\tabc
1419441610000\t67890\txyz
1419441710000\t67890\tzzz
"""

DEMO_JOB = {
    "shards": 8,
    "source": [
        {
            "name": "attributes",
            "path": "attributes/",
            "format": "tsv",
            "header": True,
            "shard_by": "UID",
            "inject_source_name": "ATTR",
            "dedup": {"keys": ["TIME", "UID", "ATTRIBUTE_IDS"]},
        },
        {
            "name": "mapping",
            "path": "mapping/",
            "format": "tsv",
            "header": True,
            "shard_by": "UID",
            "inject_source_name": "MAPPING",
        },
    ],
    "map": {
        "filter_out": {
            "op": "chain",
            "filter": [
                {
                    "op": "field",
                    "from": "ATTRIBUTE_IDS",
                    "filter": {"op": "split", "split": ","},
                    "nullFail": False,
                },
            ],
        },
    },
    "tree": {
        "root": [
            {"type": "const", "value": "root"},
            {
                "type": "branch",
                "list": [
                    [
                        {
                            "type": "value",
                            "key": "UID",
                            "filter": {
                                "op": "field",
                                "from": "ATTR",
                                "filter": {"op": "empty", "not": True},
                            },
                        },
                        {"type": "const", "value": "A"},
                        {"type": "value", "key": "ATTRIBUTE_IDS"},
                    ],
                    [
                        {
                            "type": "value",
                            "key": "UID",
                            "create": False,
                            "filter": {
                                "op": "field",
                                "from": "MAPPING",
                                "filter": {"op": "empty", "not": True},
                            },
                        },
                        {"type": "const", "value": "M"},
                        {"type": "value", "key": "PUID"},
                    ],
                ],
            },
        ]
    },
}

DEMO_PATH = "root/+:nodes>1/+/+"
DEMO_OPS = "str=c1,v=,cat,c2,cat,v2,set;merge=kij"
DEMO_ANSWER_ROPS = "cross=0,1,2,M,A,list"
"""The seed's answer, PUID -> attribute ids: each shard gives each PUID row of its UIDs
the UID's attribute ids as one list..."""
DEMO_ANSWER_OPS = "gather=kJ;sort"
"""...and the driver folds the lists per PUID."""


def _demo_files() -> dict[str, str]:
    """The files the demo writes, by path inside its folder, with their text."""
    return {
        "attributes/attributes-0001.tsv": ATTRIBUTES,
        "mapping/mapping-0001.tsv": MAPPING,
        "job.json": json.dumps(DEMO_JOB, indent=2) + "\n",
    }


def write_demo_inputs(workdir: Path) -> Path:
    """Write the seed-004 tables and job file under ``workdir``; return the job file."""
    for name, text in _demo_files().items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(text)
    return workdir / "job.json"


def _store_version(workdir: Path) -> str | None:
    """The text of the demo store's ``CURRENT`` (None: nothing published)."""
    current = workdir / "store" / CURRENT
    return current.read_text(errors="replace").strip() if current.is_file() else None


def _changes_since_demo(workdir: Path) -> list[str]:
    """What differs in a marked demo folder from what the demo left there."""
    try:
        mark = json.loads((workdir / DEMO_MARKER).read_text())
        published = mark.get("store_version") if isinstance(mark, dict) else None
    except (OSError, ValueError):
        published = None
    expected = _demo_files()
    changes = []
    for path in sorted(p for p in workdir.rglob("*") if p.is_file() or p.is_symlink()):
        name = path.relative_to(workdir).as_posix()
        if name == DEMO_MARKER or name.startswith("store/"):
            continue
        if name not in expected:
            changes.append(f"{name} was added")
        elif path.is_symlink() or path.read_text(errors="replace") != expected[name]:
            changes.append(f"{name} was edited")
    current = _store_version(workdir)
    if current != published:
        changes.append(
            f"its store is at version {current or 0}, the demo left version {published or 0}"
        )
    return changes


def prepare_demo_folder(workdir: Path, force: bool, out: TextIO) -> None:
    """Make ``workdir`` an empty, marked demo folder, deleting only what a demo made.

    A new or empty folder is used as it is. A folder with the demo's mark is rebuilt,
    saying so first; when it changed since the demo (``--force`` rebuilds it anyway)
    and any non-empty folder without the mark are refused with :class:`TreestoreError`.
    """
    if workdir.exists() and not workdir.is_dir():
        raise TreestoreError(f"{workdir} is a file, not a folder; pick another --workdir")
    if workdir.is_dir() and any(workdir.iterdir()):
        if not (workdir / DEMO_MARKER).is_file():
            raise TreestoreError(
                f"{workdir} is not empty and was not made by `treestore demo` (it has no "
                f"{DEMO_MARKER} file), so the demo will not write into it and deletes nothing; "
                "pick a new or empty folder with --workdir"
            )
        changes = _changes_since_demo(workdir)
        if changes and not force:
            raise TreestoreError(
                f"{workdir} holds an earlier demo that changed since ({'; '.join(changes)}); "
                "rebuilding it would delete that, so nothing was deleted: add --force to "
                "rebuild it anyway, or pick another folder with --workdir"
            )
        what = f", deleting your changes: {'; '.join(changes)}" if changes else ""
        print(f"# rebuilding the earlier demo in {workdir}/{what}", file=out)
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    _mark(workdir)


def _mark(workdir: Path) -> None:
    """Write the demo's mark, with the store version it left (after the load)."""
    text = {"made_by": "treestore demo", "store_version": _store_version(workdir)}
    (workdir / DEMO_MARKER).write_text(json.dumps(text) + "\n")


def pasteable_command(argv0: str | None = None) -> tuple[str, bool]:
    """How to type the running ``treestore`` command here, and whether it is on PATH:
    ``treestore`` when PATH finds this very script, else its path (relative to the
    current folder when inside it, e.g. ``.venv/bin/treestore``); ``python -m
    treestore`` with this interpreter when not run as the script."""
    script = Path(argv0 if argv0 is not None else sys.argv[0])
    if script.name != "treestore":
        return f"{shlex.quote(sys.executable)} -m treestore", False
    found = shutil.which("treestore")
    if found is not None and Path(found).resolve() == script.resolve():
        return "treestore", True
    absolute = script.resolve()
    inside = absolute.is_relative_to(Path.cwd().resolve())
    shown = str(absolute.relative_to(Path.cwd().resolve())) if inside else str(absolute)
    return shlex.quote(shown), False


def path_hint(command: str) -> str:
    """The shell line that puts ``command``'s folder on PATH."""
    folder = Path(shlex.split(command)[0]).parent
    where = "$PWD/" + str(folder) if not folder.is_absolute() else str(folder)
    return f'export PATH="{where}:$PATH"'


def run_demo(
    workdir: Path, master: str | None, out: TextIO, force: bool = False
) -> list[tuple[str, str]]:
    """Run the whole demo in ``workdir`` (see :func:`prepare_demo_folder`: only a new,
    empty or earlier demo folder; ``force`` rebuilds a demo folder that changed since)
    and print each step."""
    from query.driver.runner import open_store
    from shell.commands import command_load
    from shell.output.formats import write_rows
    from treestore.spark import get_session

    prepare_demo_folder(workdir, force, out)
    job = write_demo_inputs(workdir)
    store = workdir / "store"
    treestore, on_path = pasteable_command()
    print(f"# wrote the seed-004 inputs and job under {workdir}/", file=out)
    if not on_path:
        print(f"# (to type just `treestore`: {path_hint(treestore)})", file=out)
    print(f"$ {treestore} load {shlex.quote(str(job))} --store {shlex.quote(str(store))}", file=out)
    command_load(str(job), str(store), master, out)
    _mark(workdir)
    print(
        f"\n$ {treestore} query {shlex.quote(str(store))} {shlex.quote(DEMO_PATH)}"
        f" --rops {shlex.quote(DEMO_OPS)}",
        file=out,
    )
    handle = open_store(str(store), session_factory=lambda: get_session(master))
    result = handle.query(DEMO_PATH, rops=DEMO_OPS)
    write_rows(result.to_list(), out, "tsv", columns=result.column_names())
    print(
        "\n# the join, one PUID per line with its attribute ids, answered by the store:\n"
        f"$ {treestore} query {shlex.quote(str(store))} {shlex.quote(DEMO_PATH)}"
        f" --rops {shlex.quote(DEMO_ANSWER_ROPS)} --ops {shlex.quote(DEMO_ANSWER_OPS)}",
        file=out,
    )
    answer = handle.query(DEMO_PATH, rops=DEMO_ANSWER_ROPS, ops=DEMO_ANSWER_OPS)
    joined = [(str(puid), str(ids)) for puid, ids in answer.to_list()]
    write_rows(joined, out, "tsv", columns=answer.column_names())
    return joined
