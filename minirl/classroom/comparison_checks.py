"""The comparison chapter's tasks (chapter 5, ``book/comparison.md``): a percentile bootstrap interval over seeds, the
interquartile mean, its stratified bootstrap over datasets, the difference of two methods with its interval and
verdict, and those verdicts read off the results of record.

Each statistic is checked against :mod:`minirl.plots`, the code behind every interval in the book. A bootstrap is
random, so the task fixes how the resamples are drawn (a ``numpy.random.default_rng(seed)`` generator and the order of
its calls, as the notebook states); an answer that draws them that way matches the reference to float precision.
"""
from __future__ import annotations

import numpy as np

from .agent_checks import _cached, _check_sweep
from .checks import Checks, Ref, _pick, fresh

RECORD = "results/record"  # the results of record (book/comparison.md): seven algorithms on four Hopper tiers
VERDICT_CODE = {"below": -1.0, "overlap": 0.0, "above": 1.0}
COMPARISONS = (("iql", "bc", "hopper-medium-replay"), ("iql", "10%bc", "hopper-medium-replay"),
               ("cql", "10%bc", "hopper-medium-replay"), ("iql", "10%bc", "hopper-medium-expert"),
               ("cql", "10%bc", "hopper-medium-expert"), ("bcq", "bc", "hopper-medium-expert"))
# while grading, record_verdicts is checked on as many comparisons drawn from these (every one has runs of record)
RECORD_POOL = tuple((m, b, ds) for m in ("iql", "cql", "cql-lagrange", "bcq", "sac-offline") for b in ("bc", "10%bc")
                    for ds in ("hopper-medium", "hopper-medium-replay", "hopper-medium-expert", "hopper-expert"))


def _samples():
    """``(description, values)``: the seeds of a few runs of record, small and odd sizes, one value, ties."""
    rng = np.random.default_rng(fresh(5))
    return [("5 seeds [27.2, 30.9, 31.2, 27.5, 29.4] (IQL on hopper-medium-replay)",
             np.array([27.2, 30.9, 31.2, 27.5, 29.4])),
            ("3 seeds [118.7, 39.3, 117.6] (one seed fell)", np.array([118.7, 39.3, 117.6])),
            ("one value [42.0]: the interval is that value", np.array([42.0])),
            ("two equal values [5.0, 5.0]", np.array([5.0, 5.0])),
            ("10 random values", rng.normal(50.0, 20.0, 10)),
            ("8 random values", rng.normal(0.0, 1.0, 8))]


def check_bootstrap_ci(fn) -> None:
    """Task: ``bootstrap_ci(values, confidence=0.95, n_boot=10_000, seed=0)``: the percentile bootstrap interval of
    the mean, resampled as :func:`minirl.plots.bootstrap_ci` does."""
    from .. import plots
    c = Checks("bootstrap_ci", reference=plots.bootstrap_ci)
    for description, values in _samples():
        c.compare(f"{description}, 95%", lambda v=values: np.asarray(fn(v.copy()), dtype=float),
                  Ref(lambda v=values: np.array(plots.bootstrap_ci(v))))
    values = _samples()[0][1]
    c.compare("5 seeds, 90%, 2,000 resamples, seed 3", lambda: np.asarray(fn(values.copy(), 0.9, 2000, 3), dtype=float),
              Ref(lambda: np.array(plots.bootstrap_ci(values, 0.9, 2000, 3))))
    c.report()


def check_iqm(fn) -> None:
    """Task: ``iqm(values)``: the interquartile mean, the average of the empirical quantile function over
    ``[1/4, 3/4]`` (a value straddling a quartile counts in part), as :func:`minirl.plots.iqm`."""
    from .. import plots
    c = Checks("iqm", reference=(plots.iqm, plots.iqm_weights))
    by_hand = [("[1, 2, 3, 4] (by hand: the mean of 2 and 3, 2.5)", [1.0, 2.0, 3.0, 4.0]),
               ("[7.0] (one value: itself)", [7.0]),
               ("[3, 1, 2] (unsorted; weights 1/6, 2/3, 1/6 on the sorted values: 2)", [3.0, 1.0, 2.0]),
               ("[0, 0, 10, 10, 100] (weights 0, 0.3, 0.4, 0.3, 0: 7)", [0.0, 0.0, 10.0, 10.0, 100.0])]
    for description, values in by_hand + [(d, list(v)) for d, v in _samples()]:
        c.compare(description, lambda v=values: float(fn(np.array(v))),
                  Ref(lambda v=values: plots.iqm(np.array(v))))
    c.report()


