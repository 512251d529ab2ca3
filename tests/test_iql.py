import copy
import io
import math

import numpy as np
import pytest
import torch

import minirl.iql as iql_module
from minirl import tabular
from minirl.config import UserError
from minirl.data import OfflineDataset
from minirl.iql import (IQL, IQLConfig, awr_actor_loss, awr_weights, cosine_lr, critic_loss, ddpg_bc_actor_loss,
                        expectile_loss, q_target, value_loss, value_target)
from minirl.runs import make_agent
from minirl.train import prepare_dataset, train


def small_agent(**kw):
    torch.manual_seed(0)
    return IQL(3, 2, -1, 1, IQLConfig(hidden=(16, 16), **kw))


def random_batch(B=8, obs_dim=3, act_dim=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.randn(B, obs_dim, generator=g), "act": torch.rand(B, act_dim, generator=g) * 2 - 1,
            "rew": torch.randn(B, generator=g), "next_obs": torch.randn(B, obs_dim, generator=g),
            "done": (torch.rand(B, generator=g) < 0.5).float()}


# ------------------------------------------------------------------------------------------------ the pure losses

def test_expectile_loss_by_hand_and_its_gradient():
    diff = torch.tensor([-2.0, -0.5, 0.0, 1.0, 3.0], requires_grad=True)
    loss = expectile_loss(diff, 0.8)
    # negative errors weigh 1 - tau = 0.2, the others tau = 0.8
    assert torch.allclose(loss, torch.tensor([0.2 * 4, 0.2 * 0.25, 0.0, 0.8 * 1, 0.8 * 9]))
    loss.sum().backward()
    assert torch.allclose(diff.grad, torch.tensor([2 * 0.2 * -2, 2 * 0.2 * -0.5, 0.0, 2 * 0.8 * 1, 2 * 0.8 * 3]))


def test_expectile_loss_asymmetry_and_half_mse_at_one_half():
    u = torch.tensor([1.5, -0.7, 2.0, -3.0])
    assert torch.allclose(expectile_loss(u, 0.9), expectile_loss(-u, 0.1))   # tau <-> 1 - tau mirrors the sign
    assert expectile_loss(torch.tensor(1.0), 0.9) > expectile_loss(torch.tensor(-1.0), 0.9)
    assert torch.allclose(expectile_loss(u, 0.5).mean(), 0.5 * torch.nn.functional.mse_loss(u, torch.zeros(4)))


def test_value_loss_is_minimised_at_the_expectile():
    # d/dv E L2_tau(x - v) vanishes at the tau-expectile of the samples (tabular.expectile), and only there
    x = torch.tensor([0.0, 1.0, 4.0])
    for tau in (0.5, 0.9):
        m = float(tabular.expectile(x.numpy()[None], np.ones((1, 3)), tau)[0])
        grads = []
        for v0 in (m - 0.1, m, m + 0.1):
            v = torch.tensor(v0, requires_grad=True)
            value_loss(v, x, tau).backward()
            grads.append(v.grad.item())
        assert grads[0] < 0 and abs(grads[1]) < 1e-5 and grads[2] > 0
    assert m == pytest.approx((0.1 * 1 + 0.9 * 4) / (0.1 * 2 + 0.9 * 1))  # by hand: m lies between 1 and 4


def test_value_target_is_the_min_over_replicas():
    q = torch.tensor([[1.0, 5.0, -2.0], [3.0, 4.0, 0.0], [2.0, 6.0, -1.0]])
    assert torch.equal(value_target(q), torch.tensor([1.0, 4.0, -2.0]))


def test_q_target_uses_next_value_and_terminal_flag():
    y = q_target(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 1.0]), torch.tensor([10.0, 10.0]), 0.9)
    assert torch.allclose(y, torch.tensor([1.0 + 0.9 * 10.0, 2.0]))


