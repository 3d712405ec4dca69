"""The shell's colours, by token class (see :mod:`shell.repl.lexer`)."""

from __future__ import annotations

from prompt_toolkit.styles import Style

__all__ = ["STYLE"]

STYLE = Style.from_dict(
    {
        "sep": "#888888",
        "syntax": "#d78700",
        "wild": "#d78700 bold",
        "prop": "#5f87d7",
        "bound": "#af5fd7",
        "string": "#5faf5f",
        "name": "",
        "punct": "#888888",
        "keyword": "#d75f5f bold",
        "op": "#00afaf bold",
        "arg": "#5faf5f",
        "meta": "#d78700 bold",
        "prompt": "#00afaf",
        "bottom-toolbar": "#444444 bg:#dddddd",
    }
)
