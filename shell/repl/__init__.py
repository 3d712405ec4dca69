"""The interactive shell: the app loop around one PromptSession, what one line does,
completion, highlighting, key bindings, style, toolbar and meta-commands.

May import: ``shell.formats``, ``query``, ``treestore``; never ``shell.cli``.
"""
