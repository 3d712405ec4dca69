"""prompt_toolkit's side of completion: the engine's suggestions, node names cached."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from query.syntax.path_parser import parse_path
from query.walk.names import child_names
from shell.repl.completion import complete
from treestore.errors import TreestoreError
from treestore.store.versions import StoreVersion

__all__ = ["NodeNames", "ShellCompleter"]


class NodeNames:
    """Node names below a path, looked up in the store and cached per store version."""

    def __init__(self, version: Callable[[], StoreVersion], size: int = 256) -> None:
        self.version = version
        self.size = size
        self.cache: OrderedDict[tuple[int, str | None, str], list[str]] = OrderedDict()

    def __call__(self, parent: str | None, prefix: str) -> list[str]:
        """Names of the children of the nodes ``parent`` reaches, starting with ``prefix``."""
        version = self.version()
        key = (version.version, parent, prefix)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        try:
            path = parse_path(parent) if parent else None
            found = child_names(version, path, prefix)
        except (TreestoreError, OSError):
            found = []
        self.cache[key] = found
        if len(self.cache) > self.size:
            self.cache.popitem(last=False)
        return found


class ShellCompleter(Completer):
    """Completes node names, path syntax, properties, op names and op letters."""

    def __init__(self, names: NodeNames) -> None:
        self.names = names

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        """The completions at the cursor."""
        for suggestion in complete(document.text_before_cursor, self.names):
            yield Completion(
                suggestion.text, start_position=suggestion.start, display_meta=suggestion.meta
            )
