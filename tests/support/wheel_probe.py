"""Run by an installed treestore's Python (``python -I wheel_probe.py``, outside the
checkout): imports every package and uses each data file the code reads at run time,
then prints one JSON document of what it found. Imports nothing of the tests."""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from importlib.metadata import distribution
from pathlib import Path


def _page(paths: list[str]) -> dict[str, int]:
    """The HTTP status of each of the page's ``paths`` (``treestore serve``'s app in
    process, no store served: the page's files need none)."""
    with warnings.catch_warnings():  # starlette 1.x would have httpx2; httpx serves here
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from shell.serve.app import build_app
    from shell.serve.options import ServeOptions
    from shell.serve.stores import Service, SparkStarter

    def no_spark() -> object:
        raise AssertionError("the page's files need no Spark")

    client = TestClient(build_app(Service(ServeOptions(), {}, SparkStarter(no_spark))))
    return {path: client.get(path).status_code for path in paths}


def main() -> None:
    import loaders
    import query
    import shell
    import treestore
    from loaders.job.text import read_job_file
    from treestore.spark import _LOG_CONFIG

    found = {"modules": {m.__name__: m.__file__ for m in (treestore, query, loaders, shell)}}
    found["sys_path"] = sys.path
    dist = distribution("treestore-spark")
    found["version"] = dist.version
    found["dist_files"] = str(dist.locate_file(""))
    found["path"] = str(query.parse_path("root/+:nodes>1/+/+"))  # path.lark
    found["ops"] = len(query.compile_ops("str=c1,v=,cat;merge=kij").ops)  # ops.lark
    with tempfile.TemporaryDirectory() as folder:
        job = Path(folder, "job.json")
        job.write_text('{"shards": 2, // a comment, as JSON job files may have\n "x": [1]}')
        found["job"] = read_job_file(job).content  # jsonpos.lark
    found["log4j"] = _LOG_CONFIG.is_file() and str(_LOG_CONFIG)
    found["page"] = _page(["/", "/static/app.js", "/static/style.css"])
    print(json.dumps(found))


if __name__ == "__main__":
    main()