def test_critic_loss_sums_replicas_and_does_not_move_the_target():
    q = torch.tensor([[1.0, 2.0], [0.0, 4.0]], requires_grad=True)
    y = torch.tensor([2.0, 2.0], requires_grad=True)
    loss = critic_loss(q, y)
    assert loss.item() == pytest.approx((1 + 0) / 2 + (4 + 4) / 2)
    loss.backward()
    assert torch.allclose(q.grad, torch.tensor([[-1.0, 0.0], [-2.0, 2.0]]))  # 2 (q - y) / B
    assert y.grad is None


def test_awr_weights_clamped_and_detached():
    adv = torch.tensor([-1.0, 0.0, 0.5, 10.0], requires_grad=True)
    w = awr_weights(adv, beta=2.0, max_weight=100.0)
    assert torch.allclose(w, torch.tensor([math.exp(-2.0), 1.0, math.e, 100.0]))
    assert not w.requires_grad
    assert torch.equal(awr_weights(adv, 0.0), torch.ones(4))  # beta = 0: behaviour cloning
    nll = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    loss = awr_actor_loss(w, nll)
    loss.backward()
    assert torch.allclose(nll.grad, w / 4)
    assert adv.grad is None


def test_actor_loss_leaves_critics_and_value_untouched():
    agent = small_agent()
    b = random_batch()
    adv = value_target(agent.critic(b["obs"], b["act"])) - agent.V(b["obs"])  # a graph through Q and V
    loss = awr_actor_loss(awr_weights(adv, 3.0), agent.actor_nll(b["obs"], b["act"]))
    loss.backward()
    assert all(p.grad is None for p in [*agent.critic.parameters(), *agent.value.parameters()])
    assert all(p.grad is not None for p in agent.actor.parameters())


def test_ddpg_bc_loss_by_hand_and_scale_free():
    q = torch.tensor([-2.0, -4.0, -6.0], requires_grad=True)
    nll = torch.tensor([1.0, 0.0, 2.0], requires_grad=True)
    loss = ddpg_bc_actor_loss(q, nll, alpha=0.5)
    assert torch.isclose(loss, torch.tensor(4.0 / 4.0 + 0.5 * 1.0), atol=1e-6)  # -mean(q)/mean|q| = 1, + alpha mean
    loss.backward()
    assert torch.allclose(q.grad, torch.full((3,), -1 / 3 / 4.0), atol=1e-7)     # the normaliser is a constant
    assert torch.allclose(nll.grad, torch.full((3,), 0.5 / 3))
    for c in (0.01, 100.0):  # Q's scale (the rewards') changes neither the loss nor the actor's step
        qc = (c * q.detach()).requires_grad_()
        assert torch.isclose(ddpg_bc_actor_loss(qc, nll.detach(), 0.5), loss.detach(), atol=1e-5)
    stacked = torch.stack([q.detach(), 10 * q.detach()])  # a seed axis: each seed normalised by its own |Q|
    assert torch.isclose(ddpg_bc_actor_loss(stacked, torch.stack([nll.detach()] * 2), 0.5), 2 * loss.detach())


def test_ddpg_bc_climbs_the_critic_and_only_the_actor_moves():
    agent = small_agent(actor="deterministic", extraction="ddpg_bc", alpha=0.0)
    b = random_batch(B=64)
    frozen = [p.detach().clone() for p in [*agent.critic.parameters(), *agent.critic_target.parameters(),
                                           *agent.value.parameters()]]
    q_before = value_target(agent.critic_target(b["obs"], agent.actor(b["obs"]))).mean()
    for _ in range(20):
        logs = agent.extract(b)
    q_after = value_target(agent.critic_target(b["obs"], agent.actor(b["obs"]))).mean()
    assert q_after > q_before and set(logs) >= {"actor_loss", "q_pi", "actor_lr"}
    after = [*agent.critic.parameters(), *agent.critic_target.parameters(), *agent.value.parameters()]
    assert all(torch.equal(a, f) for a, f in zip(after, frozen))
    assert agent.step == 0 and int(agent.t) == 20  # extract advances the actor's schedule, not the critics' count


