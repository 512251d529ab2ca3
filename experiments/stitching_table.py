"""The stitching grid's table: every method on every dataset, with 95% bootstrap intervals over seeds, and each
method's difference from BC and from 10%BC (book/stitching.md, book/lab/stitching.md).

    python experiments/stitching_table.py                     # print the table of results/stitching
    python experiments/stitching_table.py --write             # also write results/stitching/table.md
    python experiments/stitching_table.py --root results/stitching-budget --evals pointmaze-medium-stitch-singletask-task1
                                                              # one dataset's runs, every evaluation (success in %):
                                                              # a row per step, a column per method, its seeds in a cell

For a maze the number is the success rate (in %, over the evaluation's 50 episodes); for Hopper the normalised
score. The number of record of a run is the protocol's statistic of record (``book/claims.md``): the mean of its last
five evaluations (``minirl.plots.RECORD_K``); the table's record columns and its differences and verdicts use it. The
final evaluation alone stays in the two columns marked "(lab)", and a verdict against 10%BC that flips between the two
summaries says so ("flips"). Settings chosen on the tasks being judged (IQL's DDPG+BC at alpha 0.0005 on the maze,
adopted from its success on stitch tasks 1-2) are labelled "tuned on the judged tasks": they decide no verdict.
A method's row lists its finished seeds and the precision each trained in (its
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

METHODS = ("bc", "10%bc", "goal-bc", "path-bc", "bcq", "cql", "iql", "td3+bc")
NAMES = {"bc": "BC", "10%bc": "10%BC", "goal-bc": "goal-BC", "path-bc": "path-BC", "bcq": "BCQ", "cql": "CQL",
         "iql": "IQL", "td3+bc": "TD3+BC"}


def final_and_last5(run: Path) -> tuple[float, float] | None:
    """The run's final number and its statistic of record, the mean over its last ``plots.RECORD_K`` = 5 evaluations
    (success in % for a maze), or None while it trains. A run with fewer than five evaluations has no statistic of
    record: NaN, which the table prints as "fewer than 5 evaluations"."""
    if not (run / "result.json").exists():
        return None
    with open(run / "eval.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    key = "success_rate" if "success_rate" in rows[0] else "score_mean"
    values = np.array([float(r[key]) for r in rows]) * (100.0 if key == "success_rate" else 1.0)
    k = plots.RECORD_K
    return float(values[-1]), float(values[-k:].mean()) if values.size >= k else float("nan")


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


def tuned_on_judged_tasks(label: str, dataset: str) -> bool:
    """Whether a row's settings were chosen by looking at the tasks being judged: on the maze, IQL's DDPG+BC at
    alpha 0.0005 (adopted from its success on stitch tasks 1-2; OGBench's own alpha is 0.0015)."""
    return dataset.startswith("pointmaze") and "alpha=0.0005" in label.split("-")


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


def difference(a: list[float], b: list[float]) -> str:
    if np.isnan(a).any() or np.isnan(b).any():
        return f"no statistic of record (fewer than {plots.RECORD_K} evaluations)"
    if len(a) < 2 or len(b) < 2:
        return "fewer than 2 seeds"
    if np.ptp(a) == 0 and np.ptp(b) == 0:  # every seed the same number on both sides (e.g. 0% everywhere)
        d = float(np.mean(a) - np.mean(b))
        return f"{d:+.1f} (no spread) {plots.verdict(d, d)}"
    d, lo, hi = plots.difference_ci(a, b)
    return f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}] {plots.verdict(lo, hi)}"


def mean_ci(values: list[float]) -> str:
    if np.isnan(values).any():
        return f"fewer than {plots.RECORD_K} evaluations"
    if len(values) < 2:
        return f"{values[0]:.1f} (one seed)"
    lo, hi = plots.bootstrap_ci(values)
    return f"{np.mean(values):.1f} [{lo:.1f}, {hi:.1f}]"


def render(table: dict, running: int) -> str:
    """Markdown: per dataset and method, the statistic of record (the mean of each run's last five evaluations) over
    seeds with its interval and its differences from BC and 10%BC; then, for the laboratory pages, the final
    evaluation and its difference from 10%BC. A verdict against 10%BC that the two summaries disagree on ends in
    "flips"."""
    lines = ["| dataset | method | seeds | precision | last 5 evaluations, mean [95% CI] | minus BC | minus 10%BC | "
             "final evaluation (lab) | final minus 10%BC (lab) |",
             "| --- | --- | ---: | --- | --- | --- | --- | --- | --- |"]
    for dataset in sorted(table):
        cells = table[dataset]
        final = {m: [f for f, _, _ in cells[m]] for m in cells}
        last5 = {m: [x for _, x, _ in cells[m]] for m in cells}
        for method in [*METHODS, *sorted(m for m in cells if m not in METHODS)]:
            if method not in cells:
                continue
            minus_bc = difference(last5[method], last5["bc"]) if method != "bc" and "bc" in last5 else ""
            against = method not in ("bc", "10%bc") and "10%bc" in last5
            minus_10 = difference(last5[method], last5["10%bc"]) if against else ""
            final_10 = difference(final[method], final["10%bc"]) if against else ""
            words = [next((w for w in ("above", "below", "overlap") if cell.endswith(w)), None)
                     for cell in (minus_10, final_10)]
            if None not in words and words[0] != words[1]:
                minus_10 += f" (final: {words[1]}; flips)"
            name = label_name(method) + (", tuned on the judged tasks" if tuned_on_judged_tasks(method, dataset)
                                         else "")
            lines.append(f"| {dataset} | {name} | {len(final[method])} | "
                         f"{precisions([p for _, _, p in cells[method]])} | {mean_ci(last5[method])} | "
                         f"{minus_bc} | {minus_10} | {mean_ci(final[method])} | {final_10} |")
    unit = ("Mazes: success rate in % over 50 episodes; Hopper: normalised score. The number of record is each run's "
            "mean over its last 5 evaluations; the final evaluation is for the laboratory pages. Differences are over "
            "seeds (`plots.difference_ci`); above/below: the 95% interval excludes 0. \"tuned on the judged tasks\": "
            "settings chosen on the tasks being judged, which decide no verdict.")
    unfinished = f"Runs not finished (training, or stopped with a checkpoint), left out: {running}."
    return "\n".join(lines) + f"\n\n{unit} {unfinished}\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
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
