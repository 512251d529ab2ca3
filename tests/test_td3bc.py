"""TD3+BC (minirl/td3bc.py): the losses by hand, the update against a transcription of the reference code's
(sfujim/TD3_BC, TD3_BC.py: train), delayed policy updates, exact resume, and a small learning test."""
import copy
import io

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from batched_seeds import same_noise
from minirl.runs import build_agent, make_config
from minirl.td3bc import TD3BC, TD3BCConfig, actor_loss, critic_target, smoothed_action

OBS, ACT = 3, 2


def small_agent(**kw):
    torch.manual_seed(0)
    return TD3BC(OBS, ACT, -1, 1, TD3BCConfig(hidden=(16, 16), **kw))


def random_batch(B=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.randn(B, OBS, generator=g), "act": torch.rand(B, ACT, generator=g) * 2 - 1,
            "rew": torch.randn(B, generator=g), "next_obs": torch.randn(B, OBS, generator=g),
            "done": (torch.rand(B, generator=g) < 0.3).float()}


# ------------------------------------------------------------------------------------------------ the pure losses

def test_smoothed_action_clips_the_noise_then_the_action():
    pi = torch.tensor([[0.0, 0.9], [-0.95, 0.1]])
    noise = torch.tensor([[0.7, 0.3], [-0.2, -0.8]])
    c = torch.tensor([0.5, 0.5])
    out = smoothed_action(pi, noise, c, torch.tensor([-1.0, -1.0]), torch.tensor([1.0, 1.0]))
    # noise clipped to [-0.5, 0.5] first: 0 + 0.5, 0.9 + 0.3 -> 1 (action clip), -0.95 - 0.2 -> -1, 0.1 - 0.5
    torch.testing.assert_close(out, torch.tensor([[0.5, 1.0], [-1.0, -0.4]]))


def test_critic_target_takes_the_min_and_stops_at_terminals():
    q_next = torch.tensor([[1.0, 5.0, -2.0], [3.0, 4.0, -1.0]])      # (n=2, B=3)
    y = critic_target(torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.0, 0.0, 1.0]), q_next, 0.5)
    torch.testing.assert_close(y, torch.tensor([1.0 + 0.5 * 1.0, 0.0 + 0.5 * 4.0, 2.0]))


def test_actor_loss_by_hand_and_lambda_is_a_constant():
    q_pi = torch.tensor([2.0, -4.0], requires_grad=True)
    pi = torch.tensor([[0.5, 0.0], [0.0, 1.0]], requires_grad=True)
    act = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    loss = actor_loss(q_pi, pi, act, alpha=2.5)
    lam = 2.5 / 3.0                                                   # E|Q| = 3
    expected = -lam * (2.0 - 4.0) / 2 + ((0.25 + 0.0) / 2 + (0.0 + 1.0) / 2) / 2
    assert float(loss.detach()) == pytest.approx(expected)
    loss.backward()
    # d/dq of -lam * mean(q): lambda is not differentiated
    torch.testing.assert_close(q_pi.grad, torch.full((2,), -lam / 2))
    # the squared error is the mean over the action's dimensions: d/dpi = 2 (pi - a) / (|A| B)
    torch.testing.assert_close(pi.grad, 2 * pi.detach() / (ACT * 2))


# ------------------------------------------------------------------------------------------------ the reference update

class TwinCritic(nn.Module):
    """The reference code's Critic: two separate 3-layer MLPs, Q1 used by the actor."""

    def __init__(self, ensemble):
        super().__init__()
        layers = [m for m in ensemble.net if hasattr(m, "weight")]
        self.q = nn.ModuleList()
        for i in range(2):
            linears = []
            for layer in layers:
                lin = nn.Linear(layer.weight.shape[1], layer.weight.shape[2])
                with torch.no_grad():
                    lin.weight.copy_(layer.weight[i].T)
                    lin.bias.copy_(layer.bias[i, 0])
                linears.append(lin)
            self.q.append(nn.ModuleList(linears))

    def one(self, i, state, action):
        x = torch.cat([state, action], 1)
        l1, l2, l3 = self.q[i]
        return l3(F.relu(l2(F.relu(l1(x)))))

    def forward(self, state, action):
        return self.one(0, state, action), self.one(1, state, action)


def reference_train(actor, actor_target, critic, critic_target_net, actor_opt, critic_opt, batch, total_it,
                    discount=0.99, tau=0.005, policy_noise=0.2, noise_clip=0.5, policy_freq=2, alpha=2.5,
                    max_action=1.0):
    """TD3_BC.train of the reference code, transcribed for a batch dict (reward and not_done as (B, 1))."""
    state, action, next_state = batch["obs"], batch["act"], batch["next_obs"]
    reward, not_done = batch["rew"].unsqueeze(1), (1.0 - batch["done"]).unsqueeze(1)
    with torch.no_grad():
        noise = (torch.randn_like(action) * policy_noise).clamp(-noise_clip, noise_clip)
        next_action = (actor_target(next_state) + noise).clamp(-max_action, max_action)
        tq1, tq2 = critic_target_net(next_state, next_action)
        target_q = reward + not_done * discount * torch.min(tq1, tq2)
    q1, q2 = critic(state, action)
    critic_l = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
    critic_opt.zero_grad()
    critic_l.backward()
    critic_opt.step()
    if total_it % policy_freq == 0:
        pi = actor(state)
        q = critic.one(0, state, pi)
        lmbda = alpha / q.abs().mean().detach()
        actor_l = -lmbda * q.mean() + F.mse_loss(pi, action)
        actor_opt.zero_grad()
        actor_l.backward()
        actor_opt.step()
        for p, tp in zip(critic.parameters(), critic_target_net.parameters()):
            tp.data.copy_(tau * p.data + (1 - tau) * tp.data)
        for p, tp in zip(actor.parameters(), actor_target.parameters()):
            tp.data.copy_(tau * p.data + (1 - tau) * tp.data)


