"""Files a follower could not read at all: reported, skipped, and read again only once
they change.

A file that cannot be read (a broken compressed file, a Parquet file that is not one)
fails a batch load, which must not lose it. A follower cannot wait for it: it names
the file in a warning, loads the micro-batch without it and keeps it in
``stream/unreadable.json`` (path, source, size, modification time, the error). Spark's
file stream never offers a file twice, so each micro-batch looks at the kept files
itself and hands any whose size or modification time changed to the load again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loaders.load.inputs import InputFile

__all__ = ["SetAside", "unreadable_file"]


def unreadable_file(
    listed: list[list[InputFile]], error: BaseException
) -> tuple[int, InputFile, str] | None:
    """The listed file that ``error`` says cannot be read, if any: its source's index, the
    file and the reader's words (``cannot be read as tsv (...)``)."""
    text = str(error)
    for index, files in enumerate(listed):
        for input_file in files:
            said = f"input file {input_file.path} "
            if said + "cannot be read" in text:
                reason = text[text.index(said) + len(said) :].split("; fix or remove it")[0]
                return index, input_file, reason
    return None


@dataclass
class SetAside:
    """The unreadable files a follower skipped, kept in a file of its stream folder
    (:data:`~treestore.store.layout.STREAM_UNREADABLE`)."""

    path: Path
    files: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> SetAside:
        """The files kept in the file ``path`` (none if it keeps none)."""
        files = json.loads(path.read_text()) if path.exists() else {}
        return cls(path, files)

    def add(self, source: int, input_file: InputFile, error: str) -> None:
        """Keep ``input_file`` of source ``source`` aside (saved at once)."""
        self.files[input_file.path] = {
            "source": source,
            "size": input_file.size,
            "mtime_ns": input_file.mtime_ns,
            "error": error,
        }
        self._save()

    def changed(self) -> list[tuple[int, InputFile]]:
        """The kept files that changed since (each with its source's index), no longer
        kept; a kept file that is gone is forgotten."""
        found, kept = [], {}
        for path, entry in self.files.items():
            if not Path(path).is_file():
                continue
            now = InputFile.at(Path(path))
            if (now.size, now.mtime_ns) != (entry["size"], entry["mtime_ns"]):
                found.append((int(entry["source"]), now))
            else:
                kept[path] = entry
        if len(kept) != len(self.files):
            self.files = kept
            self._save()
        return found

    def _save(self) -> None:
        aside = self.path.with_suffix(".tmp")
        aside.write_text(json.dumps(self.files, indent=1, sort_keys=True))
        os.replace(aside, self.path)
