"""The discrete agents (minirl.discrete: discrete BCQ, discrete CQL; its losses are in test_cql.py) and the CartPole
dataset (minirl.discrete_data)."""
import copy
import math

import numpy as np
import pytest
import torch

from minirl import tabular
from minirl.data import OfflineDataset
from minirl.discrete import (DiscreteBCQ, DiscreteBCQConfig, DiscreteCQL, DiscreteCQLConfig, bcq_action_mask,
                             discrete_bcq_target, imitation_loss, masked_argmax)
from minirl.discrete_data import action_indices, controller_action, make_cartpole_dataset, GOOD_GAINS
from minirl.evaluation import evaluate


def logp(rows):
    return torch.tensor(rows, dtype=torch.float64).log()


# ---- the mask --------------------------------------------------------------------------------------------------

def test_mask_keeps_actions_whose_ratio_to_the_best_reaches_the_threshold():
    # ratios to the best action: [1, 0.5, 1/6] and [0.2/0.5, 1, 0.3/0.5] = [0.4, 1, 0.6]
    lp = logp([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3]])
    assert bcq_action_mask(lp, 0.3).tolist() == [[True, True, False], [True, True, True]]
    assert bcq_action_mask(lp, 0.45).tolist() == [[True, True, False], [False, True, True]]
    assert bcq_action_mask(lp, 0.7).tolist() == [[True, False, False], [False, True, False]]


def test_threshold_zero_allows_everything_even_unseen_actions_and_one_allows_only_the_argmax():
    lp = logp([[0.7, 0.3, 0.0], [0.1, 0.1, 0.8]])      # action 2 never taken in the first state
    assert bcq_action_mask(lp, 0.0).all()
    assert bcq_action_mask(lp, 1.0).tolist() == [[True, False, False], [False, False, True]]
    assert not bcq_action_mask(lp, 1e-9)[0, 2]         # any positive threshold removes a probability-0 action


def test_mask_is_exact_for_tiny_probabilities_in_log_space():
    lp = torch.tensor([[-1000.0, -1000.5, -1003.0]])   # exp() underflows; ratios 1, e^-0.5 = 0.61, e^-3 = 0.05
    assert bcq_action_mask(lp, 0.3).tolist() == [[True, True, False]]


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_mask_rejects_thresholds_outside_unit_interval(bad):
    with pytest.raises(ValueError, match="threshold must be in \\[0, 1\\]"):
        bcq_action_mask(logp([[0.5, 0.5]]), bad)


def test_masked_argmax_ignores_masked_actions():
    q = torch.tensor([[1.0, 5.0, 3.0], [2.0, 0.0, 1.0]])
    mask = torch.tensor([[True, False, True], [False, True, True]])
    assert masked_argmax(q, mask).tolist() == [2, 2]


# ---- the target and the losses ---------------------------------------------------------------------------------

def test_target_by_hand_double_dqn_over_allowed_actions():
    rew, done = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    next_q = torch.tensor([[1.0, 5.0, 3.0], [2.0, 0.0, 1.0]])          # online network picks a'
    next_q_target = torch.tensor([[10.0, 20.0, 30.0], [7.0, 8.0, 9.0]])  # target network evaluates it
    lp = logp([[0.6, 0.1, 0.3], [0.2, 0.5, 0.3]])
    # row 0, threshold 0.3: ratios [1, 1/6, 1/2] -> allowed {0, 2}; online argmax is a' = 2 -> 1 + 0.9 * 30 = 28
    # row 1 is terminal: y = r = 0
    y = discrete_bcq_target(rew, done, next_q, next_q_target, lp, 0.9, 0.3)
    assert torch.allclose(y, torch.tensor([28.0, 0.0]))
    # threshold 0 (double DQN): a' = 1 -> 1 + 0.9 * 20 = 19;  threshold 1 (greedy BC): a' = 0 -> 1 + 0.9 * 10 = 10
    assert torch.allclose(discrete_bcq_target(rew, done, next_q, next_q_target, lp, 0.9, 0.0), torch.tensor([19.0, 0]))
    assert torch.allclose(discrete_bcq_target(rew, done, next_q, next_q_target, lp, 0.9, 1.0), torch.tensor([10.0, 0]))


