"""What the service's browse and help calls answer, as JSON-ready documents (no HTTP).

Each function takes a served store (a :class:`~query.driver.runner.QueryStore`: one
published version) and returns plain dicts and lists: the stores' list
(:func:`store_summary`), what ``treestore info`` says (:func:`store_document`), one node's
children across the shards (:func:`children_document`), what the shell's Tab offers
(:func:`completions_document`), and the op catalogue (:func:`ops_document`,
:func:`op_document`). The texts are the shell's own: the same functions make them.
"""

from __future__ import annotations

import difflib
import heapq
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from query.driver.runner import QueryStore
from query.ops import REGISTRY
from shell.output.info import store_info
from shell.repl.completion import NamesLookup, NodeNames, complete
from shell.repl.meta import op_help, op_summaries
from treestore.errors import NodeNotFoundError, OpError, TreestoreError
from treestore.storage.tree import Node, ShardTree

__all__ = [
    "children_document",
    "completions_document",
    "op_document",
    "ops_document",
    "store_document",
    "store_summary",
]


def store_summary(name: str, store: QueryStore) -> dict[str, Any]:
    """A served store in the stores' list: its name, location, the version it reads, its
    shard count and the newest version published (``None`` if ``CURRENT`` cannot be read
    now)."""
    version = store.store_version
    try:
        newest: int | None = store.newest_version()
    except (TreestoreError, OSError):
        newest = None
    return {
        "name": name,
        "location": version.location,
        "version": version.version,
        "shards": version.shards,
        "newest": newest,
    }


def store_document(name: str, store: QueryStore) -> dict[str, Any]:
    """What ``treestore info`` says of the version ``store`` reads, as JSON (see
    :meth:`shell.output.info.StoreInfo.to_json`), with the store's served ``name`` and the
    newest version published (``newest``: a load or a follower may have published since)."""
    version = store.store_version
    summary = store_summary(name, store)
    return {"name": name, **store_info(version).to_json(), "newest": summary["newest"]}


def children_document(
    name: str, store: QueryStore, path: Sequence[str], after: str | None, limit: int
) -> dict[str, Any]:
    """One node's children in name order, merged across the shards, a page at a time.

    The node at ``path`` (its names from the top; empty: the top nodes) is found in each
    shard that has it; a name that several shards hold is one child, its ``hits`` and
    child counts (``nodes``) summed. The page is the ``limit`` first names greater than
    ``after`` (from the first when ``None``); ``next`` is the page's last name if more
    follow, else ``None``. Only the pages of the runs that hold those names are read.
    Names are in the store's order: by code point, which is UTF-8 byte order.

    Raises:
        NodeNotFoundError: no shard has a node at ``path``; it names the first name that
            no shard has at its place.
        ValueError: ``limit`` is below 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    version = store.store_version
    trees = [store.tree(shard, version) for shard in sorted(version.manifest.trees)]
    nodes = _nodes_at(name, version.version, trees, path)
    children: list[dict[str, Any]] = []
    more = False
    for child, group in itertools.groupby(_merged_children(nodes, after), key=lambda n: n.name):
        if len(children) == limit:
            more = True
            break
        hits = nodes_below = 0
        for node in group:
            hits += node.hits
            nodes_below += node.child_count
        children.append({"name": child, "hits": hits, "nodes": nodes_below})
    return {
        "store": name,
        "version": version.version,
        "path": list(path),
        "children": children,
        "next": children[-1]["name"] if more else None,
    }


def _nodes_at(
    store: str, version: int, trees: list[ShardTree], path: Sequence[str]
) -> list[tuple[ShardTree, Node]]:
    """The node at ``path`` in each shard that has it (looked up name by name)."""
    found: list[tuple[ShardTree, Node]] = []
    reached = 0  # the most names any shard has in a row
    for tree in trees:
        node = tree.root
        depth = 0
        for part in path:
            child = tree.child(node, part)
            if child is None:
                break
            node, depth = child, depth + 1
        reached = max(reached, depth)
        if depth == len(path):
            found.append((tree, node))
    if path and not found:
        where = "/".join(path[:reached]) or "the top"
        raise NodeNotFoundError(
            f"Store {store!r} (version {version}) has no node {path[reached]!r} under "
            f"{where} in any shard.",
            tuple(path),
            reached,
        )
    return found


def _merged_children(nodes: list[tuple[ShardTree, Node]], after: str | None) -> Iterator[Node]:
    """The children of ``nodes`` (one node of each shard) named after ``after``, merged in
    name order (a name several shards hold comes once from each); each shard's pages are
    read as the merge reaches them."""
    start = "" if after is None else after
    streams = [tree.children(node, start) for tree, node in nodes]
    merged = heapq.merge(*streams, key=lambda node: node.name)
    if after is None:
        return merged
    return itertools.dropwhile(lambda node: node.name == after, merged)


def completions_document(store: QueryStore | None, text: str, cursor: int) -> dict[str, Any]:
    """What the shell's Tab offers with the cursor at ``cursor`` in ``text`` (a shell line:
    ``PATH [| rops OPS] [| ops OPS]`` or a meta-command), node names read from ``store``'s
    version (none without a store).

    Each completion's ``text`` replaces ``text[start:cursor]``; ``display`` is what a list
    shows, ``meta`` what it means. ``cursor`` and ``start`` count characters (code
    points); a cursor outside the text is taken as its nearest end.
    """
    cursor = max(0, min(cursor, len(text)))
    names: NamesLookup = _no_names
    if store is not None:
        version = store.store_version
        names = NodeNames(lambda: version)
    return {
        "completions": [
            {"text": s.text, "display": s.text, "meta": s.meta, "start": cursor + s.start}
            for s in complete(text[:cursor], names)
        ]
    }


def _no_names(parent: str | None, prefix: str) -> list[str]:
    return []


def ops_document() -> dict[str, Any]:
    """The op catalogue, as the shell's ``\\ops`` lists it: each op's name, its help's first
    line (``summary``) and its aliases, by name."""
    return {
        "ops": [
            {"name": op.name, "summary": op.summary, "aliases": list(op.aliases)}
            for op in op_summaries()
        ]
    }


def op_document(name: str) -> dict[str, Any]:
    """One op's help, the text the shell's ``\\ops NAME`` prints.

    Raises:
        OpError: no op (or alias) is called ``name``; it names the closest ones.
    """
    text = op_help(name)
    if text is None:
        close = difflib.get_close_matches(name, sorted(REGISTRY), n=3)
        hint = f"Did you mean {' or '.join(close)}?" if close else "GET /ops lists the ops."
        raise OpError(f"No op called {name!r}", name, 1, 1, hint=hint)
    return {"name": name, "help": text}
