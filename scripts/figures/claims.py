"""The claims page's figure: how the book reads a comparison of two methods over seeds.

One figure, ``claims_intervals.png``, from the results of record (``results/record``, 50,000 gradient steps, five
seeds per method on ``hopper-medium-replay``), computed with minirl's own statistics (``minirl.plots``):

* left: each method's statistic of record (one dot per seed: the mean of the run's last 5 evaluations,
  ``plots.record_scores``), their mean and its 95% percentile bootstrap interval (``bootstrap_ci``), for BC,
  CQL-Lagrange, IQL and 10%BC;
* right: three differences of means with their bootstrap intervals (``difference_ci``) and the book's verdict
  (``verdict``): IQL - BC lies above 0 ("above"), CQL-Lagrange - 10%BC contains 0 ("overlap"), and IQL - 10%BC lies
  below 0 ("below").

Deterministic: the bootstrap uses minirl's fixed seed (0) and 10,000 resamples.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from minirl import plots  # noqa: E402

DATASET = "hopper-medium-replay"
METHODS = [("bc", "BC", "tab:gray"), ("cql-lagrange", "CQL-Lagrange", "tab:green"), ("iql", "IQL", "tab:blue"),
           ("10%bc", "10%BC", "tab:orange")]
PAIRS = [("iql", "bc", "IQL − BC"), ("cql-lagrange", "10%bc", "CQL-Lagrange\n− 10%BC"),
         ("iql", "10%bc", "IQL − 10%BC")]
VERDICT_COLOR = {"above": "tab:blue", "overlap": "0.35", "below": "tab:red"}


def main(out_dir: Path) -> list[Path]:
    with plt.rc_context({"font.size": 13}):
        return _draw(out_dir)


def _draw(out_dir: Path) -> list[Path]:
    runs = plots.load_results("results/record")
    scores = {}
    for label, _, _ in METHODS:
        x = plots.record_scores(runs, label, DATASET)
        if x.size != 5:
            raise RuntimeError(f"expected 5 seeds of {label} on {DATASET} in results/record, found {x.size}")
        scores[label] = x

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.6), gridspec_kw={"width_ratios": [1.25, 1]})

    # Left: seeds, mean and 95% bootstrap interval of the mean
    ticks = []
    for i, (label, name, color) in enumerate(METHODS):
        x = scores[label]
        lo, hi = plots.bootstrap_ci(x)
        jitter = np.linspace(-0.15, 0.15, x.size)
        ax.scatter(i - 0.12 + jitter, x, s=28, color=color, alpha=0.6, zorder=2,
                   label="one seed (mean of its last 5 evaluations)" if i == 0 else None)
        ax.errorbar(i + 0.2, x.mean(), yerr=[[x.mean() - lo], [hi - x.mean()]], fmt="o", color="k",
                    capsize=5, markersize=6, zorder=3, label="mean and its 95% interval" if i == 0 else None)
        ticks.append(f"{name}\n{x.mean():.1f}\n[{lo:.1f}, {hi:.1f}]")
    ax.set_xticks(range(len(METHODS)), ticks, fontsize=11)
    ax.set_xlim(-0.55, len(METHODS) - 0.45)
    ax.set_ylim(0, 50)
    ax.set_ylabel("normalised score, last 5 evaluations\n(0 random, 100 expert)")
    ax.set_title(f"{DATASET}, five seeds each", fontsize=13)
    ax.legend(loc="upper left", fontsize=11.5, frameon=False)
    ax.grid(axis="y", alpha=0.3)

    # Right: differences of means with their intervals and the verdict
    for j, (a, b, name) in enumerate(PAIRS):
        diff, lo, hi = plots.difference_ci(scores[a], scores[b])
        v = plots.verdict(lo, hi)
        y = len(PAIRS) - 1 - j
        bx.errorbar(diff, y, xerr=[[diff - lo], [hi - diff]], fmt="o", color=VERDICT_COLOR[v], capsize=4,
                    markersize=6, linewidth=2)
        bx.text(diff, y + 0.18, f"{diff:+.1f} [{lo:+.1f}, {hi:+.1f}]: {v}", ha="center", va="bottom",
                fontsize=12, color=VERDICT_COLOR[v], bbox=dict(facecolor="white", edgecolor="none", pad=1))
    bx.axvline(0, color="k", linewidth=1)
    bx.set_yticks(range(len(PAIRS)), [name for _, _, name in reversed(PAIRS)])
    bx.set_ylim(-0.5, len(PAIRS) - 0.2)
    bx.set_xlim(-30, 30)
    bx.set_xlabel("difference of the means (points)\nwith its 95% interval")
    bx.set_title("the verdict: is 0 outside the interval?", fontsize=13)
    bx.grid(axis="x", alpha=0.3)

    fig.tight_layout()
    path = out_dir / "claims_intervals.png"
    plots.save_figure(fig, path)
    return [path]
