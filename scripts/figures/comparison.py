"""Figures of the comparison chapter (``book/comparison.md``), written to ``book/figures/comparison_<name>.png``.

* ``comparison_returns.png``: the episodes of the four Hopper datasets of record, as normalised scores (0 = random,
  100 = this book's expert), with the best tenth of the episodes (the data 10%BC clones) shaded from its threshold,
  the best episode marked, and 10%BC's score of record (mean over seeds, 95% bootstrap interval) above each panel:
  why 10%BC is strong on mixed data. Every episode is drawn: the bins span each dataset's lowest to highest score,
  and the script checks that the histogram counts every episode.
* ``comparison_main.png``: the main table of the results of record as a dot plot, every algorithm on every Hopper
  tier, the mean over seeds of each run's statistic of record (the mean of its last 5 evaluations, dot), 95%
  percentile bootstrap interval (bar) and the seeds (small marks), from ``results/record`` with :mod:`minirl.plots`.

The datasets are read with :func:`minirl.datasets.load_dataset`, which loads them from the cache
(``$MINIRL_DATA``, default ``~/.cache/minirl``). In a fresh clone the cache is empty and the first run makes them
(a Hopper roll-out of 1M transitions for each of ``hopper-medium`` and ``hopper-expert``, with a progress bar;
``hopper-medium-replay`` is the shipped buffer); a roll-out made on another kind of CPU can differ by a few
episodes (``minirl/datasets.py``). The runs of record trained on the roll-out of an AMD EPYC, which made these images.

    python scripts/make_figures.py comparison
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from minirl import plots
from minirl.datasets import load_dataset, normalized_score

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "results" / "record"
HOPPER = ["hopper-medium", "hopper-expert", "hopper-medium-replay", "hopper-medium-expert"]
ALGOS = ["bc", "10%bc", "bcq", "cql", "cql-lagrange", "iql", "sac-offline", "td3+bc"]
NAMES = {"bc": "BC", "10%bc": "10%BC", "bcq": "BCQ", "cql": "CQL", "cql-lagrange": "CQL-Lagrange", "iql": "IQL",
         "sac-offline": "offline SAC", "td3+bc": "TD3+BC"}
COLORS = {a: f"C{i}" for i, a in enumerate(ALGOS)}  # the comparison notebook's colours


def episode_scores(name: str) -> np.ndarray:
    """The normalised score of every episode of dataset ``name`` (made and cached on first use)."""
    ds = load_dataset(name)  # a progress bar only where the dataset is made
    return np.asarray(normalized_score("hopper", ds.episode_returns()), dtype=float)


def best_tenth(scores: np.ndarray) -> np.ndarray:
    """The scores of the best 10% of episodes, as ``OfflineDataset.best_episodes(0.1)`` picks them (at least one)."""
    k = max(int(0.1 * len(scores)), 1)
    return np.sort(scores)[len(scores) - k:]


def returns_figure(path: Path, record: list[dict]) -> Path:
    summary = plots.ci_summary(record, ["10%bc"], HOPPER)
    fig, axes = plt.subplots(2, 2, figsize=(8.5, 7.4), layout="constrained")
    for ax, name in zip(axes.flat, HOPPER):
        scores = episode_scores(name)
        top = best_tenth(scores)
        edges = np.histogram_bin_edges(scores, bins=40, range=(scores.min(), scores.max()))
        counts, _, _ = ax.hist(scores, bins=edges, color="0.6", label="every episode of the dataset")
        if int(counts.sum()) != len(scores):  # every episode is in a bin: no range drops any
            raise AssertionError(f"{name}: the histogram holds {int(counts.sum())} of {len(scores)} episodes")
        ax.hist(top, bins=edges, color="C1", label="the best tenth (10%BC's data)")
        ax.axvline(top.min(), color="C1", linestyle="--", linewidth=1.5, label="best-tenth threshold")
        ax.axvline(scores.max(), color="k", linewidth=1.5, label="best episode")
        s = summary[("10%bc", name)]
        ax.errorbar([s["mean"]], [1.1 * counts.max()], xerr=[[s["mean"] - s["lo"]], [s["hi"] - s["mean"]]],
                    fmt="v", color="C1", markeredgecolor="k", markersize=9, capsize=4, linewidth=2,
                    label="10%BC of record: mean, 95% interval")
        ax.set_ylim(0, 1.2 * counts.max())
        ax.set_xlim(min(-5.0, scores.min() - 3), max(130.0, scores.max() + 5))
        ax.set_title(f"{name}: {len(scores):,} episodes\nbest tenth {top.mean():.1f}, best {scores.max():.1f}; "
                     f"10%BC {s['mean']:.1f}", fontsize=11)
        ax.set_xlabel("episode's normalised score", fontsize=11)
        ax.set_ylabel("episodes", fontsize=11)
        ax.tick_params(labelsize=10)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=10)
    fig.suptitle("What 10%BC clones: the best tenth of each dataset (0 = random, 100 = expert)", fontsize=12)
    plots.save_figure(fig, path)
    return path


def main_figure(path: Path, record: list[dict]) -> Path:
    summary = plots.ci_summary(record, ALGOS, HOPPER)
    fig, axes = plt.subplots(2, 2, figsize=(8.5, 7.4), sharey=True, layout="constrained")
    rows = np.arange(len(ALGOS))[::-1]  # BC at the top
    for ax, name in zip(axes.flat, HOPPER):
        tenth = summary[("10%bc", name)]
        ax.axvspan(tenth["lo"], tenth["hi"], color="C1", alpha=0.15, linewidth=0)
        ax.axvline(100, color="0.6", linestyle=":", linewidth=1)
        for row, a in zip(rows, ALGOS):
            s = summary[(a, name)]
            ax.plot(s["scores"], np.full(s["n"], row - 0.22), "|", color=COLORS[a], markersize=7, alpha=0.8)
            ax.errorbar([s["mean"]], [row], xerr=[[s["mean"] - s["lo"]], [s["hi"] - s["mean"]]], fmt="o",
                        color=COLORS[a], markersize=7, capsize=3, linewidth=2)
        seeds = {a: summary[(a, name)]["n"] for a in ALGOS}
        most = max(seeds.values(), key=list(seeds.values()).count)
        fewer = ", ".join(f"{NAMES[a]} {n}" for a, n in seeds.items() if n != most)
        ax.set_title(f"{name}\n({most} seeds{'; ' + fewer if fewer else ''})", fontsize=11)
        ax.set_xlim(-10, 130)
        ax.set_yticks(rows, [NAMES[a] for a in ALGOS], fontsize=11)
        ax.set_xlabel("normalised score, mean of the last 5 evaluations", fontsize=11)
        ax.tick_params(axis="x", labelsize=10)
        ax.grid(axis="x", color="0.9")
    fig.suptitle("Scores of record at 50,000 gradient steps (each run's last 5 evaluations): mean (dot), 95% "
                 "bootstrap\ninterval (bar), "
                 "seeds (ticks); shaded: 10%BC's interval; dotted: the expert (100)", fontsize=11)
    plots.save_figure(fig, path)
    return path


def main(out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    record = [r for r in plots.load_results(RECORD) if r["label"] in ALGOS and r["dataset"] in HOPPER]
    return [returns_figure(out_dir / "comparison_returns.png", record),
            main_figure(out_dir / "comparison_main.png", record)]
