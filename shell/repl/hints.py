"""One-line hints under a query's rows: a path name no shard has, keys ``gather`` would merge.

Both read what the shell already has: the store's trees in this process (as
completion does) and the rows it printed.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence

from query.ops import Value
from query.syntax.ast import Path
from query.syntax.path_parser import parse_path
from query.walk.names import child_names
from query.walk.row_walker import matching_nodes
from treestore.errors import QuerySyntaxError, TreestoreError
from treestore.store.versions import StoreVersion

__all__ = ["missing_name", "repeated_keys"]


def missing_name(version: StoreVersion, text: str) -> QuerySyntaxError | None:
    """The first name a path looks up that no node it reaches has, in any shard, as an
    error at that element's column with the closest existing names; ``None`` if every
    name exists (or the path looks up no name)."""
    try:
        path = parse_path(text)
    except TreestoreError:
        return None
    for index, element in enumerate(path.elements):
        unknown = _unknown_attachment(version, path, index, text)
        if unknown is not None:
            return unknown
        if element.kind != "names" or element.stand_in is not None:
            continue
        parent = Path(path.elements[:index]) if index else None
        try:
            children = child_names(version, parent, "", limit=10_000)
        except (TreestoreError, OSError):
            return None
        absent = [name for name in element.names if name not in children]
        if not absent or len(absent) < len(element.names):
            continue
        where = f"under {parent}" if parent else "at the top"
        close = difflib.get_close_matches(absent[0], children, n=3)
        hint = "Closest: " + ", ".join(close) + "." if close else None
        return QuerySyntaxError(
            f"no node {where} is named {absent[0]!r} in any shard",
            text,
            1,
            element.column,
            hint=hint,
        )
    return None


def attachments(version: StoreVersion, parent: Path, limit: int = 200) -> tuple[int, list[str]]:
    """How many nodes ``parent`` reaches (the first ``limit`` per shard) and the data
    attachments they have, by name: what ``parent/+%?`` lists."""
    found: set[str] = set()
    nodes = 0
    for shard in sorted(version.manifest.trees):
        tree = version.tree(shard)
        for count, node in enumerate(matching_nodes(tree, parent) if parent.elements else ()):
            if count >= limit:
                break
            nodes += 1
            found.update(node.data or {})
    return nodes, sorted(found)


def _unknown_attachment(
    version: StoreVersion, path: Path, index: int, text: str
) -> QuerySyntaxError | None:
    """An error when element ``index`` reads an attachment (``%name``, ``$name``) that none
    of the nodes it reads it on has (and there are such nodes)."""
    element = path.elements[index]
    if element.kind == "data" and element.names:
        wanted, parent = [element.names[0]], Path(path.elements[:index])
    elif element.fields:
        wanted = [f.name for f in element.fields]
        parent = Path((*path.elements[:index], dataclasses.replace(element, fields=())))
    else:
        return None
    try:
        nodes, present = attachments(version, parent)
    except (TreestoreError, OSError):
        return None
    missing = [name for name in wanted if name not in present]
    if not missing or not nodes:
        return None
    close = difflib.get_close_matches(missing[0], present, n=3) or present[:3]
    hint = "Attachments there: " + ", ".join(close) + "." if close else "Its nodes have none."
    return QuerySyntaxError(
        f"no node here has an attachment {missing[0]!r}", text, 1, element.column, hint=hint
    )


def repeated_keys(rows: Sequence[Sequence[Value]]) -> str | None:
    """A hint when rows repeat a key (the tuple of their text columns) and have numbers to
    merge: each shard sends its own rows (Hydra's semantics), so a key found in several
    shards comes once per shard; the hint names the ``gather`` that merges them."""
    seen: set[tuple[Value, ...]] = set()
    repeats = 0
    letters = ""
    for row in rows:
        numeric = [isinstance(v, int | float) and not isinstance(v, bool) for v in row]
        if not any(numeric) or all(numeric):
            continue
        key = tuple(v for v, number in zip(row, numeric, strict=True) if not number)
        if key in seen:
            repeats += 1
            letters = letters or "".join("s" if number else "k" for number in numeric)
        seen.add(key)
    if not repeats:
        return None
    return (
        f"hint: {repeats:,} row(s) repeat a key: each shard sends its own rows;"
        f" | ops gather={letters} merges them"
    )
