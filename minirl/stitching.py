"""Stitching, exactly: a gridworld whose data holds only pieces of the way to the goal.

Dynamic programming on a dataset's transitions can join pieces of different trajectories into a path that no single
trajectory took ("stitching"); behaviour cloning, filtered or not, can only copy whole trajectories. This module
builds the smallest world where that difference decides everything, makes its dataset, and computes what each
method of the book does there, exactly, with :mod:`minirl.tabular` (the book's chapter "Stitching").

The world (``gridworld``): a 5 x 7 grid, four deterministic moves (up, right, down, left; a move into the border
stays put), discount ``gamma``. Three cells are exits (terminal, absorbing): the goal ``G`` (entering it pays 1),
a decoy ``D`` (pays ``decoy_reward``) and a pit ``X`` (pays 0). Episodes start at ``S``. The data's moves::

        col   0     1     2      3     4     5     6
    row 0     .     .     >      >     >     >     G       family A (S to D, 6 moves):   S > > J1 > > > > D
        1     .     .     ^      .     .     .     .       family B (J1 to X, 6 moves):  J1 ^ ^ J2 > > > > X
        2     W >   >     J2 >^  >     >     >     X       family C (W to G, 8 moves):   W > > J2 ^ ^ > > > > G
        3     .     .     ^      .     .     .     .
        4     S >   >     J1 >^  >     >     >     D       stitched (10 moves):  S > > J1 ^ ^ J2 ^ ^ > > > > G

The dataset (``make_dataset``) is ``n_a`` copies of family A, ``n_b`` of B and ``n_c`` of C, in an order shuffled
by a fixed seed: short segments, none from ``S`` to ``G``. They share two states, the junctions ``J1`` (A goes
right, B goes up) and ``J2`` (B goes right, C goes up). With ``p = n_c / (n_b + n_c)`` the share of C at ``J2``,
``q = n_a / (n_a + n_b)`` the share of A at ``J1`` and ``r`` the decoy's reward, the values from ``S``
(``closed_forms``; the chapter derives them) are:

    BC (pi_hat_beta)        q gamma^5 r + (1 - q) p gamma^9   enters G with probability (1 - q) p
    10%BC                   gamma^5 r                         the best segments through S go to D
    one-step (Q^beta)       gamma^5 r  if r > p gamma^4       else gamma^9
    BCQL (batch optimum)    gamma^9    if r < gamma^4         the stitched path
    IQL, greedy             gamma^9    if tau >= tau_c = k (1 - p) / (k (1 - p) + p (1 - k)),  k = r / gamma^4
    tabular CQL(H)          gamma^9    if alpha < alpha_c     (no closed form: ``threshold`` finds it)

Rewards are exact and moves deterministic, so the empirical MDP agrees with the true one on every pair in the data:
each difference between the methods comes from which of the data's actions they chain, none from estimation error.

Exercise candidate: :func:`one_step_policy` (evaluate the behaviour policy on the empirical MDP, act greedily among
the data's actions), about five lines with :mod:`minirl.tabular`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minirl import tabular as tab

__all__ = [
    "ACTIONS",
    "Gridworld",
    "gridworld",
    "FAMILIES",
    "make_dataset",
    "segment_returns",
    "top_fraction",
    "support_mask",
    "greedy_in_support",
    "one_step_policy",
    "iql_policy",
    "cql_operator",
    "cql_fixed_point",
    "threshold",
    "reach_probability",
    "greedy_path",
    "closed_forms",
    "compare_methods",
    "path_groups",
    "plot_gridworld",
]

ACTIONS = ("up", "right", "down", "left")
_MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))
_LETTER = {"U": 0, "R": 1, "D": 2, "L": 3}


@dataclass(frozen=True)
class Gridworld:
    """The stitching gridworld: its MDP and the cells that matter.

    Attributes:
        mdp: the true MDP; states are ``row * cols + col``, actions :data:`ACTIONS`.
        rows, cols: the grid's size.
        cells: named cells ``(row, col)``: ``start``, ``goal``, ``decoy``, ``pit``, ``west`` (where family C
            starts), ``junction1`` and ``junction2``.
        decoy_reward: what entering the decoy pays (the goal pays 1, the pit 0).
    """

    mdp: tab.FiniteMDP
    rows: int
    cols: int
    cells: dict
    decoy_reward: float

    def state(self, cell: tuple[int, int]) -> int:
        """The state index of ``(row, col)``."""
        row, col = cell
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            raise ValueError(f"cell {cell} is outside the {self.rows} x {self.cols} grid")
        return row * self.cols + col

    def cell(self, state: int) -> tuple[int, int]:
        """The ``(row, col)`` of a state index."""
        return divmod(int(state), self.cols)

    @property
    def start(self) -> int:
        return self.state(self.cells["start"])


def gridworld(decoy_reward: float = 0.5, gamma: float = 0.9) -> Gridworld:
    """The 5 x 7 stitching gridworld of the module docstring (deterministic moves, three terminal exits).

    ``R[s, a]`` is the reward of the exit that the move enters (goal 1, decoy ``decoy_reward``, pit 0), else 0.
    The start distribution puts all its mass on ``S``.
    """
    if not 0.0 < decoy_reward < 1.0:
        raise ValueError(f"decoy_reward must be in (0, 1) (the goal pays 1), got {decoy_reward}")
    rows, cols = 5, 7
    cells = {"start": (4, 0), "junction1": (4, 2), "decoy": (4, 6), "west": (2, 0), "junction2": (2, 2),
             "pit": (2, 6), "goal": (0, 6)}
    exits = {cells["goal"]: 1.0, cells["decoy"]: float(decoy_reward), cells["pit"]: 0.0}
    n = rows * cols
    P = np.zeros((n, len(ACTIONS), n))
    R = np.zeros((n, len(ACTIONS)))
    terminal = np.zeros(n, dtype=bool)
    for row in range(rows):
        for col in range(cols):
            s = row * cols + col
            if (row, col) in exits:
                terminal[s] = True
                P[s, :, s] = 1.0
                continue
            for a, (dr, dc) in enumerate(_MOVES):
                r2, c2 = row + dr, col + dc
                if not (0 <= r2 < rows and 0 <= c2 < cols):
                    r2, c2 = row, col  # the border: stay
                P[s, a, r2 * cols + c2] = 1.0
                R[s, a] = exits.get((r2, c2), 0.0)
    init = np.zeros(n)
    init[cells["start"][0] * cols + cells["start"][1]] = 1.0
    mdp = tab.FiniteMDP(P=P, R=R, gamma=gamma, init=init, terminal=terminal)
    return Gridworld(mdp=mdp, rows=rows, cols=cols, cells=cells, decoy_reward=float(decoy_reward))


# The three families of segments: where each starts and the moves it makes (U, R, D, L).
FAMILIES = {
    "A": ("start", "RRRRRR"),     # start to decoy
    "B": ("junction1", "UURRRR"),  # junction 1 to the pit, through junction 2
    "C": ("west", "RRUURRRR"),    # west to the goal, through junction 2
}


def make_dataset(grid: Gridworld, n_a: int = 90, n_b: int = 5, n_c: int = 5, seed: int = 0) -> dict[str, np.ndarray]:
    """The stitching dataset: ``n_a``, ``n_b`` and ``n_c`` segments of families A, B and C (:data:`FAMILIES`).

    The segments are listed in an order shuffled by ``seed`` (the order changes no quantity of the chapter).
    Every segment ends in an exit, so ``done`` is True on its last transition and no transition is a timeout.

    Returns:
        a tabular dataset (``s, a, r, s_next, done, timeout``, as :func:`minirl.tabular.sample_dataset`) plus
        ``episode`` (the segment's index in the shuffled order) and ``family`` (0, 1, 2 for A, B, C).
    """
    counts = {"A": int(n_a), "B": int(n_b), "C": int(n_c)}
    if any(n < 0 for n in counts.values()) or sum(counts.values()) == 0:
        raise ValueError(f"segment counts must be >= 0 and not all zero, got n_a={n_a}, n_b={n_b}, n_c={n_c}")
    labels = np.concatenate([np.full(n, i) for i, n in enumerate(counts.values())])
    order = np.random.default_rng(seed).permutation(labels)
    mdp = grid.mdp
    rows = []
    for episode, family in enumerate(order):
        first, moves = FAMILIES["ABC"[family]]
        s = grid.state(grid.cells[first])
        for letter in moves:
            a = _LETTER[letter]
            s_next = int(np.argmax(mdp.P[s, a]))  # deterministic moves
            rows.append((s, a, mdp.R[s, a], s_next, bool(mdp.terminal[s_next]), episode, family))
            s = s_next
        if not mdp.terminal[s]:
            raise AssertionError(f"family {'ABC'[family]} does not end in an exit")  # the layout is fixed
    s, a, r, s2, done, ep, fam = map(np.array, zip(*rows))
    return {"s": s.astype(np.int64), "a": a.astype(np.int64), "r": r.astype(float), "s_next": s2.astype(np.int64),
            "done": done, "timeout": np.zeros(len(s), dtype=bool), "episode": ep.astype(np.int64),
            "family": fam.astype(np.int64)}


def segment_returns(data: dict) -> np.ndarray:
    """The undiscounted return of every segment (episode), in episode order."""
    episodes = np.asarray(data["episode"])
    return np.bincount(episodes, weights=np.asarray(data["r"], dtype=float))


def top_fraction(data: dict, fraction: float = 0.1) -> dict[str, np.ndarray]:
    """The transitions of the best ``fraction`` of segments by return: the data of filtered BC (10%BC).

    The rule of :meth:`minirl.data.OfflineDataset.best_episodes`: ``floor(fraction * segments)`` segments (at
    least one), the highest returns, ties at the cut broken by the later segment.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    returns = segment_returns(data)
    k = max(int(fraction * len(returns)), 1)
    keep = np.sort(np.argsort(returns, kind="stable")[len(returns) - k:])
    rows = np.isin(data["episode"], keep)
    return {key: np.asarray(value)[rows] for key, value in data.items()}


# ---------------------------------------------------------------------------------------------------------------
# The methods, in a table
# ---------------------------------------------------------------------------------------------------------------


def support_mask(data: dict, n_states: int, n_actions: int) -> np.ndarray:
    """``N(s, a) > 0``: the data's actions, a boolean ``(S, A)`` mask."""
    mask = np.zeros((n_states, n_actions), dtype=bool)
    mask[np.asarray(data["s"]), np.asarray(data["a"])] = True
    return mask


def greedy_in_support(Q: np.ndarray, support: np.ndarray, default: np.ndarray | None = None) -> np.ndarray:
    """The greedy policy of ``Q`` among the data's actions (ties to the lowest action), one-hot ``(S, A)``.

    At a state with no action in ``support`` the row of ``default`` (uniform if None) is kept.
    """
    Q = np.asarray(Q, dtype=float)
    support = np.asarray(support, dtype=bool)
    pi = tab.greedy_policy(np.where(support, Q, -np.inf))
    empty = ~support.any(axis=1)
    pi[empty] = (np.full(Q.shape[1], 1.0 / Q.shape[1]) if default is None else np.asarray(default)[empty])
    return pi


def one_step_policy(mdp_hat: tab.FiniteMDP, pi_beta: np.ndarray, support: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One-step improvement (Brandfonbrener et al. 2021): greedy among the data's actions on ``Q^beta``.

    ``Q^beta`` is the exact value of the empirical behaviour policy in the empirical MDP, one linear solve;
    IQL at ``tau = 0.5`` computes the same table (SARSA on the data). Returns ``(pi, Q_beta)``.
    """
    Q_beta = tab.evaluate_policy_exact(mdp_hat, pi_beta)
    return greedy_in_support(Q_beta, support, pi_beta), Q_beta


def iql_policy(mdp_hat: tab.FiniteMDP, pi_beta: np.ndarray, support: np.ndarray,
               tau: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tabular IQL at expectile ``tau`` with greedy extraction (AWR's ``beta -> inf`` limit).

    Returns ``(pi, Q_tau, V_tau)`` from :func:`minirl.tabular.expectile_value_iteration`.
    """
    Q, V = tab.expectile_value_iteration(mdp_hat, pi_beta, tau, support=support)
    return greedy_in_support(Q, support, pi_beta), Q, V


def _cql_state(y: np.ndarray, pi: np.ndarray, alpha: float, Q0: np.ndarray) -> np.ndarray:
    """Minimise ``alpha (logsumexp(Q) - pi . Q) + 1/2 sum_a pi_a (Q_a - y_a)^2`` over ``Q`` (one state's data
    actions, ``pi > 0``) by Newton's method with a backtracking line search, from ``Q0``. The objective is strictly
    convex, so its minimiser is the unique root of ``pi (Q - y) + alpha (softmax(Q) - pi)``."""
    def objective(Q):
        top = Q.max()
        return alpha * (top + np.log(np.exp(Q - top).sum()) - pi @ Q) + 0.5 * pi @ (Q - y) ** 2

    Q = Q0.copy()
    for _ in range(100):
        sigma = np.exp(Q - Q.max())
        sigma /= sigma.sum()
        grad = pi * (Q - y) + alpha * (sigma - pi)
        hess = np.diag(pi + alpha * sigma) - alpha * np.outer(sigma, sigma)
        step = np.linalg.solve(hess, grad)
        if np.abs(step).max() <= 1e-15 * (1.0 + np.abs(Q).max()):
            return Q - step
        t, f0, decrement = 1.0, objective(Q), grad @ step  # decrement / 2 estimates f(Q) - min f
        if decrement > 1e-12 * (1.0 + abs(f0)):  # far from the minimum: backtrack (Armijo); near it, full steps
            while objective(Q - t * step) > f0 - 0.25 * t * decrement and t > 1e-8:
                t *= 0.5
        Q = Q - t * step
    return Q


def cql_operator(mdp_hat: tab.FiniteMDP, pi_beta: np.ndarray, support: np.ndarray, alpha: float,
                 Q: np.ndarray) -> np.ndarray:
    """One update of tabular CQL(H) with a greedy target: at every state, the minimiser

        Q_new(s, .) = argmin_Q  alpha (log sum_a e^{Q(s, a)} - sum_a pi_beta(a|s) Q(s, a))
                                + 1/2 sum_a pi_beta(a|s) (Q(s, a) - y(s, a))^2,
        y(s, a) = r_hat(s, a) + gamma sum_s' P_hat(s'|s, a) max_{a' in D(s')} Q(s', a'),

    the critic loss of discrete CQL (Kumar et al. 2020, CQL(H)) over the whole dataset, per unit of ``N(s)``. The
    sums run over the data's actions ``D(s)`` (``support``): at an action outside the data the loss has only the
    push-down term, whose infimum is at ``-inf``, so those entries are ``-inf``. The minimiser is the unique root of
    the stationarity condition, CQL's penalised backup with ``mu = softmax Q`` (penalty (2) of
    :func:`minirl.tabular.cql_penalty_weights`)::

        Q(s, a) = y(s, a) - alpha (softmax_a Q(s, .) / pi_beta(a|s) - 1),

    found by Newton's method. A state with one data action has ``softmax = pi_beta = 1``: no penalty, ``Q = y``.
    ``minirl.discrete.DiscreteCQL`` writes its TD term without the 1/2, so its ``cql_alpha`` is twice this ``alpha``.
    """
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    support = np.asarray(support, dtype=bool)
    pi_beta = tab.check_policy(pi_beta, mdp_hat.n_states, mdp_hat.n_actions, name="pi_beta")
    if np.any(support & (pi_beta <= 0)):
        raise ValueError("pi_beta must be positive on every supported pair (use the empirical behaviour policy)")
    Q = np.asarray(Q, dtype=float)
    has_action = support.any(axis=1)
    V = np.where(has_action, np.where(support, Q, -np.inf).max(axis=1), 0.0)
    y = mdp_hat.R + mdp_hat.gamma * (mdp_hat.P @ V)
    Q_new = np.where(support, y, -np.inf)
    if alpha > 0:
        for s in np.flatnonzero(support.sum(axis=1) > 1):
            seen = support[s]
            start = Q[s, seen] if np.all(np.isfinite(Q[s, seen])) else y[s, seen]
            Q_new[s, seen] = _cql_state(y[s, seen], pi_beta[s, seen] / pi_beta[s, seen].sum(), alpha, start)
    return Q_new


def cql_fixed_point(mdp_hat: tab.FiniteMDP, pi_beta: np.ndarray, support: np.ndarray, alpha: float,
                    tol: float = 1e-12, max_iters: int = 100_000) -> np.ndarray:
    """Tabular CQL: iterate :func:`cql_operator` from zeros to its fixed point.

    The per-state minimiser is monotone in the targets and commutes with adding a constant, so the update is a
    ``gamma``-contraction in the sup norm (the chapter's proposition); iteration stops once
    ``gamma / (1 - gamma) ||Q_{k+1} - Q_k||_inf <= tol``. ``alpha = 0`` gives BCQL's fixed point
    (:func:`minirl.tabular.constrained_value_iteration`). Returns ``Q`` of shape ``(S, A)``, ``-inf`` outside
    ``support``.
    """
    support = np.asarray(support, dtype=bool)
    Q = np.where(support, 0.0, -np.inf)
    for _ in range(int(max_iters)):
        Q_next = cql_operator(mdp_hat, pi_beta, support, alpha, Q)
        delta = float(np.abs(Q_next[support] - Q[support]).max(initial=0.0))
        Q = Q_next
        if mdp_hat.gamma * delta <= tol * (1.0 - mdp_hat.gamma):
            return Q
    raise RuntimeError(f"cql_fixed_point did not reach tol={tol} in max_iters={max_iters} iterations")


def threshold(stitches, lo: float, hi: float, iters: int = 60) -> float:
    """Bisection for the knob value where ``stitches(x)`` changes, given ``stitches(lo) != stitches(hi)``.

    Used for IQL's expectile (``tau_c``, known in closed form) and CQL's penalty weight (``alpha_c``, not).
    Returns the midpoint of the last bracket (``hi - lo`` halved ``iters`` times).
    """
    left = bool(stitches(lo))
    if bool(stitches(hi)) == left:
        raise ValueError(f"stitches({lo}) and stitches({hi}) agree ({left}): no change to bracket")
    for _ in range(int(iters)):
        mid = 0.5 * (lo + hi)
        if bool(stitches(mid)) == left:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# ---------------------------------------------------------------------------------------------------------------
# Reading a policy: where it goes
# ---------------------------------------------------------------------------------------------------------------


def reach_probability(mdp: tab.FiniteMDP, pi: np.ndarray, target: int) -> np.ndarray:
    """The probability, from every state, that ``pi`` ever enters the terminal state ``target`` (shape ``(S,)``).

    Solves ``h = P_pi h`` with ``h = 1`` at ``target`` and ``h = 0`` at the other terminal states, restricted to
    the states from which ``target`` is reachable under ``pi`` (the others have ``h = 0``), where the solution is
    unique.
    """
    if not mdp.terminal[target]:
        raise ValueError(f"target {target} must be a terminal state")
    P_pi = tab.state_transition(mdp.P, pi)
    n = mdp.n_states
    can = np.zeros(n, dtype=bool)  # states that reach target with positive probability
    can[target] = True
    for _ in range(n):
        grow = ~mdp.terminal & ((P_pi[:, can] > 0).any(axis=1))
        if not np.any(grow & ~can):
            break
        can |= grow
    h = np.zeros(n)
    h[target] = 1.0
    live = can & ~mdp.terminal
    if live.any():
        A = np.eye(live.sum()) - P_pi[np.ix_(live, live)]
        h[live] = np.linalg.solve(A, P_pi[live, target])
    return h


def greedy_path(mdp: tab.FiniteMDP, pi: np.ndarray, start: int, max_steps: int = 100) -> list[int]:
    """The states visited from ``start`` taking each state's most likely action (ties to the lowest action),
    until a terminal state, a repeated state or ``max_steps`` moves. For a deterministic policy in a
    deterministic MDP this is the path the policy takes."""
    path = [int(start)]
    for _ in range(int(max_steps)):
        s = path[-1]
        if mdp.terminal[s]:
            break
        s_next = int(np.argmax(mdp.P[s, int(np.argmax(pi[s]))]))
        if s_next in path:
            path.append(s_next)
            break
        path.append(s_next)
    return path


# ---------------------------------------------------------------------------------------------------------------
# What the chapter states: closed forms and the table of methods
# ---------------------------------------------------------------------------------------------------------------


def closed_forms(grid: Gridworld, n_a: int = 90, n_b: int = 5, n_c: int = 5, taus=(0.5, 0.7, 0.9, 0.99)) -> dict:
    """The chapter's values from ``S``, derived by hand for the layout of :func:`gridworld` (no solver).

    With ``p = n_c / (n_b + n_c)``, ``q = n_a / (n_a + n_b)``, ``r`` the decoy's reward and ``g = gamma``:
    ``V^beta(J2) = p g^5``; ``Q^beta(J1, right) = g^3 r``, ``Q^beta(J1, up) = g^2 V^beta(J2)``; from ``S`` (two
    moves before ``J1``) BC is worth ``q g^5 r + (1 - q) p g^9``; one-step takes the decoy iff ``r > p g^4``;
    the stitched path is worth ``g^9`` and is the batch-constrained optimum iff ``g^9 > g^5 r``. IQL: the
    two-point expectile ``m_tau(p) = tau p / (tau p + (1 - tau)(1 - p))`` gives ``V_tau(J2) = g^5 m_tau(p)``,
    and at ``J1`` the expectile of ``{g^7 m_tau(p)`` w.p. ``1 - q``, ``g^3 r`` w.p. ``q}``; IQL's greedy policy
    goes up at ``J1`` iff ``m_tau(p) >= k = r / g^4``, i.e. ``tau >= tau_c`` (ties go to the lower action, up).

    Requires ``n_b, n_c >= 1`` (both junctions have two actions) and ``n_a >= 1``.
    """
    if min(n_a, n_b, n_c) < 1:
        raise ValueError("closed_forms needs at least one segment of each family")
    g, r = grid.mdp.gamma, grid.decoy_reward
    p, q = n_c / (n_b + n_c), n_a / (n_a + n_b)

    def m(tau, prob):  # expectile of {1 w.p. prob, 0 w.p. 1 - prob}
        return tau * prob / (tau * prob + (1 - tau) * (1 - prob))

    def two_point(tau, x, px, y):  # expectile of {x w.p. px, y w.p. 1 - px}
        lo, hi, p_hi = (x, y, 1 - px) if x <= y else (y, x, px)
        return lo + (hi - lo) * m(tau, p_hi)

    stitched, decoy = g ** 9, g ** 5 * r
    iql = {}
    for tau in taus:
        up, right = g ** 7 * m(tau, p), g ** 3 * r
        iql[tau] = {"V_start": g ** 2 * two_point(tau, up, 1 - q, right),
                    "return": stitched if up >= right else decoy}  # a tie goes to the lower action, up
    k = r / g ** 4
    N = n_a + n_b + n_c
    top = max(int(0.1 * N), 1)
    return {
        "p": p, "q": q, "decoy_reward": r,
        "bc": q * decoy + (1 - q) * p * stitched,
        "bc_reach_goal": (1 - q) * p,
        # the best `top` segments: all of C (return 1), then A (return r) before B (return 0); with n_c >= top the
        # start is outside 10%BC's data, with top > n_c + n_a B enters it: neither has a closed form here
        "10%bc": decoy if n_c < top <= n_c + n_a else float("nan"),
        "one_step": decoy if r > p * g ** 4 else stitched,
        "one_step_fails_iff": p * g ** 4,
        "batch_constrained": max(stitched, decoy),
        "stitched": stitched,
        "iql": iql,
        "tau_c": k * (1 - p) / (k * (1 - p) + p * (1 - k)),
    }


def compare_methods(grid: Gridworld, data: dict, taus=(0.5, 0.7, 0.9, 0.99), alphas=(0.001, 0.01, 0.1, 1.0)) -> dict:
    """Every method of the chapter on ``data``, computed with :mod:`minirl.tabular`.

    Returns ``{name: {"pi": policy, "estimate": its own value of S or None, "return": its exact value of S in
    the true MDP, "reach_goal": probability of entering G from S}}``, in the chapter's order: BC, 10%BC,
    one-step, the empirical MDP's optimum with unseen pairs paying 0 (pessimistic) and 1 (optimistic,
    ``unseen_reward`` of :func:`minirl.tabular.empirical_mdp`), BCQL, IQL for each ``tau``, CQL for each
    ``alpha``, and the true MDP's optimum.
    """
    mdp = grid.mdp
    S, A, g = mdp.n_states, mdp.n_actions, mdp.gamma
    start, goal = grid.start, grid.state(grid.cells["goal"])
    mdp_hat, counts = tab.empirical_mdp(data, S, A, g)
    support = counts > 0
    pi_hat = tab.empirical_behavior_policy(data, S, A)
    top = top_fraction(data, 0.1)
    out = {}

    def add(name, pi, estimate=None):
        out[name] = {"pi": pi, "estimate": estimate, "return": float(tab.policy_return(mdp, pi)),
                     "reach_goal": float(reach_probability(mdp, pi, goal)[start])}

    add("BC", pi_hat)
    add("10%BC", tab.empirical_behavior_policy(top, S, A))
    pi1, Q_beta = one_step_policy(mdp_hat, pi_hat, support)
    add("one-step", pi1, float(Q_beta[start].max()))
    for unseen in (0.0, 1.0):
        m_hat, _ = tab.empirical_mdp(data, S, A, g, unseen_reward=unseen)
        Q = tab.value_iteration(m_hat)
        add(f"empirical MDP optimum, unseen pairs pay {unseen:g}", tab.greedy_policy(Q), float(Q[start].max()))
    Q_bcql = tab.offline_q_iteration(data, S, A, g, constrained=True)
    add("BCQL", greedy_in_support(Q_bcql, support, pi_hat), float(Q_bcql[start][support[start]].max()))
    for tau in taus:
        pi, _, V = iql_policy(mdp_hat, pi_hat, support, tau)
        add(f"IQL tau={tau:g}", pi, float(V[start]))
    for alpha in alphas:
        Q = cql_fixed_point(mdp_hat, pi_hat, support, alpha)
        add(f"CQL alpha={alpha:g}", greedy_in_support(Q, support, pi_hat), float(Q[start][support[start]].max()))
    Q_star = tab.value_iteration(mdp)
    add("optimum (true MDP)", tab.greedy_policy(Q_star), float(Q_star[start].max()))
    return out


def path_groups(grid: Gridworld, results: dict, skip=("optimum (true MDP)",)) -> dict[str, list[int]]:
    """``{label: path}`` with one entry per distinct path from ``S`` among ``results`` (:func:`compare_methods`),
    the label listing the methods that take it (``IQL tau=0.5, 0.7`` for a knob's values). BC's entry is its most
    likely path. Methods in ``skip`` are left out (the true optimum, by default: a shortest path of its own)."""
    groups: dict[tuple, list[str]] = {}
    for name, r in results.items():
        if name not in skip:
            groups.setdefault(tuple(greedy_path(grid.mdp, r["pi"], grid.start)), []).append(name)
    out = {}
    for path, names in groups.items():
        plain, knobs = [], {}
        for name in names:
            head, _, value = name.partition("=")
            if value:
                knobs.setdefault(head, []).append(value)
            else:
                plain.append(name + (" (most likely path)" if name == "BC" else ""))
        end = grid.cell(path[-1])
        where = {grid.cells["goal"]: "to G", grid.cells["decoy"]: "to D", grid.cells["pit"]: "to X"}.get(
            end, f"stuck at {end}")
        out[f"{where}: " + ", ".join(plain + [f"{h}={', '.join(v)}" for h, v in knobs.items()])] = list(path)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The figure
# ---------------------------------------------------------------------------------------------------------------


def plot_gridworld(grid: Gridworld, data: dict, paths: dict | None = None, ax=None, show_data_legend: bool = True):
    """Draw the grid, its named cells, the data's segments (one line per family, wider for more copies) and,
    optionally, ``paths`` (``{label: list of states}``, each offset a little so that paths along the same cells stay
    visible). Returns the matplotlib axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 5))
    ax.set_xlim(-0.5, grid.cols - 0.5)
    ax.set_ylim(grid.rows - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xticks(range(grid.cols))
    ax.set_yticks(range(grid.rows))
    ax.set_xticks(np.arange(-0.5, grid.cols), minor=True)
    ax.set_yticks(np.arange(-0.5, grid.rows), minor=True)
    ax.grid(which="minor", color="0.85")
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    names = {"start": ("S", "k"), "goal": ("G", "tab:green"), "decoy": ("D", "tab:orange"), "pit": ("X", "tab:red"),
             "junction1": ("J1", "0.35"), "junction2": ("J2", "0.35"), "west": ("W", "0.35")}
    for key, (label, color) in names.items():
        row, col = grid.cells[key]
        ax.text(col + 0.3, row - 0.28, label, color=color, fontsize=10, fontweight="bold", ha="center", va="center")
    family_of = np.zeros(int(np.max(data["episode"])) + 1, dtype=np.int64)
    family_of[data["episode"]] = data["family"]
    n_segments = np.bincount(family_of, minlength=3)
    data_handles = []
    for fam, (key, moves) in enumerate(FAMILIES.values()):
        if n_segments[fam] == 0:
            continue
        row, col = grid.cells[key]
        xs, ys = [col], [row]
        for letter in moves:
            dr, dc = _MOVES[_LETTER[letter]]
            row, col = row + dr, col + dc
            xs.append(col)
            ys.append(row)
        line, = ax.plot(xs, ys, color=("tab:orange", "tab:purple", "tab:green")[fam], alpha=0.3,
                        lw=3 + 9 * n_segments[fam] / n_segments.max(), solid_capstyle="round",
                        label=f"data, family {'ABC'[fam]}: {n_segments[fam]} segments")
        data_handles.append(line)
    handles = list(data_handles) if show_data_legend else []
    styles, colors = ("-", "--", "-.", ":"), ("tab:blue", "k", "tab:red", "tab:brown", "tab:pink")
    for i, (label, path) in enumerate((paths or {}).items()):
        off = 0.14 * (i - (len(paths) - 1) / 2)
        ys, xs = zip(*(grid.cell(s) for s in path))
        line, = ax.plot(np.array(xs) + off, np.array(ys) + off, styles[i % len(styles)],
                        color=colors[i % len(colors)], lw=2, marker="o", ms=3, label=label)
        handles.append(line)
    if handles:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8, frameon=False)
    return ax
