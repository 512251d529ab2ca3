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


# ---------------------------------------------------------------------------------------------------------------
# Design a dataset: tabular CQL stitches on it, IQL at tau = 0.7 does not (no expected value: a property)
# ---------------------------------------------------------------------------------------------------------------

DESIGN = {"alpha": 0.3, "tau": 0.7, "decoy_reward": 0.5, "max_segments": 40, "max_moves": 20}


def _segment_start(grid, start) -> int:
    """The state a segment starts from: a cell name of ``grid.cells`` or a ``(row, col)`` pair."""
    if isinstance(start, str):
        if start not in grid.cells:
            raise ValueError(f"unknown cell name {start!r} (the names: {', '.join(sorted(grid.cells))})")
        return grid.state(grid.cells[start])
    if isinstance(start, (tuple, list)) and len(start) == 2:
        def whole(x):
            if isinstance(x, (bool, np.bool_)) or not (isinstance(x, (int, np.integer)) or (
                    isinstance(x, np.ndarray) and x.shape == () and x.dtype.kind in "iu")):
                raise ValueError(f"a cell is (row, col) in whole numbers, got {start!r}")
            return int(x)
        return grid.state((whole(start[0]), whole(start[1])))
    raise ValueError(f"a segment starts at a cell name or a (row, col) pair, got {start!r}")


def segments_dataset(grid, segments, max_segments: int | None = None, max_moves: int | None = None) -> dict:
    """The tabular dataset of ``segments`` in ``grid``'s true (deterministic) world, as :func:`minirl.stitching.
    make_dataset` returns it: each segment a pair ``(start, moves)``, ``start`` a cell name (``"start"``, ``"west"``,
    ``"junction1"``, ...) or a ``(row, col)`` pair, ``moves`` a string of U, R, D, L, walked from ``start`` as one
    episode. Raises ``ValueError`` on a malformed segment, a move after an exit, or more segments or moves than
    allowed."""
    from .. import stitching as st
    if not isinstance(segments, (list, tuple)) or not segments:
        raise ValueError(f"expected a non-empty list of (start, moves) segments, got {type(segments).__name__}")
    if max_segments is not None and len(segments) > max_segments:
        raise ValueError(f"{len(segments)} segments: at most {max_segments}")
    mdp, rows = grid.mdp, []
    for episode, segment in enumerate(segments):
        if not isinstance(segment, (list, tuple)) or len(segment) != 2 or not isinstance(segment[1], str):
            raise ValueError(f"segment {episode}: expected a pair (start, moves), moves a string of U, R, D, L; got "
                             f"{segment!r}"[:300])
        s, moves = _segment_start(grid, segment[0]), segment[1]
        if not moves or (max_moves is not None and len(moves) > max_moves) or set(moves) - set("URDL"):
            raise ValueError(f"segment {episode}: moves {moves!r}: 1 to {max_moves or 'any number of'} letters of "
                             "U, R, D, L"[:300])
        if mdp.terminal[s]:
            raise ValueError(f"segment {episode} starts in an exit, {grid.cell(s)}")
        for k, letter in enumerate(moves):
            if mdp.terminal[s]:
                raise ValueError(f"segment {episode} moves on after entering the exit {grid.cell(s)} (move {k})")
            a = st._LETTER[letter]
            s_next = int(np.argmax(mdp.P[s, a]))
            rows.append((s, a, mdp.R[s, a], s_next, bool(mdp.terminal[s_next]), episode))
            s = s_next
    s, a, r, s2, done, ep = map(np.array, zip(*rows))
    return {"s": s.astype(np.int64), "a": a.astype(np.int64), "r": r.astype(float), "s_next": s2.astype(np.int64),
            "done": done, "timeout": np.zeros(len(s), dtype=bool), "episode": ep.astype(np.int64)}