def test_imitation_loss_by_hand():
    logits = torch.tensor([[0.0, math.log(3.0)]])      # G = [1/4, 3/4]
    want = -math.log(0.75) + 1e-2 * (math.log(3.0) ** 2) / 2
    assert imitation_loss(logits, torch.tensor([1]), 1e-2).item() == pytest.approx(want, rel=1e-6)
    assert imitation_loss(logits, torch.tensor([0]), 0.0).item() == pytest.approx(math.log(4.0), rel=1e-6)


# ---- the agent -------------------------------------------------------------------------------------------------

def _agent(threshold, n_actions=2, **kw):
    torch.manual_seed(0)
    return DiscreteBCQ(3, n_actions, DiscreteBCQConfig(threshold=threshold, hidden=(16,), **kw))


def _set_output_bias(net, bias):
    last = net[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor(bias))


def test_agent_never_acts_on_an_unsupported_action_however_high_its_q():
    obs = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    agent = _agent(0.3)
    _set_output_bias(agent.q, [0.0, 100.0])            # Q says action 1 is far better ...
    _set_output_bias(agent.imitation, [5.0, 0.0])      # ... but G(1|s) / G(0|s) = e^-5 < 0.3
    assert agent.act(obs).tolist() == [0] * 5
    assert agent.allowed(torch.as_tensor(obs)).tolist() == [[True, False]] * 5
    agent.cfg.threshold = 0.0                          # DQN-like: the argmax of Q
    assert agent.act(obs).tolist() == [1] * 5
    agent.cfg.threshold = 0.005                        # e^-5 = 0.0067 >= 0.005: supported again
    assert agent.act(obs).tolist() == [1] * 5


def test_threshold_limits_are_greedy_q_and_greedy_behaviour_cloning():
    obs = torch.randn(64, 3)
    for thr, net in ((0.0, "q"), (1.0, "imitation")):
        agent = _agent(thr, n_actions=4)
        want = getattr(agent, net)(obs).argmax(1).numpy()
        got = agent.act(obs.numpy())
        assert got.dtype == np.int64 and got.shape == (64,)
        assert np.array_equal(got, want)
    assert _agent(0.3).act(np.zeros(3, np.float32)).shape == ()   # a single observation gives a single index


def test_mask_learned_from_data_removes_an_action_the_data_never_takes():
    # 3 actions; the data takes only actions 0 and 1 (equally often), never 2. Q is pushed to prefer action 2.
    torch.manual_seed(0)
    agent = DiscreteBCQ(3, 3, DiscreteBCQConfig(hidden=(32,), lr=1e-2))
    obs = torch.randn(128, 3).repeat(2, 1)            # every state twice: once with action 0, once with 1
    batch = {"obs": obs, "act": torch.cat([torch.zeros(128, 1), torch.ones(128, 1)]), "rew": torch.zeros(256),
             "next_obs": obs, "done": torch.ones(256)}
    for _ in range(100):
        agent.update(batch)
    _set_output_bias(agent.q, [0.0, 0.0, 10.0])
    mask = agent.allowed(obs)
    assert mask[:, :2].all() and not mask[:, 2].any()
    assert set(agent.act(obs.numpy()).tolist()) <= {0, 1}


