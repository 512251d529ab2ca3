"""How much a page asks a reader to read: one count for the book's reading budget (``scripts/word_count.py``) and
the course table's reading times (:mod:`minirl.classroom.release`).

A prose page counts as its whole Markdown source (math, directives and code blocks included: a theorem or a Key
equations box is read too), HTML comments left out; a notebook as the text of its Markdown cells (its code and outputs
are not read as prose)."""
from __future__ import annotations

import json
import re
from pathlib import Path

WORDS_PER_MINUTE = 130  # for mathematical text
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def words(markdown: str) -> int:
    """Whitespace-separated tokens, HTML comments left out."""
    return len(_COMMENT.sub(" ", markdown).split())


def notebook_markdown(path: str | Path) -> str:
    """The text of a notebook's Markdown cells, one after the other."""
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def page_text(root: str | Path, name: str) -> str:
    """The prose of one table-of-contents entry (``name`` without its suffix): a Markdown page's source, or a
    notebook's Markdown cells."""
    md, nb = Path(root) / f"{name}.md", Path(root) / f"{name}.ipynb"
    if md.exists():
        return md.read_text(encoding="utf-8")
    if nb.exists():
        return notebook_markdown(nb)
    raise FileNotFoundError(f"_toc.yml lists {name!r} but neither {name}.md nor {name}.ipynb exists")


def minutes(n_words: int) -> int:
    """Reading time in minutes, to the nearest 5 (at least 5)."""
    return max(5, 5 * round(n_words / WORDS_PER_MINUTE / 5))