def design_methods(grid, data) -> dict:
    """What the design task asks about ``data``: ``{"cql": ..., "iql": ...}``, the probability that the greedy policy
    (among the data's actions) of tabular CQL at ``DESIGN["alpha"]`` and of tabular IQL at ``DESIGN["tau"]`` enters
    G from S, computed with :mod:`minirl.stitching`'s solvers on the empirical MDP of ``data``."""
    from .. import stitching as st
    from .. import tabular as tab
    mdp = grid.mdp
    S, A = mdp.n_states, mdp.n_actions
    mdp_hat, counts = tab.empirical_mdp(data, S, A, mdp.gamma)
    support, pi_hat = counts > 0, tab.empirical_behavior_policy(data, S, A)
    goal = grid.state(grid.cells["goal"])
    Q = st.cql_fixed_point(mdp_hat, pi_hat, support, DESIGN["alpha"])
    pi_iql, _, _ = st.iql_policy(mdp_hat, pi_hat, support, DESIGN["tau"])
    reach = lambda pi: float(st.reach_probability(mdp, pi, goal)[grid.start])  # noqa: E731
    return {"cql": reach(st.greedy_in_support(Q, support, pi_hat)), "iql": reach(pi_iql)}


def _whole_path(grid, segments) -> str | None:
    """What is wrong if a segment passes through S and then enters G (the data would hold the whole way)."""
    from .. import stitching as st
    goal = grid.state(grid.cells["goal"])
    for episode, (start, moves) in enumerate(segments):
        s, seen_start = _segment_start(grid, start), False
        for letter in moves:
            seen_start |= s == grid.start
            s = int(np.argmax(grid.mdp.P[s, st._LETTER[letter]]))
        if seen_start and s == goal:
            return (f"segment {episode} goes from S to G by itself: the data must hold the way only in pieces (copying "
                    "that segment would be enough, nothing to stitch)")
    return None


def stitching_design_reference(grid):
    """A design of the task's kind, found by search: the fewest segments of the chapter's families A, B, C (each
    1 to 6) on which CQL stitches and IQL does not. Its segments, as the task returns them."""
    import itertools
    for total in range(3, 19):
        for n_a, n_b in itertools.product(range(1, 7), range(1, 7)):
            n_c = total - n_a - n_b
            if 1 <= n_c <= 6:
                from .. import stitching as st
                segments = [tuple(st.FAMILIES[f]) for f, n in zip("ABC", (n_a, n_b, n_c)) for _ in range(n)]
                found = design_methods(grid, segments_dataset(grid, segments))
                if found["cql"] > 0.99 and found["iql"] < 0.01:
                    return segments
    raise RuntimeError("no design of families A, B, C found")


def check_stitching_design(fn) -> None:
    """Task (design a dataset): ``fn(grid)`` returns segments (:func:`segments_dataset`) on which tabular CQL at
    alpha 0.3 reaches G from S and tabular IQL at tau 0.7 does not, with no segment from S into G. The check is
    the property, computed in the judge with minirl's solvers (:func:`design_methods`): there is no expected value
    to read off."""
    from .. import stitching as st
    c = Checks("stitching_design", reference=stitching_design_reference)
    grid = st.gridworld(decoy_reward=DESIGN["decoy_reward"], gamma=0.9)
    state: dict = {}

    def design():  # in the child: the student's segments (called once), recorded as plain data
        if "got" not in state:
            state["got"] = fn(grid)
        return state["got"]

    def parsed(got):
        try:
            return segments_dataset(grid, got, DESIGN["max_segments"], DESIGN["max_moves"]), None
        except ValueError as e:
            return None, str(e)

    def valid(got):
        return parsed(got)[1]

    def no_whole_path(got):
        data, problem = parsed(got)
        return "the design is not valid (the first check)" if data is None else _whole_path(grid, got)

    def method(name, wanted):
        def judge(got):
            data, problem = parsed(got)
            if data is None:
                return "the design is not valid (the first check)"
            reach = design_methods(grid, data)[name]
            return None if (reach > 0.99) == wanted else (f"its greedy policy enters G from S with probability "
                                                           f"{reach:.2f}, expected {1 if wanted else 0}")
        return judge

    c.compare(f"the design: 1 to {DESIGN['max_segments']} segments (start, moves), at most {DESIGN['max_moves']} "
              "moves of U, R, D, L each, none moving on after an exit", design, valid)
    c.compare("no segment goes from S into G by itself", design, no_whole_path)
    c.compare(f"tabular CQL, alpha {DESIGN['alpha']:g}, greedy among the data's actions: reaches G from S", design,
              method("cql", True))
    c.compare(f"tabular IQL, tau {DESIGN['tau']:g}, greedy among the data's actions: does not reach G from S", design,
              method("iql", False))
    c.report()
