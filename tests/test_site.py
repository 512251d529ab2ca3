"""The built book, checked as a reader meets it (scripts/check_site.py), and the checker caught breaking it."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from check_site import check_site  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    result = subprocess.run(["jupyter-book", "build", "--path-output", str(out), str(REPO)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
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


def test_cdn_script_and_raw_tex_and_missing_figure_and_dead_anchor_are_caught(site, tmp_path):
    html = _copy(site, tmp_path)
    page = html / "book" / "offline_rl.html"
    text = page.read_text()
    text = text.replace("../_static/mathjax/tex-mml-chtml.js", "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js", 1)
    text = text.replace("</h1>", "</h1><p>an unrendered $$x^2$$ formula</p>", 1)
    text = text.replace('href="#', 'href="#no-such-anchor-', 1)
    page.write_text(text)
    nb_page = html / "notebooks" / "01_offline_rl.html"
    nb_page.write_text(nb_page.read_text().replace("<img ", "<span ", 1))
    problems = "\n".join(check_site(html, REPO))
    assert "loads https://cdn.jsdelivr.net" in problems and "from outside the site" in problems
    assert "raw TeX '$$'" in problems
    assert "an anchor that is not on that page" in problems
    assert "notebooks/01_offline_rl.html: shows" in problems