def test_update_logs_and_hard_target_copy_every_k_steps():
    agent = _agent(0.3, target_tau=1.0, target_update_every=3)
    g = torch.Generator().manual_seed(0)
    batch = {"obs": torch.randn(8, 3, generator=g), "act": torch.tensor([[0.0], [1.0]] * 4),
             "rew": torch.ones(8), "next_obs": torch.randn(8, 3, generator=g), "done": torch.zeros(8)}
    same = lambda: all(torch.equal(a, b) for a, b in zip(agent.q.parameters(), agent.q_target.parameters()))
    logs = agent.update(batch)
    assert set(logs) == {"q_loss", "imitation_loss", "q_mean"} and all(torch.isfinite(v) for v in logs.values())
    agent.update(batch)
    assert not same()                                  # 2 updates: the target is still the initial network
    agent.update(batch)
    assert same()                                      # the 3rd update copies Q into the target


def test_state_dict_round_trip_continues_identically():
    a, b = _agent(0.3), _agent(0.3, lr=1e-2)
    batch = {"obs": torch.randn(8, 3), "act": torch.tensor([[0.0], [1.0]] * 4), "rew": torch.ones(8),
             "next_obs": torch.randn(8, 3), "done": torch.zeros(8)}
    for _ in range(3):
        a.update(batch)
    b.load_state_dict(copy.deepcopy(a.state_dict()))  # a copy, as torch.save / torch.load give
    assert b.steps == 3
    la, lb = a.update(batch), b.update(batch)
    assert torch.equal(la["q_loss"], lb["q_loss"])
    assert all(torch.equal(x, y) for x, y in zip(a.q.parameters(), b.q.parameters()))


def test_errors_name_the_field():
    with pytest.raises(ValueError, match="threshold must be in"):
        DiscreteBCQ(3, 2, DiscreteBCQConfig(threshold=2.0))
    with pytest.raises(ValueError, match="target_tau"):
        DiscreteBCQ(3, 2, DiscreteBCQConfig(target_tau=0.0))
    assert DiscreteBCQ(3, 4, DiscreteBCQConfig(hidden=(8,))).n_actions == 4


# ---- one constructor, one action convention ---------------------------------------------------------------------

AGENTS = {"bcq": (DiscreteBCQ, DiscreteBCQConfig), "cql": (DiscreteCQL, DiscreteCQLConfig)}


@pytest.mark.parametrize("algo", sorted(AGENTS))
def test_both_agents_take_obs_dim_n_actions_config_device(algo):
    cls, config = AGENTS[algo]
    agent = cls(5, 3, config(hidden=(8,)), "cpu")
    assert agent.n_actions == 3 and agent.q(torch.zeros(1, 5)).shape == (1, 3)
    assert cls(obs_dim=5, n_actions=3, config=config(hidden=(8,)), device="cpu").n_actions == 3
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match=r"n_actions must be a whole number >= 2 .* got"):
            cls(5, bad)


@pytest.mark.parametrize("algo", sorted(AGENTS))
def test_both_agents_share_one_action_convention(algo):
    cls, config = AGENTS[algo]
    torch.manual_seed(0)
    one = cls(4, 3, config(hidden=(8,)))
    obs = torch.randn(6, 4)
    column = {"obs": obs, "act": torch.tensor([[0.0], [1.0], [2.0]] * 2), "rew": torch.ones(6),
              "next_obs": obs, "done": torch.zeros(6)}
    vector = column | {"act": column["act"][:, 0].long()}
    other = copy.deepcopy(one)
    # the dataset's column (B, 1) and a vector of indices (B,) are the same batch
    la, lb = one.update(column), other.update(vector)
    assert all(torch.equal(la[k], lb[k]) for k in la)
    a = one.act(obs.numpy())
    assert a.dtype == np.int64 and a.shape == (6,) and set(a.tolist()) <= {0, 1, 2}
    assert one.act(obs[0].numpy()).shape == ()             # one observation, one index
    with pytest.raises(ValueError, match=r"batch\['act'\] must have shape \(B, 1\) or \(B,\)"):
        one.update(column | {"act": torch.zeros(6, 2)})
    with pytest.raises(ValueError, match=r"batch\['act'\] must hold integers in \[0, 3\), got values in \[0, 3\]"):
        one.update(column | {"act": torch.tensor([0, 1, 2, 3, 0, 1])})


