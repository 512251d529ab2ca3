import copy
import math

import numpy as np
import pytest
import torch

from minirl import cql, tabular
from minirl.cql import CQL, CQLConfig, alpha_prime_value, cql_penalty, discrete_cql_penalty, lagrange_loss
from minirl.discrete import DiscreteCQL, DiscreteCQLConfig
from minirl.data import OfflineDataset
from minirl.runs import make_agent
from minirl.train import train

SMALL = dict(actor_hidden=(32, 32), critic_hidden=(32, 32))


def batch(n=16, obs_dim=3, act_dim=2, seed=0, low=-1.0, high=1.0):
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.randn(n, obs_dim, generator=g),
            "act": low + (high - low) * torch.rand(n, act_dim, generator=g),
            "rew": torch.randn(n, generator=g), "next_obs": torch.randn(n, obs_dim, generator=g),
            "done": (torch.rand(n, generator=g) < 0.1).float()}


def small_agent(seed=0, obs_dim=3, act_dim=2, low=-1.0, high=1.0, **kw):
    torch.manual_seed(seed)
    return CQL(obs_dim, act_dim, low, high, CQLConfig(**{**SMALL, **kw}))


# ---------------------------------------------------------------------------------------------------------------
# The penalty
# ---------------------------------------------------------------------------------------------------------------

def test_penalty_hand_computed_no_weights():
    # logsumexp(log 1, log 2, log 3) = log 6
    q_sampled = torch.tensor([[0.0, math.log(2), math.log(3)]])
    out = cql_penalty(torch.tensor([0.5]), q_sampled)
    assert out.shape == (1,)
    assert out.item() == pytest.approx(math.log(6) - 0.5, abs=1e-6)


def test_penalty_hand_computed_importance_weights():
    # two uniform actions in [-1, 1] (density 0.5, log 0.5 = -0.6931) and two policy actions with log pi = 1.0, -2.0
    q = torch.tensor([[1.0, 2.0, 0.5, -1.0]])
    log_density = torch.tensor([[math.log(0.5), math.log(0.5), 1.0, -2.0]])
    want = math.log(math.exp(1.0) / 0.5 + math.exp(2.0) / 0.5 + math.exp(0.5 - 1.0) + math.exp(-1.0 + 2.0)) - 0.3
    assert cql_penalty(torch.tensor([0.3]), q, log_density).item() == pytest.approx(want, abs=1e-6)


def test_penalty_temperature():
    q = torch.tensor([[1.0, 3.0]])
    log_density = torch.tensor([[0.0, math.log(2.0)]])
    T = 2.0
    want = T * math.log(math.exp(1.0 / T) + math.exp(3.0 / T) / 2.0) - 1.0
    assert cql_penalty(torch.tensor([1.0]), q, log_density, T).item() == pytest.approx(want, abs=1e-6)
    # T -> 0: the hard maximum of Q
    assert cql_penalty(torch.tensor([0.0]), q, 0.0, 1e-3).item() == pytest.approx(3.0, abs=1e-2)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        cql_penalty(torch.tensor([0.0]), q, 0.0, 0.0)
    with pytest.raises(ValueError, match="q_sampled must have shape"):
        cql_penalty(torch.tensor([0.0, 1.0]), q)


def test_penalty_gradient_pushes_sampled_down_and_data_up():
    q_data = torch.tensor([0.2, -0.4], requires_grad=True)
    q_sampled = torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.5, 2.0]], requires_grad=True)
    log_density = torch.tensor([[0.0, 1.0, -1.0], [-0.5, 0.0, 0.5]])
    cql_penalty(q_data, q_sampled, log_density).sum().backward()
    # d/dQ(a_i) = softmax(Q - log p)_i > 0: gradient descent lowers every sampled Q, the highest weighted most
    assert torch.allclose(q_sampled.grad, torch.softmax(q_sampled.detach() - log_density, -1))
    assert (q_sampled.grad > 0).all()
    # d/dQ(s, a_data) = -1: gradient descent raises Q on the data
    assert torch.allclose(q_data.grad, torch.tensor([-1.0, -1.0]))


def test_discrete_penalty_is_logsumexp_minus_q_data():
    q_all = torch.tensor([[0.0, 1.0, 2.0], [3.0, 3.0, 3.0]])
    actions = torch.tensor([2, 0])
    want = [math.log(1 + math.e + math.e ** 2) - 2.0, 3.0 + math.log(3.0) - 3.0]
    assert discrete_cql_penalty(q_all, actions).tolist() == pytest.approx(want, abs=1e-6)
    with pytest.raises(ValueError, match="actions must have shape"):
        discrete_cql_penalty(q_all, torch.tensor([0, 1, 2]))


