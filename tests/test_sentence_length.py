"""scripts/sentence_length.py: what counts as a lesson page's prose and where its sentences end."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("sentence_length", ROOT / "scripts" / "sentence_length.py")
sl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sl)

PAGE = """# A title that is not prose

One short sentence here. A second one, with $Q(s, a)$ inline math, e.g. this, counts as one word each.

$$
V(s) = \\max_a Q(s, a)
$$

| a | table |
| --- | --- |
| 1 | 2 |

```{figure} figures/x.png
:name: fig-x
:alt: not read as prose

A caption is read.
```

```python
code = "is not prose. At all."
```

- a list item is its own sentence
- and so is this one
"""


def test_prose_sentences_and_the_blocks_around_them(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.md").write_text(PAGE)
    r = sl.page_stats("page", tmp_path)
    assert (r["equations"], r["figures"], r["tables"], r["code"]) == (1, 1, 1, 1)
    # "One short sentence here." 4; "A second one, with X inline math, eg this, counts as one word each." 14 (the
    # abbreviation ends no sentence); "A caption is read." 4; the two list items 7 and 5
    assert r["sentences"] == 5 and r["words"] == 4 + 14 + 4 + 7 + 5
    assert r["minutes"] > r["words"] / 130  # equations, figures, tables and code take time too


def test_every_lesson_page_is_measured():
    for name in sl.LESSONS:
        r = sl.page_stats(name)
        assert r["sentences"] > 20 and r["mean"] > 5
