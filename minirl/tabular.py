"""Finite MDPs, exactly: the tabular toolkit behind the book's theory sections.

Everything here is pure numpy and small enough to solve exactly, so a notebook can compare what an offline
algorithm computes from a dataset with the true answer.

Notation (chapter 1 of the book)
--------------------------------
A finite MDP is ``(S, A, P, r, gamma)`` with ``P[s, a, s'] = P(s' | s, a)`` (shape ``(S, A, S)``, each row
``P[s, a]`` a distribution), rewards ``R[s, a] = r(s, a)`` (shape ``(S, A)``), a discount ``gamma`` in ``[0, 1)``
and a start distribution ``init`` (shape ``(S,)``).  A policy is a table ``pi[s, a] = pi(a | s)`` of shape
``(S, A)`` whose rows are distributions.

State-action pairs are flattened in row-major order, ``index(s, a) = s * A + a``, so that ``Q.reshape(-1)`` is the
vector ``Q`` of the book and

    P^pi[(s, a), (s', a')] = P(s' | s, a) * pi(a' | s')              (policy_transition)
    B^pi Q = R + gamma P^pi Q                                          (bellman_operator)
    Q^pi  = (I - gamma P^pi)^{-1} R                                    (evaluate_policy_exact)

Terminal states
---------------
An MDP may mark states as ``terminal``.  A terminal state must be absorbing with zero reward
(``P[s, a, s] = 1`` and ``R[s, a] = 0`` for every ``a``), so its value is 0 and the equations above hold with no
special case.  ``sample_dataset`` sets ``done = True`` on a transition whose next state is terminal.

Offline data
------------
A dataset is a dict of equal-length 1-D arrays ``s, a, r, s_next, done`` (and ``timeout``, see
``sample_dataset``).  ``empirical_mdp`` turns it into the maximum-likelihood ("certainty equivalence") MDP:
``P_hat(s'|s,a) = N(s,a,s') / N(s,a)`` and ``r_hat(s,a)`` = mean observed reward.  Pairs with ``N(s,a) = 0`` have no
data at all; they are given an explicit, documented convention (a self-loop paying ``unseen_reward``), and every
value computed at them is a consequence of that convention, not of the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "FiniteMDP",
    "random_mdp",
    "check_policy",
    "uniform_policy",
    "policy_transition",
    "state_transition",
    "bellman_operator",
    "optimality_operator",
    "evaluate_policy_exact",
    "evaluate_policy_iterative",
    "state_values",
    "policy_return",
    "value_iteration",
    "greedy_policy",
    "constrained_value_iteration",
    "sample_dataset",
    "check_dataset",
    "empirical_mdp",
    "empirical_behavior_policy",
    "offline_q_iteration",
    "offline_q_learning",
    "bcql",
    "cql_penalty_weights",
    "cql_policy_evaluation",
    "cql_closed_form",
    "cql_lower_bound_alpha",
    "chi_square",
    "behavior_gap",
    "cql_policy_change_margin",
    "expectile",
    "expectile_value_iteration",
    "awr_policy",
]

_ATOL = 1e-8  # tolerance for "sums to one" checks


# ---------------------------------------------------------------------------------------------------------------
# The MDP
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class FiniteMDP:
    """A finite, discounted MDP ``(S, A, P, r, gamma)`` with a start distribution.

    Attributes:
        P: transition probabilities, shape ``(S, A, S)``; ``P[s, a, s'] = P(s' | s, a)``, every row sums to 1.
        R: expected rewards, shape ``(S, A)``; ``R[s, a] = r(s, a)``.
        gamma: discount factor in ``[0, 1)``.
        init: start-state distribution, shape ``(S,)``; ``None`` means uniform.
        terminal: boolean mask of terminal states, shape ``(S,)``; ``None`` means no terminal state.  A terminal
            state must be absorbing with zero reward.

    All fields are validated (and copied to float / bool arrays) on construction; a ``ValueError`` names the
    field and the expected shape or property.
    """

    P: np.ndarray
    R: np.ndarray
    gamma: float
    init: np.ndarray | None = None
    terminal: np.ndarray | None = field(default=None)

    def __post_init__(self) -> None:
        P = np.array(self.P, dtype=float)
        if P.ndim != 3 or P.shape[0] != P.shape[2]:
            raise ValueError(f"P must have shape (S, A, S), got {P.shape}")
        n_states, n_actions, _ = P.shape
        if n_states == 0 or n_actions == 0:
            raise ValueError(f"P must have at least one state and one action, got shape {P.shape}")
        if not np.all(np.isfinite(P)):
            raise ValueError("P has non-finite entries (NaN or inf)")
        if np.any(P < 0):
            s, a, s2 = np.argwhere(P < 0)[0]
            raise ValueError(f"P has negative entries (first at P[{s}, {a}, {s2}] = {P[s, a, s2]:.3g})")
        row_sums = P.sum(axis=2)
        bad = np.abs(row_sums - 1.0) > _ATOL
        if np.any(bad):
            s, a = np.argwhere(bad)[0]
            raise ValueError(
                f"P must be row-stochastic (P[s, a, :] sums to 1), but P[{s}, {a}, :] sums to {row_sums[s, a]:.6g}"
            )

        R = np.array(self.R, dtype=float)
        if R.shape != (n_states, n_actions):
            raise ValueError(f"R must have shape (S, A) = {(n_states, n_actions)}, got {R.shape}")
        if not np.all(np.isfinite(R)):
            raise ValueError("R has non-finite entries (NaN or inf)")

        gamma = float(self.gamma)
        if not 0.0 <= gamma < 1.0:
            raise ValueError(f"gamma must be in [0, 1), got {self.gamma}")

        if self.init is None:
            init = np.full(n_states, 1.0 / n_states)
        else:
            init = np.array(self.init, dtype=float)
            if init.shape != (n_states,):
                raise ValueError(f"init must have shape (S,) = ({n_states},), got {init.shape}")
            if np.any(init < 0) or not np.all(np.isfinite(init)) or abs(init.sum() - 1.0) > _ATOL:
                raise ValueError(f"init must be a probability distribution (non-negative, sums to 1), sum={init.sum():.6g}")

        if self.terminal is None:
            terminal = np.zeros(n_states, dtype=bool)
        else:
            terminal = np.array(self.terminal)
            if terminal.shape != (n_states,) or terminal.dtype != bool:
                raise ValueError(
                    f"terminal must be a boolean array of shape (S,) = ({n_states},), "
                    f"got dtype {terminal.dtype} and shape {terminal.shape}"
                )
            for s in np.flatnonzero(terminal):
                if not (np.allclose(P[s, :, s], 1.0) and np.allclose(R[s], 0.0)):
                    raise ValueError(
                        f"terminal state {s} must be absorbing with zero reward (P[{s}, a, {s}] = 1 and R[{s}, a] = 0)"
                    )

        self.P, self.R, self.gamma, self.init, self.terminal = P, R, gamma, init, terminal

    @property
    def n_states(self) -> int:
        return self.P.shape[0]

    @property
    def n_actions(self) -> int:
        return self.P.shape[1]


def random_mdp(
    n_states: int,
    n_actions: int,
    gamma: float = 0.9,
    seed: int = 0,
    branching: int | None = None,
    reward_range: tuple[float, float] = (0.0, 1.0),
) -> FiniteMDP:
    """A random MDP: each ``P[s, a]`` spreads over ``branching`` random next states, rewards are uniform.

    Args:
        n_states, n_actions: sizes ``S`` and ``A``.
        gamma: discount factor in ``[0, 1)``.
        seed: seed of ``numpy.random.default_rng``; the same seed gives the same MDP.
        branching: number of possible next states of each ``(s, a)``; ``None`` means all ``S`` states.
        reward_range: ``R[s, a]`` is uniform in ``[low, high)``.

    Only ``rng.random`` is drawn (uniform weights, normalised), so the MDP is the same on every platform.
    The start distribution is uniform and no state is terminal.
    """
    if int(n_states) < 1 or int(n_actions) < 1:
        raise ValueError(f"n_states and n_actions must be >= 1, got {n_states} and {n_actions}")
    if branching is None:
        branching = n_states
    if not 1 <= branching <= n_states:
        raise ValueError(f"branching must be in [1, n_states] = [1, {n_states}], got {branching}")
    rng = np.random.default_rng(seed)
    weights = rng.random((n_states, n_actions, n_states))
    if branching < n_states:
        # keep the `branching` largest of a second random draw: a uniformly random set of successors
        order = np.argsort(rng.random((n_states, n_actions, n_states)), axis=2)
        mask = np.zeros_like(weights, dtype=bool)
        np.put_along_axis(mask, order[:, :, :branching], True, axis=2)
        weights = np.where(mask, weights, 0.0)
    P = weights / weights.sum(axis=2, keepdims=True)
    low, high = reward_range
    R = low + (high - low) * rng.random((n_states, n_actions))
    return FiniteMDP(P=P, R=R, gamma=gamma)


# ---------------------------------------------------------------------------------------------------------------
# Policies and operators
# ---------------------------------------------------------------------------------------------------------------


def check_policy(pi: np.ndarray, n_states: int, n_actions: int, name: str = "pi") -> np.ndarray:
    """Return ``pi`` as a float array after checking it is an ``(S, A)`` table of distributions."""
    pi = np.asarray(pi, dtype=float)
    if pi.shape != (n_states, n_actions):
        raise ValueError(f"{name} must have shape (S, A) = {(n_states, n_actions)}, got {pi.shape}")
    if not np.all(np.isfinite(pi)) or np.any(pi < 0):
        raise ValueError(f"{name} must have finite, non-negative entries")
    sums = pi.sum(axis=1)
    bad = np.abs(sums - 1.0) > _ATOL
    if np.any(bad):
        s = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[s, :] must sum to 1 for every state, but {name}[{s}, :] sums to {sums[s]:.6g}")
    return pi


def uniform_policy(n_states: int, n_actions: int) -> np.ndarray:
    """The policy that picks every action with probability ``1 / A``."""
    return np.full((n_states, n_actions), 1.0 / n_actions)


def _check_q(Q: np.ndarray, mdp: FiniteMDP, name: str = "Q") -> np.ndarray:
    Q = np.asarray(Q, dtype=float)
    if Q.shape != (mdp.n_states, mdp.n_actions):
        raise ValueError(f"{name} must have shape (S, A) = {(mdp.n_states, mdp.n_actions)}, got {Q.shape}")
    return Q


def policy_transition(P: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """The state-action transition matrix of ``pi``, shape ``(S*A, S*A)``.

    ``P^pi[(s, a), (s', a')] = P(s' | s, a) pi(a' | s')`` with ``index(s, a) = s * A + a``.  It is row-stochastic,
    and with it policy evaluation is linear: ``Q^pi = R + gamma P^pi Q^pi``.
    """
    P = np.asarray(P, dtype=float)
    if P.ndim != 3 or P.shape[0] != P.shape[2]:
        raise ValueError(f"P must have shape (S, A, S), got {P.shape}")
    n_states, n_actions, _ = P.shape
    pi = check_policy(pi, n_states, n_actions)
    return np.einsum("sat,tb->satb", P, pi).reshape(n_states * n_actions, n_states * n_actions)


def state_transition(P: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """The state-to-state transition matrix of ``pi``, shape ``(S, S)``: ``sum_a pi(a|s) P(s'|s, a)``."""
    P = np.asarray(P, dtype=float)
    if P.ndim != 3 or P.shape[0] != P.shape[2]:
        raise ValueError(f"P must have shape (S, A, S), got {P.shape}")
    pi = check_policy(pi, P.shape[0], P.shape[1])
    return np.einsum("sa,sat->st", pi, P)


def state_values(Q: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """``V(s) = sum_a pi(a|s) Q(s, a)``, shape ``(S,)``."""
    Q = np.asarray(Q, dtype=float)
    pi = check_policy(pi, *Q.shape)
    return (pi * Q).sum(axis=1)


def bellman_operator(mdp: FiniteMDP, Q: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """One application of the Bellman evaluation operator ``(B^pi Q)(s,a) = r(s,a) + gamma E[V(s')]``.

    ``V(s') = sum_a' pi(a'|s') Q(s', a')``; equivalently ``R + gamma P^pi Q`` in vector form.  Returns ``(S, A)``.
    """
    Q = _check_q(Q, mdp)
    pi = check_policy(pi, mdp.n_states, mdp.n_actions)
    return mdp.R + mdp.gamma * mdp.P @ (pi * Q).sum(axis=1)


def optimality_operator(mdp: FiniteMDP, Q: np.ndarray) -> np.ndarray:
    """The Bellman optimality operator ``(B* Q)(s,a) = r(s,a) + gamma E[max_a' Q(s', a')]``.  Returns ``(S, A)``."""
    Q = _check_q(Q, mdp)
    return mdp.R + mdp.gamma * mdp.P @ Q.max(axis=1)


# ---------------------------------------------------------------------------------------------------------------
# Evaluation and control
# ---------------------------------------------------------------------------------------------------------------


def evaluate_policy_exact(mdp: FiniteMDP, pi: np.ndarray) -> np.ndarray:
    """``Q^pi`` by one linear solve, ``(I - gamma P^pi) Q = R``.  Returns ``(S, A)``.

    The system is non-singular because ``P^pi`` is row-stochastic, so the spectral radius of ``gamma P^pi`` is at
    most ``gamma < 1`` (chapter 1, the policy-evaluation theorem).
    """
    n = mdp.n_states * mdp.n_actions
    P_pi = policy_transition(mdp.P, pi)
    q = np.linalg.solve(np.eye(n) - mdp.gamma * P_pi, mdp.R.reshape(n))
    return q.reshape(mdp.n_states, mdp.n_actions)


def evaluate_policy_iterative(
    mdp: FiniteMDP,
    pi: np.ndarray,
    iters: int | None = None,
    tol: float = 1e-8,
    Q0: np.ndarray | None = None,
    max_iters: int = 100_000,
) -> tuple[np.ndarray, np.ndarray]:
    """Iterative policy evaluation: ``Q_{k+1} = B^pi Q_k`` from ``Q_0`` (zeros by default).

    Args:
        iters: if given, run exactly this many iterations and ignore ``tol``.
        tol: otherwise stop as soon as ``||Q_{k+1} - Q^pi||_inf <= tol`` is guaranteed, which holds once
            ``gamma / (1 - gamma) * ||Q_{k+1} - Q_k||_inf <= tol`` (a consequence of the contraction).
        Q0: starting table, shape ``(S, A)``.
        max_iters: safety cap when iterating to ``tol``; a ``RuntimeError`` is raised if it is reached.

    Returns:
        ``(Q, deltas)``: the last iterate and the array ``deltas[k] = ||Q_{k+1} - Q_k||_inf``, which shrinks at
        least by a factor ``gamma`` per iteration.
    """
    pi = check_policy(pi, mdp.n_states, mdp.n_actions)
    Q = np.zeros((mdp.n_states, mdp.n_actions)) if Q0 is None else _check_q(Q0, mdp, "Q0").copy()
    if iters is not None and int(iters) < 0:
        raise ValueError(f"iters must be >= 0, got {iters}")
    if iters is None and not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    gamma = mdp.gamma
    deltas = []
    n_max = int(iters) if iters is not None else int(max_iters)
    for _ in range(n_max):
        Q_next = bellman_operator(mdp, Q, pi)
        delta = float(np.abs(Q_next - Q).max())
        deltas.append(delta)
        Q = Q_next
        if iters is None and gamma * delta <= tol * (1.0 - gamma):
            break
    else:
        if iters is None:
            raise RuntimeError(f"evaluate_policy_iterative did not reach tol={tol} in max_iters={max_iters} iterations")
    return Q, np.array(deltas)


def policy_return(mdp: FiniteMDP, pi: np.ndarray) -> float:
    """The expected discounted return ``J(pi) = sum_s init(s) V^pi(s)``."""
    return float(mdp.init @ state_values(evaluate_policy_exact(mdp, pi), pi))


def value_iteration(mdp: FiniteMDP, tol: float = 1e-10, max_iters: int = 100_000) -> np.ndarray:
    """``Q*`` by value iteration, ``Q_{k+1} = B* Q_k`` from zeros, to sup-norm accuracy ``tol``.  Returns ``(S, A)``.

    Stops once ``gamma / (1 - gamma) * ||Q_{k+1} - Q_k||_inf <= tol``, which guarantees ``||Q_{k+1} - Q*|| <= tol``.
    """
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    Q = np.zeros((mdp.n_states, mdp.n_actions))
    for _ in range(int(max_iters)):
        Q_next = optimality_operator(mdp, Q)
        delta = float(np.abs(Q_next - Q).max())
        Q = Q_next
        if mdp.gamma * delta <= tol * (1.0 - mdp.gamma):
            return Q
    raise RuntimeError(f"value_iteration did not reach tol={tol} in max_iters={max_iters} iterations")


def greedy_policy(Q: np.ndarray) -> np.ndarray:
    """The deterministic greedy policy of ``Q`` as a one-hot ``(S, A)`` table; ties go to the lowest action."""
    Q = np.asarray(Q, dtype=float)
    if Q.ndim != 2:
        raise ValueError(f"Q must have shape (S, A), got {Q.shape}")
    pi = np.zeros_like(Q)
    pi[np.arange(Q.shape[0]), Q.argmax(axis=1)] = 1.0
    return pi


def constrained_value_iteration(mdp: FiniteMDP, support: np.ndarray, empty_value: float = 0.0,
                                tol: float = 1e-10, max_iters: int = 100_000) -> np.ndarray:
    """The optimal ``Q`` among policies that only take actions in ``support``: the batch-constrained optimum.

    Iterates ``Q(s, a) = R(s, a) + gamma sum_s' P(s'|s, a) max_{a' : support[s', a']} Q(s', a')`` to sup-norm
    accuracy ``tol``.  ``support`` is a boolean ``(S, A)`` mask, typically ``counts > 0`` from :func:`empirical_mdp`.
    A state with no supported action at all (e.g. the last state of a truncated episode) is worth
    ``empty_value``.  Unsupported entries of the result are ``-inf``, so ``greedy_policy`` never picks them where a
    supported action exists.  This is the answer that BCQL, and IQL as its expectile goes to 1, should reach.
    """
    support = np.asarray(support)
    if support.shape != (mdp.n_states, mdp.n_actions) or support.dtype != bool:
        raise ValueError(f"support must be a boolean array of shape {(mdp.n_states, mdp.n_actions)}, "
                         f"got dtype {support.dtype} and shape {support.shape}")
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    has_action = support.any(axis=1)
    Q = np.where(support, 0.0, -np.inf)
    for _ in range(int(max_iters)):
        V = np.where(has_action, Q.max(axis=1), float(empty_value))
        Q_next = np.where(support, mdp.R + mdp.gamma * (mdp.P @ V), -np.inf)
        delta = float(np.abs(Q_next[support] - Q[support]).max(initial=0.0))
        Q = Q_next
        if mdp.gamma * delta <= tol * (1.0 - mdp.gamma):
            return Q
    raise RuntimeError(f"constrained_value_iteration did not reach tol={tol} in max_iters={max_iters} iterations")


# ---------------------------------------------------------------------------------------------------------------
# Offline data
# ---------------------------------------------------------------------------------------------------------------


def _sample_rows(cdf_rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling: one index per row of ``cdf_rows`` (shape (n, k)) from uniforms ``u`` (shape (n,))."""
    idx = (cdf_rows < u[:, None]).sum(axis=1)
    return np.minimum(idx, cdf_rows.shape[1] - 1)  # guard against round-off in the last cumulative sum


def sample_dataset(
    mdp: FiniteMDP,
    pi_beta: np.ndarray,
    n_transitions: int,
    seed: int = 0,
    horizon: int = 50,
    reward_noise: float = 0.0,
) -> dict[str, np.ndarray]:
    """Collect ``n_transitions`` transitions by running the behaviour policy ``pi_beta`` in ``mdp``.

    Episodes start from ``mdp.init`` and end when the next state is terminal (``done = True``) or after
    ``horizon`` steps (``timeout = True``: a truncation, not a terminal; bootstrapping continues through it).
    For speed, ``ceil(n_transitions / horizon)`` independent streams of episodes are simulated side by side; the
    output lists each stream's transitions in time order, one stream after another.

    Args:
        reward_noise: standard deviation of Gaussian noise added to each observed reward (0 = exact ``R[s, a]``).

    Returns:
        dict with ``s, a, s_next`` (int64), ``r`` (float64), ``done`` and ``timeout`` (bool), each of length
        ``n_transitions``.  The same seed gives the same dataset.
    """
    pi_beta = check_policy(pi_beta, mdp.n_states, mdp.n_actions, name="pi_beta")
    n_transitions = int(n_transitions)
    if n_transitions < 1:
        raise ValueError(f"n_transitions must be >= 1, got {n_transitions}")
    if int(horizon) < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    if reward_noise < 0:
        raise ValueError(f"reward_noise must be >= 0, got {reward_noise}")
    horizon = int(horizon)
    rng = np.random.default_rng(seed)
    n_streams = -(-n_transitions // horizon)
    cdf_init = np.cumsum(mdp.init)[None, :]
    cdf_pi = np.cumsum(pi_beta, axis=1)
    cdf_P = np.cumsum(mdp.P, axis=2)

    out = {k: np.zeros((horizon, n_streams), dtype=np.int64) for k in ("s", "a", "s_next")}
    out["done"] = np.zeros((horizon, n_streams), dtype=bool)
    out["timeout"] = np.zeros((horizon, n_streams), dtype=bool)
    s = _sample_rows(np.repeat(cdf_init, n_streams, axis=0), rng.random(n_streams))
    for t in range(horizon):
        a = _sample_rows(cdf_pi[s], rng.random(n_streams))
        s_next = _sample_rows(cdf_P[s, a], rng.random(n_streams))
        done = mdp.terminal[s_next]
        timeout = ~done & (t == horizon - 1)  # each stream runs `horizon` steps, so no episode is longer
        out["s"][t], out["a"][t], out["s_next"][t] = s, a, s_next
        out["done"][t], out["timeout"][t] = done, timeout
        reset = done | timeout
        if np.any(reset):
            s_next = s_next.copy()
            s_next[reset] = _sample_rows(np.repeat(cdf_init, int(reset.sum()), axis=0), rng.random(int(reset.sum())))
        s = s_next

    data = {k: v.T.reshape(-1)[:n_transitions] for k, v in out.items()}  # stream-major: episodes are contiguous
    data["timeout"][-1] = not data["done"][-1]  # the cut after n_transitions truncates the last episode
    data["r"] = mdp.R[data["s"], data["a"]]
    if reward_noise > 0:
        data["r"] = data["r"] + reward_noise * rng.standard_normal(n_transitions)
    return {k: data[k] for k in ("s", "a", "r", "s_next", "done", "timeout")}


def check_dataset(dataset: dict, n_states: int, n_actions: int) -> dict[str, np.ndarray]:
    """Validate a tabular dataset and return its arrays ``s, a, r, s_next, done`` as numpy arrays.

    Raises a ``ValueError`` naming the key if one is missing, not 1-D, of a different length than ``s``,
    out of range (``0 <= s, s_next < S``, ``0 <= a < A``) or, for ``r``, not finite.
    """
    required = ("s", "a", "r", "s_next", "done")
    missing = [k for k in required if k not in dataset]
    if missing:
        raise ValueError(f"dataset is missing key(s) {missing}; expected keys {list(required)}")
    arrays = {k: np.asarray(dataset[k]) for k in required}
    n = arrays["s"].shape[0] if arrays["s"].ndim == 1 else -1
    for k, v in arrays.items():
        if v.ndim != 1 or v.shape[0] != n:
            raise ValueError(f"dataset['{k}'] must be 1-D with the length of dataset['s'] ({n}), got shape {v.shape}")
    for k, hi in (("s", n_states), ("a", n_actions), ("s_next", n_states)):
        v = arrays[k]
        if not np.issubdtype(v.dtype, np.integer):
            raise ValueError(f"dataset['{k}'] must hold integers, got dtype {v.dtype}")
        if n and (v.min() < 0 or v.max() >= hi):
            i = int(np.flatnonzero((v < 0) | (v >= hi))[0])
            raise ValueError(f"dataset['{k}'] must be in [0, {hi}), got {v[i]} at index {i}")
    r = arrays["r"].astype(float)
    if not np.all(np.isfinite(r)):
        bad = np.flatnonzero(~np.isfinite(r))
        raise ValueError(f"dataset['r'] has {bad.size} non-finite values (first at index {bad[0]})")
    arrays["r"] = r
    arrays["done"] = arrays["done"].astype(bool)
    return arrays


def empirical_mdp(
    dataset: dict,
    n_states: int,
    n_actions: int,
    gamma: float,
    init: np.ndarray | None = None,
    unseen_reward: float = 0.0,
) -> tuple[FiniteMDP, np.ndarray]:
    """The maximum-likelihood MDP of a dataset, and the counts ``N(s, a)``.

    For every pair seen in the data (``N(s, a) > 0``)::

        T_hat(s' | s, a) = N(s, a, s') / N(s, a)        r_hat(s, a) = mean of the rewards observed at (s, a)

    **Unseen pairs** (``N(s, a) = 0``, the mask ``seen = counts > 0`` is ``False``): the data says nothing about
    them.  By convention they become a self-loop ``T_hat(s | s, a) = 1`` paying ``unseen_reward`` forever, so
    ``Q_hat(s, a) = unseen_reward / (1 - gamma)`` for every policy that keeps taking ``a`` in ``s``.  The default
    ``0.0`` is one arbitrary choice among many that agree equally well with the data: chapter 1 shows how that
    choice leaks into the values of seen pairs (extrapolation error).

    **Terminal states**: a state reached by a transition with ``done = True`` is terminal in the empirical MDP:
    absorbing with zero reward, whatever the data says about leaving it.

    Args:
        init: start distribution of the empirical MDP; ``None`` means the empirical distribution of ``s`` in the
            data (start states are not recorded separately), or uniform if that is empty.

    Returns:
        ``(mdp_hat, counts)`` with ``counts[s, a] = N(s, a)``, an int array of shape ``(S, A)``.
    """
    d = check_dataset(dataset, n_states, n_actions)
    S, A = int(n_states), int(n_actions)
    counts_sas = np.zeros((S, A, S))
    np.add.at(counts_sas, (d["s"], d["a"], d["s_next"]), 1.0)
    reward_sum = np.zeros((S, A))
    np.add.at(reward_sum, (d["s"], d["a"]), d["r"])
    counts = counts_sas.sum(axis=2)
    seen = counts > 0

    P = np.zeros((S, A, S))
    P[seen] = counts_sas[seen] / counts[seen][:, None]
    R = np.full((S, A), float(unseen_reward))
    R[seen] = reward_sum[seen] / counts[seen]
    unseen_s, unseen_a = np.nonzero(~seen)
    P[unseen_s, unseen_a, unseen_s] = 1.0

    terminal = np.zeros(S, dtype=bool)
    terminal[d["s_next"][d["done"]]] = True
    for s in np.flatnonzero(terminal):
        P[s] = 0.0
        P[s, :, s] = 1.0
        R[s] = 0.0

    if init is None:
        visits = np.bincount(d["s"], minlength=S).astype(float)
        init = visits / visits.sum() if visits.sum() > 0 else np.full(S, 1.0 / S)
    mdp_hat = FiniteMDP(P=P, R=R, gamma=gamma, init=init, terminal=terminal)
    return mdp_hat, counts.astype(np.int64)


def empirical_behavior_policy(dataset: dict, n_states: int, n_actions: int) -> np.ndarray:
    """The empirical behaviour policy ``pi_hat_beta(a | s) = N(s, a) / N(s)``, shape ``(S, A)``.

    States that never occur in the data (``N(s) = 0``) get the uniform distribution, so the result is always a
    valid policy; check ``N(s) > 0`` yourself where the difference matters.
    """
    d = check_dataset(dataset, n_states, n_actions)
    counts = np.zeros((int(n_states), int(n_actions)))
    np.add.at(counts, (d["s"], d["a"]), 1.0)
    n_s = counts.sum(axis=1, keepdims=True)
    return np.where(n_s > 0, counts / np.maximum(n_s, 1.0), 1.0 / n_actions)


# ---------------------------------------------------------------------------------------------------------------
# Tabular BCQ: batch-constrained Q-learning (chapter 2)
# ---------------------------------------------------------------------------------------------------------------


def _bootstrap_model(d: dict, S: int, A: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts ``N(s, a)``, mean rewards ``r_hat(s, a)`` and ``T_boot[s, a, s'] = N(s, a, s', done=False) / N(s, a)``
    (the next states that are bootstrapped from; a ``done`` transition contributes its reward only)."""
    counts = np.zeros((S, A))
    np.add.at(counts, (d["s"], d["a"]), 1.0)
    reward_sum = np.zeros((S, A))
    np.add.at(reward_sum, (d["s"], d["a"]), d["r"])
    boot = np.zeros((S, A, S))
    live = ~d["done"]
    np.add.at(boot, (d["s"][live], d["a"][live], d["s_next"][live]), 1.0)
    n = np.maximum(counts, 1.0)
    return counts, reward_sum / n, boot / n[:, :, None]


def _next_values(Q: np.ndarray, support: np.ndarray | None) -> np.ndarray:
    """``V(s') = max_a' Q(s', a')`` over all actions (``support=None``) or over supported ones (0 if none)."""
    if support is None:
        return Q.max(axis=1)
    return np.where(support.any(axis=1), np.where(support, Q, -np.inf).max(axis=1), 0.0)


def _initial_q(Q0, S: int, A: int) -> np.ndarray:
    if Q0 is None:
        return np.zeros((S, A))
    Q0 = np.array(np.broadcast_to(np.asarray(Q0, dtype=float), (S, A)))
    if not np.all(np.isfinite(Q0)):
        raise ValueError("Q0 must be finite")
    return Q0


def offline_q_iteration(dataset: dict, n_states: int, n_actions: int, gamma: float, constrained: bool = False,
                        Q0: np.ndarray | float | None = None, tol: float = 1e-10,
                        max_iters: int = 100_000) -> np.ndarray:
    """The fixed point of offline Q-learning on ``dataset``, by synchronous iteration of its expected update.

    Every pair seen in the data (``N(s, a) > 0``) is set, at each iteration, to the average of its transitions'
    targets::

        Q(s, a) <- r_hat(s, a) + gamma * sum_s' T_boot(s' | s, a) * max_{a'} Q(s', a')

    where ``T_boot`` counts only transitions with ``done = False`` (a terminal transition contributes its reward
    and no bootstrap). Pairs never seen are never updated:

    * ``constrained=False`` (naive Q-learning): they keep their initial values ``Q0`` (default 0), which are
      arbitrary, and the ``max`` over ``a'`` looks at them too: this is Q-learning on the empirical MDP whose unseen
      pairs take arbitrary values, and what it returns depends on ``Q0`` (extrapolation error).
    * ``constrained=True`` (batch-constrained Q-learning, BCQL): the ``max`` only ranges over actions seen in ``s'``
      (a state with none is worth 0), unseen entries are ``-inf``, and the result equals
      ``constrained_value_iteration(mdp_hat, counts > 0)`` with ``(mdp_hat, counts) = empirical_mdp(dataset, ...)``
      on every pair of a non-terminal state, whatever ``Q0``.

    Stops when ``gamma / (1 - gamma) * ||Q_{k+1} - Q_k||_inf <= tol`` (``tol`` from the fixed point).
    """
    d = check_dataset(dataset, n_states, n_actions)
    S, A = int(n_states), int(n_actions)
    if not 0.0 <= gamma < 1.0:
        raise ValueError(f"gamma must be in [0, 1), got {gamma}")
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    counts, r_hat, T_boot = _bootstrap_model(d, S, A)
    seen = counts > 0
    support = seen if constrained else None
    Q = _initial_q(Q0, S, A)
    if constrained:
        Q = np.where(seen, Q, -np.inf)
    for _ in range(int(max_iters)):
        Q_next = np.where(seen, r_hat + gamma * (T_boot @ _next_values(Q, support)), Q)
        delta = float(np.abs(Q_next[seen] - Q[seen]).max(initial=0.0))
        Q = Q_next
        if gamma * delta <= tol * (1.0 - gamma):
            return Q
    raise RuntimeError(f"offline_q_iteration did not reach tol={tol} in max_iters={max_iters} iterations")


def offline_q_learning(dataset: dict, n_states: int, n_actions: int, gamma: float, constrained: bool = False,
                       Q0: np.ndarray | float | None = None, sweeps: int = 100, lr_power: float = 0.6,
                       seed: int = 0) -> np.ndarray:
    """Sample-based offline Q-learning: ``sweeps`` passes over the dataset's transitions, each in a random order,

        Q(s, a) <- Q(s, a) + alpha * (r + gamma * (1 - done) * max_{a'} Q(s', a') - Q(s, a))

    with step size ``alpha = 1 / n(s, a) ** lr_power`` (``n(s, a)``: updates of the pair so far; ``lr_power`` in
    ``(0.5, 1]`` satisfies the Robbins-Monro conditions). With ``constrained=True`` the max ranges over the actions
    seen in ``s'`` only: this is BCQL (Fujimoto et al. 2019, section 4, tabular), which converges to the fixed point
    :func:`offline_q_iteration` computes. Unseen pairs keep ``Q0`` (naive) or are ``-inf`` (constrained).
    """
    d = check_dataset(dataset, n_states, n_actions)
    S, A = int(n_states), int(n_actions)
    if not 0.0 <= gamma < 1.0:
        raise ValueError(f"gamma must be in [0, 1), got {gamma}")
    if not 0.5 < lr_power <= 1.0:
        raise ValueError(f"lr_power must be in (0.5, 1], got {lr_power}")
    if int(sweeps) < 0:
        raise ValueError(f"sweeps must be >= 0, got {sweeps}")
    seen = np.zeros((S, A), dtype=bool)
    seen[d["s"], d["a"]] = True
    Q = _initial_q(Q0, S, A)
    if constrained:
        Q = np.where(seen, Q, -np.inf)
    support = seen if constrained else None
    visits = np.zeros((S, A))
    rng = np.random.default_rng(seed)
    s_all, a_all, r_all, s2_all, done_all = d["s"], d["a"], d["r"], d["s_next"], d["done"]
    for _ in range(int(sweeps)):
        for i in rng.permutation(len(s_all)):
            s, a, s2 = s_all[i], a_all[i], s2_all[i]
            if done_all[i]:
                target = r_all[i]
            elif support is None:
                target = r_all[i] + gamma * Q[s2].max()
            else:
                target = r_all[i] + gamma * (Q[s2][support[s2]].max() if support[s2].any() else 0.0)
            visits[s, a] += 1.0
            Q[s, a] += (target - Q[s, a]) / visits[s, a] ** lr_power
    return Q


def bcql(dataset: dict, n_states: int, n_actions: int, gamma: float, **kwargs) -> np.ndarray:
    """Batch-constrained Q-learning: :func:`offline_q_learning` with ``constrained=True``."""
    return offline_q_learning(dataset, n_states, n_actions, gamma, constrained=True, **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Tabular CQL: the conservative policy-evaluation updates and their closed forms (chapter 3)
# ---------------------------------------------------------------------------------------------------------------


def cql_penalty_weights(pi_beta: np.ndarray, mu: np.ndarray, variant: int = 1) -> np.ndarray:
    """The per-pair penalty ``c(s, a)`` of CQL's tabular policy-evaluation update, shape ``(S, A)``.

    In a finite MDP the minimiser of CQL's objective can be written pair by pair (Kumar et al. 2020, eqs. 1-2):

        (1)  min_Q  alpha E_{s~D, a~mu}[Q(s, a)]                          + 1/2 E_D[(Q - B_hat^pi Q_k)^2]
        (2)  min_Q  alpha (E_{s~D, a~mu}[Q] - E_{s~D, a~pi_hat_beta}[Q])   + 1/2 E_D[(Q - B_hat^pi Q_k)^2]

    Setting the derivative in ``Q(s, a)`` to zero (both terms carry the weight ``d(s)``) gives
    ``Q_{k+1} = B_hat^pi Q_k - alpha c`` with

        variant 1:  c = mu / pi_hat_beta            (every pair pushed down, most where mu leaves the data)
        variant 2:  c = mu / pi_hat_beta - 1        (pushed down where mu > pi_hat_beta, up where mu < pi_hat_beta)

    Pairs with ``pi_hat_beta(a|s) = 0`` and ``mu(a|s) = 0`` are in neither term: ``c = 0`` there (the update is the
    plain backup of the empirical MDP). ``mu(a|s) > 0`` where ``pi_hat_beta(a|s) = 0`` would be an infinite
    penalty and raises a ``ValueError`` (the theorems assume ``supp mu`` inside ``supp pi_hat_beta``).
    """
    if variant not in (1, 2):
        raise ValueError(f"variant must be 1 (penalty (1)) or 2 (penalty (2)), got {variant!r}")
    pi_beta = check_policy(pi_beta, *np.shape(pi_beta), name="pi_beta")
    mu = check_policy(mu, *pi_beta.shape, name="mu")
    outside = (mu > 0) & (pi_beta == 0)
    if np.any(outside):
        s, a = np.argwhere(outside)[0]
        raise ValueError(f"mu must be zero where pi_beta is zero (supp mu inside supp pi_beta), but "
                         f"mu[{s}, {a}] = {mu[s, a]:.3g} with pi_beta[{s}, {a}] = 0")
    seen = pi_beta > 0
    c = np.zeros_like(pi_beta)
    c[seen] = mu[seen] / pi_beta[seen] - (1.0 if variant == 2 else 0.0)
    return c


def cql_policy_evaluation(mdp: FiniteMDP, pi: np.ndarray, pi_beta: np.ndarray, alpha: float,
                          mu: np.ndarray | None = None, variant: int = 1, tol: float = 1e-10,
                          max_iters: int = 100_000) -> np.ndarray:
    """Iterate CQL's tabular update ``Q_{k+1} = R + gamma P^pi Q_k - alpha c`` to its fixed point, from zeros.

    ``mdp`` is the MDP the backup uses (the empirical MDP of the data in the paper's theorems), ``pi`` the policy
    evaluated, ``pi_beta`` the (empirical) behaviour policy and ``mu`` the penalised distribution (default
    ``mu = pi``); ``c`` is :func:`cql_penalty_weights`. The update is a gamma-contraction (the penalty does not
    depend on Q), so it converges to :func:`cql_closed_form`; iteration stops once
    ``gamma / (1 - gamma) * ||Q_{k+1} - Q_k||_inf <= tol``. Returns ``(S, A)``.
    """
    pi = check_policy(pi, mdp.n_states, mdp.n_actions)
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    c = _cql_c(mdp, pi, pi_beta, mu, variant)
    shifted = FiniteMDP(mdp.P, mdp.R - alpha * c, mdp.gamma, mdp.init, mdp.terminal)  # the penalty is a reward
    Q, _ = evaluate_policy_iterative(shifted, pi, tol=tol, max_iters=max_iters)
    return Q


def _cql_c(mdp: FiniteMDP, pi: np.ndarray, pi_beta: np.ndarray, mu: np.ndarray | None, variant: int) -> np.ndarray:
    """``c`` of :func:`cql_penalty_weights`, zero at terminal states (never a state of the data, value 0)."""
    c = cql_penalty_weights(pi_beta, pi if mu is None else mu, variant)
    c[mdp.terminal] = 0.0
    return c


def _discounted_penalty(mdp: FiniteMDP, pi: np.ndarray, pi_beta: np.ndarray, mu: np.ndarray | None,
                        variant: int) -> np.ndarray:
    """``w = (I - gamma P^pi)^{-1} c``: how much one unit of alpha lowers each ``Q(s, a)``."""
    c = _cql_c(mdp, pi, pi_beta, mu, variant)
    n = mdp.n_states * mdp.n_actions
    return np.linalg.solve(np.eye(n) - mdp.gamma * policy_transition(mdp.P, pi), c.reshape(n)).reshape(c.shape)


def cql_closed_form(mdp: FiniteMDP, pi: np.ndarray, pi_beta: np.ndarray, alpha: float,
                    mu: np.ndarray | None = None, variant: int = 1) -> np.ndarray:
    """The fixed point of CQL's update in closed form (Kumar et al. 2020, Theorems 3.1 and 3.2):

        Q_hat = Q^pi - alpha (I - gamma P^pi)^{-1} c,    c = mu / pi_beta (variant 1)  or  mu / pi_beta - 1 (variant 2)

    with ``Q^pi`` and ``P^pi`` of ``mdp`` (the empirical MDP in the theorems); ``c = 0`` at terminal states.
    Returns ``(S, A)``.
    """
    pi = check_policy(pi, mdp.n_states, mdp.n_actions)
    return evaluate_policy_exact(mdp, pi) - alpha * _discounted_penalty(mdp, pi, pi_beta, mu, variant)


def cql_lower_bound_alpha(mdp_hat: FiniteMDP, mdp: FiniteMDP, pi: np.ndarray, pi_beta: np.ndarray,
                          mu: np.ndarray | None = None, variant: int = 1) -> float:
    """The smallest ``alpha >= 0`` for which CQL's estimate from ``mdp_hat`` is a lower bound in the true ``mdp``.

    Variant 1 (Theorem 3.1): ``Q_hat(s, a) <= Q^pi(s, a)`` for every pair. Variant 2 (Theorem 3.2, ``mu = pi``):
    ``V_hat(s) = E_pi[Q_hat(s, .)] <= V^pi(s)`` for every state. ``Q_hat`` is affine in alpha,
    ``Q_hat = Q_hat^pi - alpha w`` with ``w = (I - gamma P_hat^pi)^{-1} c``, so the threshold is the largest ratio
    ``(Q_hat^pi - Q^pi) / w`` (resp. its state-value version) over the entries where the estimate without penalty
    is too high. 0 means no penalty is needed; ``inf`` means some overestimated entry has ``w <= 0`` and no alpha
    makes the bound hold there.
    """
    pi = check_policy(pi, mdp.n_states, mdp.n_actions)
    gap = evaluate_policy_exact(mdp_hat, pi) - evaluate_policy_exact(mdp, pi)
    w = _discounted_penalty(mdp_hat, pi, pi_beta, mu, variant)
    if variant == 2:  # the bound is on V = E_pi[Q], not pointwise
        gap, w = state_values(gap, pi), state_values(w, pi)
    over = gap > 1e-12
    if not np.any(over):
        return 0.0
    if np.any(w[over] <= 0):
        return float("inf")
    return float(np.max(gap[over] / w[over]))


def _check_support(mu: np.ndarray, pi_beta: np.ndarray, name: str = "mu") -> None:
    outside = (mu > 0) & (pi_beta == 0)
    if np.any(outside):
        s, a = np.argwhere(outside)[0]
        raise ValueError(f"{name} must be zero where pi_beta is zero (supp {name} inside supp pi_beta), but "
                         f"{name}[{s}, {a}] = {mu[s, a]:.3g} with pi_beta[{s}, {a}] = 0")


def chi_square(mu: np.ndarray, pi_beta: np.ndarray) -> np.ndarray:
    """``chi^2(mu(.|s) || pi_beta(.|s)) = sum_a mu^2 / pi_beta - 1 = E_mu[mu / pi_beta - 1]``, one value per state.

    The average of CQL's penalty (2) under the penalised distribution itself: it is what Theorems 3.2-3.4 of
    Kumar et al. (2020) need to be non-negative. Requires ``supp mu`` inside ``supp pi_beta``. Returns ``(S,)``.
    """
    pi_beta = check_policy(pi_beta, *np.shape(pi_beta), name="pi_beta")
    mu = check_policy(mu, *pi_beta.shape, name="mu")
    _check_support(mu, pi_beta)
    seen = pi_beta > 0
    ratio2 = np.zeros_like(mu)
    ratio2[seen] = mu[seen] ** 2 / pi_beta[seen]
    return ratio2.sum(1) - 1.0


def behavior_gap(Q: np.ndarray, pi_beta: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``E_{a~pi_beta}[Q(s, a)] - E_{a~mu}[Q(s, a)]`` per state: how much Q prefers the data's actions to mu's.

    CQL is *gap-expanding* (Kumar et al. 2020, Theorem 3.4): one update with penalty (2),
    ``B Q_k - alpha (mu / pi_beta - 1)``, has this gap larger than the plain backup ``B Q_k`` by exactly
    ``alpha * chi_square(mu, pi_beta)``. Returns ``(S,)``.
    """
    return state_values(Q, pi_beta) - state_values(Q, mu)


def cql_policy_change_margin(mu: np.ndarray, pi_new: np.ndarray, pi_beta: np.ndarray) -> np.ndarray:
    """The slack of the sufficient condition of Theorem 3.3 (Kumar et al. 2020), one value per state:

        chi^2(mu || pi_beta)(s)  -  ||pi_new(.|s) - mu(.|s)||_1 * max_a mu(a|s) / pi_beta(a|s)

    CQL's penalty is built from ``mu`` (in CQL(H), the softmax of the previous Q) while the backup and the value use
    the new policy ``pi_new``. Where the slack is >= 0, ``E_{pi_new}[mu / pi_beta - 1](s) >= 0``; if it holds at every
    state, the value ``E_{pi_new}[Q_hat]`` of penalty (2) with ``mu`` is below ``V^{pi_new}`` for every alpha >= 0
    (without sampling error). Requires the supports of ``mu`` and ``pi_new`` inside that of ``pi_beta``.
    """
    pi_beta = check_policy(pi_beta, *np.shape(pi_beta), name="pi_beta")
    pi_new = check_policy(pi_new, *pi_beta.shape, name="pi_new")
    _check_support(pi_new, pi_beta, "pi_new")
    chi2 = chi_square(mu, pi_beta)
    seen = pi_beta > 0
    ratio = np.zeros_like(pi_beta)
    ratio[seen] = mu[seen] / pi_beta[seen]
    return chi2 - np.abs(pi_new - mu).sum(1) * ratio.max(1)


# ---------------------------------------------------------------------------------------------------------------
# Tabular IQL: expectile value iteration (chapter 4)
# ---------------------------------------------------------------------------------------------------------------


def expectile(values: np.ndarray, weights: np.ndarray, tau: float) -> np.ndarray:
    """The ``tau``-expectile of each row's discrete distribution: ``values[..., k]`` with probability
    proportional to ``weights[..., k]``.  Returns an array of shape ``values.shape[:-1]``.

    The expectile ``m`` is the minimiser of ``sum_k w_k |tau - 1(x_k < m)| (x_k - m)^2``, i.e. the root of
    ``tau sum_k w_k (x_k - m)_+ = (1 - tau) sum_k w_k (m - x_k)_+``.  ``tau = 0.5`` gives the mean, and ``m``
    grows to the largest value of positive weight as ``tau -> 1``; ``tau = 1`` is accepted and returns that maximum.
    Computed exactly: between two consecutive sorted values the condition is linear in ``m``, so ``m`` is a mean
    with weight ``1 - tau`` on the values below it and ``tau`` on those above; the interval where that mean falls
    inside the interval is the answer.  Entries of zero weight are ignored (they may be ``-inf``).
    """
    x = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    if x.shape != w.shape or x.ndim < 1:
        raise ValueError(f"values and weights must have the same shape (..., K), got {x.shape} and {w.shape}")
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"tau must be in (0, 1], got {tau}")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite and non-negative")
    positive = w > 0
    if not np.all(positive.any(axis=-1)):
        raise ValueError("every row of weights needs a positive entry (an expectile of nothing is undefined)")
    if not np.all(np.isfinite(x[positive])):
        raise ValueError("values with positive weight must be finite")
    top = np.where(positive, x, -np.inf).max(axis=-1)
    if tau == 1.0:
        return top
    x = np.where(positive, x, top[..., None])          # zero-weight entries: any finite value, they count for nothing
    order = np.argsort(x, axis=-1)
    x, w = np.take_along_axis(x, order, -1), np.take_along_axis(w, order, -1)
    cw, cwx = np.cumsum(w, -1), np.cumsum(w * x, -1)  # mass and first moment of the k + 1 smallest values
    tw, twx = cw[..., -1:], cwx[..., -1:]
    m = ((1 - tau) * cwx + tau * (twx - cwx)) / ((1 - tau) * cw + tau * (tw - cw))  # m if x_(k) <= m <= x_(k+1)
    upper = np.concatenate([x[..., 1:], np.full(x.shape[:-1] + (1,), np.inf)], -1)
    violation = np.maximum(np.maximum(x - m, m - upper), 0.0)
    return np.take_along_axis(m, violation.argmin(-1)[..., None], -1)[..., 0]


def expectile_value_iteration(mdp: FiniteMDP, pi_beta: np.ndarray, tau: float, support: np.ndarray | None = None,
                              empty_value: float = 0.0, tol: float = 1e-10,
                              max_iters: int = 100_000) -> tuple[np.ndarray, np.ndarray]:
    """Tabular IQL: iterate ``V(s) = expectile_tau of Q(s, a) over a ~ pi_beta(.|s)`` and ``Q = R + gamma P V``.

    The expectile runs over the actions in ``support`` (default ``pi_beta > 0``; pass ``counts > 0`` with
    ``pi_beta = empirical_behavior_policy(...)``, which is uniform at states without data), weighted by
    ``pi_beta``.  A state with no supported action is worth ``empty_value``.  The expectile is monotone and
    ``expectile(q + c) = expectile(q) + c``, so the update is a ``gamma``-contraction in the sup norm, iterated to
    accuracy ``tol`` like :func:`constrained_value_iteration`.  ``tau = 0.5`` evaluates ``pi_beta`` (SARSA);
    ``tau = 1`` is exactly :func:`constrained_value_iteration`, the limit IQL approaches as ``tau -> 1``.

    Returns ``(Q, V)``: ``Q`` of shape ``(S, A)`` with ``-inf`` at unsupported pairs, ``V`` of shape ``(S,)``.
    """
    pi_beta = check_policy(pi_beta, mdp.n_states, mdp.n_actions, name="pi_beta")
    support = pi_beta > 0 if support is None else np.asarray(support)
    if support.shape != (mdp.n_states, mdp.n_actions) or support.dtype != bool:
        raise ValueError(f"support must be a boolean array of shape {(mdp.n_states, mdp.n_actions)}, "
                         f"got dtype {support.dtype} and shape {support.shape}")
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"tau must be in (0, 1], got {tau}")
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    weights = np.where(support, pi_beta, 0.0)
    has_action = weights.sum(axis=1) > 0  # a supported action of zero behaviour probability carries no weight
    Q = np.where(support, 0.0, -np.inf)
    V = np.full(mdp.n_states, float(empty_value))
    for _ in range(int(max_iters)):
        V[has_action] = expectile(Q[has_action], weights[has_action], tau)
        Q_next = np.where(support, mdp.R + mdp.gamma * (mdp.P @ V), -np.inf)
        delta = float(np.abs(Q_next[support] - Q[support]).max(initial=0.0))
        Q = Q_next
        if mdp.gamma * delta <= tol * (1.0 - mdp.gamma):
            V[has_action] = expectile(Q[has_action], weights[has_action], tau)
            return Q, V
    raise RuntimeError(f"expectile_value_iteration did not reach tol={tol} in max_iters={max_iters} iterations")


def awr_policy(Q: np.ndarray, V: np.ndarray, pi_beta: np.ndarray, beta: float, max_weight: float = np.inf,
               support: np.ndarray | None = None) -> np.ndarray:
    """IQL's policy extraction in closed form: ``pi(a|s) ∝ pi_beta(a|s) min(exp(beta (Q(s,a) - V(s))), max_weight)``.

    This table maximises the AWR objective ``sum_a pi_beta(a|s) w(s, a) log pi(a|s)`` at every state (Gibbs'
    inequality).  ``beta = 0`` returns ``pi_beta`` (behaviour cloning); ``beta -> inf`` without a clamp puts all mass
    on the best supported action; with a clamp every action of positive advantage gets the same weight
    ``max_weight``, so the limit is ``pi_beta`` restricted to those actions (filtered behaviour cloning).
    Only actions in ``support`` (default ``pi_beta > 0``) get mass; states with no support keep ``pi_beta``.
    """
    Q = np.asarray(Q, dtype=float)
    pi_beta = check_policy(pi_beta, *Q.shape, name="pi_beta")
    V = np.asarray(V, dtype=float)
    if V.shape != Q.shape[:1]:
        raise ValueError(f"V must have shape (S,) = ({Q.shape[0]},), got {V.shape}")
    if beta < 0 or not max_weight > 0:
        raise ValueError(f"beta must be >= 0 and max_weight > 0, got beta={beta}, max_weight={max_weight}")
    support = (pi_beta > 0 if support is None else np.asarray(support, dtype=bool)) & (pi_beta > 0)
    adv = np.where(support, Q - V[:, None], 0.0)
    log_w = np.minimum(beta * adv, np.log(max_weight))  # log of the clamped weight, no overflow
    log_w = np.where(support, log_w, -np.inf)
    has_action = support.any(axis=1)
    log_w[has_action] -= log_w[has_action].max(axis=1, keepdims=True)  # rescaling a row changes nothing
    pi = np.where(support, pi_beta * np.exp(log_w), 0.0)
    pi[~has_action] = pi_beta[~has_action]
    return pi / pi.sum(axis=1, keepdims=True)