def test_update_equals_the_reference_codes_update():
    agent = small_agent()
    ref_actor = copy.deepcopy(agent.actor)
    ref_actor_target = copy.deepcopy(ref_actor)
    ref_critic = TwinCritic(agent.critic)
    ref_critic_target = copy.deepcopy(ref_critic)
    ref_actor_opt = torch.optim.Adam(ref_actor.parameters(), lr=3e-4)
    ref_critic_opt = torch.optim.Adam(ref_critic.parameters(), lr=3e-4)
    with same_noise():  # the same smoothing noise for both (torch.randn_like)
        for it in range(1, 7):
            b = random_batch(seed=it)
            agent.update(b)
            reference_train(ref_actor, ref_actor_target, ref_critic, ref_critic_target, ref_actor_opt,
                            ref_critic_opt, b, it)
    for mine, ref in ((agent.actor, ref_actor), (agent.actor_target, ref_actor_target)):
        for p, q in zip(mine.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6)
    for mine, ref in ((agent.critic, ref_critic), (agent.critic_target, ref_critic_target)):
        twin = TwinCritic(mine)
        for p, q in zip(twin.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6)


def test_the_actor_and_the_targets_move_every_second_step_only():
    agent = small_agent()
    before = [copy.deepcopy(m.state_dict()) for m in (agent.actor, agent.actor_target, agent.critic_target)]
    logs = agent.update(random_batch(seed=1))
    assert "actor_loss" not in logs
    for m, saved in zip((agent.actor, agent.actor_target, agent.critic_target), before):
        assert all(torch.equal(v, saved[k]) for k, v in m.state_dict().items())
    logs = agent.update(random_batch(seed=2))
    assert "actor_loss" in logs
    for m, saved in zip((agent.actor, agent.actor_target, agent.critic_target), before):
        assert not all(torch.equal(v, saved[k]) for k, v in m.state_dict().items())


def test_state_dict_resumes_exactly():
    a = small_agent()
    batches = [random_batch(seed=i) for i in range(7)]
    for b in batches[:3]:  # an odd count: the resumed agent must know the next step moves the actor
        a.update(b)
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(99)
    b_agent = TD3BC(OBS, ACT, -1, 1, TD3BCConfig(hidden=(16, 16)))
    b_agent.load_state_dict(torch.load(buffer, weights_only=False))
    for b in batches[3:]:
        torch.manual_seed(5)
        la = a.update(b)
        torch.manual_seed(5)
        lb = b_agent.update(b)
        assert la.keys() == lb.keys() and la["critic_loss"] == lb["critic_loss"]
    for m in ("actor", "actor_target", "critic", "critic_target"):
        for p, q in zip(getattr(a, m).parameters(), getattr(b_agent, m).parameters()):
            assert torch.equal(p, q)
    assert b_agent.step == 7


def test_act_shape_bounds_and_the_registry():
    agent = TD3BC(OBS, ACT, [-2, -1], [2, 1], TD3BCConfig(hidden=(16, 16)))
    out = agent.act(np.random.default_rng(0).normal(size=(5, OBS)) * 100)
    assert out.shape == (5, ACT) and np.all(np.abs(out) <= [2, 1])
    assert isinstance(build_agent("td3+bc", OBS, ACT, -1, 1, make_config("td3+bc", {})), TD3BC)


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="policy_freq"):
        TD3BCConfig(policy_freq=0)
    with pytest.raises(ValueError, match="alpha"):
        TD3BCConfig(alpha=-1.0)


def test_moves_towards_the_better_action_where_bc_copies_the_mean():
    """A one-step bandit: the data's actions are uniform in [-1, 1], the reward -(a - 0.6)^2, every step terminal.
    BC's answer is the data's mean, 0; TD3+BC's critic learns the reward and its actor climbs it, held near the
    data (which covers 0.6)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    n = 2048
    obs = torch.zeros(n, 1)
    act = torch.rand(n, 1, generator=g) * 2 - 1
    data = {"obs": obs, "act": act, "rew": -(act[:, 0] - 0.6) ** 2, "next_obs": obs, "done": torch.ones(n)}
    agent = TD3BC(1, 1, -1, 1, TD3BCConfig(hidden=(32, 32), actor_lr=1e-3, critic_lr=1e-3))
    for _ in range(600):
        idx = torch.randint(0, n, (128,), generator=g)
        agent.update({k: v[idx] for k, v in data.items()})
    a = float(agent.act(np.zeros((1, 1), dtype=np.float32))[0, 0])
    assert 0.3 < a < 0.9, a
