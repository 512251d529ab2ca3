"""The predict-then-run tasks (chapters 1 and 2): the student writes a prediction, runs an experiment, explains.

Each task has three parts. A *prediction* (``coverage_prediction``, ``gap_prediction``): a number in a named variable
and one sentence why, in a cell before the experiment. Its checker judges the form only (a number of the expected
kind, a sentence); a right prediction earns nothing more than a wrong one. The grader runs the prediction's cell
before the experiment's, so the recorded prediction cannot call the student's experiment; when the student typed it
is beyond any grader. An *experiment* (``coverage_experiment``, ``unseen_gap_sweep``): the student's process returns
plain numbers, which the grader compares with its own run of the same experiment, at settings drawn per grading run
(:func:`~minirl.classroom.checks.fresh`). A *written* answer, marked by hand with its rubric: where the prediction
was right or wrong, and why the numbers came out as they did.

Chapter 1 (``coverage_experiment``): how far the empirical MDP's planner overrates its own plan as the data's
coverage of two rare actions shrinks. Chapter 2 (``unseen_gap_sweep``): what discrete BCQ's critic believes about
the actions its data never shows, as the threshold goes from 0 (Q-learning) to 1 (greedy imitation).
"""
from __future__ import annotations

import numpy as np

from .agent_checks import (THRESHOLDS, _cached, _check_sweep, _train, greedy_return, make_discrete_bcq, sweep_settings,
                           tabular_exercise)
from .checks import Checks, fresh

MIN_WORDS = 5  # the reason of a prediction: one sentence, at least this many words
# The tasks whose answer is a value the student types (a prediction and its reason), not a function: there is no
# computation to hand to minirl, so their checkers declare no reference (``Checks(task, reference=None)``); a
# function given in place of the value is "not a number". tests/test_reference_use.py holds every other task to a
# reference.
FORM_ONLY = ("coverage_prediction", "gap_prediction")


def _prediction(task: str, value, why) -> dict:
    """What the prediction cell holds, as plain data for the judge (in the child: no verdict). The stub's ``None``
    reads as a stub that still raises (the grader's "not implemented")."""
    if value is None or why is None:
        raise NotImplementedError(f"{task}: your code here: replace None by your prediction and its reason")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return {"value": None, "kind": type(value).__name__, "why": why if isinstance(why, str) else None}
    return {"value": float(value), "kind": "number", "why": why if isinstance(why, str) else None}


def _judge_reason(got) -> str | None:
    why = got.get("why") if isinstance(got, dict) else None
    if not isinstance(why, str):
        return "the reason must be a sentence in quotes (a str)"
    words = len(why.split())
    return None if words >= MIN_WORDS else f"the reason has {words} words; write one sentence (at least {MIN_WORDS})"


def _check_prediction(task: str, value, why, rule: str, judge) -> None:
    """Two checks of form, none of correctness: the prediction is a number that ``judge`` accepts, and a reason."""
    assert task in FORM_ONLY, task
    c = Checks(task, reference=None)  # a value, not a function: nothing to delegate (FORM_ONLY)
    state: dict = {}

    def recorded():
        if not state:
            state["got"] = _prediction(task, value, why)
        return state["got"]

    def judge_value(got):
        if not isinstance(got, dict) or got.get("kind") != "number" or not isinstance(got.get("value"), float):
            kind = got.get("kind") if isinstance(got, dict) else type(got).__name__
            return f"the prediction must be a number, got a {kind}"
        return judge(got["value"])

    c.compare(f"the prediction: {rule} (its form only: a right prediction earns no more than a wrong one)",
              recorded, judge_value)
    c.compare(f"the reason: one sentence of at least {MIN_WORDS} words", recorded, _judge_reason)
    c.report()


# ---------------------------------------------------------------------------------------------------------------
# Chapter 1: the planner's overestimate as the data's coverage of two rare actions shrinks
# ---------------------------------------------------------------------------------------------------------------

COVERAGE_EPS = (0.0, 0.01, 0.03, 0.1, 0.3, 0.5)  # how often the behaviour takes actions 2 and 3, in all
COVERAGE_SEEDS = 20                               # datasets (and MDPs) averaged per setting
COVERAGE_NOISE = 0.5                              # the standard deviation of the noise on each observed reward
# while grading, the experiment runs at settings drawn from these (as many eps as the public ones, sorted)
COVERAGE_POOL = {"eps": (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5),
                 "n_transitions": (200, 300, 500, 1000)}


