"""Results and figures the notebooks share: load a suite's runs, tabulate scores over seeds, plot learning curves,
and the statistics of a comparison (percentile bootstrap confidence intervals, the interquartile mean, and a
stratified bootstrap of the IQM across datasets, after Agarwal et al. 2021, "Deep RL at the Edge of the
Statistical Precipice").

The runs are the directories written by ``experiments/run_suite.py``:
``<root>/<label>/<dataset>/s<seed>/{result.json, eval.csv, config.json, log.jsonl}``.

**The statistic of record** (the protocol, ``book/claims.md``): a run's number is the mean of its last
:data:`RECORD_K` = 5 evaluations (:func:`record_score`), never its final evaluation alone, which flips verdicts. Every
table and interval function here (:func:`ci_summary`, :func:`ci_table`, :func:`baseline_table`, :func:`aggregate_iqm`,
:func:`published_table`, :func:`value_check_table`, :func:`plot_score_intervals`, :func:`plot_baseline`) takes
``k=RECORD_K`` by default; ``k=None`` gives the final evaluation, for the laboratory pages only. A run with fewer than
``k`` evaluations has no statistic of record: a ``ValueError`` says so.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np


def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def results_path(path: str | Path) -> Path:
    """Where a results file or folder is: a relative ``path`` is looked up from the current directory first, then
    from the repository (so a notebook in ``notebooks/`` finds ``results/replay-size/buffers.json``). The path is
    returned whether or not it exists."""
    given = Path(path)
    return given if given.is_absolute() or given.exists() else _repo_root() / given


RECORD_K = 5
"""k of the statistic of record: a run's number is the mean of its last ``RECORD_K`` evaluations (``book/claims.md``,
the protocol). Five evaluations are the last 40% of a 50,000-step run evaluated every 5,000 steps."""


def _check_k(k) -> None:
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k: expected a positive number of evaluations, or None for the final one, got {k!r}")


def record_score(run: dict, k: int | None = RECORD_K) -> float:
    """A run's statistic of record: the mean of its last ``k`` evaluation scores (``run["curve"]["score"]``, from
    :func:`load_results`); ``k=None`` is its final evaluation (``run["score"]``, for the laboratory pages).

    A run already summarised by :func:`late_scores` keeps the summary it was given (``run["summary"]``). Fewer than
    ``k`` evaluations is a ``ValueError`` naming the run: it has no statistic of record."""
    _check_k(k)
    if k is None or run.get("summary"):
        return float(run["score"])
    scores = np.asarray(run.get("curve", {}).get("score", []), dtype=float)
    if scores.size < k:
        raise ValueError(f"{run.get('path', run.get('label'))} has {scores.size} evaluations, fewer than the {k} of "
                         f"the statistic of record (the mean of the last {k}); pass k=None for its final evaluation")
    return float(scores[-k:].mean())


def record_scores(runs: list[dict], label: str, dataset: str, k: int | None = RECORD_K) -> np.ndarray:
    """The statistic of record (:func:`record_score`) of each finished run of ``(label, dataset)``, one per seed, in
    the runs' order; ``k=None``: the final evaluations, as :func:`final_scores`."""
    return np.array([record_score(r, k) for r in select(runs, label, dataset) if r.get("score") is not None])


def statistic_name(k: int | None = RECORD_K) -> str:
    """How a table names its statistic: ``last 5 evaluations`` (their mean) or ``final evaluation``."""
    return "final evaluation" if k is None else f"last {k} evaluations"


