"""The synthetic recommendation world, its logged data, the ranking metrics and the baselines (minirl.recsys)."""
import math

import numpy as np
import pytest

from minirl import recsys as R


# ---- metrics, by hand ------------------------------------------------------------------------------------------

RANKED = np.array([[3, 1, 2], [0, 1, 2]])


def test_hit_rate_and_ndcg_by_hand():
    targets = np.array([1, 2])          # user 0: target at rank 1; user 1: target at rank 2
    assert R.hit_rate_at_k(RANKED, targets, k=2) == 0.5
    assert R.ndcg_at_k(RANKED, targets, k=2) == pytest.approx((1 / math.log2(3)) / 2)
    assert R.hit_rate_at_k(RANKED, targets, k=3) == 1.0
    assert R.ndcg_at_k(RANKED, targets, k=3) == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / 2)
    assert R.ndcg_at_k(RANKED, np.array([3, 0]), k=1) == 1.0       # both at rank 0: 1 / log2(2)
    assert R.hit_rate_at_k(RANKED, np.array([7, 7]), k=3) == 0.0


def test_several_targets_per_user_each_count_once():
    targets = np.array([[1, 9], [0, 2]])  # hits: (0, 1) rank 1, (1, 0) rank 0, (1, 2) rank 2
    assert R.hit_rate_at_k(RANKED, targets, k=3) == 0.75
    want = (1 / math.log2(3) + 0 + 1 + 1 / math.log2(4)) / 4
    assert R.ndcg_at_k(RANKED, targets, k=3) == pytest.approx(want)


def test_metric_errors():
    with pytest.raises(ValueError, match="k must be in \\[1, 3\\]"):
        R.hit_rate_at_k(RANKED, np.array([1, 2]), k=4)
    with pytest.raises(ValueError, match="targets must have shape"):
        R.ndcg_at_k(RANKED, np.array([1, 2, 3]), k=2)
    with pytest.raises(ValueError, match="ranked must be 2-D"):
        R.hit_rate_at_k(np.array([1, 2]), np.array([1, 2]), k=1)


def test_top_k_and_top_k_by_dot():
    scores = np.array([[0.1, 0.5, 0.5, 0.2], [3.0, 2.0, 1.0, 0.0]])
    assert R.top_k(scores, 3).tolist() == [[1, 2, 3], [0, 1, 2]]       # tie 0.5/0.5: lower index first
    emb = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7], [-1.0, 0.0]])
    # a = (1, 0.2): e.a = 1, 0.2, 0.84, -1 -> [0, 2, 1];  a = (-1, 0): -1, 0, -0.7, 1 -> [3, 1, 2]
    assert R.top_k_by_dot(emb, np.array([[1.0, 0.2], [-1.0, 0.0]]), 3).tolist() == [[0, 2, 1], [3, 1, 2]]
    with pytest.raises(ValueError, match="actions must have shape \\(n, d\\) with d = 2"):
        R.top_k_by_dot(emb, np.ones((2, 3)), 2)
    with pytest.raises(ValueError, match="k must be in \\[1, n_items = 4\\]"):
        R.top_k(scores, 5)


# ---- the world and the logs ------------------------------------------------------------------------------------

def test_click_model_and_history_state_by_hand():
    world = R.make_world(n_users=2, n_items=3, dim=2, seed=0)
    u, v, b = world.user_tastes[1], world.item_latent[2], world.item_bias[2]
    p = 1 / (1 + math.exp(-(2 * u @ v + b - world.click_offset)))
    assert world.click_probability(np.array([1]))[0, 2] == pytest.approx(p)
    # state of a user whose last clicks are items 0 and 2 (history 3, one empty slot)
    s = R.history_state(world, np.array([[-1, 0, 2]]))
    e = world.item_embeddings
    assert np.allclose(s[0, :2], (e[0] + e[2]) / 2) and s[0, 2] == pytest.approx(2 / 3)
    assert np.allclose(R.history_state(world, np.array([[-1, -1, -1]])), 0.0)


