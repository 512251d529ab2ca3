"""BCQ: the losses against hand-computed values, the perturbation bound, action selection, the update's mechanics,
checkpoints, tabular BCQL against the exact batch-constrained optimum, and a short learning test on Pendulum."""
import copy
import math

import numpy as np
import pytest
import torch

from minirl import tabular
from minirl.bcq import (BCQ, BCQConfig, Perturbation, critic_target, kl_to_standard_normal, perturbation_loss,
                        soft_clipped_double_q, vae_loss)

SMALL = dict(actor_hidden=(32, 32), critic_hidden=(32, 32), vae_hidden=(32, 32))


def _batch(B=8, obs_dim=3, act_dim=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.randn(B, obs_dim, generator=g), "act": torch.rand(B, act_dim, generator=g) * 2 - 1,
            "rew": torch.randn(B, generator=g), "next_obs": torch.randn(B, obs_dim, generator=g),
            "done": (torch.rand(B, generator=g) < 0.3).float()}


# ---------------------------------------------------------------------------------------------------------------
# Pure losses
# ---------------------------------------------------------------------------------------------------------------

def test_kl_to_standard_normal_by_hand():
    # KL(N(m, s^2) || N(0, 1)) = 1/2 (s^2 + m^2 - 1 - log s^2)
    assert kl_to_standard_normal(torch.zeros(2, 3), torch.ones(2, 3)).item() == pytest.approx(0.0)
    assert kl_to_standard_normal(torch.tensor([[1.0]]), torch.tensor([[1.0]])).item() == pytest.approx(0.5)
    want = 0.5 * (4 - 1 - math.log(4))  # m = 0, s = 2
    assert kl_to_standard_normal(torch.tensor([[0.0]]), torch.tensor([[2.0]])).item() == pytest.approx(want)
    # averaged over elements: [0 (m=0,s=1), 0.5 (m=1,s=1)] -> 0.25
    got = kl_to_standard_normal(torch.tensor([[0.0, 1.0]]), torch.tensor([[1.0, 1.0]]))
    assert got.item() == pytest.approx(0.25)


def test_vae_loss_by_hand():
    recon, actions = torch.tensor([[0.5, 0.0]]), torch.tensor([[0.0, 1.0]])  # squared errors 0.25, 1 -> mean 0.625
    mean, std = torch.tensor([[1.0]]), torch.tensor([[1.0]])                 # KL 0.5
    assert vae_loss(recon, actions, mean, std, kl_weight=0.5).item() == pytest.approx(0.625 + 0.25)
    assert vae_loss(recon, actions, mean, std, kl_weight=0.0).item() == pytest.approx(0.625)


def test_soft_clipped_double_q_by_hand():
    q1, q2 = torch.tensor([1.0, 4.0]), torch.tensor([3.0, 2.0])
    assert torch.allclose(soft_clipped_double_q(q1, q2, 0.75), torch.tensor([1.5, 2.5]))
    assert torch.allclose(soft_clipped_double_q(q1, q2, 1.0), torch.tensor([1.0, 2.0]))   # clipped double Q
    assert torch.allclose(soft_clipped_double_q(q1, q2, 0.0), torch.tensor([3.0, 4.0]))   # max
    assert torch.allclose(soft_clipped_double_q(q1, q2, 0.5), (q1 + q2) / 2)


def test_critic_target_by_hand():
    # two next states, three candidate actions each
    q1 = torch.tensor([[0.0, 2.0, 1.0], [5.0, -1.0, 0.0]])
    q2 = torch.tensor([[4.0, 2.0, 1.0], [1.0, 3.0, 0.0]])
    # soft clipped (lambda 0.75): row 0 -> [1.0, 2.0, 1.0], max 2.0; row 1 -> [2.0, 0.0, 0.0], max 2.0
    rew, done = torch.tensor([1.0, -1.0]), torch.tensor([0.0, 1.0])
    y = critic_target(rew, done, q1, q2, gamma=0.9, lmbda=0.75)
    assert torch.allclose(y, torch.tensor([1.0 + 0.9 * 2.0, -1.0]))  # done: no bootstrap
    y = critic_target(rew, torch.zeros(2), q1, q2, gamma=0.5, lmbda=0.0)  # max over everything: 4, 5
    assert torch.allclose(y, torch.tensor([1.0 + 0.5 * 4.0, -1.0 + 0.5 * 5.0]))


