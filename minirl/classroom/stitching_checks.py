"""The stitching chapter's tasks: one-step improvement, batch-constrained values, IQL's expectile on the gridworld.

The problems come from :mod:`minirl.stitching` (the 5 x 7 gridworld whose data holds the way to the goal only in
pieces) and, for the edge cases, small random MDPs of :mod:`minirl.tabular`. Each checker compares the student's
function with minirl's own (:func:`minirl.stitching.one_step_policy`,
:func:`minirl.tabular.constrained_value_iteration`, :func:`minirl.stitching.iql_policy`, the closed form of
:func:`minirl.stitching.closed_forms`) and prints one line per task. How a check compares:
:mod:`minirl.classroom.checks`; the sweep's comparison: :mod:`minirl.classroom.agent_checks`.
"""
from __future__ import annotations

import numpy as np

from .agent_checks import _cached, _check_sweep, sweep_reference, sweep_settings
from .checks import Checks, Ref, _pick, fresh

STITCH_TAUS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 0.99)  # IQL's expectile, the stitching chapter's experiment
STITCH_CASES = ((90, 5, 5, 0.5), (60, 3, 4, 0.45), (40, 10, 2, 0.3))  # (n_a, n_b, n_c, decoy reward)
# while grading, stitching_threshold is checked on as many datasets drawn from these (tau_c kept in [0.55, 0.98])
STITCH_POOL = {"n_a": tuple(range(20, 101)), "n_b": tuple(range(1, 11)), "n_c": tuple(range(1, 11)),
               "decoy_reward": (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6)}


def stitching_exercise(n_a: int = 90, n_b: int = 5, n_c: int = 5, decoy_reward: float = 0.5):
    """The stitching gridworld and its data (the chapter's: 90, 5, 5 segments, decoy 0.5, gamma 0.9), with what every
    task needs: ``grid``, ``mdp`` (the true MDP), ``start``, ``data``, ``mdp_hat`` and ``counts`` (the empirical MDP),
    ``support`` (``counts > 0``) and ``pi_hat`` (the empirical behaviour policy), as a namespace."""
    from types import SimpleNamespace

    from .. import stitching as st
    from .. import tabular as tab
    grid = st.gridworld(decoy_reward=decoy_reward, gamma=0.9)
    data = st.make_dataset(grid, n_a, n_b, n_c, seed=0)
    S, A = grid.mdp.n_states, grid.mdp.n_actions
    mdp_hat, counts = tab.empirical_mdp(data, S, A, grid.mdp.gamma)
    return SimpleNamespace(grid=grid, mdp=grid.mdp, start=grid.start, data=data, mdp_hat=mdp_hat, counts=counts,
                           support=counts > 0, pi_hat=tab.empirical_behavior_policy(data, S, A))


def _random_offline_problem(S: int, A: int, seed: int, n: int = 300, gamma: float = 0.9):
    """A random MDP with rewards in [-1, 0] (an action outside the data looks good: its self-loop pays 0) and ``n``
    transitions of a behaviour that takes actions 0 and 1 only; returns ``(mdp_hat, support, pi_hat)``."""
    from .. import tabular as tab
    seed = fresh(seed)
    mdp = tab.random_mdp(S, A, gamma=gamma, seed=seed, branching=2, reward_range=(-1.0, 0.0))
    pi = np.zeros((S, A))
    pi[:, 0] = np.random.default_rng(seed + 50).uniform(0.2, 0.8, S)
    pi[:, 1] = 1.0 - pi[:, 0]
    data = tab.sample_dataset(mdp, pi, n, seed=seed)
    mdp_hat, counts = tab.empirical_mdp(data, S, A, gamma)
    return mdp_hat, counts > 0, tab.empirical_behavior_policy(data, S, A)


def _tie_problem():
    """Three states, three actions. The data takes actions 1 and 2 at state 0, both entering the terminal state 2 with
    reward 1 (a tie: the lowest data action, 1, must win, not the unseen action 0); state 1 has no data at all."""
    from .. import tabular as tab
    data = {"s": np.array([0, 0, 0]), "a": np.array([1, 2, 2]), "r": np.array([1.0, 1.0, 1.0]),
            "s_next": np.array([2, 2, 2]), "done": np.array([True, True, True])}
    mdp_hat, counts = tab.empirical_mdp(data, 3, 3, 0.9)
    return mdp_hat, counts > 0, tab.empirical_behavior_policy(data, 3, 3)


def _problems():
    """``(description, mdp_hat, support, pi_hat)`` of every one-step and BCQL check, the chapter's data first."""
    out = []
    for n_a, n_b, n_c, r in ((90, 5, 5, 0.5), (10, 1, 9, 0.5), (90, 5, 5, 0.8)):
        p = stitching_exercise(n_a, n_b, n_c, r)
        out.append((f"the stitching gridworld, {n_a}/{n_b}/{n_c} segments of A/B/C, decoy {r:g}", p.mdp_hat,
                    p.support, p.pi_hat))
    for S, A, seed in ((6, 3, 0), (8, 4, 1)):
        out.append((f"random MDP S={S} A={A} seed={seed}, rewards in [-1, 0], data of actions 0 and 1 only",
                    *_random_offline_problem(S, A, seed)))
    out.append(("three states: a tie between data actions 1 and 2 at state 0, state 1 without data",
                *_tie_problem()))
    return out