def _groups():
    runs = _record_runs()
    from .. import plots
    groups = {ds: plots.final_scores(runs, "iql", ds) for ds in
              ("hopper-medium", "hopper-medium-replay", "hopper-medium-expert", "hopper-expert")}
    return [("IQL's seeds of record on the four Hopper tiers (3, 5, 5, 3 seeds)", groups),
            ("two groups [1, 2, 3] and [10, 20]", {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([10.0, 20.0])}),
            ("one group of 6 values", {"a": np.array([3.0, 9.0, 4.0, 1.0, 7.0, 2.0])})]


def check_stratified_iqm_ci(fn) -> None:
    """Task: ``stratified_iqm_ci(groups, confidence=0.95, n_boot=10_000, seed=0)``: the bootstrap interval of the IQM
    of all the groups' values, resampling within each group, as :func:`minirl.plots.stratified_bootstrap_ci`."""
    from .. import plots
    c = Checks("stratified_iqm_ci", reference=plots.stratified_bootstrap_ci)
    cases = _groups()
    for description, groups in cases:
        copy = lambda g=groups: {k: v.copy() for k, v in g.items()}  # noqa: E731
        c.compare(description, lambda copy=copy: np.asarray(fn(copy()), dtype=float),
                  Ref(lambda g=groups: np.array(plots.stratified_bootstrap_ci(g))))
    description, groups = cases[0]
    c.compare(f"{description}, 90%, 3,000 resamples, seed 7",
              lambda: np.asarray(fn({k: v.copy() for k, v in groups.items()}, 0.9, 3000, 7), dtype=float),
              Ref(lambda: np.array(plots.stratified_bootstrap_ci(groups, 0.9, 3000, 7))))
    c.report()


def compare_reference(a, b, confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0) -> tuple:
    """``(mean(a) - mean(b), lo, hi, verdict)`` with :func:`minirl.plots.difference_ci` and
    :func:`minirl.plots.verdict`."""
    from .. import plots
    d, lo, hi = plots.difference_ci(a, b, confidence, n_boot, seed)
    return d, lo, hi, plots.verdict(lo, hi)


def _as_four(result):
    d, lo, hi, verdict = _pick(result, 0, 4), _pick(result, 1, 4), _pick(result, 2, 4), _pick(result, 3, 4)
    if verdict not in VERDICT_CODE:
        raise ValueError(f"the verdict is {verdict!r}; expected one of {sorted(VERDICT_CODE)}")
    return np.array([float(d), float(lo), float(hi), VERDICT_CODE[verdict]])


def check_compare(fn) -> None:
    """Task: ``compare(a, b, confidence=0.95, n_boot=10_000, seed=0)`` returns ``(difference, lo, hi, verdict)``:
    the difference of the means, its percentile bootstrap interval resampling each group on its own (``a`` first),
    and ``"above"``, ``"below"`` or ``"overlap"`` (the verdict is coded 1, -1, 0 in the comparisons)."""
    from .. import plots
    c = Checks("compare", reference=(compare_reference, plots.difference_ci, plots.verdict))
    cases = [("a = [3, 4, 5], b = [0, 1, 2]: clearly above", ([3.0, 4.0, 5.0], [0.0, 1.0, 2.0])),
             ("a = [0, 1, 2], b = [3, 4, 5]: clearly below", ([0.0, 1.0, 2.0], [3.0, 4.0, 5.0])),
             ("a = [1, 5, 9], b = [4, 5, 6]: overlap", ([1.0, 5.0, 9.0], [4.0, 5.0, 6.0])),
             ("IQL vs 10%BC seeds on hopper-medium-replay", ([27.2, 30.9, 31.2, 27.5, 29.4],
                                                            [39.7, 44.2, 30.2, 27.7, 29.7])),
             ("groups of different sizes (5 and 3)", ([1.0, 2.0, 2.5, 3.0, 9.0], [0.5, 1.5, 1.0]))]
    for description, (a, b) in cases:
        c.compare(description, lambda a=a, b=b: _as_four(fn(np.array(a), np.array(b))),
                  Ref(lambda a=a, b=b: _as_four(compare_reference(np.array(a), np.array(b)))))
    a, b = cases[3][1]
    c.compare("IQL vs 10%BC, 80%, 5,000 resamples, seed 11",
              lambda: _as_four(fn(np.array(a), np.array(b), 0.8, 5000, 11)),
              Ref(lambda: _as_four(compare_reference(np.array(a), np.array(b), 0.8, 5000, 11))))
    c.report()