# ---- the CartPole dataset --------------------------------------------------------------------------------------

def test_cartpole_dataset_format_and_determinism():
    ds = make_cartpole_dataset(600, "mixed", seed=3)
    assert isinstance(ds, OfflineDataset) and ds.actions.shape == (600, 1) and ds.obs_dim == 4
    assert set(np.unique(ds.actions)) <= {0.0, 1.0}
    assert ds.action_low.tolist() == [0.0] and ds.action_high.tolist() == [1.0]
    assert ds.terminals.any() and (ds.rewards == 1.0).all()
    assert np.array_equal(action_indices(ds), ds.actions[:, 0].astype(np.int64))
    again = make_cartpole_dataset(600, "mixed", seed=3)
    assert np.array_equal(ds.observations, again.observations) and np.array_equal(ds.actions, again.actions)
    # an expert episode follows the good controller (up to its 5% random steps) and is never cut short
    expert = make_cartpole_dataset(1000, "expert", seed=0)
    agree = (controller_action(expert.observations, GOOD_GAINS) == expert.actions[:, 0]).mean()
    assert agree > 0.9 and not expert.terminals.any()
    with pytest.raises(ValueError, match="quality must be one of"):
        make_cartpole_dataset(10, "great")


def test_action_indices_rejects_non_index_actions():
    ds = make_cartpole_dataset(50, "random")
    bad = OfflineDataset(ds.observations, ds.actions + 0.5, ds.rewards, ds.next_observations, ds.terminals,
                         ds.timeouts, action_low=0.0, action_high=2.0)
    with pytest.raises(ValueError, match=r"whole numbers in \[0, 2\)"):
        action_indices(bad, 2)


def test_train_evaluate_accepts_integer_actions_on_cartpole():
    returns = evaluate(_agent_for_cartpole(), "CartPole-v1", episodes=2, seed=0)
    assert returns.shape == (2,) and (returns >= 1).all()


def _agent_for_cartpole():
    torch.manual_seed(0)
    return DiscreteBCQ(4, 2, DiscreteBCQConfig(hidden=(8,)))


# ---- learning --------------------------------------------------------------------------------------------------

def test_learns_a_tabular_mdp_from_one_hot_states_better_than_behaviour_and_random():
    S, A = 8, 3
    mdp = tabular.random_mdp(S, A, gamma=0.9, seed=1, branching=2)
    # behaviour: 60% on the worst action of each state under Q*, the rest spread: every action supported
    q_star = tabular.value_iteration(mdp)
    pi_beta = np.full((S, A), 0.2)
    pi_beta[np.arange(S), q_star.argmin(1)] = 0.6
    data = tabular.sample_dataset(mdp, pi_beta, 4000, seed=0, horizon=40)
    eye = np.eye(S, dtype=np.float32)
    ds = OfflineDataset(eye[data["s"]], data["a"].astype(np.float32)[:, None], data["r"], eye[data["s_next"]],
                        data["done"], data["timeout"], action_low=0.0, action_high=A - 1.0)
    torch.manual_seed(0)
    agent = DiscreteBCQ(S, A, DiscreteBCQConfig(hidden=(64,), lr=3e-3, gamma=0.9, target_tau=0.05))
    behaviour, random = tabular.policy_return(mdp, pi_beta), tabular.policy_return(mdp, np.full((S, A), 1 / A))
    best = tabular.policy_return(mdp, tabular.greedy_policy(q_star))   # 7.32; random 4.73, behaviour 3.83
    bar = max(behaviour, random) + 0.1 * (best - max(behaviour, random))
    assert tabular.policy_return(mdp, np.eye(A)[agent.act(eye)]) < bar   # the untrained greedy policy does not pass
    g = torch.Generator().manual_seed(0)
    for _ in range(400):
        agent.update(ds.sample(128, generator=g))
    ret = tabular.policy_return(mdp, np.eye(A)[agent.act(eye)])
    assert ret > bar, (ret, behaviour, random, best)