def check_one_step_policy(fn) -> None:
    """Task: ``one_step_policy(mdp_hat, pi_beta, support)`` returns ``(pi, Q_beta)``: ``Q_beta`` the exact value of
    ``pi_beta`` in ``mdp_hat``, ``pi`` greedy on it among the data's actions (ties to the lowest; a state without data
    keeps ``pi_beta``'s row), as :func:`minirl.stitching.one_step_policy`."""
    from .. import stitching as st
    c = Checks("one_step_policy", reference=st.one_step_policy)
    for k, (description, mdp_hat, support, pi_hat) in enumerate(_problems()):
        want = lambda j, m=mdp_hat, s=support, p=pi_hat: st.one_step_policy(m, p, s)[j]  # noqa: E731 - the judge's
        call = lambda j, m=mdp_hat, s=support, p=pi_hat: _pick(fn(m, p.copy(), s.copy()), j, 2)  # noqa: E731
        c.compare(f"{description}: pi", lambda call=call: call(0), Ref(lambda want=want: want(0)))
        if k in (0, 3):  # Q_beta on the chapter's data and on a random MDP
            c.compare(f"{description}: Q_beta", lambda call=call: call(1), Ref(lambda want=want: want(1)), atol=1e-6)
    c.report()


def check_bcql_values(fn) -> None:
    """Task: ``bcql_values(mdp_hat, support)`` returns the batch-constrained optimum ``Q*_D`` (``-inf`` outside the
    data; a state without data actions is worth 0), as :func:`minirl.tabular.constrained_value_iteration`."""
    from .. import tabular as tab
    c = Checks("bcql_values", reference=tab.constrained_value_iteration)
    cases = [(d, m, s) for d, m, s, _ in _problems()]
    mdp_hat, support, _ = _random_offline_problem(5, 3, 2, n=40, gamma=0.0)
    cases.append(("random MDP S=5 A=3 seed=2, gamma=0 (Q*_D = r_hat on the data), 40 transitions", mdp_hat, support))
    for description, mdp_hat, support in cases:
        want = Ref(lambda m=mdp_hat, s=support: tab.constrained_value_iteration(m, s, tol=1e-12))
        c.compare(description, lambda m=mdp_hat, s=support: fn(m, s.copy()), want, atol=1e-6)
    c.report()


def stitching_sweep_reference(taus=STITCH_TAUS) -> tuple[np.ndarray, np.ndarray]:
    """The stitching chapter's experiment with minirl's tabular IQL on the chapter's data: per expectile, IQL's own
    estimate ``V_tau(S)`` and the exact value at ``S``, in the true MDP, of its greedy policy among the data's
    actions."""
    from .. import stitching as st
    from .. import tabular as tab
    p = stitching_exercise()
    estimates, values = [], []
    for tau in taus:
        pi, _, V = st.iql_policy(p.mdp_hat, p.pi_hat, p.support, tau)
        estimates.append(V[p.start])
        values.append(tab.policy_return(p.mdp, pi))
    return np.array(estimates), np.array(values)


def check_stitching_sweep(fn):
    """Task: ``fn(taus)`` returns ``(estimates, values)`` of tabular IQL on the chapter's data, one per expectile
    (:func:`stitching_sweep_reference`). Returns the student's pair (``None`` if the function fails), to plot."""
    settings = sweep_settings("stitching", STITCH_TAUS)
    want = sweep_reference("stitching", settings, stitching_sweep_reference, STITCH_TAUS, parts=2)
    return _check_sweep("stitching_sweep", fn, settings, want, ("IQL's estimate V_tau(S)",
                        "the value of its greedy policy at S"), [f"tau {t:g}" for t in settings], atol=1e-6,
                        reference=stitching_sweep_reference)


def stitch_cases() -> tuple:
    """The ``(n_a, n_b, n_c, decoy reward)`` datasets ``stitching_threshold`` is checked on: :data:`STITCH_CASES`
    for the self-check, and while grading as many drawn from :data:`STITCH_POOL` by the task's draw (:func:`fresh`),
    each with its threshold (the closed form of :func:`minirl.stitching.closed_forms`, by hand here) in [0.55, 0.98],
    inside the bisection's bracket [0.5, 0.999]."""
    from . import checks
    if checks._FRESH is None:
        return STITCH_CASES
    rng = np.random.default_rng(fresh(17))
    cases: list = []
    while len(cases) < len(STITCH_CASES):
        n_a, n_b, n_c = (int(rng.choice(STITCH_POOL[k])) for k in ("n_a", "n_b", "n_c"))
        r = float(rng.choice(STITCH_POOL["decoy_reward"]))
        p, k = n_c / (n_b + n_c), r / 0.9 ** 4
        tau_c = k * (1 - p) / (k * (1 - p) + p * (1 - k))
        if 0.55 <= tau_c <= 0.98 and (n_a, n_b, n_c, r) not in cases:
            cases.append((n_a, n_b, n_c, r))
    return tuple(cases)


def check_stitching_threshold(fn) -> None:
    """Task: ``fn(grid, data)`` returns the expectile ``tau_c`` above which tabular IQL's greedy policy stitches (to
    within 1e-3), on the chapter's data and on two others (while grading, on three drawn: :func:`stitch_cases`);
    compared with the chapter's closed form."""
    from .. import stitching as st
    c = Checks("stitching_threshold", reference=(st.closed_forms, st.threshold))
    for n_a, n_b, n_c, r in stitch_cases():
        grid = st.gridworld(decoy_reward=r, gamma=0.9)
        data = st.make_dataset(grid, n_a, n_b, n_c, seed=0)
        want = Ref(lambda g=grid, a=n_a, b=n_b, n=n_c: st.closed_forms(g, a, b, n)["tau_c"])
        c.compare(f"{n_a}/{n_b}/{n_c} segments of A/B/C, decoy {r:g}: the closed form's tau_c, within 1e-3",
                  lambda g=grid, d=data: float(fn(g, d)), want, atol=1e-3, rtol=0.0)
    c.report()
