"""A job's input files: finding them, and telling which of them a store has loaded.

Lives here: listing a source's files (``files``: a file, a folder or a glob, local or
at a URI; each file with its source's root and its path relative to that root; broken
and looping symbolic links reported, never skipped without a word) and their identity
(``identity``: a loaded file is known by its source, its path relative to the source's
root, its size, its modification time and a content fingerprint, so a store and its
inputs can move, be copied or be mounted elsewhere without a file being read twice).

May import: ``loaders.job``, ``treestore``.
"""
