"""How long the lesson pages' sentences are, and how long each page takes to read with its equations and figures.

    python scripts/sentence_length.py            # a table: page, sentences, mean words a sentence, over 40, minutes
    python scripts/sentence_length.py --check    # also exit 1 if a lesson page averages more than 25 words a sentence
    python scripts/sentence_length.py --long bcq # list a page's sentences over 40 words, longest first

The lesson pages are the chapters a student reads (:data:`LESSONS`). Their **prose** is what is left of the Markdown
source once code blocks, display math (``$$ ... $$`` and ``{math}`` blocks), tables, headings, HTML comments and the
directive lines of figures, admonitions, theorems and exercises (``:name:``, ``:class:`` ...) are taken out; a
figure's caption, an admonition's text and a theorem's statement stay (they are read as sentences). Inline math and
inline code count as one word each. A sentence ends at ``.``, ``?`` or ``!`` before a space and a capital,
a digit, a bracket or the end of a paragraph, and at the end of a list item; abbreviations such as "e.g." and "et al."
do not end one.

The **reading time** is the book's one model (``minirl.classroom.reading.reading_seconds``, which the chapters' stated
times and ``scripts/word_count.py`` use too): the page's whole source at 130 words a minute, plus each display
equation, figure, table and code block at its own rate, calibrated once on a timed read (see that module).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # minirl from this checkout when not installed
from minirl.classroom.reading import blocks, reading_seconds, words  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ("offline_rl", "methods", "claims", "bcq", "cql", "iql", "stitching", "comparison", "choosing", "after")
LIMIT = 25            # the mean words a sentence a lesson page may have
LONG = 40             # a sentence over this many words is listed by --long

_ABBREV = re.compile(r"\b(e\.g|i\.e|et al|cf|vs|Fig|Eq|Sec|approx|resp)\.", re.I)
_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z0-9(\[*`$\"'])")


def sentences(paragraph: str) -> list[str]:
    text = re.sub(r"\$[^$]+\$", "X", paragraph)                # inline math: one word
    text = re.sub(r"`[^`]+`", "X", text)                        # inline code and roles' targets: one word
    text = re.sub(r"\{[a-z:]+\}X", "X", text)                  # {doc}`...`, {cite}`...`: one word
    text = _ABBREV.sub(lambda m: m.group(1).replace(".", ""), text)
    return [s for s in _END.split(text) if re.search(r"[A-Za-z]", s)]   # a bare "1." of a split number is none


def page_stats(name: str, root: Path = ROOT) -> dict:
    source = (root / "book" / f"{name}.md").read_text(encoding="utf-8")
    parts = blocks(source)
    lengths = [len(s.split()) for p in parts["prose"] for s in sentences(p)]
    seconds = reading_seconds(words(source), parts)
    return {"page": f"book/{name}", "sentences": len(lengths), "words": sum(lengths),
            "mean": sum(lengths) / max(len(lengths), 1), "over_long": sum(n > LONG for n in lengths),
            "equations": parts["equations"], "figures": parts["figures"], "tables": parts["tables"],
            "code": parts["code"], "minutes": seconds / 60}


def long_sentences(name: str, root: Path = ROOT) -> list[tuple[int, str]]:
    parts = blocks((root / "book" / f"{name}.md").read_text(encoding="utf-8"))
    found = [(len(s.split()), s) for p in parts["prose"] for s in sentences(p)]
    return sorted((x for x in found if x[0] > LONG), reverse=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--check", action="store_true", help=f"exit 1 if a lesson page averages over {LIMIT} words")
    ap.add_argument("--long", metavar="PAGE", choices=LESSONS, help="list PAGE's sentences over 40 words")
    args = ap.parse_args(argv)
    if args.long:
        for n, s in long_sentences(args.long):
            print(f"{n:4d}  {s}")
        return 0
    print(f"{'page':<18} {'sentences':>9} {'words':>6} {'mean':>5} {'>40':>4} {'eq':>3} {'fig':>3} {'tab':>3} "
          f"{'code':>4} {'minutes':>7}")
    over = []
    for name in LESSONS:
        r = page_stats(name)
        print(f"{r['page']:<18} {r['sentences']:>9} {r['words']:>6} {r['mean']:>5.1f} {r['over_long']:>4} "
              f"{r['equations']:>3} {r['figures']:>3} {r['tables']:>3} {r['code']:>4} {r['minutes']:>7.0f}")
        if r["mean"] > LIMIT:
            over.append(f"{r['page']} averages {r['mean']:.1f} words a sentence (at most {LIMIT})")
    for line in over:
        print(f"sentence_length: {line}", file=sys.stderr)
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
