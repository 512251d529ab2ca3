"""Check a built book the way a reader meets it, offline.

    python scripts/check_site.py _build/html
    python scripts/check_site.py _build/html --repository OWNER/NAME [--branch main]   # the published build

Reports, one line per problem (exit status 1 if any):
- a page that loads a script, stylesheet, font or image from outside the site (math and layout must work offline),
  or a local one that does not exist in the build (e.g. a broken MathJax path); the same for the fonts and
  ``@import``s of the site's stylesheets, and for the web fonts that MathJax loads next to its script;
- a page with math but no MathJax script;
- raw TeX delimiters left in the text of a page (``$$``, ``\\[``, ``\\(``, a ``$...$`` pair), i.e. math that was not
  turned into a math element;
- a Markdown table left as text (a ``| --- |`` rule in a paragraph), e.g. a notebook's ``display(Markdown(table))``
  output that the Markdown renderer did not turn into a table;
- a notebook page that shows fewer figures than its notebook has image outputs;
- an internal link whose target page or anchor does not exist (citations, cross-references, the chapter map);
- a citation that does not resolve: sphinxcontrib-bibtex renders an unknown key as an empty ``[]`` with no link,
  and a citation must link to an entry of a bibliography; a MyST role left as text (``{cite}`key```);
- a page without a link to download its source (``.ipynb`` for a notebook page) from the build;
- with ``--repository OWNER/NAME``: a notebook page without its Colab and Binder launch links, or a page without
  its "show source" link on GitHub (sphinx-book-theme shows them only when ``repository.url`` is set).
With ``--overflow`` (needs Chromium) it also opens every content page in headless Chromium at a laptop's width
(1280 px by default, ``--width``) once MathJax has typeset it, and reports every display equation, inline equation
or table that does not fit its column: one that scrolls sideways inside its box or sticks out of the article.

tests/test_site.py runs it on a fresh build and on builds broken on purpose.
"""
from __future__ import annotations

import argparse
import html as html_module
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

