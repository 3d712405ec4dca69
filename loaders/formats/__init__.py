"""Input formats: reading one input file's records with pyarrow, inside a Spark task.

csv and tsv (pyarrow's streaming CSV reader), json lines (pyarrow's JSON reader, line
by line only for a chunk that holds a bad line) and Parquet; every value as text, each
record with its physical line number, and every record that cannot be read (wrong
number of cells, not UTF-8 text, not JSON, a csv quote that runs past the end of its
line, a line longer than the most one may hold) set aside with its line and why. The load's
``loaders.formats.readers`` picks the reader by format and names the file in any failure.

May import: ``treestore``.
"""