def test_a_saturated_tanh_actor_gets_no_gradient_and_a_clipped_one_gets_the_bc_term_s():
    """OGBench's DDPG+BC actor (actor_squash="clip"): the critic at the clipped action, behaviour cloning on the
    unclipped one. Driven far outside the box, a tanh actor gets no gradient from either term; a clipped actor gets
    none from the critic but the behaviour-cloning term's pull back towards the data."""
    b = random_batch(B=32)
    grads = {}
    for squash in ("tanh", "clip"):
        agent = small_agent(actor="deterministic", extraction="ddpg_bc", alpha=0.5, actor_squash=squash)
        with torch.no_grad():
            agent.actor.net[-2 if squash == "tanh" else -1].bias.fill_(40.0)  # f(s) >> 1 everywhere
        assert torch.allclose(agent.actor(b["obs"]), torch.ones(32, 2))  # both act at the box's corner
        agent.extract(b)
        grads[squash] = agent.actor.net[0].weight.grad.abs().max().item()
        raw = agent.actor.unclipped(b["obs"])
        if squash == "clip":  # the BC term is on the unclipped output, the critic on the clipped one
            assert raw.min() > 30
            expected = 0.5 * ((raw - b["act"]).pow(2).sum(-1)).mean()
            q_pi = value_target(agent.critic_target(b["obs"], torch.ones(32, 2)))
            assert torch.isclose(agent.actor_nll(b["obs"], b["act"]).mean() * 0.5, expected)
            assert torch.isclose(ddpg_bc_actor_loss(q_pi, agent.actor_nll(b["obs"], b["act"]), 0.5),
                                 -q_pi.mean() / q_pi.abs().mean().detach() + expected)
        else:
            assert torch.equal(raw, agent.actor(b["obs"]))  # unclipped is the action itself
    assert grads["tanh"] == 0.0 and grads["clip"] > 1e-3


def test_actor_squash_clip_needs_the_deterministic_actor():
    with pytest.raises(UserError, match="IQLConfig.actor must be 'deterministic' with actor_squash='clip'"):
        IQLConfig(actor_squash="clip")
    with pytest.raises(UserError, match="actor_squash"):
        IQLConfig(actor="deterministic", actor_squash="sigmoid")


