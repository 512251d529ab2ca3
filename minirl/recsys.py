"""Offline RL for recommendation: a synthetic logged dataset, ranking metrics and baselines.

A recommender learns from logs that an earlier recommender (the *logging policy*) produced: the logs only show
the items that policy chose, so learning from them is batch RL with the logging policy as behaviour policy. Here
the world is simulated, so the truth is known and held-out users can be scored exactly.

The world (``make_world``)
    users     latent tastes u in R^d, u ~ N(0, I)
    items     latent factors v_i ~ N(0, I/d) and a quality bias b_i ~ N(0, bias_std^2); the recommender only sees
              item embeddings e_i = v_i + N(0, embedding_noise^2 I) (e.g. learned from content, imperfectly)
    clicks    P(click | u, i) = sigmoid(affinity(u, i) - click_offset),  affinity(u, i) = 2 u . v_i + b_i
    logging   a noisy softmax over a partly informative score: the old system knows the user only roughly
              (u_log = u + N(0, logging_user_noise^2 I)) and mixes in a taste-free editorial score c_i ~ N(0, 1):
                  score_log(u, i) = w * 2 u_log . e_i + (1 - w) * c_i,   pi_log(i | u) = softmax(score_log / T)

The logged data (``simulate_sessions``): every user has a session of ``session_length`` steps; at each step the
logging policy shows one item and the user clicks it or not. As an MDP for offline RL (``OfflineDataset`` rows):

    state    s_t = (mean embedding of the user's last ``history`` clicked items, their count / history)  (d + 1)
    action   a_t = e_{i_t}, the embedding of the shown item (a point in R^d; bounds: the embeddings' box)
    reward   r_t = 1 if clicked else 0;   the state changes only on a click; sessions end in a timeout

A continuous-action agent (BCQ) outputs a point a in embedding space; the recommendation list is the top-k items
by dot product e_i . a (``top_k_by_dot``).

Evaluation on held-out users (``make_recsys_data``): each test user first has a logged session (by the same
logging policy) that gives the state; their *targets* are items they then pick on their own, drawn from
``softmax(target_sharpness * affinity(u, .))``. ``hit_rate_at_k`` (is the target in the top k?) and ``ndcg_at_k``
(``1 / log2(rank + 2)`` for a target at 0-based rank ``rank < k``, else 0; with one relevant item the ideal DCG is
1) are averaged over all (user, target) pairs. Baselines: the logging policy's own top-k, the most clicked items in
the logs (popularity), random lists, and the oracle's top-k by true affinity (an upper bound).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data import OfflineDataset


# ----------------------------------------------------------------------------------------------------------------
# Metrics and ranking: pure functions
# ----------------------------------------------------------------------------------------------------------------

def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest entries of each row of ``scores`` ``(n, n_items)``, best first (ties: lower
    index first). Returns int64 ``(n, k)``."""
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D (n_users, n_items), got shape {scores.shape}")
    if not 1 <= k <= scores.shape[1]:
        raise ValueError(f"k must be in [1, n_items = {scores.shape[1]}], got {k}")
    return np.argsort(-scores, axis=1, kind="stable")[:, :k].astype(np.int64)


def top_k_by_dot(item_embeddings: np.ndarray, actions: np.ndarray, k: int) -> np.ndarray:
    """The recommendation lists of points in embedding space: top ``k`` items by ``e_i . a`` for each row ``a`` of
    ``actions`` ``(n, d)``; ``item_embeddings`` is ``(n_items, d)``."""
    actions = np.asarray(actions, dtype=np.float64)
    item_embeddings = np.asarray(item_embeddings, dtype=np.float64)
    if actions.ndim != 2 or actions.shape[1] != item_embeddings.shape[1]:
        raise ValueError(f"actions must have shape (n, d) with d = {item_embeddings.shape[1]} (the embedding size), "
                         f"got {actions.shape}")
    return top_k(actions @ item_embeddings.T, k)


