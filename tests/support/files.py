"""Small trees of files written from a dict, for tests that build a tiny package or layout."""

from __future__ import annotations

from pathlib import Path

__all__ = ["write_files"]


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write each ``relative path -> text`` of ``files`` under ``root`` (folders made as
    needed); return ``root``."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