SKIP_TEXT_TAGS = {"script", "style", "pre", "code", "kbd", "samp", "textarea"}
RAW_TEX = re.compile(r"\$\$|\\\[|\\\]|\\\(|\\\)|(?<![\w$])\$[^$\s][^$]*\$(?![\w$])")
# the rule under a Markdown table's header, left as text; Sphinx's smartquotes turn its --- into an em dash
RAW_TABLE = re.compile(r"\|\s*:?(?:-{3,}|\u2014|\u2013-?):?\s*\|")
RAW_ROLE = re.compile(r"\{[a-z]+(?::[a-z]+)*\}`")   # {cite}`key`, {doc}`page`, {cite:t}`key` left as text
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)['"]?\s*\)""")
CSS_IMPORT = re.compile(r"""@import\s+(?:url\(\s*)?['"]?([^'")\s;]+)""")
FONT_FACE = re.compile(r"@font-face\s*\{[^}]*\}", re.S)
# MathJax 3's combined component loads its CHTML web fonts from this folder next to the script, at run time
MATHJAX_FONT = "output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff"
COLAB_URL = "https://colab.research.google.com"
BINDER_URL = "https://mybinder.org"


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.resources: list[tuple[str, str]] = []   # (tag, url) loaded by the page
        self.links: list[str] = []                   # <a href>
        self.ids: set[str] = set()
        self.text: list[str] = []
        self.images = 0
        self.has_math = False
        self.citations: list[dict] = []              # <span class="bibtex-citation">: its id, links, preceding text
        self.citation_ids: set[str] = set()          # ids of bibliography entries on this page
        self._skip = 0           # depth inside tags whose text is not prose
        self._math = 0           # depth inside math elements (rendered by MathJax from their text)
        self._cite = 0           # depth inside a citation
        self._stack: list[tuple[str, bool, bool, bool]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if "name" in a and tag == "a":
            self.ids.add(a["name"])
        classes = (a.get("class") or "").split()
        if tag == "script" and a.get("src"):
            self.resources.append((tag, a["src"]))
        if tag == "link" and a.get("href") and ({"stylesheet", "icon", "preload"} & set((a.get("rel") or "").split())):
            self.resources.append((tag, a["href"]))
        if tag == "img" and a.get("src"):
            self.images += 1
            self.resources.append((tag, a["src"]))
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "a" and a.get("href") and self._cite:
            self.citations[-1]["links"].append(a["href"])
        if "citation" in classes or a.get("role") == "doc-biblioentry":
            if "id" in a:
                self.citation_ids.add(a["id"])
        is_math = "math" in classes or tag == "math"
        self.has_math |= is_math
        if tag in ("br", "img", "link", "meta", "input", "hr"):
            return
        is_cite = tag == "span" and "bibtex-citation" in classes
        if is_cite:
            self.citations.append({"id": a.get("id", "?"), "links": [], "text": "",
                                   "before": " ".join("".join(self.text[-8:]).split())[-60:]})
        skip = tag in SKIP_TEXT_TAGS
        self._skip += skip
        self._math += is_math
        self._cite += is_cite
        self._stack.append((tag, skip, is_math, is_cite))

    def handle_endtag(self, tag):
        while self._stack:
            t, skip, is_math, is_cite = self._stack.pop()
            self._skip -= skip
            self._math -= is_math
            self._cite -= is_cite
            if t == tag:
                break

    def handle_data(self, data):
        if self._cite:
            self.citations[-1]["text"] += data
        if not self._skip and not self._math:
            self.text.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def _notebook_images(ipynb: Path) -> int:
    nb = json.loads(ipynb.read_text())
    return sum(1 for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
               if any(k.startswith("image/") for k in o.get("data", {})))


def _stylesheet_problems(css: Path, html_dir: Path, seen: set[Path]) -> list[str]:
    """Fonts and ``@import``s of a local stylesheet (and of what it imports) that come from outside or are missing."""
    if css in seen or not css.is_file():
        return []
    seen.add(css)
    text = css.read_text(encoding="utf-8", errors="replace")
    rel = css.relative_to(html_dir) if css.is_relative_to(html_dir) else css
    problems = []
    local = [m.group(1) for m in CSS_IMPORT.finditer(text)]
    local += [m.group(1) for face in FONT_FACE.findall(text) for m in CSS_URL.finditer(face)]
    for url in [m.group(1) for m in CSS_URL.finditer(text)] + local:
        if url.startswith(("http:", "https:", "//")):
            problems.append(f"{rel}: stylesheet loads {url} from outside the site")
    for url in local:
        parts = urlsplit(url)
        if parts.scheme or url.startswith("//") or not parts.path:
            continue
        target = (css.parent / unquote(parts.path)).resolve()
        if not target.exists():
            problems.append(f"{rel}: stylesheet loads {parts.path}, which is not in the build")
        elif target.suffix == ".css":
            problems += _stylesheet_problems(target, html_dir, seen)
    return problems


def _source(source_dir: Path, rel: Path) -> Path | None:
    """The source file (relative to the repository) that the page ``rel`` was built from, if any."""
    for suffix in (".ipynb", ".md"):
        if (source_dir / rel.with_suffix(suffix)).is_file():
            return rel.with_suffix(suffix)
    return None


def check_site(html_dir: str | Path, source_dir: str | Path | None = None, repository: str | None = None,
               branch: str = "main") -> list[str]:
    """All problems found in the built site ``html_dir``; ``source_dir`` (the repository) locates the pages' sources
    and notebooks; ``repository`` (OWNER/NAME) asks for the launch and source links of a build that names it."""
    html_dir = Path(html_dir).resolve()
    source_dir = Path(source_dir).resolve() if source_dir else None
    problems: list[str] = []
    pages = {p: _parse(p) for p in sorted(html_dir.rglob("*.html")) if "_static" not in p.parts
             and "_sources" not in p.parts}
    if not pages:
        return [f"{html_dir}: no HTML pages (was the book built?)"]
    content_pages = {p: pg for p, pg in pages.items() if p.name not in ("genindex.html", "search.html")}
    stylesheets: set[Path] = set()
    mathjax_dirs: dict[Path, Path] = {}   # folder of a MathJax script -> a page that loads it
    for path, page in pages.items():
        rel = path.relative_to(html_dir)
        for tag, url in page.resources:
            parts = urlsplit(url)
            if parts.scheme in ("http", "https") or url.startswith("//"):
                problems.append(f"{rel}: <{tag}> loads {url} from outside the site")
            elif parts.scheme == "" and parts.path:
                target = (path.parent / unquote(parts.path)).resolve()
                if not target.exists():
                    problems.append(f"{rel}: <{tag}> loads {parts.path}, which is not in the build")
                elif tag == "link" and target.suffix == ".css":
                    stylesheets.add(target)
                elif tag == "script" and target.name.startswith("tex-") and "mathjax" in parts.path.lower():
                    mathjax_dirs.setdefault(target.parent, rel)
        if page.has_math and not any("mathjax" in url.lower() for _, url in page.resources):
            problems.append(f"{rel}: has math but loads no MathJax script")
        if path in content_pages:
            text = " ".join(page.text)
            for m in RAW_TEX.finditer(text):
                context = text[max(0, m.start() - 40): m.end() + 40].replace("\n", " ")
                problems.append(f"{rel}: raw TeX {m.group()!r} in the text: ...{context}...")
                break
            for m in RAW_TABLE.finditer(text):
                context = text[max(0, m.start() - 60): m.end() + 20].replace("\n", " ")
                problems.append(f"{rel}: a Markdown table left as text (not rendered): ...{context}...")
                break
            for m in RAW_ROLE.finditer(text):
                context = text[max(0, m.start() - 40): m.end() + 40].replace("\n", " ")
                problems.append(f"{rel}: MyST role {m.group()!r} left as text (not rendered): ...{context}...")
                break
        for cite in page.citations:
            where = f"{rel}: citation (id {cite['id']}) after \"...{cite['before']}\""
            if not cite["links"]:
                problems.append(f"{where} does not resolve: it shows {cite['text'].strip()!r} and links to no "
                                f"bibliography entry (an unknown bibtex key, or no {{bibliography}} on the page)")
            for href in cite["links"]:
                parts = urlsplit(href)
                target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
                if target in pages and unquote(parts.fragment) not in pages[target].citation_ids:
                    problems.append(f"{where} links to {href}, which is not an entry of a bibliography")
        for href in page.links:
            parts = urlsplit(href)
            if parts.scheme or href.startswith(("mailto:", "//")):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.suffix != ".html" and parts.path:
                if not target.exists():
                    problems.append(f"{rel}: link to {href}, which is not in the build")
                continue
            if target not in pages:
                problems.append(f"{rel}: link to {href}, a page that is not in the build")
            elif parts.fragment and unquote(parts.fragment) not in pages[target].ids:
                problems.append(f"{rel}: link to {href}, an anchor that is not on that page")
    seen: set[Path] = set()
    for css in sorted(stylesheets):
        problems += _stylesheet_problems(css, html_dir, seen)
    for folder, rel in mathjax_dirs.items():
        if not (folder / MATHJAX_FONT).is_file():
            problems.append(f"{rel}: MathJax at {folder.relative_to(html_dir)} has no web fonts beside it "
                            f"({MATHJAX_FONT} is not in the build): math would not render offline")
    if source_dir is not None:
        for path, page in pages.items():
            rel = path.relative_to(html_dir)
            src = _source(source_dir, rel)
            if src is None:
                continue
            if src.suffix == ".ipynb":
                want = _notebook_images(source_dir / src)
                if page.images < want:
                    problems.append(f"{rel}: shows {page.images} images, its notebook has {want} image outputs")
            links = {(path.parent / unquote(urlsplit(h).path)).resolve() for h in page.links
                     if not urlsplit(h).scheme and urlsplit(h).path}
            if (html_dir / "_sources" / src).resolve() not in links:
                problems.append(f"{rel}: no link to download its source {src.suffix} (expected _sources/{src})")
            if repository:
                want_links = {"show source": f"https://github.com/{repository}/blob/{branch}/{src.as_posix()}?plain=1"}
                if src.suffix == ".ipynb":
                    want_links["Colab"] = f"{COLAB_URL}/github/{repository}/blob/{branch}/{src.as_posix()}"
                    want_links["Binder"] = (f"{BINDER_URL}/v2/gh/{repository}/{branch}?urlpath=lab/tree/"
                                            f"{src.as_posix()}")
                for what, url in want_links.items():
                    if url not in page.links:
                        problems.append(f"{rel}: no {what} link (expected {url})")
    return problems


# ---------------------------------------------------------------------------------------------------------------
# Does every equation and table fit its column?  Measured in a real browser, after MathJax has typeset the page.
# ---------------------------------------------------------------------------------------------------------------

# Injected into a copy of the page: once MathJax is done, measure and write a JSON report into the DOM, which
# Chromium's --dump-dom prints. An element "overflows" when an ancestor between it and the article scrolls or
# clips sideways (scrollWidth > clientWidth), or when it sticks out on the right of the article.
OVERFLOW_JS = r"""
(function () {
  function label(el) {
    var box = el.closest('div.math, table, .cell_output, section');
    var id = box && box.id ? box.id : '';
    var sec = el.closest('section');
    var h = sec ? sec.querySelector('h1, h2, h3, h4') : null;
    var title = h ? h.textContent.replace(/[\u00b6#]/g, '').replace(/\s+/g, ' ').trim().slice(0, 60) : '';
    var tex = '';
    if (window.MathJax && MathJax.startup && MathJax.startup.document) {
      try { for (const m of MathJax.startup.document.math) { if (m.typesetRoot === el) tex = m.math; } } catch (e) {}
    }
    tex = tex.replace(/\s+/g, ' ').trim();
    return (id ? '#' + id + ' ' : '') + '(section "' + title + '")' + (tex ? ' TeX: ' + tex.slice(0, 70) : '');
  }
  function report() {
    try { measure(); } catch (e) {
      var div = document.createElement('div');
      div.id = 'minirl-overflow';
      div.hidden = true;
      div.textContent = JSON.stringify({error: String(e)});
      document.body.appendChild(div);
    }
  }
  function measure() {
    var art = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
    var right = art.getBoundingClientRect().right;
    var out = [];
    function check(el, kind) {
      var r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) return;          // hidden (a collapsed dropdown)
      if (!art.contains(el)) return;                        // the sidebars' tables of contents are not the column
      var excess = r.right - right;
      var start = el;
      if (kind === 'inline equation') {
        // judged against its paragraph (or list item, table cell, box): does it stick out on the right? The
        // theme's span.math around it clips a few pixels of glyph overhang by design, so start above that span.
        var block = el.closest('p, li, dd, dt, td, th, div');
        if (block) excess = Math.max(excess, r.right - block.getBoundingClientRect().right);
        start = el.parentElement && el.parentElement.matches('span.math') ? el.parentElement.parentElement
                                                                          : el.parentElement;
      }
      for (var a = start; a && a !== art.parentElement; a = a.parentElement) {
        var ox = getComputedStyle(a).overflowX;
        if (ox !== 'visible' && a.clientWidth > 0 && a.scrollWidth > a.clientWidth + 1) {   // a box that scrolls
          excess = Math.max(excess, a.scrollWidth - a.clientWidth);
        }
      }
      if (excess > 1) out.push({kind: kind, where: label(el), excess: Math.round(excess)});
    }
    document.querySelectorAll('mjx-container[display="true"]').forEach(function (el) { check(el, 'equation'); });
    document.querySelectorAll('mjx-container:not([display="true"])').forEach(function (el) { check(el, 'inline equation'); });
    document.querySelectorAll('table').forEach(function (el) { check(el, 'table'); });
    var div = document.createElement('div');
    div.id = 'minirl-overflow';
    div.hidden = true;
    div.textContent = JSON.stringify({width: window.innerWidth, problems: out});
    document.body.appendChild(div);
  }
  function go() {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(function () { setTimeout(report, 0); });
    } else { setTimeout(report, 0); }
  }
  if (document.readyState === 'complete') go(); else window.addEventListener('load', go);
})();
"""
OVERFLOW_REPORT = re.compile(r'<div id="minirl-overflow"[^>]*>(.*?)</div>', re.S)


def find_browser() -> str | None:
    """Chromium (or Chrome) on this machine, or ``None``."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def page_overflow(page: str | Path, width: int = 1280, browser: str | None = None, base: str | Path | None = None,
                  height: int = 2000, budget_ms: int = 30_000) -> list[dict]:
    """The equations and tables of one built page that do not fit its column at ``width`` px, as measured by
    headless Chromium: a list of ``{"kind", "where", "excess"}`` (``excess`` in px). ``base`` is the folder the
    page's relative links resolve from (its own folder by default), so a modified copy can live elsewhere."""
    browser = browser or find_browser()
    if browser is None:
        raise RuntimeError("Chromium not found: apt-get update && apt-get install -y chromium")
    page = Path(page).resolve()
    base = Path(base).resolve() if base else page.parent
    html = page.read_text(encoding="utf-8", errors="replace")
    html = re.sub(r"<head([^>]*)>", lambda m: f'<head{m.group(1)}><base href="{base.as_uri()}/">', html, count=1)
    end = html.rfind("</body>")   # the last one: a notebook's output may contain the string "</body>" too
    html = (html[:end] if end >= 0 else html) + f"<script>{OVERFLOW_JS}</script>" + (html[end:] if end >= 0 else "")
    with tempfile.TemporaryDirectory(prefix="minirl-overflow-") as tmp:
        copy = Path(tmp) / page.name
        copy.write_text(html, encoding="utf-8")
        result = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--allow-file-access-from-files",
             f"--user-data-dir={tmp}/profile", f"--virtual-time-budget={budget_ms}",
             f"--window-size={width},{height}", "--dump-dom", copy.as_uri()],
            capture_output=True, text=True, timeout=180, env={**os.environ, "HOME": tmp})
    m = OVERFLOW_REPORT.search(result.stdout)
    if not m:
        raise RuntimeError(f"{page.name}: Chromium returned no overflow report (exit {result.returncode}): "
                           f"{result.stderr.strip()[-500:]}")
    report = json.loads(html_module.unescape(m.group(1)))
    if "error" in report:
        raise RuntimeError(f"{page.name}: the overflow measurement failed in the browser: {report['error']}")
    return report["problems"]