def test_critic_target_shape_errors():
    with pytest.raises(ValueError, match=r"shape \(B, n\)"):
        critic_target(torch.zeros(2), torch.zeros(2), torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="len\\(rewards\\)"):
        critic_target(torch.zeros(3), torch.zeros(3), torch.zeros(2, 3), torch.zeros(2, 3))


def test_perturbation_loss_is_minus_mean_q1_and_its_gradient():
    q = torch.tensor([1.0, 2.0, 6.0], requires_grad=True)
    loss = perturbation_loss(q)
    assert loss.item() == pytest.approx(-3.0)
    loss.backward()
    assert torch.allclose(q.grad, torch.full((3,), -1.0 / 3))


# ---------------------------------------------------------------------------------------------------------------
# The perturbation model and action selection
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("phi", [0.0, 0.05, 0.5])
def test_perturbation_never_exceeds_phi_and_stays_in_bounds(phi):
    torch.manual_seed(0)
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 1.0])   # asymmetric: half ranges 2 and 0.5
    xi = Perturbation(3, 2, (16,), phi, low, high)
    with torch.no_grad():  # large weights saturate the tanh: the bound is reached
        for p in xi.parameters():
            p.mul_(50.0)
    obs = torch.randn(500, 3)
    a = torch.as_tensor(low + (high - low) * np.random.default_rng(0).random((500, 2)), dtype=torch.float32)
    out = xi(obs, a)
    bound = phi * torch.tensor([2.0, 0.5])
    assert torch.all((out - a).abs() <= bound + 1e-6)
    assert torch.all(out >= torch.tensor(low, dtype=torch.float32)) and torch.all(out <= torch.tensor(high, dtype=torch.float32))
    if phi == 0.0:
        assert torch.equal(out, a)
    else:  # saturated: some offsets reach the bound
        assert ((out - a).abs() > 0.99 * bound).any()


def test_act_returns_the_best_candidate_under_q1_inside_the_bounds():
    low, high = np.array([-2.0, -0.5]), np.array([2.0, 1.5])
    agent = BCQ(3, 2, low, high, BCQConfig(**SMALL, phi=0.3, n_action_samples=20))
    obs = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    torch.manual_seed(7)
    a = agent.act(obs)
    assert a.shape == (5, 2) and np.all(a >= low) and np.all(a <= high)
    torch.manual_seed(7)  # the same VAE samples again, evaluated by hand
    with torch.no_grad():
        obs_rep, cands = agent.candidates(torch.as_tensor(obs), 20)
        q1 = agent.critic(obs_rep, cands)[0].view(5, 20)
        cands = cands.view(5, 20, 2)
    best = cands[torch.arange(5), q1.argmax(1)].numpy()
    np.testing.assert_allclose(a, best)
    with torch.no_grad():
        q_chosen = agent.critic(torch.as_tensor(obs), torch.as_tensor(a))[0]
    assert torch.all(q_chosen >= q1.max(1).values - 1e-5)
    assert agent.act(obs[0]).shape == (2,)  # a single observation gives a single action


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="BCQConfig.phi"):
        BCQ(3, 1, config=BCQConfig(phi=-0.1))
    with pytest.raises(ValueError, match="BCQConfig.lmbda"):
        BCQ(3, 1, config=BCQConfig(lmbda=1.5))
    with pytest.raises(ValueError, match="BCQConfig.n_target_samples"):
        BCQ(3, 1, config=BCQConfig(n_target_samples=0))


# ---------------------------------------------------------------------------------------------------------------
# The update
# ---------------------------------------------------------------------------------------------------------------

def test_update_trains_every_network_and_polyak_averages_the_targets():
    torch.manual_seed(0)
    cfg = BCQConfig(**SMALL, tau=0.1)
    agent = BCQ(3, 2, config=cfg)
    before = {k: [p.detach().clone() for p in getattr(agent, k).parameters()]
              for k in ("vae", "actor", "critic", "actor_target", "critic_target")}
    logs = agent.update(_batch())
    assert set(logs) >= {"vae_loss", "recon_loss", "kl", "critic_loss", "actor_loss", "q_data", "target"}
    assert all(torch.isfinite(torch.as_tensor(v)) for v in logs.values())
    assert all(not torch.as_tensor(v).requires_grad for v in logs.values())
    for k in ("vae", "actor", "critic"):
        assert any(not torch.equal(p, q) for p, q in zip(before[k], getattr(agent, k).parameters())), k
    for src, tgt in (("critic", "critic_target"), ("actor", "actor_target")):
        for old, new_src, new_tgt in zip(before[tgt], getattr(agent, src).parameters(),
                                         getattr(agent, tgt).parameters()):
            torch.testing.assert_close(new_tgt, 0.9 * old + 0.1 * new_src.detach())