def test_extract_takes_the_actor_step_update_takes():
    agent, twin = small_agent(), small_agent()
    b = random_batch()
    twin.load_state_dict(agent.state_dict())
    agent.update(b)
    with torch.no_grad():  # the same step from the V the update had after its V step
        twin.value.load_state_dict(agent.value.state_dict())
    twin.extract(b)
    for p, q in zip(agent.actor.parameters(), twin.actor.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_cosine_schedule():
    assert cosine_lr(0, 100, 3e-4) == pytest.approx(3e-4)
    assert cosine_lr(50, 100, 3e-4) == pytest.approx(1.5e-4)
    assert cosine_lr(100, 100, 3e-4) == pytest.approx(0.0, abs=1e-15)
    assert cosine_lr(150, 100, 3e-4) == pytest.approx(0.0, abs=1e-15)
    agent = small_agent(max_steps=10)
    b = random_batch()
    lrs = [float(agent.update(b)["actor_lr"]) for _ in range(10)]
    assert lrs[0] == pytest.approx(3e-4) and all(x > y for x, y in zip(lrs, lrs[1:]))
    assert lrs[-1] == pytest.approx(3e-4 * (1 + math.cos(math.pi * 0.9)) / 2)   # the last step: ~0.02 * lr
    assert float(agent.actor_lr()) == pytest.approx(0.0, abs=1e-10)
    assert float(agent.actor_opt.param_groups[0]["lr"]) == pytest.approx(lrs[-1])
    # the schedule on the device (a tensor step count) is the same function as on ints
    assert [float(cosine_lr(torch.tensor(float(t)), 10, 3e-4)) for t in (0, 5, 12)] == \
        pytest.approx([cosine_lr(t, 10, 3e-4) for t in (0, 5, 12)], abs=1e-10)
    flat = small_agent(max_steps=10, cosine_actor_lr=False)
    assert [flat.update(b)["actor_lr"] for _ in range(3)] == [3e-4] * 3



def test_a_checkpoint_with_the_learning_rate_as_a_number_resumes_on_the_schedule():
    # checkpoints written before the schedule moved onto the device hold the actor's lr as a Python number
    agent = small_agent(max_steps=10)
    b = random_batch()
    for _ in range(4):
        agent.update(b)
    state = agent.state_dict()
    state["actor_opt"]["param_groups"][0]["lr"] = float(state["actor_opt"]["param_groups"][0]["lr"])
    resumed = small_agent(max_steps=10)
    resumed.load_state_dict(state)
    assert isinstance(resumed.actor_opt.param_groups[0]["lr"], torch.Tensor)  # fused Adam: a tensor again
    assert resumed.step == 4 and float(resumed.t) == 4.0
    assert float(resumed.update(b)["actor_lr"]) == pytest.approx(cosine_lr(4, 10, 3e-4))
    assert float(agent.update(b)["actor_lr"]) == pytest.approx(cosine_lr(4, 10, 3e-4))


# ------------------------------------------------------------------------------------------------ the agent's wiring

def test_update_uses_target_critics_for_v_and_new_v_for_q(monkeypatch):
    agent = small_agent(n_critics=3, gamma=0.9)
    with torch.no_grad():  # make the online critics differ from the targets
        for p in agent.critic.parameters():
            p.add_(0.5 * torch.randn_like(p))
    b = random_batch()
    seen = {}

    def spy_value_loss(v, q, tau):
        seen["q"] = q
        return value_loss(v, q, tau)

    def spy_critic_loss(q, y):
        seen["y"] = y
        return critic_loss(q, y)
    monkeypatch.setattr(iql_module, "value_loss", spy_value_loss)
    monkeypatch.setattr(iql_module, "critic_loss", spy_critic_loss)
    with torch.no_grad():
        q_tgt = agent.critic_target(b["obs"], b["act"]).min(0).values
        q_online = agent.critic(b["obs"], b["act"]).min(0).values
    agent.update(b)
    assert torch.allclose(seen["q"], q_tgt) and not torch.allclose(seen["q"], q_online)
    with torch.no_grad():  # V has been updated before the critic target is formed
        want = b["rew"] + 0.9 * (1 - b["done"]) * agent.V(b["next_obs"])
    assert torch.allclose(seen["y"], want)
    assert torch.allclose(seen["y"][b["done"] == 1], b["rew"][b["done"] == 1])


def test_target_update_period_and_polyak():
    agent = small_agent(tau=0.5, target_update_period=2)
    b = random_batch()
    target0 = [p.clone() for p in agent.critic_target.parameters()]
    agent.update(b)
    assert all(torch.equal(a, p) for a, p in zip(target0, agent.critic_target.parameters()))
    agent.update(b)
    for t0, t, p in zip(target0, agent.critic_target.parameters(), agent.critic.parameters()):
        assert torch.allclose(t, 0.5 * t0 + 0.5 * p)


def test_state_dict_resumes_exactly():
    a = small_agent()
    batches = [random_batch(seed=i) for i in range(6)]
    for b in batches[:3]:
        a.update(b)
    buffer = io.BytesIO()  # through bytes, as a checkpoint does (optimiser state dicts hold live tensors)
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=False)
    torch.manual_seed(99)
    b_agent = IQL(3, 2, -1, 1, IQLConfig(hidden=(16, 16)))
    b_agent.load_state_dict(state)
    for b in batches[3:]:
        la, lb = a.update(b), b_agent.update(b)
        assert la["critic_loss"] == lb["critic_loss"]
    for m in ("actor", "critic", "critic_target", "value"):
        for p, q in zip(getattr(a, m).parameters(), getattr(b_agent, m).parameters()):
            assert torch.equal(p, q)
    assert b_agent.step == 6


def test_act_shapes_bounds_and_both_actors():
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    for actor in ("gaussian", "deterministic"):
        torch.manual_seed(0)
        agent = IQL(3, 2, [-2, -1], [2, 1], IQLConfig(hidden=(16, 16), actor=actor))
        a = agent.act(obs)
        assert a.shape == (5, 2) and np.all(np.abs(a) <= [2, 1])
        np.testing.assert_array_equal(a, agent.act(obs))          # deterministic acting
        logs = agent.update(random_batch())
        assert set(logs) >= {"value_loss", "critic_loss", "actor_loss", "adv", "weight"}


