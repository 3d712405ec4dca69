"""prompt_toolkit's side of completion: the engine's suggestions as prompt_toolkit's
completions (node names looked up and cached by :class:`~shell.repl.completion.NodeNames`)."""

from __future__ import annotations

from collections.abc import Iterable

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from shell.repl.completion import NodeNames, complete

__all__ = ["NodeNames", "ShellCompleter"]


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
