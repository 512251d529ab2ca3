"""The book's shape: its reading budget (scripts/word_count.py) and the figures of its prose pages
(scripts/make_figures.py). The figures' pixels are not compared; that every figure a page shows exists, is made by
code in the repository, and that each algorithm chapter shows at least two, is."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIGURE = re.compile(r"```\{figure\}\s+(\S+)")
ALGORITHM_CHAPTERS = ("book/bcq", "book/cql", "book/iql", "book/comparison")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


word_count = _load("word_count")


def _prose_pages() -> list[str]:
    pages = []
    for page, sections in word_count.chapters(ROOT):
        pages += [p for p in [page, *sections] if (ROOT / f"{p}.md").exists()]
    return pages


def _figures(page: str) -> list[Path]:
    text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
    return [((ROOT / page).parent / f).resolve() for f in FIGURE.findall(text)]


def test_the_book_keeps_its_reading_budget_and_states_its_reading_times():
    rows, total, problems = word_count.report(ROOT)
    assert total <= word_count.BUDGET, f"{total} words, over the budget of {word_count.BUDGET}"
    assert problems == [], problems
    counted = {r["page"] for r in rows if r["counted"]}
    assert "book/iql" in counted and "notebooks/04_iql" in counted
    assert not any(p.startswith("book/lab") or p == "book/exercises" for p in counted)


def test_word_count_counts_markdown_not_code_or_comments(tmp_path):
    assert word_count.words("one two <!-- not read --> three") == 3
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": [
        {"cell_type": "markdown", "source": ["# A title\n", "two words"]},
        {"cell_type": "code", "source": ["x = 1  # code is not prose"], "outputs": []}]}))
    assert word_count.words(word_count.page_text(tmp_path, "nb")) == 5
    with pytest.raises(FileNotFoundError, match="neither missing.md nor missing.ipynb"):
        word_count.page_text(tmp_path, "missing")
    assert word_count.minutes(60 * 22) == 20 and word_count.minutes(10) == 5  # seconds to the nearest 5 minutes


def test_a_stated_reading_time_that_disagrees_with_the_count_is_reported(tmp_path):
    (tmp_path / "_toc.yml").write_text("root: intro\nchapters:\n  - file: ch\n    sections:\n      - file: nb\n")
    (tmp_path / "intro.md").write_text("# Intro\n\n| chapter | minutes |\n| --- | ---: |\n| 1. {doc}`ch` | 60 |\n")
    (tmp_path / "ch.md").write_text("# Chapter\n\nReading time: about 60 minutes.\n" + "word " * 1300)
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["word " * 1300]}]}))
    _, total, problems = word_count.report(tmp_path)
    assert total == 18 + 1307 + 1300   # the titles, the table, "Reading time: ..." and the words are counted
    assert problems == ["ch.md states 60 minutes; its 2607 words (page and notebooks) at 130 a minute, with its "
                        "equations, figures and tables, give 20",
                        "intro.md: its reading path gives ch 60 minutes; its count gives 20"]


def test_reading_times_count_equations_figures_and_tables_not_only_words(tmp_path):
    """A chapter of 1,300 words (10 minutes of words) with 6 display equations, 12 figures (3 in the page, 9 in its
    notebook's outputs) and two tables (one in the page, one its notebook displays) reads in about 20 minutes: stating 10 is reported. Before, only words counted,
    and 10 passed."""
    (tmp_path / "_toc.yml").write_text("root: intro\nchapters:\n  - file: ch\n    sections:\n      - file: nb\n")
    (tmp_path / "intro.md").write_text("# Intro\n")
    figure = "```{figure} f.png\nA caption.\n```\n\n"
    (tmp_path / "ch.md").write_text("# Chapter\n\nReading time: about 10 minutes.\n\n" + "word " * 600 + "\n\n"
                                    + "$$x = 1$$\n\n" * 6 + figure * 3 + "| a | b |\n| --- | --- |\n| 1 | 2 |\n")
    image = {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": ["<Figure>"]}, "metadata": {}}
    shown = {"output_type": "display_data", "data": {"text/markdown": ["| a | b |\n", "| --- | ---: |\n", "| 1 | 2 |"],
                                                      "text/plain": ["<Markdown>"]}, "metadata": {}}
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["word " * 650]}] + [
        {"cell_type": "code", "source": ["plot()"], "outputs": [image]}] * 9 + [
        {"cell_type": "code", "source": ["display(Markdown(table))"], "outputs": [shown]}]}))
    found = word_count.page_items(tmp_path, "ch"), word_count.page_items(tmp_path, "nb")
    assert found[0] == {"equations": 6, "figures": 3, "tables": 1, "code": 0}
    assert found[1] == {"equations": 0, "figures": 9, "tables": 1, "code": 0}  # a table the notebook displays
    rows, _, problems = word_count.report(tmp_path)
    chapter = next(r for r in rows if r["page"] == "  = chapter ch")
    assert 10 < chapter["words"] / 130 + 1 < 12 and chapter["minutes"] == 20
    assert problems == ["ch.md states 10 minutes; its 1305 words (page and notebooks) at 130 a minute, with its "
                        "equations, figures and tables, give 20"], problems


def test_the_reading_rates_against_the_one_timed_read_on_record():
    """The review behind issue 72 read the intro's reading path as it was at 2b714cd in 4.5 to 5 hours (its words
    alone gave 3.7): the book's rates must give that book a time within 10% of the read's range (they give 5.3 h:
    see minirl/classroom/reading.py on why the rates were not refitted), and words alone must fall short of it."""
    import subprocess
    from minirl.classroom import reading
    commit = reading.CALIBRATION["commit"]
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"]).returncode != 0:
        pytest.skip(f"this clone has no commit {commit} (a shallow clone)")
    minutes, alone = word_count.reading_path(word_count.at_commit(commit))
    low, high = reading.CALIBRATION["timed_hours"]
    assert 0.9 * 60 * low <= minutes <= 1.1 * 60 * high and alone < 60 * low, (minutes, alone)


def test_every_figure_a_page_shows_exists_and_is_made_by_code():
    makers = {p.stem: p.read_text(encoding="utf-8") for p in (ROOT / "scripts" / "figures").glob("*.py")}
    notebooks = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "notebooks").glob("*.ipynb")}
    experiments = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "experiments").glob("*.py")}
    for page in _prose_pages():
        for fig in _figures(page):
            assert fig.is_file(), f"{page}.md shows {fig.relative_to(ROOT)}, which does not exist"
            prefix = next((m for m in makers if fig.stem.startswith(m + "_")), fig.stem.partition("_")[0])
            name = fig.stem[len(prefix) + 1:]
            made = (prefix in makers and name in makers[prefix]) \
                or any(fig.name in text for text in notebooks.values()) \
                or any(fig.name in text for text in experiments.values())
            assert made, f"{fig.relative_to(ROOT)} (shown in {page}.md) is made by no scripts/figures/{prefix}.py, " \
                         f"notebook or experiment"


FIGURE_BLOCK = re.compile(r"^```\{figure\}\s+(\S+)\n((?::[\w-]+:.*\n)*)", re.M)


def figures_without_alt_text(text: str) -> list[str]:
    """The images of the ``{figure}`` directives in ``text`` whose options give no ``:alt:`` text."""
    return [m.group(1) for m in FIGURE_BLOCK.finditer(text)
            if not re.search(r"^:alt:\s*\S", m.group(2), re.M)]


def test_every_figure_of_every_page_has_alt_text():
    """A screen reader reads a figure's ``:alt:``; without it a reader who cannot see the image gets its file name.
    Every page under book/ (lab and instructors' pages included); the first check shows the test can fail."""
    assert figures_without_alt_text("```{figure} a.png\n:name: fig-a\n:width: 80%\n\nA caption.\n```\n"
                                    "```{figure} b.png\n:alt: Two lines.\n\nB.\n```\n") == ["a.png"]
    missing = {str(p.relative_to(ROOT)): figures_without_alt_text(p.read_text(encoding="utf-8"))
               for p in sorted((ROOT / "book").rglob("*.md")) if "_build" not in p.parts}
    missing = {page: figs for page, figs in missing.items() if figs}
    assert not missing, f"figures without :alt: text: {missing}"


def test_every_algorithm_chapter_shows_at_least_two_figures():
    for page in ALGORITHM_CHAPTERS:
        assert len(_figures(page)) >= 2, f"{page}.md shows {len(_figures(page))} figure(s); at least 2 expected"


def test_no_committed_prose_figure_is_left_unshown():
    shown = {f for page in _prose_pages() for f in _figures(page)}
    for png in (ROOT / "book" / "figures").glob("*.png"):
        assert png.resolve() in shown, f"{png.relative_to(ROOT)} is committed but no page shows it"


def test_make_figures_names_an_unknown_page_in_one_line(capsys):
    make_figures = _load("make_figures")
    with pytest.raises(SystemExit) as e:
        make_figures.main(["no-such-page"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "pages: no scripts/figures/no-such-page.py" in err
