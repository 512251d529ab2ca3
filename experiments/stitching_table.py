"""The stitching grid's table: every method on every dataset, with 95% bootstrap intervals over seeds, and each
method's difference from BC and from 10%BC (book/stitching.md, book/lab/stitching.md).

    python experiments/stitching_table.py                     # print the table of results/stitching
    python experiments/stitching_table.py --write             # also write results/stitching/table.md
    python experiments/stitching_table.py --root results/stitching-budget --evals pointmaze-medium-stitch-singletask-task1
                                                              # one dataset's runs, every evaluation (success in %):
                                                              # a row per step, a column per method, its seeds in a cell

For a maze the number is the success rate (in %, over the evaluation's 50 episodes) at the final evaluation; for
Hopper the normalised score, at the final evaluation and averaged over each run's last five evaluations (single
evaluations dip now and then). A method's row lists its finished seeds and the precision each trained in (its
``result.json``; seeds of one row can differ where they ran on different CPUs: ``--precision auto`` is bfloat16 only
where the CPU computes it natively); a difference needs at least two seeds on both
sides (with fewer it says so). The interval is ``minirl.plots.bootstrap_ci`` (the mean over seeds) and
``difference_ci`` (two independent groups of seeds); the difference is "above" or "below" when its interval excludes
0, else "overlap". Runs not finished (no ``result.json``: training, or stopped) are left out and counted.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from minirl import plots  # noqa: E402

METHODS = ("bc", "10%bc", "bcq", "cql", "iql")
NAMES = {"bc": "BC", "10%bc": "10%BC", "bcq": "BCQ", "cql": "CQL", "iql": "IQL"}


def final_and_last5(run: Path) -> tuple[float, float] | None:
    """The run's final number and its mean over the last five evaluations (success in % for a maze), or None while
    it trains."""
    if not (run / "result.json").exists():
        return None
    with open(run / "eval.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    key = "success_rate" if "success_rate" in rows[0] else "score_mean"
    values = np.array([float(r[key]) for r in rows]) * (100.0 if key == "success_rate" else 1.0)
    return float(values[-1]), float(values[-5:].mean())


def precision(run: Path) -> str:
    """The precision a finished run trained in (``float32`` or ``bf16``, from its ``result.json``), or "not recorded"
    (``run_suite.py`` and ``benchmarks/gpu.py`` both record it)."""
    return json.loads((run / "result.json").read_text()).get("precision", "not recorded")


def precisions(names: list[str]) -> str:
    """One row's seeds' precisions: ``bf16`` when all agree, else each with its count (``bf16 ×2, float32 ×1``)."""
    counts = Counter(names)
    if len(counts) == 1:
        return names[0]
    return ", ".join(f"{name} ×{n}" for name, n in sorted(counts.items()))


def collect(root: Path) -> tuple[dict, int]:
    """``{dataset: {method: [(final, last5, precision), ...]}}`` over finished seeds, and the number of runs not
    finished (training, or stopped with a checkpoint)."""
    table: dict = {}
    running = 0
    labels = [*METHODS, *sorted(d.name for d in root.iterdir() if d.is_dir() and d.name not in METHODS)]
    for method in labels:  # the five methods, then variants such as iql-layer_norm=True
        for run in sorted((root / method).glob("*/s*")):
            got = final_and_last5(run)
            if got is None:
                running += 1
                continue
            table.setdefault(run.parent.name, {}).setdefault(method, []).append((*got, precision(run)))
    return table, running


def label_name(label: str) -> str:
    """A run folder's label as the book writes it: ``iql-expectile=0.5-layer_norm=True`` -> ``IQL (τ 0.5, LayerNorm)``,
    ``iql-beta=100.0-layer_norm=True`` -> ``IQL (β 100, LayerNorm)``,
    ``iql-actor=deterministic-alpha=0.0015-extraction=ddpg_bc-layer_norm=True`` -> ``IQL (α 0.0015, DDPG+BC,
    LayerNorm)`` (DDPG+BC's actor is always deterministic)."""
    if label in NAMES:
        return NAMES[label]
    base, *options = label.split("-")
    if "extraction=ddpg_bc" in options:
        options.remove("actor=deterministic")
    words = {"layer_norm=True": "LayerNorm", "extraction=ddpg_bc": "DDPG+BC"}
    symbols = {"expectile": "τ", "beta": "β", "alpha": "α"}

    def shown(option: str) -> str:
        field, _, value = option.partition("=")
        return words.get(option, f"{symbols[field]} {float(value):g}" if field in symbols else option)
    return f"{NAMES.get(base, base)} ({', '.join(shown(o) for o in options)})"


def evaluations(root: Path, dataset: str) -> str:
    """Markdown: one row per evaluation step, one column per method of ``dataset`` under ``root``; a cell holds the
    method's seeds' success in % (a maze) or score (Hopper) at that step, in the order of the column's seeds. A run
    still training is marked with * and has blanks ("-") where it has not been evaluated yet."""
    columns = []
    for label in [*METHODS, *sorted(d.name for d in root.iterdir() if d.is_dir() and d.name not in METHODS)]:
        runs = []
        for run in sorted((root / label / dataset).glob("s*"), key=lambda r: int(r.name[1:])):
            if (run / "eval.csv").is_file():
                with open(run / "eval.csv", newline="") as f:
                    rows = list(csv.DictReader(f))
                key = "success_rate" if "success_rate" in rows[0] else "score_mean"
                factor = 100.0 if key == "success_rate" else 1.0
                mark = "" if (run / "result.json").exists() else "*"
                runs.append((run.name[1:] + mark, {int(r["step"]): factor * float(r[key]) for r in rows}))
        if runs:
            columns.append((label_name(label), runs))
    steps = sorted({step for _, runs in columns for _, values in runs for step in values})
    lines = ["| step | " + " | ".join(f"{name}, seeds {' / '.join(seed for seed, _ in runs)}" for name, runs in columns)
             + " |", "| ---: | " + " | ".join("---:" for _ in columns) + " |"]
    for s in steps:
        cells = [" / ".join(f"{values[s]:.0f}" if s in values else "-" for _, values in runs) for _, runs in columns]
        lines.append(f"| {s // 1000}k | " if s % 1000 == 0 else f"| {s:,} | ")
        lines[-1] += " | ".join(cells) + " |"
    return "\n".join(lines) + "\n"


def verdict(lo: float, hi: float) -> str:
    return "above" if lo > 0 else "below" if hi < 0 else "overlap"


def difference(a: list[float], b: list[float]) -> str:
    if len(a) < 2 or len(b) < 2:
        return "fewer than 2 seeds"
    if np.ptp(a) == 0 and np.ptp(b) == 0:  # every seed the same number on both sides (e.g. 0% everywhere)
        return f"{np.mean(a) - np.mean(b):+.1f} (no spread)"
    d, lo, hi = plots.difference_ci(a, b)
    return f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}] {verdict(lo, hi)}"