def coverage_behaviour(eps: float) -> np.ndarray:
    """The behaviour policy of chapter 1's coverage experiment (8 states, 4 actions): actions 0 and 1 with
    probability ``(1 - eps) / 2`` each, the rare actions 2 and 3 with ``eps / 2`` each, in every state."""
    pi = np.zeros((8, 4))
    pi[:, :2], pi[:, 2:] = (1.0 - eps) / 2, eps / 2
    return pi


def coverage_experiment_reference(eps_values=COVERAGE_EPS, n_transitions: int = 300,
                                  seeds=tuple(range(COVERAGE_SEEDS))) -> tuple[np.ndarray, np.ndarray]:
    """Chapter 1's experiment: per ``eps``, over the ``seeds`` (each an MDP ``random_mdp(8, 4, gamma=0.9, seed,
    branching=3)`` and ``n_transitions`` of :func:`coverage_behaviour` with reward noise 0.5, the same seed), plan in
    the empirical MDP (unseen pairs loop with reward 0, the true start distribution) and take its greedy policy.
    Returns the mean overestimate ``J_hat - J_true`` and the mean true return ``J_true``, one value per ``eps``."""
    from .. import tabular as tab
    over, true = [], []
    for eps in eps_values:
        gaps, returns = [], []
        for seed in seeds:
            mdp = tab.random_mdp(8, 4, gamma=0.9, seed=int(seed), branching=3)
            data = tab.sample_dataset(mdp, coverage_behaviour(eps), n_transitions, seed=int(seed),
                                      reward_noise=COVERAGE_NOISE)
            mdp_hat, _ = tab.empirical_mdp(data, 8, 4, gamma=0.9, init=mdp.init)
            pi = tab.greedy_policy(tab.value_iteration(mdp_hat))
            j_true = tab.policy_return(mdp, pi)
            gaps.append(tab.policy_return(mdp_hat, pi) - j_true)
            returns.append(j_true)
        over.append(np.mean(gaps))
        true.append(np.mean(returns))
    return np.array(over), np.array(true)


def coverage_setting() -> dict:
    """The arguments ``coverage_experiment`` is checked with: the public ones for the self-check, and while grading
    six values of ``eps`` (sorted, distinct), a dataset size and 20 consecutive seeds drawn by the task's draw."""
    from . import checks
    if checks._FRESH is None:
        return {"eps_values": COVERAGE_EPS, "n_transitions": 300, "seeds": tuple(range(COVERAGE_SEEDS))}
    rng = np.random.default_rng(fresh(17))
    eps = tuple(float(v) for v in sorted(rng.choice(COVERAGE_POOL["eps"], len(COVERAGE_EPS), replace=False)))
    first = int(rng.integers(1, 10_000))
    return {"eps_values": eps, "n_transitions": int(rng.choice(COVERAGE_POOL["n_transitions"])),
            "seeds": tuple(range(first, first + COVERAGE_SEEDS))}


def check_coverage_prediction(prediction, why=None) -> None:
    """Task (predict): ``coverage_prediction``, one of :data:`COVERAGE_EPS` (where you expect the overestimate to be
    largest), and ``coverage_prediction_why``, one sentence. Checked for its form only. (``why`` has a default because
    the grader's judge calls every checker with one argument, and replays the recorded values.)"""
    _check_prediction("coverage_prediction", prediction, why, f"one of the values of eps {list(COVERAGE_EPS)}",
                      lambda v: None if any(abs(v - e) < 1e-12 for e in COVERAGE_EPS) else
                      f"{v:g} is not one of {list(COVERAGE_EPS)}")