def _record_runs():
    from .. import plots
    return _cached("record-runs", lambda: plots.load_results(RECORD))


def record_verdicts_reference(comparisons=COMPARISONS) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The chapter's reading of the results of record: per ``(method, baseline, dataset)``, the difference of the
    final scores' means, its 95% interval and the verdict (coded 1 above, -1 below, 0 overlap)."""
    from .. import plots
    runs = _record_runs()
    out = [compare_reference(plots.final_scores(runs, m, ds), plots.final_scores(runs, b, ds))
           for m, b, ds in comparisons]
    return tuple(np.array([o[k] for o in out]) for k in range(3)) + (np.array([VERDICT_CODE[o[3]] for o in out]),)


def _coded(result):
    """The student's ``(differences, lows, highs, verdicts)`` with the verdict words coded as numbers."""
    parts = [_pick(result, k, 4) for k in range(4)]
    words = list(parts[3])
    bad = [w for w in words if w not in VERDICT_CODE]
    if bad:
        raise ValueError(f"a verdict is {bad[0]!r}; expected one of {sorted(VERDICT_CODE)}")
    return parts[0], parts[1], parts[2], [VERDICT_CODE[w] for w in words]


def record_comparisons() -> tuple:
    """The ``(method, baseline, dataset)`` triples ``record_verdicts`` is checked on: :data:`COMPARISONS` for the
    self-check, and while grading as many distinct ones drawn from :data:`RECORD_POOL`, in a drawn order, by the
    task's draw (:func:`~minirl.classroom.checks.fresh`)."""
    from . import checks
    if checks._FRESH is None:
        return COMPARISONS
    rng = np.random.default_rng(fresh(19))
    return tuple(RECORD_POOL[int(i)] for i in rng.choice(len(RECORD_POOL), len(COMPARISONS), replace=False))


def check_record_verdicts(fn):
    """Task: ``fn(runs, comparisons)`` returns ``(differences, lows, highs, verdicts)``, one entry per ``(method,
    baseline, dataset)`` of :data:`COMPARISONS` (while grading, of drawn ones: :func:`record_comparisons`), on the
    results of record (:func:`record_verdicts_reference`). Returns the student's four lists (``None`` if it fails),
    to print."""
    from .. import plots
    comparisons = record_comparisons()
    want = lambda: _cached(("record-verdicts", comparisons),  # noqa: E731 - where verdicts are
                           lambda: record_verdicts_reference(comparisons))
    runs = _record_runs()
    return _check_sweep("record_verdicts", lambda comparisons: _coded(fn(runs, comparisons)), comparisons, want,
                        ("the difference of the means", "the interval's lower end", "the interval's upper end",
                         "the verdict (1 above, -1 below, 0 overlap)"),
                        [f"{m} - {b} on {ds}" for m, b, ds in comparisons], atol=1e-6,
                        reference=(record_verdicts_reference, plots.baseline_table, plots.difference_ci))


# ---------------------------------------------------------------------------------------------------------------
# Design the seeds: a large gap the seeds do not establish, a small one they do (a property, no expected value)
# ---------------------------------------------------------------------------------------------------------------