def test_critic_loss_uses_the_soft_clipped_target_of_n_perturbed_vae_actions():
    torch.manual_seed(0)
    n, B = 4, 8
    agent = BCQ(3, 2, config=BCQConfig(**SMALL, n_target_samples=n))
    ref = copy.deepcopy(agent)  # the networks before the update
    batch = _batch(B)
    rng = torch.get_rng_state()
    logs = agent.update(batch)
    # redo the critic step by hand: the VAE is updated first (use its new weights), its noise draw comes first
    ref.vae.load_state_dict(agent.vae.state_dict())
    torch.set_rng_state(rng)
    torch.randn(B, ref.vae.latent_dim)  # the reparameterisation noise of the VAE step
    with torch.no_grad():
        next_rep = batch["next_obs"].repeat_interleave(n, 0)
        a_next = ref.actor_target(next_rep, ref.vae.decode(next_rep))
        q1, q2 = ref.critic_target(next_rep, a_next).view(2, B, n)
        v = (0.75 * torch.min(q1, q2) + 0.25 * torch.max(q1, q2)).max(1).values
        y = batch["rew"] + 0.99 * (1 - batch["done"]) * v
        q = ref.critic(batch["obs"], batch["act"])
        want = ((q[0] - y) ** 2).mean() + ((q[1] - y) ** 2).mean()
    torch.testing.assert_close(logs["target"], y.mean())
    torch.testing.assert_close(logs["critic_loss"], want)


def test_state_dict_round_trip_gives_identical_updates():
    torch.manual_seed(1)
    a = BCQ(3, 2, config=BCQConfig(**SMALL))
    for s in range(3):
        a.update(_batch(seed=s))
    b = BCQ(3, 2, config=BCQConfig(**SMALL))
    b.load_state_dict(copy.deepcopy(a.state_dict()))  # a copy: torch's optimisers would share a's state tensors
    torch.manual_seed(5)
    la = a.update(_batch(seed=9))
    torch.manual_seed(5)
    lb = b.update(_batch(seed=9))
    for k in la:
        assert la[k].item() == lb[k].item(), k
    for p, q in zip(a.critic_target.parameters(), b.critic_target.parameters()):
        assert torch.equal(p, q)


# ---------------------------------------------------------------------------------------------------------------
# Learning
# ---------------------------------------------------------------------------------------------------------------

def test_learns_better_than_random_on_pendulum():
    from minirl import datasets, evaluation, train
    raw = datasets.load_dataset("pendulum-expert", 5000, progress=False)
    data, normalizer, _ = train.prepare_dataset(raw, normalize_states=True)
    torch.manual_seed(0)
    cfg = BCQConfig(actor_hidden=(64, 64), critic_hidden=(64, 64), vae_hidden=(64, 64), n_action_samples=10,
                    actor_lr=3e-3, critic_lr=3e-3, vae_lr=3e-3)
    agent = BCQ(data.obs_dim, data.act_dim, data.action_low, data.action_high, cfg)
    train.train(agent, data, 400, batch_size=128, seed=0, progress=False)

    class Random:
        rng = np.random.default_rng(0)

        def act(self, obs, deterministic=True):
            return self.rng.uniform(raw.action_low, raw.action_high, (len(obs), raw.act_dim))

    ret_bcq = evaluation.evaluate(agent, "Pendulum-v1", episodes=4, seed=123, state_normalizer=normalizer).mean()
    ret_random = evaluation.evaluate(Random(), "Pendulum-v1", episodes=4, seed=123).mean()
    assert ret_bcq > ret_random + 300, (ret_bcq, ret_random)


# ---------------------------------------------------------------------------------------------------------------
# Tabular BCQL
# ---------------------------------------------------------------------------------------------------------------

def _tiny_dataset():
    # two states, two actions; only action 0 is ever taken: 0 -(r=1)-> 1 -(r=0)-> 0
    return {"s": np.array([0, 1]), "a": np.array([0, 0]), "r": np.array([1.0, 0.0]), "s_next": np.array([1, 0]),
            "done": np.array([False, False])}


