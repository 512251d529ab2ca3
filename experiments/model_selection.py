"""Offline model selection on the book's committed runs (book/choosing.md): would the critic's own estimate have
picked the setting, or the checkpoint, that the evaluation picks?

    python experiments/model_selection.py              # both tables, as Markdown
    python experiments/model_selection.py --json       # the same numbers as JSON

It trains nothing and runs no episode: it reads ``eval.csv`` of the committed runs under ``results/``.

Two sweeps, on the two mixed Hopper tiers, seeds 0-2 of each setting (the sweeps have three; the default's extra
seeds 3-4 in ``results/record`` are left out so that every setting has the same seeds):

* IQL's expectile tau: 0.5 and 0.9 (``results/record-iql-tau``) and the default 0.7 (``results/record/iql``);
* BCQ's bound Phi: 0.0 and 0.25 (``results/record-bcq-phi``) and the default 0.05 (``results/record/bcq``).

Per run, at each evaluation step, ``eval.csv`` holds ``score_mean`` (the evaluation: 10 episodes) and ``q_start``
(the critic's estimate ``min_k Q_k(s_0, pi(s_0))`` at the start states, in raw reward units). ``q_start`` needs no
episode once the start states are drawn from the data; here they are the evaluation's start states, which on Hopper
are the same distribution as the data's.

**Settings table.** Per sweep, dataset and setting: the evaluation's number (the mean over seeds of each run's
statistic of record, the mean of its last 5 evaluations, ``minirl.plots.RECORD_K``) and the critic's (the same mean
of ``q_start``). In bold, per dataset, the setting each one ranks first.

**Checkpoints table.** Per sweep and dataset, over its nine runs (and over all 36): the mean score at the final
checkpoint, at the checkpoint with the highest ``q_start`` ("critic's pick") and at the checkpoint with the highest
score (the best any selector could do, "oracle", itself an optimistic number: the largest of ten noisy
evaluations); how often the critic's pick is the run's last checkpoint, and how often it is the oracle's.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
K = 5              # the statistic of record: the mean of a run's last K evaluations (minirl.plots.RECORD_K)
SEEDS = (0, 1, 2)
DATASETS = ("hopper-medium-replay", "hopper-medium-expert")
# sweep -> [(setting's name, its value, folder under results/ holding <dataset>/s<seed>/eval.csv)]; default second
SWEEPS = {
    "IQL tau": [("0.5", 0.5, "record-iql-tau/iql-expectile=0.5"), ("0.7", 0.7, "record/iql"),
                ("0.9", 0.9, "record-iql-tau/iql-expectile=0.9")],
    "BCQ Phi": [("0.0", 0.0, "record-bcq-phi/bcq-phi=0.0"), ("0.05", 0.05, "record/bcq"),
                ("0.25", 0.25, "record-bcq-phi/bcq-phi=0.25")],
}
DEFAULTS = {"IQL tau": "0.7", "BCQ Phi": "0.05"}


def read_eval(path: Path) -> dict[str, np.ndarray]:
    """One run's ``eval.csv``: arrays ``step``, ``score`` (``score_mean``) and ``q_start``."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path} has no evaluation rows")
    return {"step": np.array([int(r["step"]) for r in rows]),
            "score": np.array([float(r["score_mean"]) for r in rows]),
            "q_start": np.array([float(r["q_start"]) for r in rows])}


