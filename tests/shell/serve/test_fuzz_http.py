"""Query strings fuzzed over HTTP against the real service: every answer is a status a
client can cause (never a 500) and arrives (never a hang); the service still answers
after."""

from __future__ import annotations

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.serve_server import ServeProcess

PIECES = ["root", "+", "*", "12345", "A", "M", ":nodes>1", ":+hits", "(", ")", "/", "|",
          "!", "@", ",", "%", "$", "~", "[", "]", "..", "++", "\x00", "é", "\n", "'"]  # fmt: skip
OPS = ["sort", "gather=kJ", "merge=kij", "cross=0,1,2,M,A,list", "str=c1", "num=", "limit=2",
       "pivot", ";", "=", ",", "sleep=1", "nosuch", "sort=0:x", "\t"]  # fmt: skip
ALLOWED = {200, 400, 404, 413, 503, 504}


def _text(pieces: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(st.sampled_from(pieces), max_size=8).map("".join),
        st.text(max_size=30),
    )


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=_text(PIECES),
    rops=st.none() | _text(OPS),
    ops=st.none() | _text(OPS),
    fmt=st.sampled_from(["json", "jsonl", "csv", "tsv", "arrow", "xml", ""]),
    limit=st.none() | st.sampled_from(["0", "1", "-1", "x", "99999999999999999999"]),
)
def test_fuzzed_queries_never_get_a_500(
    serve_server: object,
    path: str,
    rops: str | None,
    ops: str | None,
    fmt: str,
    limit: str | None,
) -> None:
    assert isinstance(serve_server, ServeProcess)
    fields = {"store": "demo", "path": path, "rops": rops, "ops": ops, "format": fmt,
              "limit": limit, "timeout": "20"}  # fmt: skip
    params = {k: v for k, v in fields.items() if v is not None}
    answer = httpx.post(serve_server.url + "/query", json=params, timeout=120)
    assert answer.status_code in ALLOWED, (answer.status_code, answer.text)
    if answer.status_code != 200:
        assert answer.json()["error"]
