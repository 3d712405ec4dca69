"""mkdocs hook: the site's home page is the repository's README, so the two never differ.

The README links to the pages as ``docs/NAME.md`` (right on the repository's own page);
on the site they sit beside the home page, so those links lose their ``docs/``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[2] / "README.md"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """The README's text for the home page (``index.md``); other pages as they are."""
    if page.file.src_uri != "index.md":
        return markdown
    return re.sub(r"\]\(docs/", "](", README.read_text(encoding="utf-8"))
