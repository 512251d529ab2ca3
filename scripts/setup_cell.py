"""Put the setup cell at the top of every chapter notebook (Colab, Binder, and "pick the scale from the device").

    python scripts/setup_cell.py                        # every notebooks/*.ipynb
    python scripts/setup_cell.py notebooks/03_cql.ipynb
    python scripts/setup_cell.py --check                # exit 1 if a notebook's setup cell is missing or stale

The cell installs minirl when ``import minirl`` would fail (a notebook opened on Colab, or a bare Jupyter), from the
GitHub repository named by ``repository.url`` in ``_config.yml``, and sets ``MINIRL_SCALE`` from the device when it is
not set already: ``full`` with a CUDA GPU, ``cpu`` without. Where minirl is installed and ``MINIRL_SCALE`` is set (this
repository, CI, ``pytest --nbval``) it does nothing and prints nothing, so stored outputs stay valid.

The cell is found by its tag ``minirl-setup`` and rewritten in place, so running the script again only updates it.
The exercise notebooks are left alone: students run them where minirl is installed.
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
# Setup for Colab and Binder: where minirl is missing, clone the book's repository (the package, and the results/
# that the comparison cells load) and install it; then choose the scale from the device unless MINIRL_SCALE is set
# (`full` on a CUDA GPU, `cpu` otherwise). Where minirl is installed (here, CI, nbval) it only sets the scale.
import importlib, importlib.util, os, subprocess, sys

MINIRL_REPOSITORY = "{repository}"  # OWNER/NAME on GitHub, from _config.yml (scripts/setup_cell.py)
if importlib.util.find_spec("minirl") is None:
    if not MINIRL_REPOSITORY:
        raise RuntimeError("minirl is not installed, and this copy of the notebook does not name the book's "
                           "repository: clone the repository, pip install -e it, then run this cell again")
    clone = os.path.abspath("minirl-book")
    if not os.path.isdir(clone):
        subprocess.run(["git", "clone", "--depth", "1", f"https://github.com/{{MINIRL_REPOSITORY}}", clone], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", clone], check=True)
    sys.path.insert(0, clone)  # this kernel started before the install: import the clone directly
    importlib.invalidate_caches()
import torch

if "MINIRL_SCALE" not in os.environ:
    os.environ["MINIRL_SCALE"] = "full" if torch.cuda.is_available() else "cpu"'''


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


def chapter_notebooks() -> list[Path]:
    return sorted((REPO / "notebooks").glob("*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    p.add_argument("--repository", default=None, help="OWNER/NAME (default: from _config.yml repository.url)")
    p.add_argument("--check", action="store_true", help="only report notebooks whose setup cell is missing or stale")
    a = p.parse_args(argv)
    repository = configured_repository() if a.repository is None else a.repository
    paths = a.notebooks or chapter_notebooks()
    if a.check:
        problems = [msg for msg in (stale(path, repository) for path in paths) if msg]
        print("\n".join(problems) or f"setup cells up to date in {len(paths)} notebooks")
        return 1 if problems else 0
    for path in paths:
        print(f"{path}: {'updated' if apply(path, repository) else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
