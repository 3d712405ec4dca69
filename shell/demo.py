"""``treestore demo``: the seed-004 join (attributes x UID->PUID mapping), end to end.

Writes the two input tables and the job file into a work folder, loads them,
runs the query, and turns its rows into the final join. Every step prints the
command that does the same by hand.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

__all__ = ["DEMO_JOB", "DEMO_OPS", "DEMO_PATH", "final_join", "run_demo", "write_demo_inputs"]

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


def write_demo_inputs(workdir: Path) -> Path:
    """Write the seed-004 tables and job file under ``workdir``; return the job file."""
    (workdir / "attributes").mkdir(parents=True, exist_ok=True)
    (workdir / "mapping").mkdir(parents=True, exist_ok=True)
    (workdir / "attributes" / "attributes-0001.tsv").write_text(ATTRIBUTES)
    (workdir / "mapping" / "mapping-0001.tsv").write_text(MAPPING)
    job = workdir / "job.json"
    job.write_text(json.dumps(DEMO_JOB, indent=2) + "\n")
    return job


def final_join(rows: Iterable[tuple[object, ...]]) -> list[tuple[str, str]]:
    """Turn the query's rows (UID, "A=1,...,M=abc") into (PUID, attribute ids) pairs.

    >>> final_join([("12345", "A=1,A=3,M=abc"), ("67890", "A=1,A=2,M=xyz,M=zzz")])
    [('abc', '1,3'), ('xyz', '1,2'), ('zzz', '1,2')]
    """
    joined: list[tuple[str, str]] = []
    for row in rows:
        items = str(row[-1]).split(",")
        attributes = [item[2:] for item in items if item.startswith("A=")]
        for item in items:
            if item.startswith("M="):
                joined.append((item[2:], ",".join(attributes)))
    return sorted(joined)


def run_demo(workdir: Path, master: str | None, out: TextIO) -> list[tuple[str, str]]:
    """Run the whole demo in ``workdir`` (made afresh) and print each step."""
    from query.driver.runner import open_store
    from shell.commands import command_load
    from shell.formats import write_rows
    from treestore.spark import get_session

    if workdir.exists():
        shutil.rmtree(workdir)
    job = write_demo_inputs(workdir)
    store = workdir / "store"
    print(f"# wrote the seed-004 inputs and job under {workdir}/", file=out)
    print(f"$ treestore load {shlex.quote(str(job))} --store {shlex.quote(str(store))}", file=out)
    command_load(str(job), str(store), master, out)
    print(
        f"\n$ treestore query {shlex.quote(str(store))} {shlex.quote(DEMO_PATH)}"
        f" --rops {shlex.quote(DEMO_OPS)}",
        file=out,
    )
    handle = open_store(str(store), session_factory=lambda: get_session(master))
    rows = handle.query(DEMO_PATH, rops=DEMO_OPS).to_list()
    write_rows(rows, out, "tsv")
    print("\n# the join, one PUID per line with its attribute ids:", file=out)
    joined = final_join(rows)
    write_rows(joined, out, "tsv")
    return joined