def test_discrete_penalty_gradient_on_a_q_table_is_softmax_minus_data():
    # on a tabular Q the CQL(H) gradient is mu - pi_beta with mu = softmax(Q): the closed form of the inner max
    Q = torch.tensor([[0.0, 1.0, -1.0]], requires_grad=True)
    s = torch.tensor([0, 0, 0, 0])
    a = torch.tensor([0, 0, 0, 1])  # pi_beta(.|0) = (3/4, 1/4, 0)
    discrete_cql_penalty(Q[s], a).mean().backward()
    want = torch.softmax(Q.detach(), -1) - torch.tensor([[0.75, 0.25, 0.0]])
    assert torch.allclose(Q.grad, want, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# The Lagrange variant
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("penalty, direction", [(8.0, 1), (2.0, -1)])
def test_lagrange_step_moves_alpha_prime_toward_the_gap(penalty, direction):
    log_ap = torch.zeros((), requires_grad=True)
    opt = torch.optim.Adam([log_ap], lr=0.1)
    loss = lagrange_loss(log_ap, torch.tensor([penalty, penalty]), target_action_gap=5.0, cql_alpha=5.0)
    # the value: -cql_alpha * alpha' * (penalty - gap) with alpha' = 1
    assert loss.item() == pytest.approx(-5.0 * (penalty - 5.0))
    opt.zero_grad()
    loss.backward()
    assert log_ap.grad.item() == pytest.approx(-5.0 * (penalty - 5.0))
    opt.step()
    assert np.sign(log_ap.item()) == direction


def test_alpha_prime_is_clamped():
    assert alpha_prime_value(torch.tensor(100.0)).item() == 1e6
    assert alpha_prime_value(torch.tensor(-100.0)).item() >= 0.0
    assert alpha_prime_value(torch.tensor(0.0)).item() == 1.0


def test_lagrange_loss_does_not_reach_the_penalty_graph():
    q = torch.tensor([[1.0, 2.0]], requires_grad=True)
    gap = cql_penalty(q[:, 0], q)
    log_ap = torch.zeros((), requires_grad=True)
    lagrange_loss(log_ap, gap, 0.0).backward()
    assert q.grad is None and log_ap.grad is not None
    # the graph is still intact: the critic's own backward can follow
    gap.sum().backward()
    assert q.grad is not None


def test_agent_lagrange_one_backward_through_the_critic_and_alpha_prime_moves():
    agent = small_agent(lagrange=True, target_action_gap=-100.0)  # the gap is far above -100: alpha' must rise
    counts = []
    for p in agent.critic.parameters():
        p.register_hook(lambda g: counts.append(1) or g)
    n_params = len(list(agent.critic.parameters()))
    for k in range(3):
        logs = agent.update(batch(seed=k))
    # one gradient per critic parameter per update: the actor pass and the alpha' step never reach the critic
    assert len(counts) == 3 * n_params
    assert logs["alpha_prime"].item() > 1.0 and agent.log_alpha_prime.item() > 0
    agent = small_agent(lagrange=True, target_action_gap=100.0)  # the gap is far below 100: alpha' must fall
    logs = agent.update(batch())
    assert logs["alpha_prime"].item() == 1.0  # the critic used the multiplier before the dual step
    assert agent.log_alpha_prime.item() < 0 and alpha_prime_value(agent.log_alpha_prime).item() < 1.0


# ---------------------------------------------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------------------------------------------

def test_config_errors():
    for kw, field in [({"cql_alpha": -1.0}, "cql_alpha"), ({"n_actions": 0}, "n_actions"),
                      ({"temperature": 0.0}, "temperature"), ({"gamma": 1.0}, "gamma"),
                      ({"bc_steps": -1}, "bc_steps")]:
        with pytest.raises(ValueError, match=f"CQLConfig.{field} must be"):
            CQLConfig(**kw)
    with pytest.raises(ValueError, match="cql_alpha must be > 0 when lagrange"):
        CQLConfig(cql_alpha=0.0, lagrange=True)
    with pytest.raises(ValueError, match="target_update_every"):
        DiscreteCQLConfig(target_update_every=0)


def test_one_batched_critic_call_of_1_plus_3n_actions():
    agent = small_agent(n_actions=4)
    rows = []
    agent.critic.register_forward_hook(lambda m, inp, out: rows.append(tuple(out.shape)))
    logs = agent.update(batch(n=16))
    # the critic loss: (n_critics, B * (1 + 3N)) in one call; then the actor's (n_critics, B)
    assert rows == [(2, 16 * 13), (2, 16)]
    for k in ("cql_gap", "q_rand", "q_pi_sampled", "critic_loss", "actor_loss", "q_data", "q_policy"):
        assert k in logs and logs[k].requires_grad is False and torch.isfinite(logs[k])


def test_alpha_zero_skips_the_penalty(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the penalty must not be computed when cql_alpha == 0 and lagrange is off")
    monkeypatch.setattr(cql, "cql_penalty", boom)
    agent = small_agent(cql_alpha=0.0)
    rows = []
    agent.critic.register_forward_hook(lambda m, inp, out: rows.append(tuple(out.shape)))
    logs = agent.update(batch(n=16))
    assert rows == [(2, 16), (2, 16)]
    assert "cql_gap" not in logs and logs["critic_loss"] == logs["td_loss"]


def test_registry_presets():
    ds = OfflineDataset(observations=np.zeros((10, 3), np.float32), actions=np.zeros((10, 1), np.float32),
                        rewards=np.zeros(10, np.float32), next_observations=np.zeros((10, 3), np.float32),
                        terminals=np.zeros(10, bool), timeouts=np.zeros(10, bool), action_low=-2.0, action_high=2.0)
    _, c = make_agent("sac-offline", ds, **SMALL)
    assert c.cql_alpha == 0.0 and not c.lagrange
    _, c = make_agent("cql-lagrange", ds, **SMALL)
    assert c.lagrange and c.cql_alpha == 5.0
    _, c = make_agent("cql", ds)
    assert (c.cql_alpha, c.n_actions, c.temperature, c.actor_lr, c.critic_lr, c.tau, c.gamma) == \
        (5.0, 10, 1.0, 1e-4, 3e-4, 5e-3, 0.99)
    assert c.critic_hidden == (256, 256, 256) and c.actor_hidden == (256, 256, 256)


def test_policy_log_density_is_in_the_unit_box():
    # Pendulum-like bounds [-2, 2]: the importance weight uses the density of the action mapped to [-1, 1]
    agent = small_agent(obs_dim=3, act_dim=1, low=-2.0, high=2.0)
    obs = torch.randn(5, 3)
    mean, std = agent.actor.mean_std(obs)
    torch.manual_seed(0)
    a, logp_box = cql.sample_actions(agent.actor, mean, std, 3)
    assert a.shape == (5, 3, 1) and logp_box.shape == (5, 3) and a.abs().max() <= 2.0
    logp_env = agent.actor.log_prob(obs.unsqueeze(1).expand(-1, 3, -1), a)
    assert torch.allclose(logp_box, logp_env + math.log(2.0), atol=1e-4)


@pytest.mark.parametrize("kw", [{}, {"lagrange": True}, {"max_target_backup": True, "deterministic_backup": False},
                                {"importance_sample": False, "temperature": 2.0}, {"bc_steps": 2}])
def test_options_run_and_resume_exactly(kw):
    a1 = small_agent(**kw)
    for k in range(3):
        a1.update(batch(seed=k))
    a2 = small_agent(seed=1, **kw)
    a2.load_state_dict(copy.deepcopy(a1.state_dict()))  # a saved checkpoint: no tensors shared with a1
    assert a2.step == 3
    torch.manual_seed(7)
    l1 = a1.update(batch(seed=9))
    torch.manual_seed(7)
    l2 = a2.update(batch(seed=9))
    assert {k: float(v) for k, v in l1.items()} == {k: float(v) for k, v in l2.items()}
    for p, q in zip(a1.actor.parameters(), a2.actor.parameters()):
        assert torch.equal(p, q)


def test_reward_multiplier_and_bias_enter_the_target():
    agent = small_agent(reward_multiplier=2.0, reward_bias=-1.0, gamma=0.0)
    b = batch()
    mean, std = agent.actor.mean_std(b["next_obs"])
    target = agent._target(b, mean, std, torch.tensor(1.0))
    assert torch.allclose(target, 2.0 * b["rew"] - 1.0)


def continuous_bandit(n=512, seed=0):
    """One-step episodes: data actions near a = 0.5 with reward 1 - (a - 0.5)^2 everywhere in [-1, 1]."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 2)).astype(np.float32)
    act = np.clip(0.5 + 0.1 * rng.normal(size=(n, 1)), -1, 1).astype(np.float32)
    return OfflineDataset(observations=obs, actions=act, rewards=(1 - (act[:, 0] - 0.5) ** 2).astype(np.float32),
                          next_observations=obs, terminals=np.ones(n, bool), timeouts=np.zeros(n, bool),
                          action_low=-1.0, action_high=1.0)


def test_cql_learns_lower_values_away_from_the_data():
    ds = continuous_bandit()
    gaps = {}
    for alpha in (0.0, 5.0):
        torch.manual_seed(0)
        agent = CQL(2, 1, -1.0, 1.0, CQLConfig(**SMALL, cql_alpha=alpha, critic_lr=1e-3, actor_lr=1e-3,
                                               normalize_states=False))
        train(agent, ds, 200, batch_size=64, progress=False)
        with torch.no_grad():
            obs = torch.tensor(ds.observations[:256])
            q_far = agent.critic(obs, torch.full((256, 1), -0.9)).mean()
            q_data = agent.critic(obs, torch.tensor(ds.actions[:256])).mean()
        gaps[alpha] = float(q_far - q_data)
    # the true gap is (1 - 1.96) - (1 - ~0.01) ~ -0.95; the penalty makes the unseen action look much worse
    assert gaps[5.0] < gaps[0.0] - 0.5
    assert gaps[5.0] < -1.0


# ---------------------------------------------------------------------------------------------------------------
# Discrete CQL on a tabular dataset with one-hot observations
# ---------------------------------------------------------------------------------------------------------------

def one_hot_batches(data, n_states):
    eye = torch.eye(n_states)
    return {"obs": eye[torch.as_tensor(data["s"])], "act": torch.as_tensor(data["a"]),
            "rew": torch.as_tensor(data["r"], dtype=torch.float32), "next_obs": eye[torch.as_tensor(data["s_next"])],
            "done": torch.as_tensor(data["done"], dtype=torch.float32)}


def test_discrete_cql_is_lower_than_dqn_on_unseen_actions():
    S, A = 8, 4
    mdp = tabular.random_mdp(S, A, gamma=0.9, seed=3)
    pi_beta = np.zeros((S, A))
    pi_beta[:, 0], pi_beta[:, 1] = 0.7, 0.3  # actions 2 and 3 never appear in the data
    data = tabular.sample_dataset(mdp, pi_beta, 2000, seed=0)
    full = one_hot_batches(data, S)
    unseen = {}
    for alpha in (0.0, 1.0):
        torch.manual_seed(0)
        agent = DiscreteCQL(S, A, DiscreteCQLConfig(hidden=(64,), lr=3e-3, gamma=0.9, cql_alpha=alpha,
                                                    target_update_every=50))
        g = torch.Generator().manual_seed(0)
        for _ in range(600):
            idx = torch.randint(0, len(data["s"]), (128,), generator=g)
            logs = agent.update({k: v[idx] for k, v in full.items()})
        q = agent.q_values(np.eye(S))
        unseen[alpha] = (q[:, 2:].mean(), q[:, :2].mean())
    # naive DQN: unseen actions are whatever the network extrapolates; CQL pushes them below the seen ones
    assert unseen[1.0][0] < unseen[0.0][0] - 1.0
    assert unseen[1.0][0] < unseen[1.0][1]
    assert "cql_gap" in logs
    with pytest.raises(ValueError, match=r"batch\['act'\] must hold integers in \[0, 4\)"):
        agent.update({**{k: v[:4] for k, v in full.items()}, "act": torch.tensor([0, 1, 2, 7])})


# ---------------------------------------------------------------------------------------------------------------
# Tabular CQL: Theorems 3.1 and 3.2
# ---------------------------------------------------------------------------------------------------------------

def random_policy(rng, S, A, support=None, concentration=0.5):
    pi = rng.dirichlet(np.full(A, concentration), size=S)
    if support is not None:
        pi = np.where(support, pi + 1e-3, 0.0)
        pi /= pi.sum(1, keepdims=True)
    return pi


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_tabular_fixed_points_match_the_closed_forms_and_bound(seed):
    rng = np.random.default_rng(seed)
    S, A = 6, 3
    mdp = tabular.random_mdp(S, A, gamma=0.9, seed=seed, branching=3)
    pi_beta = random_policy(rng, S, A, concentration=2.0)
    pi = random_policy(rng, S, A)
    for variant in (1, 2):
        Q_iter = tabular.cql_policy_evaluation(mdp, pi, pi_beta, alpha=0.7, variant=variant)
        Q_closed = tabular.cql_closed_form(mdp, pi, pi_beta, alpha=0.7, variant=variant)
        assert np.abs(Q_iter - Q_closed).max() < 1e-6
    # no sampling error (the empirical MDP is the true one): any alpha > 0 gives the bound of each theorem
    Q_pi = tabular.evaluate_policy_exact(mdp, pi)
    Q1 = tabular.cql_closed_form(mdp, pi, pi_beta, 0.1, variant=1)
    assert (Q1 < Q_pi).all()                                                      # Theorem 3.1: pointwise
    Q2 = tabular.cql_closed_form(mdp, pi, pi_beta, 0.1, variant=2)
    assert (tabular.state_values(Q2, pi) <= tabular.state_values(Q_pi, pi) + 1e-12).all()  # Theorem 3.2: on V
    # ... and not pointwise: with pi = pi_beta except at state 0, where pi moves half its mass to one action,
    # c = pi / pi_beta - 1 < 0 raises the pairs pi_beta prefers, more than the (small) future penalty lowers them
    mdp = tabular.random_mdp(S, A, gamma=0.5, seed=seed, branching=3)
    pi = pi_beta.copy()
    pi[0] *= 0.5
    pi[0, (pi_beta[0].argmax() + 1) % A] += 0.5
    Q_pi = tabular.evaluate_policy_exact(mdp, pi)
    Q2 = tabular.cql_closed_form(mdp, pi, pi_beta, 0.1, variant=2)
    assert (tabular.state_values(Q2, pi) <= tabular.state_values(Q_pi, pi) + 1e-12).all()
    assert (Q2 > Q_pi).any()


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_tabular_bound_with_sampling_error_holds_above_the_threshold(seed):
    rng = np.random.default_rng(seed)
    S, A = 6, 3
    mdp = tabular.random_mdp(S, A, gamma=0.9, seed=10 + seed, branching=3)
    data = tabular.sample_dataset(mdp, random_policy(rng, S, A, concentration=2.0), 200, seed=seed, horizon=100,
                                  reward_noise=0.5)
    mdp_hat, counts = tabular.empirical_mdp(data, S, A, mdp.gamma)
    pi_hat_beta = tabular.empirical_behavior_policy(data, S, A)
    assert (counts.sum(1) > 0).all()
    pi = random_policy(rng, S, A, support=counts > 0)
    Q_pi = tabular.evaluate_policy_exact(mdp, pi)
    V_pi = tabular.state_values(Q_pi, pi)
    for variant in (1, 2):
        a_star = tabular.cql_lower_bound_alpha(mdp_hat, mdp, pi, pi_hat_beta, variant=variant)
        assert 0 < a_star < np.inf  # 200 noisy transitions: with these seeds alpha = 0 overestimates somewhere
        above = tabular.cql_closed_form(mdp_hat, pi, pi_hat_beta, 1.01 * a_star, variant=variant)
        below = tabular.cql_closed_form(mdp_hat, pi, pi_hat_beta, 0.99 * a_star, variant=variant)
        if variant == 1:
            assert (above <= Q_pi).all() and not (below <= Q_pi).all()
        else:
            V_above, V_below = tabular.state_values(above, pi), tabular.state_values(below, pi)
            assert (V_above <= V_pi).all() and not (V_below <= V_pi).all()


def test_tabular_penalty_weights():
    pi_beta = np.array([[0.5, 0.5, 0.0], [0.25, 0.25, 0.5]])
    mu = np.array([[1.0, 0.0, 0.0], [0.5, 0.0, 0.5]])
    assert tabular.cql_penalty_weights(pi_beta, mu, 1).tolist() == [[2.0, 0.0, 0.0], [2.0, 0.0, 1.0]]
    assert tabular.cql_penalty_weights(pi_beta, mu, 2).tolist() == [[1.0, -1.0, 0.0], [1.0, -1.0, 0.0]]
    with pytest.raises(ValueError, match=r"mu must be zero where pi_beta is zero .* mu\[0, 2\]"):
        tabular.cql_penalty_weights(pi_beta, np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="variant must be 1"):
        tabular.cql_penalty_weights(pi_beta, mu, 3)


def test_progress_bar_names_the_variant():
    from minirl.cql import CQL, CQLConfig
    assert CQL(3, 1, config=CQLConfig()).name == "CQL"
    assert CQL(3, 1, config=CQLConfig(lagrange=True)).name == "CQL-Lagrange"
    assert CQL(3, 1, config=CQLConfig(cql_alpha=0.0)).name == "offline SAC"