def check_coverage_experiment(fn):
    """Task (experiment): ``fn(eps_values, n_transitions=300, seeds=range(20))`` returns ``(overestimates,
    true_returns)``, one value per ``eps`` (:func:`coverage_experiment_reference`); while grading at drawn settings.
    Returns the student's two arrays (``None`` if the function fails), to plot."""
    kw = coverage_setting()
    eps, n, seeds = kw["eps_values"], kw["n_transitions"], kw["seeds"]
    key = ("coverage", eps, n, seeds)
    want = lambda: _cached(key, lambda: coverage_experiment_reference(eps, n, seeds))  # noqa: E731 - in the judge
    at = "" if seeds[0] == 0 and n == 300 else f" ({n} transitions, seeds {seeds[0]}-{seeds[-1]})"
    return _check_sweep("coverage_experiment", lambda e: fn(e, n_transitions=n, seeds=seeds), eps, want,
                        ("the mean overestimate J_hat - J_true", "the mean true return J_true"),
                        [f"eps {e:g}{at}" for e in eps], atol=1e-6, reference=coverage_experiment_reference)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 2: what discrete BCQ's critic believes about the actions its data never shows
# ---------------------------------------------------------------------------------------------------------------

GAP_THRESHOLDS = THRESHOLDS  # 0, 0.1, 0.5, 1: Task 6's sweep again, now looking at the critic
GAP_STEPS = 150


def unseen_gap_reference(thresholds=GAP_THRESHOLDS, steps: int = GAP_STEPS, seed: int = 0):
    """Chapter 2's second experiment with minirl's discrete BCQ: per threshold, a fresh ``make_discrete_bcq(threshold,
    seed)`` trained ``steps`` full-batch updates on :func:`tabular_exercise`'s data, then (1) the gap ``mean Q(s,
    unseen actions 2, 3) - mean Q(s, seen actions 0, 1)`` over the 8 states and (2) the overestimate: the value the
    critic gives its own greedy allowed policy, ``mean_s Q(s, pi(s))`` (the start distribution is uniform), minus
    that policy's true return."""
    import torch
    p = tabular_exercise()
    gaps, over = [], []
    for threshold in thresholds:
        agent = make_discrete_bcq(threshold, seed=seed)
        _train(agent, None, p.bcq_batch, steps, ())
        with torch.no_grad():
            q = agent.q(torch.as_tensor(p.states)).numpy()
        actions = np.asarray(agent.act(p.states)).reshape(-1)
        gaps.append(float(q[:, 2:].mean() - q[:, :2].mean()))
        over.append(float(q[np.arange(8), actions].mean()) - greedy_return(agent, p))
    return np.array(gaps), np.array(over)


def check_gap_prediction(prediction, why=None) -> None:
    """Task (predict): ``gap_prediction``, the gap ``mean Q(s, unseen) - mean Q(s, seen)`` you expect at threshold
    0.5, a number between -10 and 10, and ``gap_prediction_why``, one sentence. Checked for its form only."""
    _check_prediction("gap_prediction", prediction, why, "a number between -10 and 10 (the gap at threshold 0.5)",
                      lambda v: None if np.isfinite(v) and -10.0 <= v <= 10.0 else f"{v:g} is not in [-10, 10]")


def gap_setting() -> dict:
    """The arguments ``unseen_gap_sweep`` is checked with: the public thresholds and seed 0 for the self-check, and
    while grading as many thresholds (:func:`~minirl.classroom.agent_checks.sweep_settings`) and a seed drawn by the
    task's draw."""
    from . import checks
    thresholds = sweep_settings("threshold", GAP_THRESHOLDS)
    seed = 0 if checks._FRESH is None else int(np.random.default_rng(fresh(23)).integers(1, 10_000))
    return {"thresholds": thresholds, "seed": seed}


def check_unseen_gap_sweep(fn):
    """Task (experiment): ``fn(thresholds, steps=150, seed=0)`` returns ``(gaps, overestimates)`` of discrete BCQ, one
    per threshold (:func:`unseen_gap_reference`); while grading at drawn thresholds and seed. Returns the student's
    two arrays (``None`` if the function fails), to plot."""
    kw = gap_setting()
    thresholds, seed = kw["thresholds"], kw["seed"]
    want = lambda: _cached(("unseen-gap", thresholds, seed),  # noqa: E731 - in the judge
                           lambda: unseen_gap_reference(thresholds, GAP_STEPS, seed))
    at = f", seed {seed}" if seed else ""
    return _check_sweep("unseen_gap_sweep", lambda t: fn(t, steps=GAP_STEPS, seed=seed), thresholds, want,
                        ("the gap mean Q(unseen) - mean Q(seen)", "the overestimate of the greedy policy's value"),
                        [f"threshold {t:g}{at}" for t in thresholds], atol=1e-3, reference=unseen_gap_reference)