def mean_ci(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.1f} (one seed)"
    lo, hi = plots.bootstrap_ci(values)
    return f"{np.mean(values):.1f} [{lo:.1f}, {hi:.1f}]"


def render(table: dict, running: int) -> str:
    lines = ["| dataset | method | seeds | precision | final, mean [95% CI] | minus BC | minus 10%BC | "
             "last 5 evaluations | last 5 minus 10%BC |", "| --- | --- | ---: | --- | --- | --- | --- | --- | --- |"]
    for dataset in sorted(table):
        cells = table[dataset]
        final = {m: [f for f, _, _ in cells[m]] for m in cells}
        last5 = {m: [x for _, x, _ in cells[m]] for m in cells}
        for method in [*METHODS, *sorted(m for m in cells if m not in METHODS)]:
            if method not in cells:
                continue
            minus_bc = difference(final[method], final["bc"]) if method != "bc" and "bc" in final else ""
            minus_10 = (difference(final[method], final["10%bc"])
                        if method not in ("bc", "10%bc") and "10%bc" in final else "")
            last_10 = (difference(last5[method], last5["10%bc"])
                       if method not in ("bc", "10%bc") and "10%bc" in last5 else "")
            lines.append(f"| {dataset} | {label_name(method)} | {len(final[method])} | "
                         f"{precisions([p for _, _, p in cells[method]])} | {mean_ci(final[method])} | "
                         f"{minus_bc} | {minus_10} | {mean_ci(last5[method])} | {last_10} |")
    unit = ("Mazes: success rate in % over 50 episodes; Hopper: normalised score. Differences are over seeds "
            "(`plots.difference_ci`); above/below: the 95% interval excludes 0.")
    unfinished = f"Runs not finished (training, or stopped with a checkpoint), left out: {running}."
    return "\n".join(lines) + f"\n\n{unit} {unfinished}\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=REPO / "results" / "stitching")
    ap.add_argument("--write", action="store_true", help="also write <root>/table.md")
    ap.add_argument("--evals", metavar="DATASET", help="instead: every evaluation of each run of DATASET under --root")
    args = ap.parse_args(argv)
    if not args.root.is_dir():
        ap.error(f"--root {args.root}: no such folder")
    if args.evals:
        if not any(args.root.glob(f"*/{args.evals}/s*/eval.csv")):
            ap.error(f"--evals {args.evals}: no run of that dataset under {args.root}")
        print(evaluations(args.root, args.evals), end="")
        return 0
    table, running = collect(args.root)
    if not table:
        print(f"no finished run under {args.root}", file=sys.stderr)
        return 1
    text = render(table, running)
    print(text)
    if args.write:
        (args.root / "table.md").write_text(f"# The stitching grid (`experiments/stitching_table.py`)\n\n{text}")
        print(f"wrote {args.root / 'table.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