def runs_of(folder: str, dataset: str, root: Path = ROOT) -> list[dict]:
    paths = [root / "results" / folder / dataset / f"s{s}" / "eval.csv" for s in SEEDS]
    missing = [str(p.relative_to(root)) for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(f"model_selection: missing committed runs: {', '.join(missing)}")
    return [read_eval(p) for p in paths]


def analyse(root: Path = ROOT) -> list[dict]:
    """One row per (sweep, dataset, setting) with both tables' numbers."""
    rows = []
    for sweep, settings in SWEEPS.items():
        for dataset in DATASETS:
            group = []
            for name, value, folder in settings:
                runs = runs_of(folder, dataset, root)
                pick = [int(np.argmax(r["q_start"])) for r in runs]
                best = [int(np.argmax(r["score"])) for r in runs]
                group.append({
                    "sweep": sweep, "dataset": dataset, "setting": name, "value": value,
                    "default": name == DEFAULTS[sweep], "seeds": len(runs),
                    "score": float(np.mean([r["score"][-K:].mean() for r in runs])),
                    "q_start": float(np.mean([r["q_start"][-K:].mean() for r in runs])),
                    "final": float(np.mean([r["score"][-1] for r in runs])),
                    "critic_pick": float(np.mean([r["score"][i] for r, i in zip(runs, pick)])),
                    "critic_pick_step": [int(r["step"][i]) for r, i in zip(runs, pick)],
                    "oracle": float(np.mean([r["score"][i] for r, i in zip(runs, best)])),
                    "oracle_step": [int(r["step"][i]) for r, i in zip(runs, best)],
                    "same_step": int(sum(i == j for i, j in zip(pick, best))),
                    "pick_is_last": int(sum(i == len(r["step"]) - 1 for r, i in zip(runs, pick))),
                })
            by_score = max(group, key=lambda g: g["score"])["setting"]
            by_critic = max(group, key=lambda g: g["q_start"])["setting"]
            for g in group:
                g["picked_by_score"] = g["setting"] == by_score
                g["picked_by_critic"] = g["setting"] == by_critic
            rows += group
    return rows


def settings_table(rows: list[dict]) -> str:
    """One row per sweep and setting; per dataset the score of record and ``q_start``. In each dataset's columns the
    evaluation's pick (the highest score) and the critic's (the highest ``q_start``) are in bold."""
    head = " | ".join(f"{d.removeprefix('hopper-')}: score | `q_start`" for d in DATASETS)
    out = [f"| sweep | setting | {head} |", "| --- | --- |" + " ---: | ---: |" * len(DATASETS)]
    for sweep in SWEEPS:
        for name, _, _ in SWEEPS[sweep]:
            cells = []
            for d in DATASETS:
                g = next(g for g in rows if (g["sweep"], g["dataset"], g["setting"]) == (sweep, d, name))
                cells += [f"**{g['score']:.1f}**" if g["picked_by_score"] else f"{g['score']:.1f}",
                          f"**{g['q_start']:.1f}**" if g["picked_by_critic"] else f"{g['q_start']:.1f}"]
            label = name + (" (default)" if name == DEFAULTS[sweep] else "")
            out.append(f"| {sweep} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def checkpoints_table(rows: list[dict]) -> str:
    """One row per sweep and dataset, over its nine runs (three settings, three seeds), and one for all 36."""
    out = ["| sweep | dataset | final | critic's pick | oracle | pick is the last | pick is the oracle's |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    keys = list(dict.fromkeys((g["sweep"], g["dataset"]) for g in rows))
    for sweep, dataset in keys:
        t = totals([g for g in rows if (g["sweep"], g["dataset"]) == (sweep, dataset)])
        out.append(f"| {sweep} | `{dataset}` | {t['final']:.1f} | {t['critic_pick']:.1f} | {t['oracle']:.1f} | "
                   f"{t['pick_is_last']} of {t['runs']} | {t['same_step']} of {t['runs']} |")
    t = totals(rows)
    out.append(f"| all | | {t['final']:.1f} | {t['critic_pick']:.1f} | {t['oracle']:.1f} | "
               f"{t['pick_is_last']} of {t['runs']} | {t['same_step']} of {t['runs']} |")
    return "\n".join(out)


def totals(rows: list[dict]) -> dict:
    """Over ``rows`` (equal seeds each): the mean of the three checkpoint scores, the counts summed; and in how
    many of the (sweep, dataset) groups the critic ranks first the setting the evaluation ranks first."""
    groups = {(g["sweep"], g["dataset"]) for g in rows}
    agree = sum(any(g["picked_by_score"] and g["picked_by_critic"] for g in rows if (g["sweep"], g["dataset"]) == k)
                for k in groups)
    return {"final": float(np.mean([g["final"] for g in rows])),
            "critic_pick": float(np.mean([g["critic_pick"] for g in rows])),
            "oracle": float(np.mean([g["oracle"] for g in rows])),
            "pick_is_last": sum(g["pick_is_last"] for g in rows), "same_step": sum(g["same_step"] for g in rows),
            "runs": sum(g["seeds"] for g in rows), "groups": len(groups), "settings_agree": int(agree)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of the two tables")
    args = parser.parse_args(argv)
    try:
        rows = analyse()
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"rows": rows, "totals": totals(rows)}, indent=1))
    else:
        print(settings_table(rows), checkpoints_table(rows), sep="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