SEED_DESIGN = {"seeds": 5, "low": 0.0, "high": 100.0, "min_std": 1.5, "large_gap": 15.0, "small_gap": 2.0}


def seed_design_reference():
    """A design of the task's kind: ``((a1, b1), (a2, b2))``, five scores each. Pair 1: means 16 points apart, one
    method's seeds spread from 10 to 84 (overlap); pair 2: 2 points apart, every seed within 2 of its mean (above)."""
    return (([10.0, 12.0, 14.0, 80.0, 84.0], [20.0, 22.0, 24.0, 26.0, 28.0]),
            ([56.0, 57.0, 58.0, 59.0, 60.0], [54.0, 55.0, 56.0, 57.0, 58.0]))


def _seed_groups(got):
    """The four groups of a design, as float arrays, or what is wrong with it."""
    d = SEED_DESIGN
    if not isinstance(got, (tuple, list)) or len(got) != 2 or not all(
            isinstance(p, (tuple, list)) and len(p) == 2 for p in got):
        return None, "expected two pairs ((a1, b1), (a2, b2))"
    groups = []
    for i, pair in enumerate(got):
        for name, g in zip("ab", pair):
            try:
                x = np.asarray(g, dtype=float)
            except (TypeError, ValueError):
                return None, f"pair {i + 1}, {name}: not an array of numbers"
            if x.shape != (d["seeds"],) or not np.all(np.isfinite(x)) or x.min() < d["low"] or x.max() > d["high"]:
                return None, (f"pair {i + 1}, {name}: expected {d['seeds']} finite scores in [{d['low']:g}, "
                              f"{d['high']:g}], got shape {x.shape}")
            if x.std(ddof=1) < d["min_std"]:
                return None, (f"pair {i + 1}, {name}: the seeds' standard deviation is {x.std(ddof=1):.2f}, below "
                              f"{d['min_std']:g} (seeds differ)")
            groups.append(x)
    return groups, None


def check_seed_design(fn) -> None:
    """Task (design): ``fn()`` returns two pairs of five seeds' scores: pair 1 with means at least 15 points apart
    whose difference's interval (:func:`minirl.plots.difference_ci`, 95%, seed 0) overlaps 0, pair 2 at most 2
    points apart whose interval lies above 0; every group's seeds spread by a standard deviation of at least 1.5.
    The check is the property, computed in the judge with minirl's statistics: there is no expected value."""
    from .. import plots
    c = Checks("seed_design", reference=seed_design_reference)
    d, state = SEED_DESIGN, {}

    def design():
        if "got" not in state:
            state["got"] = fn()
        return state["got"]

    def pair(k, rule):
        def judge(got):
            groups, problem = _seed_groups(got)
            if groups is None:
                return "the design is not valid (the first check)"
            a, b = groups[2 * k], groups[2 * k + 1]
            diff, lo, hi = plots.difference_ci(a, b)
            return rule(diff, lo, hi)
        return judge

    c.compare(f"the design: two pairs of {d['seeds']} scores in [{d['low']:g}, {d['high']:g}], each group's standard "
              f"deviation at least {d['min_std']:g}", design, lambda got: _seed_groups(got)[1])
    c.compare(f"pair 1: means at least {d['large_gap']:g} points apart, the 95% interval of the difference overlapping "
              "0", design, pair(0, lambda diff, lo, hi: None if abs(diff) >= d["large_gap"] and plots.verdict(lo, hi)
                                 == "overlap" else f"difference {diff:.2f}, verdict {plots.verdict(lo, hi)}; expected "
                                 f"at least {d['large_gap']:g} and overlap"))
    c.compare(f"pair 2: means at most {d['small_gap']:g} points apart, the 95% interval of the difference above 0",
              design, pair(1, lambda diff, lo, hi: None if abs(diff) <= d["small_gap"] and plots.verdict(lo, hi)
                           == "above" else f"difference {diff:.2f}, verdict {plots.verdict(lo, hi)}; expected at "
                           f"most {d['small_gap']:g} and above"))
    c.report()