def test_offline_q_iteration_by_hand():
    data = _tiny_dataset()
    # BCQL: Q(0,0) = 1 + 0.5 Q(1,0), Q(1,0) = 0.5 Q(0,0)  ->  Q(0,0) = 4/3, Q(1,0) = 2/3; unseen pairs -inf
    Q = tabular.offline_q_iteration(data, 2, 2, 0.5, constrained=True, Q0=10.0)
    np.testing.assert_allclose(Q[:, 0], [4 / 3, 2 / 3])
    assert np.all(np.isneginf(Q[:, 1]))
    # naive, unseen pairs frozen at Q0 = 10: both bootstraps take the max over the unseen 10s
    Q = tabular.offline_q_iteration(data, 2, 2, 0.5, Q0=10.0)
    np.testing.assert_allclose(Q, [[1 + 0.5 * 10, 10], [0.5 * 10, 10]])
    # a terminal transition is not bootstrapped
    data["done"] = np.array([False, True])
    Q = tabular.offline_q_iteration(data, 2, 2, 0.5, constrained=True)
    np.testing.assert_allclose(Q[:, 0], [1.0, 0.0], atol=1e-12)


def _mdp_and_dataset(seed=3, terminal=False):
    mdp = tabular.random_mdp(10, 4, gamma=0.9, seed=seed, branching=3)
    if terminal:  # make state 9 terminal: absorbing, zero reward
        P, R = mdp.P.copy(), mdp.R.copy()
        P[9] = 0.0
        P[9, :, 9] = 1.0
        R[9] = 0.0
        mdp = tabular.FiniteMDP(P, R, 0.9, terminal=np.arange(10) == 9)
    rng = np.random.default_rng(seed)
    pi_b = np.zeros((10, 4))
    for s in range(10):  # two of the four actions in each state, the others never appear in the data
        pi_b[s, rng.choice(4, 2, replace=False)] = [0.7, 0.3]
    return mdp, pi_b, tabular.sample_dataset(mdp, pi_b, 1500, seed=seed, horizon=40)


@pytest.mark.parametrize("terminal", [False, True])
def test_bcql_fixed_point_is_the_exact_batch_constrained_optimum(terminal):
    mdp, _, data = _mdp_and_dataset(terminal=terminal)
    mdp_hat, counts = tabular.empirical_mdp(data, 10, 4, 0.9)
    want = tabular.constrained_value_iteration(mdp_hat, counts > 0)
    for Q0 in (0.0, 100.0, np.random.default_rng(1).normal(size=(10, 4))):  # whatever the initial values
        got = tabular.offline_q_iteration(data, 10, 4, 0.9, constrained=True, Q0=Q0)
        live = (counts > 0) & ~mdp_hat.terminal[:, None]
        np.testing.assert_allclose(got[live], want[live], atol=1e-8)
        assert np.array_equal(np.isneginf(got), counts == 0)


def test_sample_based_bcql_converges_to_the_fixed_point():
    mdp, _, data = _mdp_and_dataset()
    fixed = tabular.offline_q_iteration(data, 10, 4, 0.9, constrained=True)
    seen = np.isfinite(fixed)
    errors = [np.abs(tabular.bcql(data, 10, 4, 0.9, sweeps=n, seed=0)[seen] - fixed[seen]).max() for n in (2, 30)]
    assert errors[1] < 0.05 < errors[0]


def test_naive_q_learning_depends_on_arbitrary_values_and_bcql_does_not():
    mdp, pi_b, data = _mdp_and_dataset()
    optimistic = tabular.offline_q_iteration(data, 10, 4, 0.9, Q0=1.0 / (1 - 0.9))  # the largest possible value
    pi_naive = tabular.greedy_policy(optimistic)
    counts = tabular.empirical_mdp(data, 10, 4, 0.9)[1]
    assert (pi_naive * (counts == 0)).sum() == 10  # every greedy action is one the data never took
    pi_bcql = tabular.greedy_policy(tabular.offline_q_iteration(data, 10, 4, 0.9, constrained=True))
    assert (pi_bcql * (counts == 0)).sum() == 0
    assert tabular.policy_return(mdp, pi_bcql) > tabular.policy_return(mdp, pi_b) > tabular.policy_return(mdp, pi_naive)


def test_tabular_argument_errors():
    data = _tiny_dataset()
    with pytest.raises(ValueError, match="gamma"):
        tabular.offline_q_iteration(data, 2, 2, 1.0)
    with pytest.raises(ValueError, match="lr_power"):
        tabular.bcql(data, 2, 2, 0.9, lr_power=0.5)
    with pytest.raises(ValueError, match=r"dataset\['s'\] must be in \[0, 1\)"):
        tabular.bcql(data, 1, 2, 0.9)