def _target_ranks(ranked: np.ndarray, targets: np.ndarray, k: int) -> np.ndarray:
    """0-based rank of each target within the first ``k`` of its row, or -1; shape of ``targets`` ((n,) or (n, m))."""
    ranked = np.asarray(ranked)
    targets = np.asarray(targets)
    if ranked.ndim != 2:
        raise ValueError(f"ranked must be 2-D (n_users, list length), got shape {ranked.shape}")
    if targets.ndim not in (1, 2) or len(targets) != len(ranked):
        raise ValueError(f"targets must have shape (n,) or (n, m) with n = {len(ranked)} (rows of ranked), "
                         f"got {targets.shape}")
    if not 1 <= k <= ranked.shape[1]:
        raise ValueError(f"k must be in [1, {ranked.shape[1]}] (the lists' length), got {k}")
    t = targets.reshape(len(targets), -1)                               # (n, m)
    match = ranked[:, None, :k] == t[:, :, None]                        # (n, m, k)
    ranks = np.where(match.any(-1), match.argmax(-1), -1)
    return ranks.reshape(targets.shape)


def hit_rate_at_k(ranked: np.ndarray, targets: np.ndarray, k: int = 10) -> float:
    """Fraction of (user, target) pairs whose target is among the user's first ``k`` recommendations.

    ``ranked`` is ``(n, L)`` item indices best first (``L >= k``); ``targets`` is ``(n,)`` or ``(n, m)``
    (``m`` targets per user, each counted once).
    """
    return float((_target_ranks(ranked, targets, k) >= 0).mean())


def ndcg_at_k(ranked: np.ndarray, targets: np.ndarray, k: int = 10) -> float:
    """Mean NDCG@k with one relevant item per (user, target) pair: ``1 / log2(rank + 2)`` if the target is at
    0-based position ``rank < k`` of the list, else 0 (the ideal DCG is ``1 / log2(2) = 1``)."""
    r = _target_ranks(ranked, targets, k)
    return float(np.where(r >= 0, 1.0 / np.log2(np.maximum(r, 0) + 2.0), 0.0).mean())


# ----------------------------------------------------------------------------------------------------------------
# The simulated world
# ----------------------------------------------------------------------------------------------------------------

@dataclass
class RecWorld:
    """Users, items, the click model and the logging policy (see the module docstring for the equations)."""
    user_tastes: np.ndarray        # u, (n_users, d)
    item_latent: np.ndarray        # v, (n_items, d)
    item_bias: np.ndarray          # b, (n_items,)
    item_embeddings: np.ndarray    # e = v + noise, (n_items, d): all the recommender knows about items
    logging_tastes: np.ndarray     # u_log = u + noise, (n_users, d)
    editorial: np.ndarray          # c, (n_items,)
    logging_weight: float          # w
    logging_temperature: float     # T
    click_offset: float

    @property
    def n_items(self) -> int:
        return len(self.item_latent)

    def affinity(self, users: np.ndarray) -> np.ndarray:
        """``2 u . v_i + b_i`` for the given user ids, ``(n, n_items)``."""
        return 2.0 * self.user_tastes[users] @ self.item_latent.T + self.item_bias

    def click_probability(self, users: np.ndarray) -> np.ndarray:
        """``P(click | u, i) = sigmoid(affinity - click_offset)``, ``(n, n_items)``."""
        return 1.0 / (1.0 + np.exp(-(self.affinity(users) - self.click_offset)))

    def logging_scores(self, users: np.ndarray) -> np.ndarray:
        """``w * 2 u_log . e_i + (1 - w) * c_i``, ``(n, n_items)``; the logging policy samples softmax(score / T)."""
        w = self.logging_weight
        return w * 2.0 * self.logging_tastes[users] @ self.item_embeddings.T + (1 - w) * self.editorial


