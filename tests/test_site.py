"""The built book, checked as a reader meets it (scripts/check_site.py), and the checker caught breaking it.

Three builds, each made once per module: the book as committed (with -W -n: zero warnings), the book with a
repository named by scripts/set_repository.py (launch, download and source buttons), and a copy of the sources with
an unknown citation key.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
from check_site import check_overflow, check_site, find_browser, page_overflow  # noqa: E402
import set_repository  # noqa: E402
import setup_cell  # noqa: E402

TEST_REPOSITORY = "test-owner/minirl-test"   # a name for the test build only: no real repository is implied
STRICT = ["-W", "-n", "--keep-going"]        # as .ci/run and the deploy workflow build


def _build(source: Path, out: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(["jupyter-book", "build", *options, "--path-output", str(out), str(source)],
                          capture_output=True, text=True)


def _warnings(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (result.stdout + result.stderr).splitlines() if "WARNING" in line]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    result = _build(REPO, out, *STRICT)
    assert result.returncode == 0 and not _warnings(result), \
        "\n".join(_warnings(result)) or result.stdout[-3000:] + result.stderr[-3000:]
    return out / "_build" / "html"


@pytest.fixture(scope="module")
def repo_root(tmp_path_factory):
    """A copy of _config.yml and the chapter notebooks, with TEST_REPOSITORY named by set_repository.py."""
    root = tmp_path_factory.mktemp("repo")
    shutil.copy(REPO / "_config.yml", root / "_config.yml")
    (root / "notebooks").mkdir()
    for nb in (REPO / "notebooks").glob("*.ipynb"):
        shutil.copy(nb, root / "notebooks" / nb.name)
    assert set_repository.main([TEST_REPOSITORY, "--root", str(root)]) == 0
    return root


@pytest.fixture(scope="module")
def repo_site(tmp_path_factory, repo_root):
    out = tmp_path_factory.mktemp("book-repo")
    result = _build(REPO, out, *STRICT, "--config", str(repo_root / "_config.yml"))
    assert result.returncode == 0 and not _warnings(result), \
        "\n".join(_warnings(result)) or result.stdout[-3000:] + result.stderr[-3000:]
    return out / "_build" / "html"


def _copy(site, tmp_path) -> Path:
    dst = tmp_path / "html"
    shutil.copytree(site, dst)
    return dst


def test_built_book_has_no_problems(site):
    assert (site / "_static" / "mathjax" / "tex-mml-chtml.js").exists()
    assert check_site(site, REPO) == []
    # as CI calls it: the command line, with a path relative to the working directory
    cli = subprocess.run([sys.executable, str(REPO / "scripts" / "check_site.py"), site.name], cwd=site.parent,
                         capture_output=True, text=True)
    assert cli.returncode == 0 and "no problems found" in cli.stdout, cli.stdout[-2000:]


def test_broken_mathjax_path_is_caught(site, tmp_path):
    html = _copy(site, tmp_path)
    (html / "_static" / "mathjax" / "tex-mml-chtml.js").unlink()
    problems = check_site(html, REPO)
    assert any("book/offline_rl.html" in p and "mathjax/tex-mml-chtml.js" in p and "not in the build" in p
               for p in problems), problems
    cli = subprocess.run([sys.executable, str(REPO / "scripts" / "check_site.py"), str(html)],
                         capture_output=True, text=True)
    assert cli.returncode == 1 and "mathjax/tex-mml-chtml.js, which is not in the build" in cli.stdout


def test_missing_mathjax_fonts_are_caught(site, tmp_path):
    html = _copy(site, tmp_path)
    shutil.rmtree(html / "_static" / "mathjax" / "output" / "chtml" / "fonts")
    problems = "\n".join(check_site(html, REPO))
    assert "has no web fonts beside it" in problems and "MathJax_Main-Regular.woff" in problems, problems


def test_cdn_script_and_raw_tex_and_missing_figure_and_dead_anchor_are_caught(site, tmp_path):
    html = _copy(site, tmp_path)
    page = html / "book" / "offline_rl.html"
    text = page.read_text()
    text = text.replace("../_static/mathjax/tex-mml-chtml.js", "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js", 1)
    text = text.replace("</h1>", "</h1><p>an unrendered $$x^2$$ formula and a {cite}`kumar2020cql` role</p>"
                        "<p>| algo | score |\n| \u2014 | \u2014: |\n| bc | 1.0 |</p>", 1)  # a table left as text
    text = text.replace('href="#', 'href="#no-such-anchor-', 1)
    page.write_text(text)
    nb_page = html / "notebooks" / "01_offline_rl.html"
    nb_page.write_text(nb_page.read_text().replace("<img ", "<span ", 1))
    problems = "\n".join(check_site(html, REPO))
    assert "loads https://cdn.jsdelivr.net" in problems and "from outside the site" in problems
    assert "raw TeX '$$'" in problems
    assert "MyST role '{cite}`' left as text" in problems
    assert "book/offline_rl.html: a Markdown table left as text (not rendered)" in problems
    assert "an anchor that is not on that page" in problems
    assert "notebooks/01_offline_rl.html: shows" in problems


def test_outside_and_missing_fonts_in_stylesheets_are_caught(site, tmp_path):
    html = _copy(site, tmp_path)
    css = html / "_static" / "styles" / "sphinx-book-theme.css"
    assert css.exists(), "the theme's stylesheet moved: update this test"
    css.write_text('@import url("missing-fonts.css");\n'
                   '@font-face{font-family:X;src:url(https://fonts.gstatic.com/s/x.woff2) format("woff2")}\n'
                   + css.read_text())
    problems = "\n".join(check_site(html, REPO))
    assert "sphinx-book-theme.css: stylesheet loads https://fonts.gstatic.com/s/x.woff2 from outside" in problems
    assert "stylesheet loads missing-fonts.css, which is not in the build" in problems


def test_citation_to_something_else_than_a_bibliography_entry_is_caught(site, tmp_path):
    html = _copy(site, tmp_path)
    page = html / "book" / "cql.html"
    text = page.read_text()
    heading_id = re.search(r'<section id="([^"]+)"', text).group(1)
    cite = re.search(r'(<span class="bibtex-citation"[^>]*>[^<]*<a class="reference internal" href=")#([^"]+)"', text)
    assert cite, "no citation in book/cql.html: update this test"
    page.write_text(text.replace(cite.group(0), f'{cite.group(1)}#{heading_id}"', 1))
    problems = "\n".join(check_site(html, REPO))
    assert f"links to #{heading_id}, which is not an entry of a bibliography" in problems, problems


def test_unknown_citation_key_is_caught_by_the_build_and_the_check(tmp_path):
    src = tmp_path / "src"
    (src / "notebooks").mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "book", src / "book")
    for nb in (REPO / "notebooks").glob("*.ipynb"):
        shutil.copy(nb, src / "notebooks" / nb.name)
    cql = src / "book" / "cql.md"
    text = cql.read_text()
    assert "{cite}`fujimoto2019bcq`" in text, "book/cql.md changed: update this test"
    cql.write_text(text.replace("{cite}`fujimoto2019bcq`", "{cite}`nosuchkey2099`", 1))
    result = _build(src, tmp_path / "out", "--keep-going")   # no -W, so the HTML is written despite the warning
    assert any('could not find bibtex key "nosuchkey2099"' in w for w in _warnings(result)), result.stdout[-2000:]
    problems = check_site(tmp_path / "out" / "_build" / "html", src)
    assert any(p.startswith("book/cql.html: citation") and "does not resolve" in p for p in problems), problems


def test_missing_download_link_is_caught(site, tmp_path):
    html = _copy(site, tmp_path)
    page = html / "notebooks" / "03_cql.html"
    text = page.read_text()
    assert 'href="../_sources/notebooks/03_cql.ipynb"' in text   # the .ipynb download button
    page.write_text(text.replace('href="../_sources/notebooks/03_cql.ipynb"', 'href="#"'))
    problems = check_site(html, REPO)
    assert "notebooks/03_cql.html: no link to download its source .ipynb (expected _sources/notebooks/03_cql.ipynb)" \
        in problems, problems


def test_default_book_has_no_repository_buttons(site):
    """No repository is named in the committed _config.yml: no button may point at a guessed one."""
    page = (site / "notebooks" / "03_cql.html").read_text()
    if setup_cell.configured_repository() == "":
        assert "colab.research.google.com" not in page and "mybinder.org" not in page
        assert not re.search(r'href="https://github\.com/', page)
        problems = "\n".join(check_site(site, REPO, repository=TEST_REPOSITORY))
        assert "notebooks/03_cql.html: no Colab link" in problems and "no Binder link" in problems
    else:
        assert check_site(site, REPO, repository=setup_cell.configured_repository()) == []


def test_book_with_a_repository_has_launch_download_and_source_buttons(repo_root, repo_site, tmp_path):
    owner, name = TEST_REPOSITORY.split("/")
    page = (repo_site / "notebooks" / "03_cql.html").read_text()
    links = re.findall(r'href="([^"]+)"', page)
    assert (f"https://colab.research.google.com/github/{owner}/{name}/blob/main/notebooks/03_cql.ipynb"
            in links), [u for u in links if "colab" in u]
    assert (f"https://mybinder.org/v2/gh/{owner}/{name}/main?urlpath=lab/tree/notebooks/03_cql.ipynb"
            in links), [u for u in links if "binder" in u]
    assert "../_sources/notebooks/03_cql.ipynb" in links and (repo_site / "_sources/notebooks/03_cql.ipynb").exists()
    assert f"https://github.com/{owner}/{name}/blob/main/notebooks/03_cql.ipynb?plain=1" in links   # show source
    assert f"https://github.com/{owner}/{name}/edit/main/notebooks/03_cql.ipynb" in links           # edit this page
    assert any(u.startswith(f"https://github.com/{owner}/{name}/issues/new?") for u in links)      # open issue
    assert f'<link rel="canonical" href="https://{owner}.github.io/{name}/notebooks/03_cql.html" />' in page
    assert check_site(repo_site, REPO, repository=TEST_REPOSITORY) == []
    # the notebooks' setup cell names the same repository
    for nb in (repo_root / "notebooks").glob("*.ipynb"):
        assert setup_cell.stale(nb, TEST_REPOSITORY) is None
    # and a build whose launch button lost its way is caught
    html = _copy(repo_site, tmp_path)
    nb_page = html / "notebooks" / "03_cql.html"
    nb_page.write_text(nb_page.read_text().replace("colab.research.google.com/github/", "colab.research.google.com/x/"))
    problems = check_site(html, REPO, repository=TEST_REPOSITORY)
    assert problems == ["notebooks/03_cql.html: no Colab link (expected https://colab.research.google.com/github/"
                        f"{owner}/{name}/blob/main/notebooks/03_cql.ipynb)"], problems


# --- the page that fits: no equation or table wider than its column, measured in headless Chromium -----------------

needs_browser = pytest.mark.skipif(find_browser() is None,
                                   reason="Chromium not installed (apt-get install -y chromium)")


@needs_browser
def test_no_equation_or_table_overflows_its_column_at_1280_px(site):
    problems = check_overflow(site, width=1280)  # the whole book, with no exception
    assert problems == [], "\n".join(problems)


@needs_browser
def test_overflow_option_of_the_command_line(tmp_path):
    """--overflow reports a page whose table is wider than the window, and exits 1."""
    html = tmp_path / "html"
    html.mkdir()
    row = "".join(f"<td>cell{i}{'x' * 40}</td>" for i in range(12))   # no hyphen to break at
    (html / "wide.html").write_text(f'<html><head></head><body><main><table id="t">{row}</table></main></body></html>')
    (html / "narrow.html").write_text('<html><head></head><body><main><table><td>1</td></table></main></body></html>')
    cli = subprocess.run([sys.executable, str(REPO / "scripts" / "check_site.py"), str(html), "--overflow"],
                         capture_output=True, text=True)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "wide.html: table #t" in cli.stdout and "wider than its column at 1280 px" in cli.stdout, cli.stdout
    assert "narrow.html" not in cli.stdout


@needs_browser
def test_overflowing_equation_and_table_are_caught(site, tmp_path):
    """cql.html with a display equation, an inline equation and a table too wide for any laptop, put in on purpose."""
    page = site / "book" / "cql.html"
    text = page.read_text()
    long_sum = " + ".join(f"x_{{{i}}}" for i in range(1, 160))
    wide_row = "".join(f"<td>column{i}{'x' * 40}</td>" for i in range(12))   # no hyphen to break at
    at = text.index("</h1>", text.index('<article class="bd-article"')) + len("</h1>")   # the chapter's title
    broken = (text[:at]
              + f'<div class="math notranslate nohighlight" id="equation-too-wide">\\[{long_sum}\\]</div>'
              + f'<p>inline <span class="math notranslate nohighlight">\\({long_sum}\\)</span></p>'
              + f'<table class="table" id="table-too-wide"><tbody><tr>{wide_row}</tr></tbody></table>'
              + text[at:])
    copy = tmp_path / "cql.html"
    copy.write_text(broken)
    problems = page_overflow(copy, width=1280, base=page.parent)
    kinds = {p["kind"] for p in problems}
    assert {"equation", "inline equation", "table"} <= kinds, problems
    assert any(p["kind"] == "equation" and "#equation-too-wide" in p["where"] and p["excess"] > 100
               for p in problems), problems
    assert any(p["kind"] == "table" and "#table-too-wide" in p["where"] for p in problems), problems
    assert page_overflow(page, width=1280) == []   # the page as built fits
