"""The query language's text: the path and ops grammars, the typed path AST, the parsers.

May import: ``treestore`` (its errors).
"""
