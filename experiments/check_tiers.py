"""Does a dataset teach? Summarise suite runs of BC, 10%BC, IQL, offline SAC... on the same datasets and budget.

    python experiments/check_tiers.py results/check-hopper-v2-100k results/check-hopper-v2 [--figure curves.png]

Prints, per dataset and algorithm, the final normalised score of every seed, their mean with a 95% percentile
bootstrap interval over seeds (``minirl.plots.bootstrap_ci``), and the same for each seed's mean over its last five
evaluations (less sensitive to the noise of one 10-episode evaluation). With ``--figure`` it also draws the
learning curves (mean over seeds, band from the lowest to the highest seed), one panel per dataset.

It reads runs and writes no runs: ``results/check-hopper-v2/summary.md`` (its printed tables) and
``results/check-hopper-v2/curves.png`` (``--figure``) were made by it, over ``results/check-hopper-v2-100k`` and
``results/check-hopper-v2`` (runs of ``experiments/run_suite.py``, the check that the remade Hopper datasets teach).
No chapter reads them: they support the README's "Datasets" section (``results/check-hopper-v2*``) and
``results/README.md``, "Which Hopper data a run used".
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from minirl import plots

LAST = 5  # evaluations averaged per seed for the "last" column


def summary_rows(runs: list[dict]) -> list[str]:
    lines = ["| dataset | algorithm | steps | seeds: final score | final: mean [95% CI] | "
             f"last {LAST} evaluations: mean [95% CI] |", "| --- | --- | ---: | --- | --- | --- |"]
    for dataset in sorted({r["dataset"] for r in runs}):
        for label in sorted({r["label"] for r in plots.select(runs, dataset=dataset)}):
            sel = sorted(plots.select(runs, label, dataset), key=lambda r: r["seed"])
            final = np.array([r["score"] for r in sel])
            last = np.array([np.mean(r["curve"]["score"][-LAST:]) for r in sel])
            steps = sorted({r["steps"] for r in sel})
            cells = []
            for values in (final, last):
                lo, hi = plots.bootstrap_ci(values)
                cells.append(f"{values.mean():.1f} [{lo:.1f}, {hi:.1f}]")
            seeds = ", ".join(f"s{r['seed']} {r['score']:.1f}" for r in sel)
            lines.append(f"| {dataset} | {label} | {'/'.join(map(str, steps))} | {seeds} | {cells[0]} | {cells[1]} |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("roots", nargs="+", help="results folders (each <label>/<dataset>/s<seed>/)")
    p.add_argument("--figure", default=None, help="write the learning curves to this image file")
    a = p.parse_args(argv)
    for root in a.roots:
        runs = plots.load_results(root)
        hw = sorted({r["hardware"].get("cpu", "?") for r in runs})
        precision = sorted({str(r.get("precision")) for r in runs})
        print(f"\n## {root}: {len(runs)} runs, precision {', '.join(precision)}, CPU {', '.join(hw)}\n")
        print("\n".join(summary_rows(runs)))
    if a.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        panels = [(root, dataset, runs) for root in a.roots for runs in [plots.load_results(root)]
                  for dataset in sorted({r["dataset"] for r in runs})]  # one panel per results folder and dataset
        fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
        labels = sorted({r["label"] for _, _, runs in panels for r in runs})
        colors = {label: f"C{i}" for i, label in enumerate(labels)}  # one colour per algorithm in every panel
        for ax, (root, dataset, runs) in zip(axes[0], panels):
            for label in sorted({r["label"] for r in plots.select(runs, dataset=dataset)}):
                plots.plot_curves(ax, runs, label, dataset, color=colors[label])
            steps = max(r["steps"] for r in plots.select(runs, dataset=dataset))
            ax.set_title(f"{dataset}, {steps:,} steps\n({Path(root).name})", fontsize=10)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(a.figure, dpi=110)
        print(f"\nlearning curves: {a.figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