def test_config_errors():
    for field, value, expected in [("actor", "tanh", "'gaussian' or 'deterministic'"), ("expectile", 1.0, "in (0, 1)"),
                                   ("beta", -1.0, ">= 0"), ("n_critics", 0, ">= 1"),
                                   ("target_update_period", 0, ">= 1"), ("max_steps", 0, ">= 1"),
                                   ("reward_scale", "max", "None or 'return_range'"),
                                   ("extraction", "td3", "'awr' or 'ddpg_bc'"), ("alpha", -0.1, ">= 0")]:
        with pytest.raises(ValueError, match=f"IQLConfig.{field} must be {expected}".replace("(", r"\(")
                           .replace(")", r"\)")):
            IQLConfig(**{field: value})
    with pytest.raises(ValueError, match="IQLConfig.actor must be 'deterministic' with extraction='ddpg_bc'"):
        IQLConfig(extraction="ddpg_bc")


# ------------------------------------------------------------------------------------------------ tabular IQL

def _tabular_problem():
    mdp = tabular.random_mdp(15, 4, gamma=0.9, seed=1, branching=3)
    pi_b = np.random.default_rng(1).dirichlet(np.ones(4), size=15)
    data = tabular.sample_dataset(mdp, pi_b, 400, seed=1)
    mdp_hat, counts = tabular.empirical_mdp(data, 15, 4, 0.9)
    return mdp_hat, counts, tabular.empirical_behavior_policy(data, 15, 4)


def test_expectile_by_hand():
    x, w = np.array([[0.0, 1.0, 3.0]]), np.array([[1.0, 1.0, 2.0]])
    assert tabular.expectile(x, w, 0.5)[0] == pytest.approx(7 / 4)  # the mean
    # tau = 0.8, m between 1 and 3: 0.2 * (0 + 1) + 0.8 * 2 * 3 over 0.2 * 2 + 0.8 * 2
    assert tabular.expectile(x, w, 0.8)[0] == pytest.approx((0.2 * 1 + 0.8 * 6) / (0.2 * 2 + 0.8 * 2))
    assert tabular.expectile(x, w, 1.0)[0] == 3.0
    # zero-weight entries are ignored, even at -inf
    assert tabular.expectile(np.array([[-np.inf, 2.0, 4.0]]), np.array([[0.0, 1.0, 1.0]]), 0.5)[0] == 3.0
    with pytest.raises(ValueError, match="positive entry"):
        tabular.expectile(x, np.zeros((1, 3)), 0.5)


def test_tabular_iql_limits():
    mdp_hat, counts, pi_hat = _tabular_problem()
    support = counts > 0
    q_star = tabular.constrained_value_iteration(mdp_hat, support)
    q1, _ = tabular.expectile_value_iteration(mdp_hat, pi_hat, 1.0, support=support)
    np.testing.assert_allclose(q1[support], q_star[support], atol=1e-8)
    gaps = [np.abs(tabular.expectile_value_iteration(mdp_hat, pi_hat, tau, support=support)[0][support]
                   - q_star[support]).max() for tau in (0.7, 0.9, 0.99, 0.999)]
    assert all(a > b for a, b in zip(gaps, gaps[1:])) and gaps[-1] < 0.05
    # tau = 1/2 evaluates the empirical behaviour policy (SARSA)
    q_half, v_half = tabular.expectile_value_iteration(mdp_hat, pi_hat, 0.5, support=support)
    q_beta = tabular.evaluate_policy_exact(mdp_hat, pi_hat)
    np.testing.assert_allclose(q_half[support], q_beta[support], atol=1e-7)


