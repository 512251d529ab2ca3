"""experiments/medium_expert_falls.py drops the expert half's falling episodes of hopper-medium-expert, only those."""

import numpy as np

from minirl.data import OfflineDataset

import medium_expert_falls


def episodes_dataset(lengths_and_ends):
    """Episodes one after the other; each ``(length, "fell" | "ran")``: a terminal or a timeout at its last step.
    The reward of every step is the episode's index, so an episode can be recognised after selection."""
    n = sum(length for length, _ in lengths_and_ends)
    terminals, timeouts, rewards = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, np.float32)
    at = 0
    for i, (length, end) in enumerate(lengths_and_ends):
        rewards[at:at + length] = i
        (terminals if end == "fell" else timeouts)[at + length - 1] = True
        at += length
    obs = np.random.default_rng(0).normal(size=(n, 3)).astype(np.float32)
    return OfflineDataset(observations=obs, actions=np.zeros((n, 1), np.float32), rewards=rewards,
                          next_observations=obs, terminals=terminals, timeouts=timeouts)


def test_only_the_expert_halfs_short_episodes_are_dropped():
    # medium half (2,000 transitions): a short and a full episode; expert half (2,000): full, short, short, short
    ds = episodes_dataset([(1000, "fell"), (1000, "ran"), (1000, "ran"), (300, "fell"), (400, "fell"), (300, "fell")])
    assert len(ds) == 4000
    kept, dropped = medium_expert_falls.without_expert_falls(ds)
    assert dropped == 3
    assert sorted(np.unique(kept.rewards).tolist()) == [0, 1, 2]  # the medium episode that fell stays
    assert len(kept) == 3000
    assert [b - a for a, b in kept.episode_bounds()] == [1000, 1000, 1000]
