"""Every job filter's cases, as (filter as in a job file, input, expected output).

The filter tests (``tests/loaders/filters/test_filters.py``) run them on Spark; the
parsers' fuzzing puts each filter into the job files it starts from. A new filter adds
its cases here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BUNDLE_CASES", "VALUE_CASES"]

# (value filter, input, expected); inputs that are lists run the filter per element.
VALUE_CASES: list[tuple[dict[str, Any], Any, Any]] = [
    ({"op": "split"}, "a,b,,c", ["a", "b", "", "c"]),
    ({"op": "split", "split": "|"}, "a|b", ["a", "b"]),
    ({"op": "split", "fixedLength": 2}, "abcde", ["ab", "cd", "e"]),
    ({"op": "split"}, "", None),
    ({"op": "split"}, ["a,b", "c"], ["a", "b", "c"]),
    ({"op": "empty"}, "", ""),
    ({"op": "empty"}, "x", None),
    ({"op": "empty", "not": True}, "x", "x"),
    ({"op": "empty", "not": True}, ["", "x", ""], ["x"]),
    ({"op": "empty", "not": True}, ["", ""], None),
    ({"op": "case", "upper": True}, "aBc", "ABC"),
    ({"op": "case", "lower": True}, "aBc", "abc"),
    ({"op": "default", "value": "none"}, "", "none"),
    ({"op": "default", "value": "none"}, None, "none"),
    ({"op": "default", "value": "none"}, "x", "x"),
    ({"op": "hash", "type": 0}, "hello", "99162322"),  # Java "hello".hashCode()
    ({"op": "hash", "type": 0}, "Hydra tree", "-1829000644"),
    ({"op": "hash", "type": 0, "abs": True}, "Hydra tree", "1829000644"),
    ({"op": "hash", "type": 4}, "abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
    ({"op": "hash", "type": 3}, "abc", str(0xA9993E364706816A - (1 << 64))),
    ({"op": "mod", "mod": 7}, "-23", "2"),
    ({"op": "mod", "mod": 7, "abs": False}, "-23", "-2"),
    ({"op": "mod", "mod": 10}, ["12", "25"], ["2", "5"]),
    ({"op": "pad", "left": "0000"}, "42", "0042"),
    ({"op": "pad", "right": "...."}, "ab", "ab.."),
    ({"op": "pad", "left": "00"}, "12345", "12345"),
    ({"op": "pad", "left": "000"}, None, "000"),
    ({"op": "slice", "from": 1, "to": 3}, "abcdef", "bc"),
    ({"op": "slice", "from": -2}, "abcdef", "ef"),
    ({"op": "slice", "from": 1}, ["a", "b", "c"], ["b", "c"]),
    ({"op": "slice", "from": 0, "to": -2}, ["a", "b", "c"], ["a"]),
    ({"op": "regex", "pattern": "(\\d+)-(\\w)"}, "1-a 22-b", ["1", "a", "22", "b"]),
    ({"op": "regex", "pattern": "x(\\d)"}, "x1x2", ["1", "2"]),
    ({"op": "regex", "pattern": "\\d"}, "a1", []),
    ({"op": "regex", "pattern": "(\\d)", "replace": "<$1>"}, "a1b2", "a<1>b<2>"),
    ({"op": "replace", "find": ".", "replace": "-"}, "a.b.c", "a-b-c"),
    ({"op": "replace", "find": "[ab]", "replace": "_", "regex": True}, "abc", "__c"),
    ({"op": "join"}, ["a", "b"], "a,b"),
    ({"op": "join", "join": ""}, ["a", "b"], "ab"),
    ({"op": "join"}, "plain", "plain"),
    ({"op": "require", "value": ["a", "b"]}, "a", "a"),
    ({"op": "require", "value": ["a", "b"]}, "c", None),
    ({"op": "require", "contains": "ell"}, "hello", "hello"),
    ({"op": "require", "match": "h.*o"}, "hello", "hello"),
    ({"op": "require", "match": "h.*l"}, "hello", None),
    ({"op": "require", "find": "l+"}, "hello", "hello"),
    ({"op": "require", "value": "ab", "toLower": True}, "AB", "AB"),
    ({"op": "exclude", "value": ["0"]}, "0", None),
    ({"op": "exclude", "value": ["0"]}, ["0", "1", "0"], ["1"]),
    ({"op": "chain", "filter": [{"op": "split"}, {"op": "slice", "from": -1}]}, "a,b,c", ["c"]),
    ([{"op": "case", "upper": True}, {"op": "pad", "left": "___"}], "a", "__A"),
    (
        {"op": "chain", "filter": [{"op": "empty", "not": True}, {"op": "default", "value": "d"}]},
        "",
        None,
    ),
    (
        {
            "op": "chain",
            "nullStop": False,
            "filter": [{"op": "empty", "not": True}, {"op": "default", "value": "d"}],
        },
        "",
        "d",
    ),
    ({"op": "case", "upper": True, "once": True}, ["a", "b"], "A,B"),
]

# (bundle filter, record, passes, {field: value after the filter})
BUNDLE_CASES: list[tuple[dict[str, Any], dict[str, Any], bool, dict[str, Any]]] = [
    (
        {"op": "field", "from": "A", "to": "B", "filter": {"op": "case", "upper": True}},
        {"A": "x"},
        True,
        {"B": "X"},
    ),
    ({"from": "A", "filter": {"op": "empty", "not": True}}, {"A": ""}, False, {"A": ""}),
    (
        {"from": "A", "filter": {"op": "empty", "not": True}, "nullFail": False},
        {"A": ""},
        True,
        {"A": None},
    ),
    ({"from": "A", "filter": {"op": "empty"}, "not": True}, {"A": "x"}, True, {"A": "x"}),
    ({"op": "not", "field": "A"}, {"A": None}, True, {}),
    ({"op": "not", "field": "A"}, {"A": "x"}, False, {}),
    (
        {"op": "not", "filter": {"op": "equals", "left": "A", "right": "B"}},
        {"A": "x", "B": "x"},
        False,
        {},
    ),
    ({"op": "equals", "left": "A", "right": "B"}, {"A": "x", "B": "x"}, True, {}),
    ({"op": "equals", "left": "A", "right": "B"}, {"A": "x", "B": None}, False, {}),
    ({"op": "equals", "left": "A", "right": "B"}, {"A": None, "B": None}, True, {}),
    ({"op": "equals", "left": "A", "right": "B", "not": True}, {"A": "x", "B": "y"}, True, {}),
    ({"op": "contains", "field": "A", "value": ["ell", "zz"]}, {"A": "hello"}, True, {}),
    ({"op": "contains", "field": "A", "value": ["zz"]}, {"A": "hello"}, False, {}),
    ({"op": "contains", "field": "A", "from": "B"}, {"A": "hello", "B": "lo"}, True, {}),
    ({"op": "contains", "field": "A", "value": ["q"], "not": True}, {"A": None}, True, {}),
    ({"op": "value", "value": "const", "to": "C"}, {}, True, {"C": "const"}),
    (
        {"op": "concat", "in": ["A", "B"], "out": "C", "join": "+"},
        {"A": "x", "B": "y"},
        True,
        {"C": "xy"},
    ),
    (
        {
            "op": "chain",
            "filter": [{"op": "value", "value": "1", "to": "C"}, {"op": "not", "field": "C"}],
        },
        {},
        False,
        {"C": "1"},
    ),
    (
        {"op": "chain", "failReturn": True, "filter": [{"op": "not", "field": "A"}]},
        {"A": "x"},
        True,
        {},
    ),
    (
        {"op": "chain", "failStop": False, "filter": [{"op": "not", "field": "A"}]},
        {"A": "x"},
        True,
        {},
    ),
]