def test_awr_policy_limits():
    mdp_hat, counts, pi_hat = _tabular_problem()
    support = counts > 0
    Q, V = tabular.expectile_value_iteration(mdp_hat, pi_hat, 0.7, support=support)
    np.testing.assert_allclose(tabular.awr_policy(Q, V, pi_hat, 0.0, support=support), pi_hat, atol=1e-12)
    greedy = tabular.awr_policy(Q, V, pi_hat, 1e6, support=support)
    np.testing.assert_allclose(greedy, tabular.greedy_policy(Q), atol=1e-9)
    filtered = tabular.awr_policy(Q, V, pi_hat, 1e6, max_weight=100.0, support=support)
    keep = support & (Q > V[:, None])
    want = np.where(keep, pi_hat, 0.0)
    np.testing.assert_allclose(filtered, want / want.sum(1, keepdims=True), atol=1e-4)
    # the same weights as the deep agent's awr_weights
    beta = 3.0
    w = awr_weights(torch.as_tensor(np.where(support, Q - V[:, None], 0.0)), beta, 100.0).numpy()
    manual = np.where(support, pi_hat * w, 0.0)
    np.testing.assert_allclose(tabular.awr_policy(Q, V, pi_hat, beta, 100.0, support=support),
                               manual / manual.sum(1, keepdims=True), atol=1e-9)


# ------------------------------------------------------------------------------------------------ learning

def bandit(n=4000, seed=0):
    """One-step problem (every transition terminal): reward -(a - s_0)^2 for actions uniform in [-1, 1].

    BC learns the mean action 0; the best in-support action is s_0 itself.
    """
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-0.8, 0.8, (n, 2)).astype(np.float32)
    act = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    return OfflineDataset(observations=obs, actions=act, rewards=-(act[:, 0] - obs[:, 0]) ** 2,
                          next_observations=obs, terminals=np.ones(n, bool), timeouts=np.zeros(n, bool),
                          action_low=-1.0, action_high=1.0)


def test_iql_learns_the_best_in_support_action_bc_does_not():
    raw = bandit()
    test_obs = np.random.default_rng(1).uniform(-0.8, 0.8, (200, 2)).astype(np.float32)
    errors = {}
    for algo, kw in (("iql", dict(beta=10.0, expectile=0.9, max_steps=800)), ("bc", dict(actor="gaussian"))):
        torch.manual_seed(0)
        agent, config = make_agent(algo, raw, hidden=(32, 32), **kw)
        data, norm, _ = prepare_dataset(raw, config.normalize_states, None)
        train(agent, data, 800, batch_size=128, progress=False)
        errors[algo] = np.abs(agent.act(norm.transform(test_obs))[:, 0] - test_obs[:, 0]).mean()
    # BC learns the mean action ~0 (error ~0.4); IQL moves towards the best action s_0
    assert errors["bc"] > 0.3 and errors["iql"] < 0.5 * errors["bc"], errors


def test_a_checkpoint_after_extraction_resumes_the_cosine_schedule_where_it_was():
    """Issue 73: extract() advanced the schedule tensor t but not step, and load_state_dict set t from step, so a
    checkpoint taken after extraction resumed the actor's cosine learning rate at another point."""
    agent = small_agent(max_steps=100)
    b = random_batch(B=16)
    for _ in range(5):
        agent.update(b)
    for _ in range(7):
        agent.extract(b)
    assert agent.step == 5 and int(agent.t) == 12
    resumed = small_agent(max_steps=100)
    from minirl.train import load_agent_state
    saved = io.BytesIO()
    torch.save(agent.state_dict(), saved)  # a checkpoint, as train writes it
    saved.seek(0)
    load_agent_state(resumed, torch.load(saved, weights_only=False), "checkpoint.pt", keep_optimizer_settings=True)
    assert int(resumed.t) == 12 and resumed.step == 5
    assert float(resumed.actor_lr()) == float(agent.actor_lr()) == float(cosine_lr(torch.tensor(12.0), 100, 3e-4))
    # and the next steps are the same steps
    assert float(resumed.extract(b)["actor_lr"]) == float(agent.extract(b)["actor_lr"])
    for p, q in zip(resumed.actor.parameters(), agent.actor.parameters()):
        assert torch.equal(p, q)
    old = {k: v for k, v in copy.deepcopy(agent.state_dict()).items() if k not in ("t", "schedule_t")}  # before the fix
    older = small_agent(max_steps=100)
    older.load_state_dict(old)
    assert int(older.t) == older.step == 5  # what such a checkpoint can say
