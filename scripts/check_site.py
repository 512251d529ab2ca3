"""Check a built book the way a reader meets it, offline.

    python scripts/check_site.py _build/html

Reports, one line per problem (exit status 1 if any):
- a page that loads a script, stylesheet, font or image from outside the site (math and layout must work offline),
  or a local one that does not exist in the build (e.g. a broken MathJax path);
- a page with math but no MathJax script;
- raw TeX delimiters left in the text of a page (``$$``, ``\\[``, ``\\(``, a ``$...$`` pair), i.e. math that was not
  turned into a math element;
- a notebook page that shows fewer figures than its notebook has image outputs;
- an internal link whose target page or anchor does not exist (citations, cross-references, the chapter map).
tests/test_site.py runs it on a fresh build and on builds broken on purpose.
"""
from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

SKIP_TEXT_TAGS = {"script", "style", "pre", "code", "kbd", "samp", "textarea"}
RAW_TEX = re.compile(r"\$\$|\\\[|\\\]|\\\(|\\\)|(?<![\w$])\$[^$\s][^$]*\$(?![\w$])")


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.resources: list[tuple[str, str]] = []   # (tag, url) loaded by the page
        self.links: list[str] = []                   # <a href>
        self.ids: set[str] = set()
        self.text: list[str] = []
        self.images = 0
        self.has_math = False
        self._skip = 0           # depth inside tags whose text is not prose
        self._math = 0           # depth inside math elements (rendered by MathJax from their text)
        self._stack: list[tuple[str, bool, bool]] = []

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
        is_math = "math" in classes or tag == "math"
        self.has_math |= is_math
        if tag in ("br", "img", "link", "meta", "input", "hr"):
            return
        skip = tag in SKIP_TEXT_TAGS
        self._skip += skip
        self._math += is_math
        self._stack.append((tag, skip, is_math))

    def handle_endtag(self, tag):
        while self._stack:
            t, skip, is_math = self._stack.pop()
            self._skip -= skip
            self._math -= is_math
            if t == tag:
                break

    def handle_data(self, data):
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


def check_site(html_dir: str | Path, source_dir: str | Path | None = None) -> list[str]:
    """All problems found in the built site ``html_dir``; ``source_dir`` (the repository) locates the notebooks."""
    html_dir = Path(html_dir).resolve()
    source_dir = Path(source_dir).resolve() if source_dir else None
    problems: list[str] = []
    pages = {p: _parse(p) for p in sorted(html_dir.rglob("*.html")) if "_static" not in p.parts
             and "_sources" not in p.parts}
    if not pages:
        return [f"{html_dir}: no HTML pages (was the book built?)"]
    content_pages = {p: pg for p, pg in pages.items() if p.name not in ("genindex.html", "search.html")}
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
        if page.has_math and not any("mathjax" in url.lower() for _, url in page.resources):
            problems.append(f"{rel}: has math but loads no MathJax script")
        if path in content_pages:
            text = " ".join(page.text)
            for m in RAW_TEX.finditer(text):
                context = text[max(0, m.start() - 40): m.end() + 40].replace("\n", " ")
                problems.append(f"{rel}: raw TeX {m.group()!r} in the text: ...{context}...")
                break
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
    if source_dir is not None:
        for path, page in pages.items():
            rel = path.relative_to(html_dir)
            ipynb = source_dir / rel.with_suffix(".ipynb")
            if ipynb.exists():
                want = _notebook_images(ipynb)
                if page.images < want:
                    problems.append(f"{rel}: shows {page.images} images, its notebook has {want} image outputs")
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    html_dir = Path(argv[0] if argv else "_build/html")
    problems = check_site(html_dir, Path(__file__).resolve().parent.parent)
    print("\n".join(problems) or f"{html_dir}: no problems found")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