def test_logged_sessions_form_a_consistent_offline_dataset():
    world = R.make_world(n_users=30, n_items=20, dim=4, seed=1)
    T = 6
    ds, clicked = R.simulate_sessions(world, np.arange(30), session_length=T, history=3, seed=0)
    assert len(ds) == 30 * T and ds.obs_dim == 5 and ds.act_dim == 4
    assert np.array_equal(ds.actions, world.item_embeddings[ds.infos["item"]].astype(np.float32))
    assert set(np.unique(ds.rewards)) <= {0.0, 1.0} and not ds.terminals.any()
    assert ds.timeouts.sum() == 30 and ds.timeouts[T - 1] and ds.episode_bounds()[1] == (T, 2 * T)
    # within a session the next state is the next step's state, and it changes exactly when the user clicked
    same_session = ds.infos["step"][:-1] < T - 1
    assert np.array_equal(ds.next_observations[:-1][same_session], ds.observations[1:][same_session])
    changed = np.any(ds.next_observations != ds.observations, axis=1)
    assert np.array_equal(changed & (ds.observations[:, -1] < 1), (ds.rewards == 1) & (ds.observations[:, -1] < 1))
    # the final clicked items give the state after the last step
    last = np.arange(T - 1, 30 * T, T)
    assert np.allclose(R.history_state(world, clicked), ds.next_observations[last])


def test_clicks_follow_the_click_model():
    world = R.make_world(n_users=400, n_items=30, dim=4, seed=2)
    ds, _ = R.simulate_sessions(world, np.arange(400), session_length=10, seed=0)
    p = world.click_probability(ds.infos["user"])[np.arange(len(ds)), ds.infos["item"]]
    assert abs(ds.rewards.mean() - p.mean()) < 0.03                  # 4000 Bernoulli draws: sd ~ 0.007
    assert ds.rewards[p > 0.7].mean() > ds.rewards[p < 0.3].mean() + 0.4


def test_recsys_data_is_seeded_and_baselines_are_ordered():
    a = R.make_recsys_data(n_train_users=300, n_test_users=300, n_items=100, session_length=10, seed=0)
    b = R.make_recsys_data(n_train_users=300, n_test_users=300, n_items=100, session_length=10, seed=0)
    assert np.array_equal(a.train.observations, b.train.observations)
    assert np.array_equal(a.test_targets, b.test_targets) and np.array_equal(a.test_states, b.test_states)
    assert not set(a.test_users) & set(np.unique(a.train.infos["user"]))
    rankings = {"oracle": R.oracle_ranking(a), "logging": R.logging_ranking(a),
                "popularity": R.popularity_ranking(a), "random": R.random_ranking(a)}
    m = R.evaluate_rankings(rankings, a.test_targets, k=10)
    assert m["oracle"]["hit_rate"] > m["logging"]["hit_rate"] > m["random"]["hit_rate"]
    assert m["popularity"]["hit_rate"] > m["random"]["hit_rate"]
    assert abs(m["random"]["hit_rate"] - 0.1) < 0.03                  # 10 of 100 items
    # popularity: the most clicked items of the logs, the same list for everyone
    clicks = np.bincount(a.train.infos["item"], weights=a.train.rewards, minlength=100)
    assert np.array_equal(rankings["popularity"][0], np.argsort(-clicks, kind="stable")[:10])
    assert (rankings["popularity"] == rankings["popularity"][0]).all()


def test_agent_ranking_uses_the_dot_product_with_the_agents_action():
    data = R.make_recsys_data(n_train_users=20, n_test_users=5, n_items=10, dim=2, session_length=3, seed=0)

    class Fixed:
        def act(self, obs, deterministic=True):
            return np.tile([1.0, 0.0], (len(obs), 1))

    want = np.argsort(-data.world.item_embeddings[:, 0], kind="stable")[:3]
    assert (R.agent_ranking(Fixed(), data, k=3) == want).all()


def test_world_errors():
    with pytest.raises(ValueError, match="logging_weight must be in \\[0, 1\\]"):
        R.make_world(logging_weight=1.5)
    with pytest.raises(ValueError, match="n_items must be >= 1"):
        R.make_world(n_items=0)
