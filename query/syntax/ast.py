"""The typed syntax tree of a query path, with a canonical printer.

``str(parse_path(text))`` is the canonical text of a path, and parsing it again
gives an equal tree (positions are not part of equality).
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Bound",
    "Element",
    "ElementKind",
    "Field",
    "Path",
    "Property",
    "quote_name",
    "regex_problem",
    "unique_names",
]

_BARE_NAME = re.compile(r'[^/:,+*"()\[\]|!@%$~;{}\s-][^/:,"()\[\]|;{}$\s]*\Z')
_PROPERTY_WORDS = frozenset({"hits", "nodes", "count"})


def quote_name(name: str) -> str:
    """``name`` as a path writes it: bare when it can be, else a JSON string."""
    if _BARE_NAME.match(name) and name not in _PROPERTY_WORDS and not name.startswith(".."):
        return name
    return json.dumps(name, ensure_ascii=False)


@dataclass(frozen=True)
class Bound:
    """One bound on a property: ``>n``, ``<n`` or ``=n``."""

    op: Literal[">", "<", "="]
    value: int

    def admits(self, number: int) -> bool:
        """Whether ``number`` satisfies this bound."""
        if self.op == ">":
            return number > self.value
        if self.op == "<":
            return number < self.value
        return number == self.value

    def __str__(self) -> str:
        return f"{self.op}{self.value}"


@dataclass(frozen=True)
class Property:
    """A node property (``hits`` or ``nodes``), shown as a column when ``show``.

    Several bounds on one property are AND-ed: ``hits>1<10`` is a range. A shown
    property may name its column: ``:+{h}hits`` (the column is ``h``, not ``hits``).
    """

    name: Literal["hits", "nodes"]
    show: bool = False
    bounds: tuple[Bound, ...] = ()
    label: str | None = None

    def __str__(self) -> str:
        label = "{" + quote_name(self.label) + "}" if self.label is not None else ""
        shown = "+" + label if self.show else ""
        return shown + self.name + "".join(map(str, self.bounds))


def _quote_data_name(name: str) -> str:
    """An attachment's name as a path writes it ("=" and "?" need quotes there)."""
    return json.dumps(name, ensure_ascii=False) if "=" in name or "?" in name else quote_name(name)


@dataclass(frozen=True)
class Field:
    """``$name`` / ``$+name=k1,k2``: a data attachment's value (one per key) on each node.

    Shown (``+``), each value is a column; hidden, a node without the value is
    dropped (kept with nulls under ``~``).
    """

    name: str
    keys: tuple[str, ...] = ()
    show: bool = False

    def __str__(self) -> str:
        keys = "=" + ",".join(map(quote_name, self.keys)) if self.keys else ""
        return "$" + ("+" if self.show else "") + _quote_data_name(self.name) + keys


ElementKind = Literal["all", "names", "prefix", "range", "regex", "up", "data", "reference"]


@dataclass(frozen=True)
class Element:
    """One step of a path.

    ``kind`` says which children it takes: ``all`` (``+`` or ``*``), ``names``
    (the listed children, looked up in the order given), ``prefix`` (``++p``:
    names starting with each prefix), ``range`` (``@from,to``: ``from <= name
    < to``, or to the end with one name), ``regex`` (``|re``: names the whole
    pattern matches; ``!re`` with ``negate``: names no pattern matches) or
    ``up`` (``..``: the node one level up, where the next element continues) or
    ``reference`` (``@@a/b``: the children whose names the node at ``a/b``, from
    the root, has as children, in that node's order) or
    ``data`` (``%name``: virtual nodes of the parent's attachment ``name``, a
    ``key.top``'s keys with their counts as hits, limited to ``data_keys`` when
    given; ``%?``, no name: one node per attachment the parent has).

    ``traps`` (``-name`` in the list, and every name after it): a parent with a
    child of one of these names (whose name one of these patterns matches, for
    ``regex``) gives nothing at all, not even the default; ``-y`` alone takes
    every child of the parents without a ``y``.

    ``flat`` (``;``): one row per parent instead of one per match, each of the
    element's columns holding its matches' values joined by ``,``.

    ``show`` puts the node's name in a column (``+``), called ``label`` when
    given (``+{label}``). ``default`` (``+[text]`` or ``+[text|hits]``) stands in
    for the children when none match (never for ``prefix``, ``range`` and
    ``reference``, as in Hydra). ``skip``/``limit`` take children
    ``skip+1 .. skip+limit`` of each parent (``(N)``, ``(M-N)``; limit 0: all).
    ``null_ok`` (``~``) keeps a node whose property bound fails, with a null
    in that property's column, instead of dropping it.
    """

    kind: ElementKind
    names: tuple[str, ...] = ()
    show: bool = False
    properties: tuple[Property, ...] = ()
    negate: bool = False
    label: str | None = None
    default: str | None = None
    default_hits: int | None = None
    skip: int = 0
    limit: int = 0
    null_ok: bool = False
    data_keys: tuple[str, ...] = ()
    fields: tuple[Field, ...] = ()
    flat: bool = False
    traps: tuple[str, ...] = ()
    line: int = field(default=1, compare=False)
    column: int = field(default=1, compare=False)

    @property
    def stand_in(self) -> str | None:
        """The name of the stand-in node when nothing matches: ``default``, except for
        prefixes, ranges and references, which (as in Hydra) never take a default."""
        return None if self.kind in ("prefix", "range", "reference") else self.default

    def _default(self) -> str:
        if self.default is None:
            return ""
        hits = "" if self.default_hits is None else f"|{self.default_hits}"
        return f"[{quote_name(self.default)}{hits}]"

    def _decorations(self) -> str:
        # An attachment's default is written after its "%", as Hydra does (+%[d]top).
        text = self._default() if self.kind != "data" else ""
        if self.label is not None:
            text += "{" + quote_name(self.label) + "}"
        return text

    def __str__(self) -> str:
        text = ""
        if self.limit or self.skip:
            text += f"({self.skip}-{self.limit})" if self.skip else f"({self.limit})"
        if self.null_ok:
            text += "~"
        names = ",".join(map(quote_name, self.names))
        if self.traps:
            names += (
                ("," if names or self.show else "") + "-" + ",".join(map(quote_name, self.traps))
            )
        shown = "+" + self._decorations() if self.show else ""
        if self.kind == "up":
            text += ("+" if self.show else "") + ".."
        elif self.kind == "regex":
            text += ("!" if self.negate else "|") + shown + names
        elif self.kind == "all":
            text += (shown or ("" if self.traps else "*")) + names
        elif self.kind == "prefix":
            text += shown + "+" + names
        elif self.kind == "range":
            text += shown + "@" + names
        elif self.kind == "reference":
            text += shown + "@@" + quote_name("/".join(self.names))
        elif self.kind == "data":
            keys = "=" + ",".join(map(quote_name, self.data_keys)) if self.data_keys else ""
            default = self._default() if self.show else ""
            text += (
                shown
                + "%"
                + default
                + (_quote_data_name(self.names[0]) + keys if self.names else "?")
            )
        else:
            text += shown + names
        if self.flat:
            text += ";"
        if self.properties:
            text += ":" + ",".join(map(str, self.properties))
        return text + "".join(map(str, self.fields))


