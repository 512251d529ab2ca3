"""The book's reading budget: words per page, the total, and each chapter's stated reading time.

    python scripts/word_count.py            # a table: page, words, minutes; the total against the budget
    python scripts/word_count.py --check    # also exit 1 if the total is over the budget or a chapter's stated
                                            # reading time disagrees with its count

What is counted (``minirl.classroom.reading``, which the course table's reading times use too): every page the table
of contents (`_toc.yml`) lists, a prose page as its whole Markdown source (math, directives and code blocks included,
HTML comments left out), a notebook as the text of its Markdown cells (its code and outputs are not read as prose). Three kinds of page are listed but not counted, because they are not a student's required reading:
the exercises page (``book/exercises``) and the laboratory appendix (``book/lab`` and the pages under it), which
holds the per-seed numbers, machines and investigations behind the chapters' results. The instructors' guide
(``book/instructors``: releasing, grading, the grader's threat model) is read by the course's teachers, not by its
students, so it is not counted either (from 1 December 2026; the course page, which students read, is).

A chapter is a prose page with its notebooks (the toc's sections under it). Its reading time is its words at
WORDS_PER_MINUTE, for mathematical text, plus its display equations, figures, tables and code blocks at their own
rates (``minirl.classroom.reading.reading_seconds``: a notebook's figures and tables are its outputs'), rounded to
the nearest 5 minutes; a chapter states it at its top as
``Reading time: about N minutes`` and ``--check`` fails if the stated N is more than 5 minutes away from the count;
the same for the minutes in the root page's reading path (a table row naming the chapter with {doc} and ending
in its minutes).

    python scripts/word_count.py --at 2b714cd   # the same count on the book as it was at a commit (git archive)
"""
from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import yaml

from minirl.classroom.reading import WORDS_PER_MINUTE, page_items, page_text, reading_seconds, words

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 35_000
NOT_COUNTED = ("book/exercises", "book/lab", "book/instructors")   # left out: that path, or a page under it
STATED = re.compile(r"Reading time:\**\s*about\s+(\d+)\s+minutes")
INTRO_ROW = re.compile(r"^\|[^|]*\{doc\}`([\w/]+)`[^\n]*\|\s*(\d+)\s*\|\s*$", re.M)  # the intro's reading path


def minutes(seconds: float) -> int:
    """A reading time in minutes, to the nearest 5 (at least 5)."""
    return max(5, 5 * round(seconds / 300))


def counted(name: str) -> bool:
    return not any(name == p or name.startswith(p + "/") for p in NOT_COUNTED)


def chapters(root: Path) -> list[tuple[str, list[str]]]:
    """(page, [its notebooks and other sections]) for every toc entry, the root page first."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    out = [(toc["root"], [])]

    def sections(entry):
        names = []
        for s in entry.get("sections", []) or []:
            names.append(s["file"])
            names.extend(sections(s))
        return names

    for entry in toc.get("chapters", []):
        out.append((entry["file"], sections(entry)))
    return out


def report(root: Path = ROOT) -> tuple[list[dict], int, list[str]]:
    """Rows per page, the counted total, and the problems --check reports."""
    rows, total, problems = [], 0, []
    for page, secs in chapters(root):
        chapter_words, chapter_seconds = 0, 0.0
        for name in [page, *secs]:
            n = words(page_text(root, name))
            is_counted = counted(name)
            seconds = reading_seconds(n, page_items(root, name))
            rows.append({"page": name, "words": n, "counted": is_counted, "chapter": page, "seconds": seconds})
            if is_counted:
                total += n
                chapter_words += n
                chapter_seconds += seconds
        if not counted(page):
            continue
        m = STATED.search(page_text(root, page))
        if secs and m is None:
            problems.append(f"{page}.md: no 'Reading time: about N minutes' line (its count gives "
                            f"{minutes(chapter_seconds)} minutes for {chapter_words} words with its equations, "
                            "figures and tables)")
        if m is not None and abs(int(m.group(1)) - minutes(chapter_seconds)) > 5:
            problems.append(f"{page}.md states {m.group(1)} minutes; its {chapter_words} words (page and notebooks) "
                            f"at {WORDS_PER_MINUTE} a minute, with its equations, figures and tables, give "
                            f"{minutes(chapter_seconds)}")
        rows.append({"page": f"  = chapter {page}", "words": chapter_words, "counted": None, "chapter": page,
                     "minutes": minutes(chapter_seconds), "seconds": chapter_seconds})
    # the root page's reading path: | chapter {doc}`page` | ... | minutes |, each row against its chapter's count
    per_chapter = {r["chapter"]: r["minutes"] for r in rows if r["counted"] is None}
    root_page = chapters(root)[0][0]
    for name, stated in INTRO_ROW.findall(page_text(root, root_page)):
        page = str((Path(root_page).parent / name).as_posix())
        if page not in per_chapter:
            problems.append(f"{root_page}.md: its reading path names {{doc}}`{name}`, which is no chapter in _toc.yml")
        elif abs(int(stated) - per_chapter[page]) > 5:
            problems.append(f"{root_page}.md: its reading path gives {page} {stated} minutes; its count gives "
                            f"{per_chapter[page]}")
    if total > BUDGET:
        problems.append(f"the book has {total} words; the budget is {BUDGET}")
    return rows, total, problems


def at_commit(commit: str) -> Path:
    """The book's files (pages, notebooks, ``_toc.yml``) as they were at ``commit``, in a temporary folder."""
    tmp = Path(tempfile.mkdtemp(prefix=f"word_count-{commit}-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "_toc.yml", "book", "notebooks"],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"word_count: --at {commit}: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tmp, filter="data")
    return tmp


def reading_path(root: Path = ROOT) -> tuple[float, float]:
    """``(minutes, minutes of words alone)`` of the root page's reading path: the chapters its table names, with
    their notebooks."""
    path = {str((Path(chapters(root)[0][0]).parent / n).as_posix()) for n, _ in
            INTRO_ROW.findall(page_text(root, chapters(root)[0][0]))}
    seconds = words_only = 0.0
    for page, secs in chapters(root):
        for name in [page, *secs] if page in path else []:
            n = words(page_text(root, name))
            seconds += reading_seconds(n, page_items(root, name))
            words_only += 60 * n / WORDS_PER_MINUTE
    return seconds / 60, words_only / 60


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the total is over budget or a stated reading time disagrees with the count")
    parser.add_argument("--at", metavar="COMMIT", help="count the book as it was at COMMIT (git archive)")
    args = parser.parse_args(argv)
    root = at_commit(args.at) if args.at else ROOT
    rows, total, problems = report(root)
    print(f"{'page':<44} {'words':>7}  note")
    for r in rows:
        if r["counted"] is None:
            print(f"{r['page']:<44} {r['words']:>7}  about {r['minutes']} min")
        else:
            print(f"{r['page']:<44} {r['words']:>7}  {'' if r['counted'] else 'not counted (not required reading)'}")
    hours = sum(r["seconds"] for r in rows if r["counted"]) / 3600
    print(f"{'total (counted pages)':<44} {total:>7}  budget {BUDGET}; reading time {hours:.1f} h "
          f"({total / WORDS_PER_MINUTE / 60:.1f} h of words alone)")
    path, alone = reading_path(root)
    print(f"{'the intro reading path':<44} {'':>7}  reading time {path / 60:.1f} h ({alone / 60:.1f} h of words alone)")
    for p in problems:
        print(f"word_count: {p}", file=sys.stderr)
    return 1 if (args.check and problems) else 0


if __name__ == "__main__":
    sys.exit(main())