def check_overflow(html_dir: str | Path, width: int = 1280, browser: str | None = None,
                   pages: list[str] | None = None) -> list[str]:
    """One line per equation or table that does not fit its column, on every content page of the build (or on
    ``pages``, paths relative to ``html_dir`` such as ``book/cql.html``)."""
    html_dir = Path(html_dir).resolve()
    if pages is None:
        paths = [p for p in sorted(html_dir.rglob("*.html")) if "_static" not in p.parts and "_sources" not in p.parts
                 and p.name not in ("genindex.html", "search.html", "index.html")]
    else:
        paths = [html_dir / p for p in pages]
    problems = []
    for path in paths:
        for o in page_overflow(path, width, browser):
            problems.append(f"{path.relative_to(html_dir)}: {o['kind']} {o['where']} is {o['excess']} px wider "
                            f"than its column at {width} px")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("html_dir", nargs="?", type=Path, default=Path("_build/html"), help="the built site (_build/html)")
    p.add_argument("--repository", help="OWNER/NAME the build names (set_repository.py): check launch/source links")
    p.add_argument("--branch", default="main", help="the branch those links open (main)")
    p.add_argument("--overflow", action="store_true",
                   help="also check in headless Chromium that no equation or table overflows its column")
    p.add_argument("--width", type=int, default=1280, help="the window width of the overflow check (1280 px)")
    a = p.parse_args(argv)
    problems = check_site(a.html_dir, Path(__file__).resolve().parent.parent, a.repository, a.branch)
    if a.overflow:
        problems += check_overflow(a.html_dir, a.width)
    print("\n".join(problems) or f"{a.html_dir}: no problems found")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
