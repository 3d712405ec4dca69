"""Running a path over one tree: the rows it selects, in tree order.

Each element applies under every node the previous element produced (``..``
goes back to the node one level up). ``+`` and ``*`` take every child in
UTF-8 byte order of names; a name list looks its names up in the order given;
``++p`` takes the names starting with ``p`` and ``@from,to`` the names from
``from`` up to (not including) ``to``, reading only the pages of that range;
``|re`` and ``!re`` test every child's whole name; ``@@a/b`` takes the children
named like those of the node ``a/b``. A node is kept when every
bound of every property admits it (with ``~``, a failing property is kept as a
null). Per parent, ``(M-N)`` skips M children and keeps the next N that pass.
An element with ``+[default]`` yields one stand-in node (no children) when no
child matches (not a prefix, range or @@, as in Hydra). A trap (``-name``) prunes a
parent that has such a child. ``%name`` yields the virtual
nodes of the parent's attachment ``name`` (a ``key.top``'s keys, hits = their
counts); ``$name=key`` reads an attachment's value. Shown names, properties and
fields become the row's columns.
A flat last element (``;``) gives one row per parent: each of its columns holds
the values of all its matches, joined by ``,``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

from query.ops.base import Value
from query.syntax.ast import Element, Path
from treestore.attachments import read_attachment, top_entries
from treestore.storage.tree import Node, ShardTree

__all__ = ["STAND_IN_ID", "Value", "matching_nodes", "prefix_range", "run_path"]

STAND_IN_ID = -1


def prefix_range(prefix: str) -> tuple[str, str | None]:
    """The name range ``[start, stop)`` holding exactly the names that start with ``prefix``."""
    if not prefix:
        return "", None
    return prefix, prefix + "\U0010ffff"


@cache
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def _children(tree: ShardTree, element: Element, node: Node) -> Iterator[Node]:
    if node.id == STAND_IN_ID:  # a stand-in has no children (its id is no stored node's)
        return
    if element.kind == "all":
        yield from tree.children(node)
    elif element.kind == "names":
        for name in element.names:
            child = tree.child(node, name)
            if child is not None:
                yield child
    elif element.kind == "prefix":
        for prefix in element.names:
            yield from tree.children(node, *prefix_range(prefix))
    elif element.kind == "range":
        stop = element.names[1] if len(element.names) > 1 else None
        yield from tree.children(node, element.names[0], stop)
    elif element.kind == "data":
        yield from _data_nodes(element, node)
    elif element.kind == "reference":
        yield from _referenced(tree, element, node)
    else:  # regex
        patterns = [_pattern(p) for p in element.names]
        for child in tree.children(node):
            matched = any(p.fullmatch(child.name) for p in patterns)
            if matched != element.negate:
                yield child


def _referenced(tree: ShardTree, element: Element, node: Node) -> Iterator[Node]:
    """The children of ``node`` named like the children of the node at ``element.names``
    (from the root), in that node's order."""
    reference: Node | None = tree.root
    for name in element.names:
        reference = tree.child(reference, name) if reference is not None else None
    for model in tree.children(reference) if reference is not None else ():
        child = tree.child(node, model.name)
        if child is not None:
            yield child


def _data_nodes(element: Element, node: Node) -> Iterator[Node]:
    """Virtual nodes of an attachment: a key.top's keys (hits: their counts), or (``%?``)
    the attachments a node has. They have no children."""
    data = node.data or {}
    if not element.names:
        for name in sorted(data):
            yield Node((STAND_IN_ID, name), STAND_IN_ID, 0, 0)
        return
    found = data.get(element.names[0])
    if found is None or found[0] != "key.top":
        return
    entries = top_entries(found[1])
    if element.data_keys:
        counts = {key: count for key, count, _error in entries}
        entries = [(k, counts[k], 0) for k in element.data_keys if k in counts]
    for key, count, _error in entries:
        yield Node((STAND_IN_ID, key), STAND_IN_ID, count, 0)


