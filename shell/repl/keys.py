"""Key bindings beyond prompt_toolkit's Emacs defaults (Ctrl-R searches history there)."""

from __future__ import annotations

from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

__all__ = ["key_bindings"]


def key_bindings() -> KeyBindings:
    """Ctrl-Space opens the completion menu; Escape closes it."""
    bindings = KeyBindings()

    @bindings.add("c-space")
    def _open_completions(event: KeyPressEvent) -> None:
        buffer = event.app.current_buffer
        if buffer.complete_state:
            buffer.complete_next()
        else:
            buffer.start_completion(select_first=False)

    return bindings