def make_world(n_users: int = 3000, n_items: int = 200, dim: int = 8, *, embedding_noise: float = 0.1,
               bias_std: float = 0.5, click_offset: float = 1.0, logging_weight: float = 0.3,
               logging_user_noise: float = 1.0, logging_temperature: float = 0.5, seed: int = 0) -> RecWorld:
    """A random world; the same arguments give the same world."""
    for name, v in (("n_users", n_users), ("n_items", n_items), ("dim", dim)):
        if int(v) < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    if not 0.0 <= logging_weight <= 1.0:
        raise ValueError(f"logging_weight must be in [0, 1], got {logging_weight}")
    if logging_temperature <= 0:
        raise ValueError(f"logging_temperature must be > 0, got {logging_temperature}")
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n_users, dim))
    v = rng.standard_normal((n_items, dim)) / np.sqrt(dim)
    return RecWorld(user_tastes=u, item_latent=v, item_bias=bias_std * rng.standard_normal(n_items),
                    item_embeddings=v + embedding_noise * rng.standard_normal((n_items, dim)),
                    logging_tastes=u + logging_user_noise * rng.standard_normal((n_users, dim)),
                    editorial=rng.standard_normal(n_items), logging_weight=float(logging_weight),
                    logging_temperature=float(logging_temperature), click_offset=float(click_offset))


