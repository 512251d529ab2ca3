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
``T_hat(s'|s,a) = N(s,a,s') / N(s,a)`` and ``r_hat(s,a)`` = mean observed reward.  Pairs with ``N(s,a) = 0`` have no
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


# ---------------------------------------------------------------------------------------------------------------
# Tabular CQL: the conservative policy-evaluation updates and their closed forms (chapter 3)
# ---------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# Tabular IQL: expectile value iteration (chapter 4)
# ---------------------------------------------------------------------------------------------------------------
