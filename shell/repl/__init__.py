"""The interactive shell: the app loop around one PromptSession, what one line does,
completion, highlighting, key bindings, style, toolbar and meta-commands.

May import: ``shell.output``, ``query.syntax``, ``query.ops``, ``query.walk``,
``query.driver``, ``treestore``, ``treestore.store``. Never ``shell`` (the command line
above it).
"""