@dataclass(frozen=True)
class Path:
    """A whole path: its elements, applied from the tree's internal root."""

    elements: tuple[Element, ...]

    def __str__(self) -> str:
        return "/".join(map(str, self.elements))

    def labels(self) -> tuple[str, ...]:
        """The name of each column the path shows, unique (a repeated name gets ``2``, ``3``...).

        An element's ``{label}``, else ``name`` (an attachment's virtual nodes: the
        attachment's name); a property's ``{label}`` (``:+{h}hits``), else ``hits`` or
        ``nodes``; an attachment's value ``$+name``, or ``name.key`` per key.
        """
        return unique_names([name for name, _ in self._columns()])

    def column_types(self) -> tuple[str | None, ...]:
        """Each shown column's type: ``string`` for names, ``int64`` for properties, ``None``
        for an attachment's value (its type depends on the attachment)."""
        return tuple(kind for _, kind in self._columns())

    def name_columns(self) -> dict[str, int]:
        """The columns that show an element's node names, by column name (as
        :meth:`labels` names them): the element's index in :attr:`elements`."""
        owners = [owner for _, _, owner in self._owned_columns()]
        return {
            label: owner
            for label, owner in zip(self.labels(), owners, strict=True)
            if owner is not None
        }

    def _columns(self) -> list[tuple[str, str | None]]:
        return [(name, kind) for name, kind, _ in self._owned_columns()]

    def _owned_columns(self) -> list[tuple[str, str | None, int | None]]:
        """Each shown column: its name, its type, and the index of the element whose node
        names it shows (``None`` for a property's or an attachment's column)."""
        columns: list[tuple[str, str | None, int | None]] = []
        for index, element in enumerate(self.elements):
            if element.show:
                columns.append((element.label or _element_name(element), "string", index))
            for prop in element.properties:
                if prop.show:
                    columns.append((prop.label or prop.name, "int64", None))
            for data_field in element.fields:
                if data_field.show and data_field.keys:
                    columns.extend(
                        (f"{data_field.name}.{key}", None, None) for key in data_field.keys
                    )
                elif data_field.show:
                    columns.append((data_field.name, None, None))
        return columns


def _element_name(element: Element) -> str:
    if element.kind == "data":
        return element.names[0] if element.names else "attachment"
    return "name"


def unique_names(names: list[str]) -> tuple[str, ...]:
    """``names`` with a repeated one numbered: ``name``, ``name2``, ``name3``..."""
    seen: dict[str, int] = {}
    out: list[str] = []
    taken = set(names)
    for name in names:
        count = seen.get(name, 0) + 1
        seen[name] = count
        candidate = name if count == 1 else f"{name}{count}"
        while count > 1 and candidate in taken:
            count += 1
            seen[name] = count
            candidate = f"{name}{count}"
        taken.add(candidate)
        out.append(candidate)
    return tuple(out)


def regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a regular expression Python can compile, or ``None``.

    >>> regex_problem("a{99999999999}")
    'the repetition number is too large'
    """
    try:
        with warnings.catch_warnings():  # "possible nested set": Python's own caution
            warnings.simplefilter("ignore")
            re.compile(pattern)
    except re.error as exc:
        return exc.msg
    except OverflowError as exc:  # a repetition count past what re can hold
        return str(exc)
    except RecursionError:
        return "its groups are nested too deeply"
    return None