def save_figure(fig, path: str | Path) -> Path:
    """Save ``fig`` as the book's figures are saved (120 dpi, cropped to its contents, no software version in the
    PNG's metadata, so the same figure gives the same bytes) and close it."""
    import matplotlib.pyplot as plt
    fig.savefig(path, dpi=120, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return Path(path)


def load_results(root: str | Path = "results/cpu") -> list[dict]:
    """Every finished run under ``root``, as a list of dicts (the fields of ``result.json``) with two additions:
    ``curve`` (a dict of numpy arrays ``step``, ``score``, ``return``, and the value check's ``q_start`` and
    ``mc_discounted``, NaN where the run has none, from ``eval.csv``) and ``path``.

    A relative ``root`` is looked up from the current directory first, then from the repository (so a notebook in
    ``notebooks/`` finds ``results/cpu``). A root with no finished run (or none at all) is a ``FileNotFoundError``
    saying where it looked, never an empty list that would make an empty table.
    """
    given = Path(root)
    root = results_path(given)
    found = sorted(root.glob("*/*/s*/result.json"))
    if not found:
        where = str(given) if root == given else f"{given} nor {root}"
        raise FileNotFoundError(f"no finished runs in {where} (none has <label>/<dataset>/s<seed>/result.json): "
                                f"make them with experiments/run_suite.py (its --root and --tag name the folder)")
    runs = []
    for path in found:
        r = json.loads(path.read_text())
        curve = {"step": [], "score": [], "return": [], "q_start": [], "mc_discounted": []}
        eval_csv = path.parent / "eval.csv"
        if eval_csv.exists():
            with open(eval_csv) as f:
                for row in csv.DictReader(f):
                    curve["step"].append(int(row["step"]))
                    curve["score"].append(float(row.get("score_mean") or "nan"))
                    curve["return"].append(float(row["return_mean"]))
                    for key in ("q_start", "mc_discounted"):  # the value check (agents with a critic)
                        curve[key].append(float(row.get(key) or "nan"))
        r["curve"] = {k: np.asarray(v) for k, v in curve.items()}
        r["path"] = str(path.parent)
        runs.append(r)
    return runs


def _run_folder(run: str | Path | dict) -> Path:
    """A run folder, given as itself or as a run of :func:`load_results`."""
    return Path(run["path"] if isinstance(run, dict) else run)


def evaluations(run: str | Path | dict) -> dict[int, float]:
    """A run's normalised evaluation scores by step, read from its ``eval.csv``: ``run`` is a run folder (finished or
    still training) or a run of :func:`load_results`."""
    with open(_run_folder(run) / "eval.csv") as f:
        return {int(r["step"]): float(r["score_mean"]) for r in csv.DictReader(f)}


def window_means(runs, lo: int, hi: int) -> tuple[dict[str, float], list[str]]:
    """Each run's mean evaluation score over steps ``lo`` to ``hi`` (keyed by the run folder's name, ``s<seed>``),
    for the runs whose evaluations reach ``hi``; and the folders of the runs that do not reach it yet, which are left
    out. ``runs``: run folders or runs of :func:`load_results`."""
    means, short = {}, []
    for run in runs:
        path = _run_folder(run)
        ev = evaluations(path)
        if hi in ev:
            means[path.name] = float(np.mean([v for s, v in ev.items() if lo <= s <= hi]))
        else:
            short.append(str(path))
    return means, short


def select(runs: list[dict], label: str | None = None, dataset: str | None = None) -> list[dict]:
    """The runs with this ``label`` (algorithm plus overrides, e.g. ``iql`` or ``iql-expectile=0.9``) and dataset."""
    return [r for r in runs if (label is None or r["label"] == label) and (dataset is None or r["dataset"] == dataset)]


def missing_runs(runs: list[dict], labels, datasets, seeds) -> list[str]:
    """``label/dataset/s<seed>`` for every expected run that has no result yet."""
    have = {(r["label"], r["dataset"], r["seed"]) for r in runs}
    return [f"{l}/{d}/s{s}" for l in labels for d in datasets for s in seeds if (l, d, s) not in have]


def _hardware_line(hw: dict) -> str:
    cpu = hw.get("cpu", "?") + (f" [{hw['cpu_id']}]" if hw.get("cpu_id") else "")  # runs since 2026-11-25 have it
    line = (f"{cpu} ({hw.get('cpu_count', '?')} cores, {hw.get('torch_threads', '?')} thread), "
            f"torch {hw.get('torch', '?')}")
    return line + (f", GPU {hw['gpu']}" if hw.get("gpu") else "")


def runs_table(runs: list[dict], labels, steps_for=None, lab: bool = False) -> str:
    """A markdown table of where the runs come from: per label, the runs found, their scales and step counts.
    ``lab=True`` adds the wall time they took in all and the hardware (CPU or GPU, threads, torch) recorded in their
    ``result.json``: laboratory detail, for the lab pages (:func:`lab_table` gives more of it), not a chapter's
    notebook.

    ``steps_for`` maps a column title to a function ``label -> steps``, e.g. ``{"cpu scale": SCALES["cpu"].steps_for}``,
    to show beside the steps run what each scale gives the algorithm."""
    steps_for = dict(steps_for or {})
    lines = ["| algorithm | runs | scale | steps run | " + "".join(f"{t} | " for t in steps_for)
             + ("wall time | hardware |" if lab else ""),
             "| --- | ---: | --- | ---: | " + "---: | " * len(steps_for) + ("---: | --- |" if lab else "")]
    lines = [line.rstrip() for line in lines]
    for label in labels:
        mine = select(runs, label)
        scales = ", ".join(sorted({r["scale"] for r in mine})) or "-"
        steps = ", ".join(f"{n:,}" for n in sorted({r["steps"] for r in mine})) or "-"
        budgets = "".join(f"{fn(label):,} | " for fn in steps_for.values())
        row = f"| {label} | {len(mine)} | {scales} | {steps} | {budgets}"
        if lab:
            known = [r["wall_time_s"] for r in mine if r.get("wall_time_s") is not None]
            hours = f"{sum(known) / 3600:.1f} h" + (f" + {len(mine) - len(known)} not known"
                                                    if len(known) < len(mine) else "")
            hardware = "; ".join(sorted({_hardware_line(r["hardware"]) for r in mine if r.get("hardware")})) or "-"
            row += f"{hours} | {hardware} |"
        lines.append(row.rstrip())
    return "\n".join(lines)


def lab_table(runs: list[dict], labels, names=None) -> str:
    """The laboratory detail of a grid of runs, one row per label, from their ``result.json``: the machines (each
    with its number of runs), the precisions, the range of updates per second, the range of wall times per run
    (evaluations included; :func:`wall_minutes`, which counts the runs resumed without a record of their earlier
    part's time) and the wall time in all. For the lab pages (``scripts/lab_tables.py``); a chapter's notebook prints
    the results, not this."""
    names = names or {}
    lines = ["| algorithm | runs | machine (runs) | precision | updates/s | wall time per run | wall time in all |",
             "| --- | ---: | --- | --- | ---: | --- | ---: |"]
    for label in labels:
        mine = select(runs, label)
        if not mine:
            lines.append(f"| {names.get(label, label)} | 0 | - | - | - | - | - |")
            continue
        machines: dict[str, int] = {}
        for r in mine:
            line = _hardware_line(r["hardware"]) if r.get("hardware") else "not recorded"
            machines[line] = machines.get(line, 0) + 1
        machine = "; ".join(f"{m} ({n})" for m, n in sorted(machines.items()))
        precision = ", ".join(sorted({str(r.get("precision", "?")) for r in mine}))
        rates = [r["updates_per_s"] for r in mine if r.get("updates_per_s")]
        rate = "-" if not rates else (f"{min(rates):.1f}" if len(rates) == 1 else f"{min(rates):.1f} to {max(rates):.1f}")
        known = [r["wall_time_s"] for r in mine if r.get("wall_time_s") is not None]
        hours = f"{sum(known) / 3600:.1f} h" + (f" + {len(mine) - len(known)} not known" if len(known) < len(mine) else "")
        lines.append(f"| {names.get(label, label)} | {len(mine)} | {machine} | {precision} | {rate} | "
                     f"{wall_minutes(mine)} | {hours} |")
    return "\n".join(lines)


def lab_runs_table(runs: list[dict], names=None) -> str:
    """The laboratory detail of each run, one row per run (sorted by label, dataset, seed), from its ``result.json``
    and ``log.jsonl``: the machine, threads and precision, the parts it ran in (a resumed run has several; "several"
    when earlier parts did not record their time), its updates per second (as ``result.json`` records them: for a
    resumed run, the mean over its last part), its update time (evaluations excluded, :func:`update_seconds`; "not
    recorded" for an older run resumed across parts) with the CPU time of the updates where recorded, its wall time
    (evaluations included; "not recorded" where a part's was not) and the episodes of the dataset it trained on (a
    Minari id by its last part). For the lab pages."""
    names = names or {}
    lines = ["| run | machine, threads, precision | parts | updates/s | updates (CPU) | wall time | episodes |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(runs, key=lambda r: (r["label"], r["dataset"], r["seed"])):
        hw = r.get("hardware") or {}
        machine = (f"{hw.get('cpu', 'not recorded')}" + (f", GPU {hw['gpu']}" if hw.get("gpu") else "")
                   + f", {hw.get('torch_threads', '?')} thread, {r.get('precision', '?')}")
        dataset = r["dataset"].split("/")[-1].removesuffix("-v0")  # a Minari id by its last part
        segments = r.get("segments_s") or [None]
        parts = "several" if None in segments else str(len(segments))
        rate = f"{r['updates_per_s']:.1f}" if r.get("updates_per_s") else "-"
        updates = update_seconds(r) if "path" in r else None
        cpu = r.get("update_cpu_s")
        update = "not recorded" if updates is None else f"{updates / 3600:.2f} h" + (
            f" ({cpu / 3600:.2f} h)" if cpu is not None else "")
        wall = r.get("wall_time_s")
        episodes = (r.get("data") or {}).get("episodes")
        lines.append(f"| {names.get(r['label'], r['label'])}, {dataset}, seed {r['seed']} | {machine} | {parts} | "
                     f"{rate} | {update} | " + ("not recorded" if wall is None else f"{wall / 3600:.2f} h") + " | "
                     + ("-" if episodes is None else f"{episodes:,}") + " |")
    return "\n".join(lines)


def wall_minutes(runs: list[dict]) -> str:
    """The range of the runs' wall times (evaluations included) as "12 to 27 min per run", saying how many runs have
    no known wall time (resumed from a checkpoint written before checkpoints recorded it: ``wall_time_s`` is None)."""
    known = [r["wall_time_s"] / 60 for r in runs if r.get("wall_time_s") is not None]
    if not known:
        text = "no known wall time"
    elif round(min(known)) == round(max(known)):
        text = f"{min(known):.0f} min" + (" per run" if len(runs) > 1 else "")
    else:
        text = f"{min(known):.0f} to {max(known):.0f} min per run"
    unknown = len(runs) - len(known)
    return text + (f" ({unknown} run{'s' * (unknown > 1)} resumed without a record of the earlier part's time)"
                   if unknown else "")


def score_summary(runs: list[dict]) -> dict[tuple[str, str], dict]:
    """``{(label, dataset): {"mean", "std", "n", "scores"}}`` of the final normalised scores over seeds (the final
    evaluation, not the statistic of record: for the first edition's runs and the laboratory pages; tables of record
    use :func:`ci_summary`).

    ``std`` is the *sample* standard deviation (``ddof=1``, divisor ``n - 1``): with three seeds the population
    standard deviation (divisor ``n``) would be smaller by a factor ``sqrt(2/3)``, about 18%.  With a single seed
    there is no spread to estimate and ``std`` is ``nan``."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        if r.get("score") is not None:
            groups.setdefault((r["label"], r["dataset"]), []).append(float(r["score"]))
    return {k: {"mean": float(np.mean(v)), "std": sample_std(v), "n": len(v), "scores": v}
            for k, v in groups.items()}


def sample_std(values) -> float:
    """The sample standard deviation, ``sqrt(sum (x - mean)^2 / (n - 1))``; ``nan`` for fewer than two values."""
    x = np.asarray(values, dtype=float)
    return float(np.std(x, ddof=1)) if x.size > 1 else float("nan")


def score_table(runs: list[dict], labels=None, datasets=None) -> str:
    """A markdown table: one row per dataset, one column per label, cells ``mean ± sample std (n seeds)``
    (``mean (1)`` for a single seed, which has no spread)."""
    summary = score_summary(runs)
    labels = list(labels) if labels else sorted({k[0] for k in summary})
    datasets = list(datasets) if datasets else sorted({k[1] for k in summary})
    lines = ["| dataset | " + " | ".join(labels) + " |", "| --- |" + " ---: |" * len(labels)]
    for d in datasets:
        cells = []
        for lab in labels:
            s = summary.get((lab, d))
            if s is None:
                cells.append("not run")
            elif s["n"] < 2:
                cells.append(f"{s['mean']:.1f} ({s['n']})")
            else:
                cells.append(f"{s['mean']:.1f} ± {s['std']:.1f} ({s['n']})")
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def train_log(run: dict) -> list[dict]:
    """The ``"train"`` records of a run's ``log.jsonl`` (the training loop writes one every ``log_every`` gradient
    steps: the means of the update's diagnostics over those steps, e.g. CQL-Lagrange's ``alpha_prime`` and
    ``cql_gap`` or IQL's advantage ``weight``); ``[]`` for a run without a log."""
    path = Path(run["path"]) / "log.jsonl"
    if not path.exists():
        return []
    with open(path) as f:
        return [row for row in map(json.loads, f) if row.get("kind") == "train"]


def update_seconds(run: dict, log: list[dict] | None = None) -> float | None:
    """Seconds of gradient updates the run took, evaluations excluded (``log``: its :func:`train_log`, read here if
    not given). The training loop records them since step 0 in each log record (``update_s``); a run made before it
    did is exact only if it ran in one part (``segments_s`` of one element): its steps over its last record's
    ``updates_per_s``, a mean since the part began. For an older run resumed across parts this returns ``None``: its
    log keeps each part's mean rate since that part began, not where the parts began. (Summing ``1000 / rate`` over
    the records, which this function replaces, is not a time: each rate is a running mean.)"""
    log = train_log(run) if log is None else log
    if not log:
        return None
    last = log[-1]
    if last.get("update_s") is not None:
        return float(last["update_s"])
    if len(run.get("segments_s") or []) == 1 and last.get("updates_per_s"):
        return last["step"] / last["updates_per_s"]
    return None


def log_series(runs: list[dict], label: str, dataset: str, key: str):
    """One logged field of ``(label, dataset)`` over training: ``(steps, values)`` with ``values`` one row per seed,
    cut to the shortest log; ``None`` if no run has a log. A field missing from a record is a ``KeyError`` naming it
    and the run."""
    logs = [(r, log) for r, log in ((r, train_log(r)) for r in select(runs, label, dataset)) if log]
    if not logs:
        return None
    n = min(len(log) for _, log in logs)
    for r, log in logs:
        if key not in log[0]:
            raise KeyError(f"{key!r} is not logged by {r['path']} (its fields: {', '.join(sorted(log[0]))})")
    steps = np.array([row["step"] for row in logs[0][1][:n]])
    return steps, np.array([[row[key] for row in log[:n]] for _, log in logs], dtype=float)


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


def plot_value_check(ax, runs: list[dict], label: str, dataset: str, color=None, name: str | None = None):
    """The critic's estimate at the start states (solid) against the discounted Monte-Carlo return of the same
    policy from those states (dashed), means over seeds, on a symmetric-log axis (estimates that run away span
    orders of magnitude). Returns the solid line, or ``None`` if no run of ``(label, dataset)`` has a value check."""
    sel = [r for r in select(runs, label, dataset)
           if len(r["curve"]["step"]) and np.isfinite(r["curve"]["q_start"]).all()]
    if not sel:
        return None
    n = min(len(r["curve"]["step"]) for r in sel)
    steps = sel[0]["curve"]["step"][:n]
    q = np.stack([r["curve"]["q_start"][:n] for r in sel]).mean(0)
    mc = np.stack([r["curve"]["mc_discounted"][:n] for r in sel]).mean(0)
    (line,) = ax.plot(steps, q, color=color, label=f"{name or label}: critic's Q(s0, pi(s0)) ({len(sel)} seeds)")
    ax.plot(steps, mc, color=line.get_color(), linestyle="--", label=f"{name or label}: Monte-Carlo return")
    ax.set_yscale("symlog", linthresh=10.0)
    ax.set_xlabel("gradient steps")
    ax.set_ylabel("discounted return from the start states")
    ax.set_title(dataset)
    return line


def value_check_table(runs: list[dict], labels, datasets, k: int | None = RECORD_K) -> str:
    """Markdown: per algorithm and dataset, the value check over seeds: the critic's mean estimate at the start
    states, the Monte-Carlo discounted return of its policy, and each seed's error, estimate minus return (a
    difference, not a ratio: a collapsed policy's return is near zero). Each seed's numbers are the statistic of
    record, means over its last ``k`` evaluations (``k=None``: its final one, ``q_start`` and ``mc_discounted`` of
    its ``result.json``); the last column counts every evaluation."""
    _check_k(k)
    lines = ["| algorithm | dataset | seeds | critic's Q(s0, pi(s0)) | Monte-Carlo return | estimate - return, per seed "
             "| estimate below the return (evaluations) |",
             "| --- | --- | ---: | ---: | ---: | --- | ---: |"]
    for label in labels:
        for dataset in datasets:
            sel = sorted((r for r in select(runs, label, dataset) if r.get("q_start") is not None),
                         key=lambda r: r["seed"])
            if not sel:
                continue
            q = np.array([_late_value(r, "q_start", k) for r in sel])
            mc = np.array([_late_value(r, "mc_discounted", k) for r in sel])
            errors = ", ".join(_compact(a - b, sign=True) for a, b in zip(q, mc))
            below, checked = _evaluations_below(sel)
            lines.append(f"| {label} | {dataset} | {len(sel)} | {_compact(q.mean())} | {_compact(mc.mean())} | {errors} "
                         f"| {below} of {checked} |")
    return "\n".join(lines)


def _late_value(run: dict, key: str, k: int | None) -> float:
    """A value-check field (``q_start`` or ``mc_discounted``) of a run: its final value (``k=None``) or its mean over
    the last ``k`` evaluations."""
    if k is None:
        return float(run[key])
    values = np.asarray(run.get("curve", {}).get(key, []), dtype=float)
    if values.size < k or not np.isfinite(values[-k:]).all():
        raise ValueError(f"{run.get('path', run.get('label'))}: {key} at {values.size} evaluations, fewer than the "
                         f"{k} of the statistic of record; pass k=None for the final one")
    return float(values[-k:].mean())


def _compact(x: float, sign: bool = False) -> str:
    """``1,234.5`` below 100,000 in absolute value; above, millions with one decimal: ``9.3M`` (``+`` if ``sign``)."""
    if abs(x) >= 1e5:
        return f"{x / 1e6:{'+' if sign else ''}.1f}M"
    return f"{x:{'+' if sign else ''},.1f}"


def _evaluations_below(runs: list[dict]) -> tuple[int, int]:
    """How many of the runs' evaluations (every seed, every evaluation with a value check) had the critic's estimate
    below the Monte-Carlo return, and how many evaluations had a value check."""
    below = checked = 0
    for r in runs:
        q, mc = r.get("curve", {}).get("q_start"), r.get("curve", {}).get("mc_discounted")
        if q is None or mc is None:
            continue
        ok = np.isfinite(q) & np.isfinite(mc)
        below += int((q[ok] < mc[ok]).sum())
        checked += int(ok.sum())
    return below, checked


def plot_value_scatter(ax, runs: list[dict], labels, datasets, colors=None, markers=None, names=None,
                       symlog: bool = True):
    """Each seed's final value check as a point: the Monte-Carlo return of its policy (x) against its critic's estimate
    at the same start states (y), both in discounted return units, with the line estimate = return. Points below the
    line are critics that underestimate their policy (a lower bound), points above overestimate it. One colour per
    algorithm (``colors``), one marker per dataset (``markers``). ``symlog`` (default) puts both axes on a
    symmetric-log scale, for estimates that run away by orders of magnitude; ``symlog=False`` keeps them linear, to
    read errors of a few percent. Returns the labels drawn (those with at least one value check)."""
    markers = dict(markers or {})
    default_markers = "os^Dv<>"
    drawn, lo, hi = [], np.inf, -np.inf
    for i, label in enumerate(labels):
        color = (colors or {}).get(label, f"C{i}")
        for j, dataset in enumerate(datasets):
            sel = [r for r in select(runs, label, dataset) if r.get("q_start") is not None]
            if not sel:
                continue
            x = np.array([r["mc_discounted"] for r in sel])
            y = np.array([r["q_start"] for r in sel])
            marker = markers.get(dataset, default_markers[j % len(default_markers)])
            ax.scatter(x, y, color=color, marker=marker, s=30, alpha=0.8,
                       label=f"{(names or {}).get(label, label)}, {dataset}")
            lo, hi = min(lo, x.min(), y.min()), max(hi, x.max(), y.max())
            if label not in drawn:
                drawn.append(label)
    if drawn:
        ax.plot([lo, hi], [lo, hi], color="k", lw=1, linestyle=":", label="estimate = return")
    if symlog:
        ax.set_xscale("symlog", linthresh=10.0)
        ax.set_yscale("symlog", linthresh=10.0)
    ax.set_xlabel("Monte-Carlo discounted return of the policy")
    ax.set_ylabel("critic's estimate Q(s0, pi(s0))")
    return drawn


# ---------------------------------------------------------------------------------------------------------------
# Statistics of a comparison: bootstrap confidence intervals, the interquartile mean, the stratified bootstrap.
# ---------------------------------------------------------------------------------------------------------------

def _as_values(values, name: str = "values") -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name} is empty: at least one value is needed")
    bad = ~np.isfinite(x)
    if bad.any():
        raise ValueError(f"{name} has {int(bad.sum())} non-finite values (first at index {int(np.argmax(bad))})")
    return x


def _check_confidence(confidence: float, n_boot: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1 (e.g. 0.95), got {confidence!r}")
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")


def iqm_weights(n: int) -> np.ndarray:
    """The weights the interquartile mean gives to the ``n`` sorted values (they sum to 1).

    Each sorted value holds probability ``1/n`` of the empirical distribution, the i-th (from 0) on
    ``[i/n, (i+1)/n]``; its weight is the part of that interval inside ``[1/4, 3/4]``, divided by 1/2. So a value that
    straddles a quartile counts in part. For ``n = 1..3`` no value is dropped entirely: ``n = 3`` gives
    ``(1/6, 2/3, 1/6)``.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    i = np.arange(n)
    overlap = np.clip(np.minimum((i + 1) / n, 0.75) - np.maximum(i / n, 0.25), 0.0, None)
    return overlap / 0.5


def iqm(values, axis: int = -1) -> float | np.ndarray:
    """Interquartile mean: the mean of the middle 50% of the values (Agarwal et al. 2021).

    Defined exactly as the average of the empirical quantile function over ``[0.25, 0.75]``, so a value that straddles
    a quartile is counted with a fractional weight (:func:`iqm_weights`). When the number of values is a multiple of 4
    this is the mean of the middle half, and equals ``scipy.stats.trim_mean(values, 0.25)``, which rliable uses.
    Otherwise they differ: ``trim_mean`` drops ``floor(n / 4)`` whole values at each end (for ``n = 5`` it keeps 3
    values with equal weights; here the 2nd and 4th count 0.3 each and the 3rd 0.4). The fractional form changes
    continuously as values move and counts every seed of a 3-seed cell. With one value the IQM is that value.

    ``values`` may be 2-D (e.g. bootstrap resamples); the IQM is taken along ``axis``.
    """
    x = np.asarray(values, dtype=float)
    if x.ndim == 0:
        x = x[None]
    if x.shape[axis] == 0:
        raise ValueError("values is empty: the IQM needs at least one value")
    w = iqm_weights(x.shape[axis])
    out = np.tensordot(np.sort(x, axis=axis), w, axes=([axis], [0]))
    return float(out) if np.ndim(out) == 0 else out


def _statistic_rows(statistic, samples: np.ndarray) -> np.ndarray:
    """``statistic`` of every row of a 2-D array (vectorised for ``np.mean``, ``np.median`` and :func:`iqm`)."""
    if statistic in (np.mean, np.median, iqm):
        return np.asarray(statistic(samples, axis=1), dtype=float)
    return np.array([float(statistic(row)) for row in samples])


def bootstrap_ci(values, confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0,
                 statistic=np.mean) -> tuple[float, float]:
    """Percentile bootstrap confidence interval ``(lo, hi)`` of ``statistic(values)``.

    Resamples the values with replacement ``n_boot`` times (a ``numpy`` generator seeded with ``seed``, so the same
    call gives the same interval), computes the statistic of each resample, and returns its ``(1 - confidence) / 2``
    and ``(1 + confidence) / 2`` quantiles.  With one value every resample is that value, so the interval is
    ``(value, value)``: it says nothing about the spread over seeds, it only restates the one number.  With few
    values (3 seeds) the interval is wide and itself uncertain: a resample can only contain the values seen, so the
    interval never reaches beyond the smallest and largest of them, and it is narrower than the truth would be.

    Raises ``ValueError`` for empty or non-finite values, a confidence outside ``(0, 1)`` or ``n_boot < 1``.
    """
    x = _as_values(values)
    _check_confidence(confidence, n_boot)
    if x.size == 1:
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    stats = _statistic_rows(statistic, x[rng.integers(0, x.size, size=(int(n_boot), x.size))])
    lo, hi = np.quantile(stats, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(lo), float(hi)


def stratified_bootstrap_ci(groups, confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0,
                            statistic=iqm) -> tuple[float, float]:
    """Bootstrap interval of ``statistic`` over all the values of several groups, resampling *within* each group.

    ``groups`` is a dict (or list) of 1-D arrays, one per dataset (stratum): each resample draws ``len(group)``
    values with replacement from every group and pools them, so every resample keeps each dataset's number of runs
    and never puts one dataset's score in another's place (Agarwal et al.'s stratified bootstrap: tasks are fixed,
    seeds are the random part).  Deterministic for a ``seed``.
    """
    arrays = list(groups.values()) if isinstance(groups, dict) else list(groups)
    if not arrays:
        raise ValueError("groups is empty: at least one group of values is needed")
    arrays = [_as_values(g, f"group {i}") for i, g in enumerate(arrays)]
    _check_confidence(confidence, n_boot)
    rng = np.random.default_rng(seed)
    samples = np.concatenate([g[rng.integers(0, g.size, size=(int(n_boot), g.size))] for g in arrays], axis=1)
    lo, hi = np.quantile(_statistic_rows(statistic, samples), [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(lo), float(hi)


def final_scores(runs: list[dict], label: str, dataset: str) -> np.ndarray:
    """The final normalised scores of the finished runs of ``(label, dataset)``, one per seed, in the runs' order."""
    return np.array([float(r["score"]) for r in select(runs, label, dataset) if r.get("score") is not None])


def late_scores(runs: list[dict], evaluations: int = 10) -> list[dict]:
    """The runs with ``score`` replaced by the mean of their last ``evaluations`` evaluation scores (``curve``).

    A run's final score is one evaluation (a few episodes); where single evaluations drop far below a flat curve now
    and then, the mean of the last few is the steadier reading of where training ended.  Every other summary
    (:func:`ci_summary`, :func:`baseline_table`) takes the returned runs as they are (their ``summary`` says which):
    the statistic of record is ``late_scores(runs, RECORD_K)``, what those functions compute by default.
    """
    if isinstance(evaluations, bool) or not isinstance(evaluations, int) or evaluations < 1:
        raise ValueError(f"evaluations: expected a positive integer, got {evaluations!r}")
    out = []
    for r in runs:
        scores = np.asarray(r["curve"]["score"], dtype=float)
        if scores.size < evaluations:
            raise ValueError(f"evaluations: {r.get('path', r['label'])} has {scores.size} evaluations, fewer than "
                             f"the {evaluations} asked for")
        out.append({**r, "score": float(scores[-evaluations:].mean()), "summary": f"last {evaluations}"})
    return out


def difference_ci(a, b, confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """``(mean(a) - mean(b), lo, hi)``: the difference of two independent groups' means (e.g. the seeds of two
    algorithms on one dataset) with a percentile bootstrap interval that resamples each group on its own.

    The interval excluding 0 is this book's test of "above" or "below" (:func:`baseline_table`). With three seeds
    per group a resample only recombines the values seen, so the interval is narrow for what three seeds can know:
    read it as "the seeds do not overlap in this direction", not as a significance test."""
    x, y = _as_values(a, "a"), _as_values(b, "b")
    _check_confidence(confidence, n_boot)
    rng = np.random.default_rng(seed)
    mx = x[rng.integers(0, x.size, size=(int(n_boot), x.size))].mean(1)
    my = y[rng.integers(0, y.size, size=(int(n_boot), y.size))].mean(1)
    lo, hi = np.quantile(mx - my, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(x.mean() - y.mean()), float(lo), float(hi)


def verdict(lo: float, hi: float) -> str:
    """The verdict of a difference's interval ``[lo, hi]`` (:func:`difference_ci`): ``"above"`` when it lies above 0,
    ``"below"`` when below, else ``"overlap"``."""
    return "above" if lo > 0 else "below" if hi < 0 else "overlap"


def baseline_table(runs: list[dict], labels, baselines, datasets, confidence: float = 0.95, n_boot: int = 10_000,
                   seed: int = 0, k: int | None = RECORD_K) -> str:
    """Markdown: for each dataset and algorithm, its statistic of record (each run's mean over its last ``k``
    evaluations; ``k=None``: its final one) as mean [CI] (seeds) and, per baseline (e.g. ``bc``
    and ``10%bc``), the difference of the means with the bootstrap interval of :func:`difference_ci` and a verdict:
    **above** (interval above 0), **below** (below 0) or overlap. Cells without runs say ``not run``."""
    summary = ci_summary(runs, list(labels) + list(baselines), datasets, confidence, n_boot, seed, k)
    pct = f"{100 * confidence:g}%"
    lines = [f"| dataset | algorithm | score ({statistic_name(k)}), mean [{pct} CI] (seeds) | "
             + " | ".join(f"minus {b} [{pct} CI]" for b in baselines) + " |",
             "| --- | --- | ---: |" + " ---: |" * len(baselines)]
    for d in datasets:
        for lab in labels:
            s = summary.get((lab, d))
            if s is None:
                lines.append(f"| {d} | {lab} | not run |" + " - |" * len(baselines))
                continue
            cells = []
            for b in baselines:
                base = summary.get((b, d))
                if base is None:
                    cells.append(f"{b} not run")
                    continue
                diff, lo, hi = difference_ci(s["scores"], base["scores"], confidence, n_boot, seed)
                cells.append(f"{diff:+.1f} [{lo:+.1f}, {hi:+.1f}] {verdict(lo, hi)}")
            lines.append(f"| {d} | {lab} | {ci_cell(s)} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


def protocol_verdict(a, b, a_final, b_final, confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0) -> dict:
    """One comparison judged by the protocol (``book/claims.md``): ``a`` minus ``b`` on the statistic of record (each
    run's mean over its last 5 evaluations) with :func:`difference_ci` and :func:`verdict`, and the same on the final
    evaluations (``a_final``, ``b_final``). Returns ``{"record": (d, lo, hi), "final": (d, lo, hi), "verdict",
    "final_verdict", "seeds": (len(a), len(b)), "provisional", "flips", "reading"}``: ``provisional`` when either side
    has fewer than 5 seeds, ``flips`` when the two summaries' verdicts differ; ``reading`` says the verdict of record
    and those two, e.g. ``"below (provisional; final: overlap, flips)"``."""
    rec = difference_ci(a, b, confidence, n_boot, seed)
    fin = difference_ci(a_final, b_final, confidence, n_boot, seed)
    v, vf = verdict(*rec[1:]), verdict(*fin[1:])
    provisional = min(len(a), len(b)) < 5
    flips = v != vf
    notes = (["provisional"] if provisional else []) + ([f"final: {vf}, flips"] if flips else [])
    return {"record": rec, "final": fin, "verdict": v, "final_verdict": vf, "seeds": (len(a), len(b)),
            "provisional": provisional, "flips": flips,
            "reading": v + (f" ({'; '.join(notes)})" if notes else "")}


def verdict_table(comparisons, k: int = RECORD_K, confidence: float = 0.95, n_boot: int = 10_000,
                  seed: int = 0) -> str:
    """Markdown: every comparison that decides a claim, judged by the protocol (:func:`protocol_verdict`).

    ``comparisons``: ``(claim, dataset, name, runs_a, label_a, runs_b, label_b)``, e.g. ``("b", "hopper-medium-replay",
    "IQL minus 10%BC", record, "iql", record, "10%bc")``; the two sides may come from different folders (a sweep
    against the runs of record, 1M steps against 50,000); ``claim`` None for a comparison that decides no claim
    (its column shows ``-``). Columns: the seeds a side, the difference of the statistic of record (mean of the last
    ``k`` evaluations) with its interval, the same on final evaluations (for the laboratory pages), and the reading.
    A comparison without runs on a side says so."""
    lines = [f"| claim | dataset | comparison | seeds | last {k}: difference [95% CI] | final (lab) | verdict |",
             "| --- | --- | --- | ---: | ---: | ---: | --- |"]
    for claim, dataset, name, runs_a, label_a, runs_b, label_b in comparisons:
        claim = "-" if claim is None else f"({claim})"
        a, b = record_scores(runs_a, label_a, dataset, k), record_scores(runs_b, label_b, dataset, k)
        if not a.size or not b.size:
            lines.append(f"| {claim} | {dataset} | {name} | - | not run | | |")
            continue
        v = protocol_verdict(a, b, final_scores(runs_a, label_a, dataset), final_scores(runs_b, label_b, dataset),
                             confidence, n_boot, seed)
        (d, lo, hi), (df, lof, hif) = v["record"], v["final"]
        lines.append(f"| {claim} | {dataset} | {name} | {v['seeds'][0]} / {v['seeds'][1]} | "
                     f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}] | {df:+.1f} [{lof:+.1f}, {hif:+.1f}] | {v['reading']} |")
    return "\n".join(lines)


# Kostrikov, Nair and Levine 2022 (IQL), Table 1: D4RL -v2, normalised score after 1M gradient steps, mean over seeds
# as published, for the Hopper tiers this book makes. The 10%BC column was read from copies of the table in later
# papers (Garg et al. 2023, XQL, Table 1; the table's nine locomotion 10%BC values sum to its 666.2).
IQL_PAPER_TABLE1 = {
    ("hopper-medium", "bc"): 52.9, ("hopper-medium", "10%bc"): 56.9, ("hopper-medium", "cql"): 58.5,
    ("hopper-medium", "iql"): 66.3,
    ("hopper-medium-replay", "bc"): 18.1, ("hopper-medium-replay", "10%bc"): 75.9,
    ("hopper-medium-replay", "cql"): 95.0, ("hopper-medium-replay", "iql"): 94.7,
    ("hopper-medium-expert", "bc"): 52.5, ("hopper-medium-expert", "10%bc"): 110.9,
    ("hopper-medium-expert", "cql"): 105.4, ("hopper-medium-expert", "iql"): 91.5,
}


def published_table(rows, published: dict, budgets, names=None, published_title: str = "published",
                    confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0, k: int | None = RECORD_K,
                    final: bool = False) -> str:
    """Markdown: our runs beside published numbers, one row per ``(dataset, label)`` of ``rows``.

    ``published`` maps ``(dataset, label)`` to the published score (``-`` where it has none). ``budgets`` is a list of
    ``(title, runs, labels)``, e.g. ``("ours, 1M steps", runs_1m, ["bc", "10%bc", "iql"])``: each budget gives one
    column, the statistic of record (each run's mean over its last ``k`` evaluations, :func:`record_score`) as mean
    [lo, hi] (seeds), the ``confidence`` bootstrap interval of :func:`ci_summary`; with ``final``, a second column
    of the final evaluations beside it (for the laboratory pages). A row whose label is not among the budget's
    ``labels`` (None: every label) shows ``-`` there, a row planned at that budget but without runs ``not run yet``.
    ``names`` maps labels to the names printed.

    The first edition's form of a budget, ``(title, runs, late, labels)``, still gives its two columns, ``title:
    final`` and ``last {late} evaluations`` (:func:`late_scores`), as the notebooks executed before the protocol
    show them."""
    rows = [tuple(r) for r in rows]
    if any(len(r) != 2 for r in rows):
        raise ValueError(f"rows: expected (dataset, label) pairs, got {rows!r}")
    names = dict(names or {})
    header = f"| dataset | algorithm | {published_title} |"
    columns = []  # per budget: a list of (summary, show seeds) and the labels planned
    for budget in budgets:
        if len(budget) not in (3, 4) or not (budget[-1] is None or isinstance(budget[-1], (list, tuple, set))):
            raise ValueError(f"budgets: expected (title, runs, labels) for each budget, labels a list or None, "
                             f"got {budget!r}")
        if len(budget) == 4:
            title, runs, late, labels = budget
        else:
            (title, runs, labels), late = budget, None
        kept = [r for r in runs if (r["dataset"], r["label"]) in rows]

        def summary(these, k_):
            return ci_summary(these, confidence=confidence, n_boot=n_boot, seed=seed, k=k_) if these else {}
        if late is not None:
            parts = [(summary(kept, None), True), (summary(late_scores(kept, late), None), False)]
            header += f" {title}: final | last {late} evaluations |"
        else:
            parts = [(summary(kept, k), True)]
            header += f" {title}, {statistic_name(k)} |"
            if final:
                parts.append((summary(kept, None), True))
                header += f" {title}, final evaluation |"
        columns.append((parts, None if labels is None else set(labels)))
    width = sum(len(parts) for parts, _ in columns)
    lines = [header, "| --- | --- | ---: |" + " ---: |" * width]
    for d, lab in rows:
        pub = published.get((d, lab))
        line = f"| {d} | {names.get(lab, lab)} | {'-' if pub is None else f'{pub:.1f}'} |"
        for parts, labels in columns:
            for summ, seeds in parts:
                if labels is not None and lab not in labels:
                    line += " - |"
                else:
                    s = summ.get((lab, d))
                    line += " not run yet |" if s is None else f" {ci_cell(s, seeds)} |"
        lines.append(line)
    return "\n".join(lines)


def plot_baseline(ax, runs: list[dict], label: str, dataset: str, color=None, name: str | None = None,
                  vertical: bool = False, confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0,
                  k: int | None = RECORD_K) -> bool:
    """A baseline (e.g. BC or 10%BC) across a plot of scores: a dashed line at the mean of its statistic of record
    (:func:`record_score`; ``k=None``: final scores) on
    ``dataset`` with the bootstrap interval of the mean shaded, labelled "name: mean [lo, hi] (n seeds)". Horizontal
    (scores on the y axis, as in a sweep) or ``vertical`` (scores on the x axis, as in ``plot_score_intervals``).
    Returns whether anything was drawn (False when the baseline has no runs on ``dataset``)."""
    x = record_scores(runs, label, dataset, k)
    if not x.size:
        return False
    lo, hi = bootstrap_ci(x, confidence, n_boot, seed)
    span, line = (ax.axvspan, ax.axvline) if vertical else (ax.axhspan, ax.axhline)
    span(lo, hi, color=color, alpha=0.15)
    line(x.mean(), color=color, lw=1.5, linestyle="--",
         label=f"{name or label}: {x.mean():.1f} [{lo:.1f}, {hi:.1f}] ({x.size} seeds)")
    return True


def plot_score_intervals(ax, runs: list[dict], labels, dataset: str, baselines=(), colors=None, names=None,
                         confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0, k: int | None = RECORD_K):
    """One row per algorithm on ``dataset``: each seed's statistic of record (:func:`record_score`; ``k=None``: its
    final score) (dots), the mean (black tick) and its bootstrap
    interval (bar); each baseline (e.g. BC and 10%BC) drawn across the plot as a vertical line at its mean with its
    interval shaded, so an algorithm "above the baseline" is a bar entirely to the right of the shading.
    Returns the labels drawn (those with runs)."""
    names = dict(names or {})
    for j, b in enumerate(baselines):
        plot_baseline(ax, runs, b, dataset, color=(colors or {}).get(b, f"C{j}"), name=names.get(b, b),
                      vertical=True, confidence=confidence, n_boot=n_boot, seed=seed, k=k)
    scores = {lab: record_scores(runs, lab, dataset, k) for lab in labels}
    drawn = [lab for lab in labels if scores[lab].size]
    for i, lab in enumerate(drawn):
        x = scores[lab]
        color = (colors or {}).get(lab, f"C{i}")
        _interval_row(ax, i, *bootstrap_ci(x, confidence, n_boot, seed), x.mean(), color)
        ax.plot(x, np.full(x.size, i), "o", color=color, ms=4)
    ax.set_yticks(range(len(drawn)), [f"{names.get(lab, lab)} ({scores[lab].size})" for lab in drawn])
    ax.set_ylim(-0.6, max(len(drawn), 1) - 0.4)
    ax.set_xlabel(f"normalised score, {statistic_name(k)} (dots: seeds; bar: {100 * confidence:g}% bootstrap CI of "
                  f"the mean)")
    ax.set_title(dataset)
    return drawn


def plot_sweep(ax, values, score_sets, color=None, name: str | None = None, confidence: float = 0.95,
               n_boot: int = 10_000, seed: int = 0):
    """A hyperparameter sweep: at each of ``values`` (e.g. IQL's expectile 0.5, 0.7, 0.9) the final scores of its
    seeds (``score_sets[i]``, dots), their mean (line) and the bootstrap interval of the mean (error bar). Values
    without runs are skipped. Returns the values drawn."""
    xs, means, los, his = [], [], [], []
    for v, scores in zip(values, score_sets):
        x = np.asarray(scores, dtype=float)
        if not x.size:
            continue
        lo, hi = bootstrap_ci(x, confidence, n_boot, seed)
        xs.append(v), means.append(x.mean()), los.append(lo), his.append(hi)
        ax.plot(np.full(x.size, v), x, "o", color=color, ms=3, alpha=0.6)
    if xs:
        means, los, his = map(np.asarray, (means, los, his))
        ax.errorbar(xs, means, yerr=[means - los, his - means], color=color, marker="s", capsize=4,
                    label=f"{name or ''} (mean, {100 * confidence:g}% CI)".strip())
    ax.set_ylabel("normalised score")
    return xs


def ci_cell(s: dict, seeds: bool = True) -> str:
    """One :func:`ci_summary` entry as a table cell: ``mean [lo, hi] (n)``, or without ``(n)``."""
    return f"{s['mean']:.1f} [{s['lo']:.1f}, {s['hi']:.1f}]" + (f" ({s['n']})" if seeds else "")


def ci_summary(runs: list[dict], labels=None, datasets=None, confidence: float = 0.95, n_boot: int = 10_000,
               seed: int = 0, k: int | None = RECORD_K) -> dict[tuple[str, str], dict]:
    """``{(label, dataset): {"mean", "lo", "hi", "n", "scores"}}``: the runs' statistic of record over seeds (the mean
    of each run's last ``k`` evaluations, :func:`record_score`; ``k=None``: final evaluations) with a percentile
    bootstrap interval of their mean (see :func:`bootstrap_ci`).  Pairs without runs are left out."""
    labels = list(labels) if labels else sorted({r["label"] for r in runs})
    datasets = list(datasets) if datasets else sorted({r["dataset"] for r in runs})
    out = {}
    for lab in labels:
        for d in datasets:
            x = record_scores(runs, lab, d, k)
            if x.size:
                lo, hi = bootstrap_ci(x, confidence, n_boot, seed)
                out[(lab, d)] = {"mean": float(x.mean()), "lo": lo, "hi": hi, "n": int(x.size), "scores": x}
    return out


def aggregate_iqm(runs: list[dict], label: str, datasets, confidence: float = 0.95, n_boot: int = 10_000,
                  seed: int = 0, k: int | None = RECORD_K) -> dict:
    """IQM of the statistic of record (:func:`record_score`; ``k=None``: final scores) of every (dataset, seed) run of ``label`` on ``datasets``, with a
    stratified bootstrap interval (seeds resampled within each dataset, :func:`stratified_bootstrap_ci`).

    Returns ``{"iqm", "lo", "hi", "n_runs", "datasets", "missing"}``: ``datasets`` are those with at least one run,
    ``missing`` those asked for without any (the IQM then covers fewer tasks: compare algorithms on the same
    datasets only).  With no run at all, ``iqm``, ``lo`` and ``hi`` are ``nan``.
    """
    groups = {d: record_scores(runs, label, d, k) for d in datasets}
    present = {d: g for d, g in groups.items() if g.size}
    missing = [d for d in datasets if d not in present]
    if not present:
        return {"iqm": float("nan"), "lo": float("nan"), "hi": float("nan"), "n_runs": 0, "datasets": [],
                "missing": missing}
    lo, hi = stratified_bootstrap_ci(present, confidence, n_boot, seed, statistic=iqm)
    return {"iqm": iqm(np.concatenate(list(present.values()))), "lo": lo, "hi": hi,
            "n_runs": int(sum(g.size for g in present.values())), "datasets": list(present), "missing": missing}


def common_datasets(runs: list[dict], labels, datasets) -> list[str]:
    """The datasets (in the given order) on which every label has at least one finished run."""
    return [d for d in datasets if all(final_scores(runs, lab, d).size for lab in labels)]


def ci_table(runs: list[dict], labels=None, datasets=None, confidence: float = 0.95, n_boot: int = 10_000,
             seed: int = 0, aggregate: bool = True, k: int | None = RECORD_K) -> str:
    """A markdown table: one row per dataset, one column per label, cells ``mean [lo, hi] (n)`` (the statistic of
    record, each run's mean over its last ``k`` evaluations, or its final one with ``k=None``; mean over ``n`` seeds and its ``confidence`` percentile bootstrap interval), ``not run`` where a cell has
    no run.  With ``aggregate``, a last row gives each label's IQM over all its (dataset, seed) runs on the datasets
    that every label *with runs* has run (their number is in the row; labels without any run show ``not run``), with a
    stratified bootstrap interval (:func:`aggregate_iqm`)."""
    labels = list(labels) if labels else sorted({r["label"] for r in runs})
    datasets = list(datasets) if datasets else sorted({r["dataset"] for r in runs})
    summary = ci_summary(runs, labels, datasets, confidence, n_boot, seed, k)
    pct = f"{100 * confidence:g}%"
    lines = [f"| dataset ({statistic_name(k)}: mean [{pct} CI] (seeds)) | " + " | ".join(labels) + " |",
             "| --- |" + " ---: |" * len(labels)]
    for d in datasets:
        cells = []
        for lab in labels:
            s = summary.get((lab, d))
            cells.append("not run" if s is None else ci_cell(s))
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    if aggregate:
        ran = [lab for lab in labels if any(summary.get((lab, d)) for d in datasets)]
        common = common_datasets(runs, ran, datasets) if ran else []
        if common:
            cells = []
            for lab in labels:
                a = aggregate_iqm(runs, lab, common, confidence, n_boot, seed, k)
                cells.append(f"{a['iqm']:.1f} [{a['lo']:.1f}, {a['hi']:.1f}] ({a['n_runs']})" if a["n_runs"]
                             else "not run")
            name = f"IQM over {len(common)} common dataset{'s' if len(common) > 1 else ''} (runs)"
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        else:
            lines.append("| IQM: no dataset run by every label with runs | " + " |" * len(labels))
    return "\n".join(lines)


def plot_aggregate(ax, aggregates: dict[str, dict], colors=None, confidence: float = 0.95):
    """Horizontal intervals of :func:`aggregate_iqm` results, one row per label (labels without runs are skipped)."""
    names = [lab for lab, a in aggregates.items() if a["n_runs"]]
    for i, lab in enumerate(names):
        a = aggregates[lab]
        color = (colors or {}).get(lab, f"C{i}")
        _interval_row(ax, i, a["lo"], a["hi"], a["iqm"], color)
    ax.set_yticks(range(len(names)), [f"{lab} ({aggregates[lab]['n_runs']} runs)" for lab in names])
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.set_xlabel(f"IQM of normalised score (bar: {100 * confidence:g}% stratified bootstrap CI)")
    return names


def _interval_row(ax, row: int, lo: float, hi: float, center: float, color) -> None:
    """One row of an interval plot: the interval ``[lo, hi]`` as a thick bar, ``center`` as a black tick."""
    ax.plot([lo, hi], [row, row], color=color, lw=6, alpha=0.5, solid_capstyle="butt")
    ax.plot([center], [row], "|", color="k", ms=14, mew=2)
