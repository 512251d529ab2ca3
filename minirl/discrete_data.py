"""A discrete-action dataset for discrete BCQ: CartPole-v1 driven by noisy hand-written controllers.

No DQN is trained here: CartPole is balanced perfectly by a linear controller, so behaviour policies of any quality
are made by adding randomness to it, the way the discrete BCQ paper (Fujimoto et al. 2019) made its buffers from a
trained DQN with epsilon-random actions. Two controllers, both of the form ``push right iff w . s > 0`` on the
state ``s = (x, x_dot, theta, theta_dot)``:

    good:  w = (0.1, 0.5, 10, 2)   position, velocity, angle and angular velocity: returns 500 (the maximum)
    poor:  w = (0, 0, 1, 0)        the angle alone: the pole swings up and falls, returns about 40

Behaviours (each episode picks its policy and noise, then every step takes a uniform random action with
probability epsilon, else the controller's action):

    random   epsilon = 1 (uniform actions)                                          mean return ~22
    medium   good controller, epsilon = 0.5                                         mean return ~200
    mixed    per episode: good with epsilon 0.5 (prob 0.1) or poor with epsilon 0.1  mean return ~60
    expert   good controller, epsilon = 0.05                                        return 500 (never fails)

In ``mixed`` the two controllers disagree in many states, so greedy behaviour cloning copies whichever is more
frequent there, while the random steps keep both actions in the data nearly everywhere: the threshold of discrete
BCQ decides how far the learner may depart from the frequent action. In ``expert`` the other action is rare and
no episode fails, so the data never shows what a wrong action leads to.
Mean episode returns above: 50,000 transitions, seed 0 (mixed: 30,000); the notebook ``02b_bcq_recommendation``
prints those of its datasets.

The dataset is an :class:`~minirl.data.OfflineDataset` whose actions are a float column ``(N, 1)`` holding the
action index, with ``action_low = 0`` and ``action_high = n_actions - 1``; ``infos["episode_policy"]`` records
which controller acted (0 good, 1 poor, 2 random). Termination (the pole falls or the cart leaves the track) sets
``terminals``; the 500-step limit sets ``timeouts``.
"""
from __future__ import annotations

import numpy as np

from .data import OfflineDataset
from .utils import make_env

GOOD_GAINS = np.array([0.1, 0.5, 10.0, 2.0])
POOR_GAINS = np.array([0.0, 0.0, 1.0, 0.0])

# quality -> list of (probability of the episode, gains or None for random, epsilon)
BEHAVIOURS = {
    "random": [(1.0, None, 1.0)],
    "medium": [(1.0, GOOD_GAINS, 0.5)],
    "mixed": [(0.1, GOOD_GAINS, 0.5), (0.9, POOR_GAINS, 0.1)],
    "expert": [(1.0, GOOD_GAINS, 0.05)],
}


def controller_action(obs: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """``1`` (push right) where ``obs @ gains > 0``, else ``0``; ``obs`` is ``(..., 4)``, the result int64."""
    return (np.asarray(obs) @ np.asarray(gains) > 0).astype(np.int64)


def make_cartpole_dataset(n_transitions: int = 50_000, quality: str = "mixed", seed: int = 0) -> OfflineDataset:
    """``n_transitions`` CartPole-v1 transitions from the behaviour ``quality`` (see the module docstring).

    Deterministic in ``seed`` (environment resets with seeds ``seed * 100_000 + episode``, a numpy generator for
    the behaviour). The last transition is marked as a timeout if its episode was cut.
    """
    if quality not in BEHAVIOURS:
        raise ValueError(f"quality must be one of {sorted(BEHAVIOURS)}, got {quality!r}")
    n = int(n_transitions)
    if n < 1:
        raise ValueError(f"n_transitions must be >= 1, got {n_transitions}")
    rng = np.random.default_rng(seed)
    behaviours = BEHAVIOURS[quality]
    probs = np.array([p for p, _, _ in behaviours])
    env = make_env("CartPole-v1")
    obs_l, act_l, rew_l, next_l, term_l, trunc_l, pol_l = [], [], [], [], [], [], []
    episode = 0
    while len(obs_l) < n:
        k = int(rng.choice(len(behaviours), p=probs))
        _, gains, eps = behaviours[k]
        policy_id = 2 if gains is None else (0 if gains is GOOD_GAINS else 1)
        obs, _ = env.reset(seed=seed * 100_000 + episode)
        episode += 1
        done = False
        while not done and len(obs_l) < n:
            if gains is None or rng.random() < eps:
                a = int(rng.integers(2))
            else:
                a = int(controller_action(obs, gains))
            nxt, r, term, trunc, _ = env.step(a)
            obs_l.append(obs), act_l.append(a), rew_l.append(r), next_l.append(nxt)
            term_l.append(term), trunc_l.append(trunc), pol_l.append(policy_id)
            obs, done = nxt, term or trunc
    env.close()
    timeouts = np.array(trunc_l)
    timeouts[-1] |= not term_l[-1]
    return OfflineDataset(observations=np.array(obs_l, np.float32),
                          actions=np.array(act_l, np.float32).reshape(-1, 1),
                          rewards=np.array(rew_l, np.float32), next_observations=np.array(next_l, np.float32),
                          terminals=np.array(term_l), timeouts=timeouts,
                          infos={"episode_policy": np.array(pol_l, np.int64)}, action_low=0.0, action_high=1.0)


def action_indices(dataset: OfflineDataset, n_actions: int | None = None) -> np.ndarray:
    """The dataset's actions as int64 indices ``(N,)``, checked to be whole numbers in ``[0, n_actions)``.

    ``n_actions`` defaults to ``action_high + 1``.
    """
    if dataset.act_dim != 1:
        raise ValueError(f"a discrete dataset has one action column (the index), got act_dim={dataset.act_dim}")
    if n_actions is None:
        if dataset.action_high is None:
            raise ValueError("n_actions is None and the dataset has no action_high (expected action_high = "
                             "n_actions - 1)")
        n_actions = int(dataset.action_high[0]) + 1
    a = dataset.actions[:, 0]
    bad = (a != np.round(a)) | (a < 0) | (a >= n_actions)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"actions must be whole numbers in [0, {n_actions}); {int(bad.sum())} are not "
                         f"(first at index {i}: {a[i]})")
    return a.astype(np.int64)
