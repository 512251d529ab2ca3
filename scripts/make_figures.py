"""Make the figures of the book's prose pages: every ``scripts/figures/<page>.py`` writes its own
``book/figures/<page>_<name>.png``.

    python scripts/make_figures.py              # all of them
    python scripts/make_figures.py bcq cql      # those pages only

Each module has ``main(out_dir: Path) -> list[Path]`` and needs only minirl, numpy and matplotlib (a figure drawn
from runs reads the committed files under ``results/``). The images are committed; the book's build reads them, and
``tests/test_book_figures.py`` checks that every figure a page shows exists and is made by one of these modules.
Figures that a notebook computes (e.g. the stitching gridworld's) are saved by that notebook instead.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "scripts" / "figures"
OUT = ROOT / "book" / "figures"


def modules() -> dict[str, Path]:
    return {p.stem: p for p in sorted(FIGURES.glob("*.py")) if not p.stem.startswith("_")}


def run(name: str, out_dir: Path = OUT) -> list[Path]:
    path = modules()[name]
    spec = importlib.util.spec_from_file_location(f"minirl_figures_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out_dir.mkdir(parents=True, exist_ok=True)
    return list(module.main(out_dir))


def main(argv=None) -> int:
    known = modules()
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", help=f"which pages' figures (default: all of {', '.join(known)})")
    args = parser.parse_args(argv)
    for name in args.pages:
        if name not in known:
            parser.error(f"pages: no scripts/figures/{name}.py (expected one of: {', '.join(known)})")
    failed = 0
    for name in args.pages or known:
        try:
            paths = run(name)
        except FileNotFoundError as e:  # a figure drawn from runs whose files are not here yet: say so, go on
            print(f"make_figures: {name}: {e}", file=sys.stderr)
            failed += 1
            continue
        for path in paths:
            print(path.relative_to(ROOT))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