def _sample_rows(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row of ``probs`` (rows are distributions)."""
    u = rng.random(len(probs))[:, None]
    return np.minimum((np.cumsum(probs, axis=1) < u).sum(1), probs.shape[1] - 1)


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def history_state(world: RecWorld, clicked: np.ndarray) -> np.ndarray:
    """The state of users whose last clicks are ``clicked`` ``(n, history)`` (item ids, -1 = empty slot):
    ``(mean embedding of the clicked items (0 if none), number clicked / history)``, float32 ``(n, d + 1)``."""
    filled = clicked >= 0
    emb = world.item_embeddings[np.maximum(clicked, 0)] * filled[..., None]   # (n, h, d)
    count = filled.sum(1)
    mean = emb.sum(1) / np.maximum(count, 1)[:, None]
    return np.concatenate([mean, (count / clicked.shape[1])[:, None]], axis=1).astype(np.float32)


def simulate_sessions(world: RecWorld, users: np.ndarray, session_length: int = 20, history: int = 5,
                      seed: int = 0) -> tuple[OfflineDataset, np.ndarray]:
    """Log one session per user under the logging policy.

    Returns ``(dataset, final_clicked)``: the transitions (user-major: each session's steps in order; infos
    ``user``, ``item``, ``step``) and each user's last ``history`` clicked items at the session's end ``(n, history)``.
    """
    users = np.asarray(users)
    if session_length < 1 or history < 1:
        raise ValueError(f"session_length and history must be >= 1, got {session_length} and {history}")
    rng = np.random.default_rng(seed)
    n, d = len(users), world.item_embeddings.shape[1]
    pi_log = _softmax(world.logging_scores(users) / world.logging_temperature)
    p_click = world.click_probability(users)
    clicked = -np.ones((n, history), dtype=np.int64)
    cols = {k: [] for k in ("obs", "item", "rew", "next_obs")}
    rows = np.arange(n)
    for _ in range(session_length):
        obs = history_state(world, clicked)
        item = _sample_rows(pi_log, rng)
        click = rng.random(n) < p_click[rows, item]
        clicked[click] = np.concatenate([clicked[click, 1:], item[click, None]], axis=1)  # drop the oldest
        cols["obs"].append(obs), cols["item"].append(item), cols["rew"].append(click.astype(np.float32))
        cols["next_obs"].append(history_state(world, clicked))
    # (T, n, ...) -> user-major (n * T, ...)
    stack = {k: np.swapaxes(np.stack(v), 0, 1).reshape(n * session_length, *np.stack(v).shape[2:])
             for k, v in cols.items()}
    timeouts = np.zeros(n * session_length, dtype=bool)
    timeouts[session_length - 1::session_length] = True
    emb = world.item_embeddings
    ds = OfflineDataset(observations=stack["obs"], actions=emb[stack["item"]].astype(np.float32),
                        rewards=stack["rew"], next_observations=stack["next_obs"],
                        terminals=np.zeros(n * session_length, dtype=bool), timeouts=timeouts,
                        infos={"user": np.repeat(users, session_length), "item": stack["item"],
                               "step": np.tile(np.arange(session_length), n)},
                        action_low=emb.min(0), action_high=emb.max(0))
    return ds, clicked


@dataclass
class RecData:
    """Everything the recommendation experiment needs (see :func:`make_recsys_data`)."""
    world: RecWorld
    train: OfflineDataset          # logged sessions of the training users
    test_users: np.ndarray         # (n_test,) user ids, disjoint from the training users
    test_states: np.ndarray        # (n_test, d + 1) each test user's state after their logged session
    test_targets: np.ndarray       # (n_test, n_targets) items each test user picks on their own


def make_recsys_data(n_train_users: int = 2000, n_test_users: int = 500, n_items: int = 200, dim: int = 8,
                     session_length: int = 20, history: int = 5, n_targets: int = 5,
                     target_sharpness: float = 2.0, seed: int = 0, **world_kwargs) -> RecData:
    """The world, the training logs and the held-out users with their states and targets (one call, seeded)."""
    world = make_world(n_train_users + n_test_users, n_items, dim, seed=seed, **world_kwargs)
    train_users = np.arange(n_train_users)
    test_users = np.arange(n_train_users, n_train_users + n_test_users)
    train, _ = simulate_sessions(world, train_users, session_length, history, seed=seed + 1)
    _, clicked = simulate_sessions(world, test_users, session_length, history, seed=seed + 2)
    rng = np.random.default_rng(seed + 3)
    choice = _softmax(target_sharpness * world.affinity(test_users))
    targets = np.stack([_sample_rows(choice, rng) for _ in range(n_targets)], axis=1)
    return RecData(world, train, test_users, history_state(world, clicked), targets)


# ----------------------------------------------------------------------------------------------------------------
# Baselines
# ----------------------------------------------------------------------------------------------------------------

def popularity_ranking(data: RecData, k: int = 10) -> np.ndarray:
    """The ``k`` items clicked most often in the training logs, the same list for every test user."""
    clicks = np.bincount(data.train.infos["item"], weights=data.train.rewards, minlength=data.world.n_items)
    return np.repeat(top_k(clicks[None], k), len(data.test_users), axis=0)


def logging_ranking(data: RecData, k: int = 10) -> np.ndarray:
    """The logging policy's own top ``k`` (its most likely items) for each test user."""
    return top_k(data.world.logging_scores(data.test_users), k)


def oracle_ranking(data: RecData, k: int = 10) -> np.ndarray:
    """Top ``k`` by the true affinity: the best any recommender can do in expectation (an upper bound)."""
    return top_k(data.world.affinity(data.test_users), k)


def random_ranking(data: RecData, k: int = 10, seed: int = 0) -> np.ndarray:
    """``k`` distinct uniformly random items per test user."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((len(data.test_users), data.world.n_items)), axis=1)[:, :k]


def agent_ranking(agent, data: RecData, k: int = 10, state_normalizer=None) -> np.ndarray:
    """Top ``k`` items by ``e_i . a`` with ``a = agent.act(state)`` for each test user's state."""
    states = data.test_states if state_normalizer is None else state_normalizer.transform(data.test_states)
    return top_k_by_dot(data.world.item_embeddings, np.asarray(agent.act(states, deterministic=True)), k)


def evaluate_rankings(rankings: dict[str, np.ndarray], targets: np.ndarray, k: int = 10) -> dict[str, dict]:
    """``{name: {"hit_rate": HR@k, "ndcg": NDCG@k}}`` for each ranking against the same targets."""
    return {name: {"hit_rate": hit_rate_at_k(r, targets, k), "ndcg": ndcg_at_k(r, targets, k)}
            for name, r in rankings.items()}
