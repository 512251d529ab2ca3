"""Put the setup cell at the top of every chapter notebook (Colab, Binder, and "pick the scale from the device").

    python scripts/setup_cell.py                        # every chapter and exercise notebook
    python scripts/setup_cell.py notebooks/03_cql.ipynb
    python scripts/setup_cell.py --check                # exit 1 if a notebook's setup cell is missing or stale

The cell installs minirl when ``import minirl`` would fail (a notebook opened on Colab, or a bare Jupyter), from the
GitHub repository named by ``repository.url`` in ``_config.yml`` (replacing the unrelated PyPI package also called
``minirl``, recognised by its lack of ``minirl/datasets.py``), and sets ``MINIRL_SCALE`` to ``cpu`` when it is not set
already, on a GPU too: ``full`` (1M gradient steps per run) is chosen only by setting it. The device is not the
cell's business: each notebook takes :func:`minirl.devices.default_device` (CUDA, then Apple's MPS, then the CPU).
Where minirl is installed and ``MINIRL_SCALE`` is set (this repository, CI, ``pytest --nbval``) it does nothing and
prints nothing, so stored outputs stay valid.

The cell is found by its tag ``minirl-setup`` and rewritten in place, so running the script again only updates it.
The exercise notebooks (the students' and the solutions) carry the same cell, so that an exercise opened on Colab
installs minirl too.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TAG = "minirl-setup"
TAGS = [TAG, "hide-input"]  # hide-input: the book shows the cell collapsed

TEMPLATE = '''\
# Setup for Colab and Binder. Where this book's minirl is missing, clone the book's repository (the package, and the
# results/ that the comparison cells load) and install it; an unrelated PyPI package also named `minirl` is
# replaced. Scale: MINIRL_SCALE if set, else `cpu` (minutes to an hour per training cell, on a GPU too). To change
# it, run e.g. `%env MINIRL_SCALE=full` (the papers' 1M gradient steps: hours per run even on a GPU) or `smoke`
# (seconds) before this cell. Where minirl is installed and MINIRL_SCALE is set (here, CI, nbval) it prints nothing.
import importlib, importlib.util, os, subprocess, sys

MINIRL_REPOSITORY = "{repository}"  # OWNER/NAME on GitHub, from _config.yml (scripts/setup_cell.py)


def _books_minirl():  # only this book's package has minirl/datasets.py (looked up without importing anything)
    spec = importlib.util.find_spec("minirl")
    return spec is not None and spec.origin is not None and os.path.isfile(
        os.path.join(os.path.dirname(spec.origin), "datasets.py"))


if not _books_minirl():
    if not MINIRL_REPOSITORY:
        raise RuntimeError("this book's minirl is not installed, and this copy of the notebook does not name the "
                           "book's repository: clone the repository, pip install -e it, then run this cell again")
    if importlib.util.find_spec("minirl") is not None:
        print("An unrelated package named minirl is installed (PyPI's `minirl`); replacing it by the book's")
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", "minirl"], check=True)
        for name in [m for m in sys.modules if m == "minirl" or m.startswith("minirl.")]:
            del sys.modules[name]
    clone = os.path.abspath("minirl-book")
    if not os.path.isdir(clone):
        subprocess.run(["git", "clone", "--depth", "1", f"https://github.com/{{MINIRL_REPOSITORY}}", clone], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", clone], check=True)
    sys.path.insert(0, clone)  # this kernel started before the install: import the clone directly
    importlib.invalidate_caches()
if "MINIRL_SCALE" not in os.environ:
    os.environ["MINIRL_SCALE"] = "cpu"
    print("MINIRL_SCALE=cpu (set MINIRL_SCALE=full or smoke before this cell for another scale)")'''


def configured_repository(config: Path = REPO / "_config.yml") -> str:
    """``OWNER/NAME`` from ``repository.url`` in the book's configuration, or ``""`` when it names none."""
    text = config.read_text()
    block = re.search(r"^repository:\s*\n((?:[ \t]+.*\n?)*)", text, re.M)
    if not block:
        return ""
    url = re.search(r"^\s+url:\s*[\"']?([^\"'\s#]+)", block.group(1), re.M)
    if not url:
        return ""
    m = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?", url.group(1))
    if not m:
        raise ValueError(f"_config.yml repository.url must be https://github.com/OWNER/NAME, got {url.group(1)!r}")
    return m.group(1)


def cell_source(repository: str) -> str:
    if repository and not re.fullmatch(r"[\w.-]+/[\w.-]+", repository):
        raise ValueError(f"repository must be OWNER/NAME, got {repository!r}")
    return TEMPLATE.format(repository=repository)


def apply(path: Path, repository: str) -> bool:
    """Insert or update the setup cell of one notebook (before its first code cell); True if the file changed."""
    nb = json.loads(path.read_text())
    source = cell_source(repository)
    cells = nb["cells"]
    found = [c for c in cells if TAG in c.get("metadata", {}).get("tags", [])]
    if found:
        cell = found[0]
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if "".join(cell["source"]) == source and all(tag in tags for tag in TAGS):
            return False
        cell["source"] = source.splitlines(keepends=True)
        tags.extend(tag for tag in TAGS if tag not in tags)
    else:
        first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
        cells.insert(first_code, {"cell_type": "code", "execution_count": None, "id": "minirl-setup",
                                  "metadata": {"tags": list(TAGS)}, "outputs": [],
                                  "source": source.splitlines(keepends=True)})
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return True


def stale(path: Path, repository: str) -> str | None:
    nb = json.loads(path.read_text())
    found = [c for c in nb["cells"] if TAG in c.get("metadata", {}).get("tags", [])]
    if not found:
        return f"{path}: no setup cell (tag {TAG!r})"
    if "".join(found[0]["source"]) != cell_source(repository):
        return f"{path}: setup cell differs from scripts/setup_cell.py's (repository {repository or 'unset'})"
    missing = [tag for tag in TAGS if tag not in found[0]["metadata"]["tags"]]
    if missing:
        return f"{path}: setup cell lacks the tags {missing}"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    if code[0] is not found[0]:
        return f"{path}: setup cell is not the first code cell"
    return None


def chapter_notebooks(root: Path = REPO) -> list[Path]:
    return sorted((root / "notebooks").glob("*.ipynb"))


def all_notebooks(root: Path = REPO) -> list[Path]:
    """The chapters, the exercise notebooks and their solutions: every notebook that carries the setup cell."""
    exercises = root / "notebooks" / "exercises"
    return (chapter_notebooks(root) + sorted(exercises.glob("*.ipynb"))
            + sorted((exercises / "solutions").glob("*.ipynb")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter and exercise notebook")
    p.add_argument("--repository", default=None, help="OWNER/NAME (default: from _config.yml repository.url)")
    p.add_argument("--check", action="store_true", help="only report notebooks whose setup cell is missing or stale")
    a = p.parse_args(argv)
    repository = configured_repository() if a.repository is None else a.repository
    paths = a.notebooks or all_notebooks()
    if a.check:
        problems = [msg for msg in (stale(path, repository) for path in paths) if msg]
        print("\n".join(problems) or f"setup cells up to date in {len(paths)} notebooks")
        return 1 if problems else 0
    for path in paths:
        print(f"{path}: {'updated' if apply(path, repository) else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
