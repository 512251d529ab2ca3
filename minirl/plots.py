"""Results and figures the notebooks share: load a suite's runs, tabulate scores over seeds, plot learning curves.

The runs are the directories written by ``benchmarks/run_suite.py``:
``<root>/<label>/<dataset>/s<seed>/{result.json, eval.csv, config.json, log.jsonl}``.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np


def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def load_results(root: str | Path = "results/cpu") -> list[dict]:
    """Every finished run under ``root``, as a list of dicts (the fields of ``result.json``) with two additions:
    ``curve`` (a dict of numpy arrays ``step``, ``score``, ``return`` from ``eval.csv``) and ``path``.

    A relative ``root`` is looked up from the current directory first, then from the repository (so a notebook in
    ``notebooks/`` finds ``results/cpu``).  A missing root gives an empty list.
    """
    root = Path(root)
    if not root.is_absolute() and not root.exists():
        root = _repo_root() / root
    runs = []
    for path in sorted(root.glob("*/*/s*/result.json")):
        r = json.loads(path.read_text())
        curve = {"step": [], "score": [], "return": []}
        eval_csv = path.parent / "eval.csv"
        if eval_csv.exists():
            with open(eval_csv) as f:
                for row in csv.DictReader(f):
                    curve["step"].append(int(row["step"]))
                    curve["score"].append(float(row.get("score_mean") or "nan"))
                    curve["return"].append(float(row["return_mean"]))
        r["curve"] = {k: np.asarray(v) for k, v in curve.items()}
        r["path"] = str(path.parent)
        runs.append(r)
    return runs


def select(runs: list[dict], label: str | None = None, dataset: str | None = None) -> list[dict]:
    """The runs with this ``label`` (algorithm plus overrides, e.g. ``iql`` or ``iql-expectile=0.9``) and dataset."""
    return [r for r in runs if (label is None or r["label"] == label) and (dataset is None or r["dataset"] == dataset)]


def missing_runs(runs: list[dict], labels, datasets, seeds) -> list[str]:
    """``label/dataset/s<seed>`` for every expected run that has no result yet."""
    have = {(r["label"], r["dataset"], r["seed"]) for r in runs}
    return [f"{l}/{d}/s{s}" for l in labels for d in datasets for s in seeds if (l, d, s) not in have]


def score_summary(runs: list[dict]) -> dict[tuple[str, str], dict]:
    """``{(label, dataset): {"mean", "std", "n", "scores"}}`` of the final normalised scores over seeds."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        if r.get("score") is not None:
            groups.setdefault((r["label"], r["dataset"]), []).append(float(r["score"]))
    return {k: {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v), "scores": v}
            for k, v in groups.items()}


def score_table(runs: list[dict], labels=None, datasets=None) -> str:
    """A markdown table: one row per dataset, one column per label, cells ``mean ± std (n seeds)``."""
    summary = score_summary(runs)
    labels = list(labels) if labels else sorted({k[0] for k in summary})
    datasets = list(datasets) if datasets else sorted({k[1] for k in summary})
    lines = ["| dataset | " + " | ".join(labels) + " |", "| --- |" + " ---: |" * len(labels)]
    for d in datasets:
        cells = []
        for lab in labels:
            s = summary.get((lab, d))
            cells.append("not run" if s is None else f"{s['mean']:.1f} ± {s['std']:.1f} ({s['n']})")
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_curves(ax, runs: list[dict], label: str, dataset: str, key: str = "score", color=None,
                name: str | None = None):
    """Mean learning curve over seeds with a band from the lowest to the highest seed; labelled axes.

    Returns the line, or ``None`` if there is no run for ``(label, dataset)``.
    """
    sel = [r for r in select(runs, label, dataset) if len(r["curve"]["step"])]
    if not sel:
        return None
    n = min(len(r["curve"]["step"]) for r in sel)
    steps = sel[0]["curve"]["step"][:n]
    values = np.stack([r["curve"][key][:n] for r in sel])
    (line,) = ax.plot(steps, values.mean(0), color=color, label=f"{name or label} ({len(sel)} seeds)")
    ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.2)
    ax.set_xlabel("gradient steps")
    ax.set_ylabel("normalised score" if key == "score" else "return")
    ax.set_title(dataset)
    return line