def _trapped(tree: ShardTree, element: Element, node: Node) -> bool:
    """Whether ``node`` has a child that one of the element's traps names (or matches)."""
    if node.id == STAND_IN_ID:
        return False
    if element.kind != "regex":
        return any(tree.child(node, name) is not None for name in element.traps)
    patterns = [_pattern(p) for p in element.traps]
    return any(p.fullmatch(child.name) for child in tree.children(node) for p in patterns)


def _candidates(tree: ShardTree, element: Element, node: Node) -> Iterator[Node]:
    if element.traps and _trapped(tree, element, node):
        return  # the whole parent is pruned: no children, no default
    found = False
    for child in _children(tree, element, node):
        found = True
        yield child
    if not found and element.stand_in is not None:
        yield Node((STAND_IN_ID, element.stand_in), STAND_IN_ID, element.default_hits or 0, 0)


def _columns(element: Element, node: Node) -> tuple[Value, ...] | None:
    """The columns ``node`` adds to a row, or ``None`` when a bound rejects it."""
    shown: list[Value] = [node.name] if element.show else []
    for prop in element.properties:
        value: Value = node.hits if prop.name == "hits" else node.child_count
        if not all(bound.admits(value) for bound in prop.bounds):  # type: ignore[arg-type]
            if not element.null_ok:
                return None
            value = None
        if prop.show:
            shown.append(value)
    for data_field in element.fields:
        values = [
            read_attachment(node.data, data_field.name, k) for k in data_field.keys or (None,)
        ]
        if not data_field.show:
            if any(v is None for v in values) and not element.null_ok:
                return None
            continue
        shown.extend(values)
    return tuple(shown)


def _matches(
    tree: ShardTree, element: Element, stack: list[Node]
) -> Iterator[tuple[Node, tuple[Value, ...]]]:
    """The nodes ``element`` takes under the last node of ``stack``, with their columns."""
    if element.kind == "up":
        if len(stack) >= 2:
            above = stack[-2]
            yield above, ((above.name,) if element.show else ())
        return
    skipped = taken = 0
    for child in _candidates(tree, element, stack[-1]):
        if skipped < element.skip:
            skipped += 1
            continue
        added = _columns(element, child)
        if added is None:
            continue
        yield child, added
        taken += 1
        if element.limit and taken >= element.limit:
            return


def _flattened(rows: list[tuple[Value, ...]]) -> tuple[Value, ...]:
    """A flat element's columns: each column's values over all matches, joined by ","."""
    joined: list[Value] = []
    for values in zip(*rows, strict=True):
        present = [str(v) for v in values if v is not None]
        joined.append(",".join(present) if present else None)
    return tuple(joined)


def _walk(tree: ShardTree, path: Path) -> Iterator[tuple[Node, tuple[Value, ...]]]:
    """Every node the last element reaches, with the row of columns that led there.

    Depth first, in tree order, with a stack of its own (a path of any length runs: a
    level deeper is an entry more in ``levels``, not a call deeper).
    """
    elements = path.elements
    if not elements:
        return
    last = len(elements) - 1
    stack = [tree.root]
    # one entry per element being walked: the row that led to it, and its matches
    levels: list[tuple[tuple[Value, ...], Iterator[tuple[Node, tuple[Value, ...]]]]]
    levels = [((), _matches(tree, elements[0], stack))]
    while levels:
        depth = len(levels) - 1
        row, matches = levels[-1]
        if depth < last:
            match = next(matches, None)
            if match is not None:
                node, added = match
                stack.append(node)
                levels.append((row + added, _matches(tree, elements[depth + 1], stack)))
                continue
        elif elements[depth].flat:
            found = list(matches)
            if found:
                yield found[0][0], row + _flattened([added for _, added in found])
        else:
            for node, added in matches:
                yield node, row + added
        levels.pop()
        stack.pop()  # the node this level walked under (the root, at the end)


def run_path(tree: ShardTree, path: Path) -> Iterator[tuple[Value, ...]]:
    """Yield one row per match of ``path`` in ``tree``, starting under its internal root."""
    for _node, row in _walk(tree, path):
        yield row


def matching_nodes(tree: ShardTree, path: Path) -> Iterator[Node]:
    """The nodes the last element of ``path`` reaches (bounds applied), in tree order."""
    for node, _row in _walk(tree, path):
        yield node
