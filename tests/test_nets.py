import math

import numpy as np
import pytest
import torch
from torch import nn

from minirl.nets import (VAE, CriticEnsemble, DeterministicActor, GaussianActor, TanhGaussianActor,
                         VectorizedLayerNorm, VectorizedLinear, mlp, soft_update)


def test_mlp_shapes_and_layers():
    net = mlp(5, 3, (16, 8))
    assert net(torch.zeros(4, 5)).shape == (4, 3)
    assert [m.out_features for m in net if isinstance(m, nn.Linear)] == [16, 8, 3]


def test_vectorized_linear_equals_independent_linears():
    torch.manual_seed(0)
    layer = VectorizedLinear(4, 3, n=5)
    x = torch.randn(5, 7, 4)
    y = layer(x)
    for i in range(5):
        assert torch.allclose(y[i], x[i] @ layer.weight[i] + layer.bias[i], atol=1e-6)


def test_critic_ensemble_replicas_differ_and_broadcast():
    torch.manual_seed(0)
    q = CriticEnsemble(3, 2, (32, 32), n_critics=4)
    obs, act = torch.randn(10, 3), torch.randn(10, 2)
    out = q(obs, act)
    assert out.shape == (4, 10)
    assert not torch.allclose(out[0], out[1])
    # per-replica inputs give the same answer as the broadcast
    assert torch.allclose(q(obs.expand(4, -1, -1), act.expand(4, -1, -1)), out)


def test_vectorized_layer_norm_equals_one_layer_norm_per_member():
    torch.manual_seed(0)
    norm = VectorizedLayerNorm(6, n=3)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    x = torch.randn(3, 5, 6) * 4 + 2
    y = norm(x)
    for i in range(3):
        member = nn.LayerNorm(6)
        with torch.no_grad():
            member.weight.copy_(norm.weight[i, 0])
            member.bias.copy_(norm.bias[i, 0])
        assert torch.allclose(y[i], member(x[i]), atol=1e-5)


def test_critic_ensemble_layer_norm_sits_before_each_relu_with_its_own_gains():
    q = CriticEnsemble(3, 2, (8, 8), n_critics=2, layer_norm=True)
    kinds = [type(m).__name__ for m in q.net]
    assert kinds == ["VectorizedLinear", "VectorizedLayerNorm", "ReLU", "VectorizedLinear", "VectorizedLayerNorm",
                     "ReLU", "VectorizedLinear"]
    out = q(torch.randn(6, 3), torch.randn(6, 2))
    out[0].sum().backward()
    assert q.net[1].weight.grad[1].abs().sum() == 0 and q.net[1].weight.grad[0].abs().sum() > 0


def test_critic_ensemble_replica_gradients_are_independent():
    q = CriticEnsemble(3, 2, (8,), n_critics=2)
    out = q(torch.randn(6, 3), torch.randn(6, 2))
    out[0].sum().backward()
    assert q.net[0].weight.grad[1].abs().sum() == 0
    assert q.net[0].weight.grad[0].abs().sum() > 0


def test_tanh_gaussian_respects_bounds_and_log_prob_matches_sample():
    torch.manual_seed(0)
    actor = TanhGaussianActor(3, 2, (32,), action_low=[-2, 0], action_high=[2, 1])
    obs = torch.randn(500, 3)
    a, logp = actor.sample(obs)
    assert (a[:, 0].abs() <= 2).all() and (a[:, 1] >= 0).all() and (a[:, 1] <= 1).all()
    assert torch.allclose(actor.log_prob(obs, a), logp, atol=1e-3)


def test_tanh_gaussian_log_prob_is_a_density():
    # 1-D: integrate exp(log pi(a|s)) over the action interval numerically
    torch.manual_seed(0)
    actor = TanhGaussianActor(1, 1, (8,), action_low=-2.0, action_high=2.0)
    a = torch.linspace(-2 + 1e-4, 2 - 1e-4, 20001).unsqueeze(1)
    obs = torch.zeros(len(a), 1)
    p = actor.log_prob(obs, a, eps=1e-7).exp()
    integral = torch.trapezoid(p, a.squeeze(1)).item()
    assert integral == pytest.approx(1.0, abs=2e-3)


def test_gaussian_actor_mean_is_squashed_and_std_state_independent():
    actor = GaussianActor(4, 2, (16,), action_low=-1, action_high=1)
    d = actor.dist(torch.randn(8, 4) * 100)
    assert (d.mean.abs() <= 1).all()
    assert torch.allclose(d.stddev, d.stddev[0].expand_as(d.stddev))
    a, _ = actor.sample(torch.randn(8, 4))
    assert (a.abs() <= 1).all()


def test_deterministic_actor_in_bounds():
    actor = DeterministicActor(4, 2, (16,), action_low=[-3, -1], action_high=[3, 1])
    a = actor(torch.randn(100, 4) * 100)
    assert (a[:, 0].abs() <= 3).all() and (a[:, 1].abs() <= 1).all()


def test_bad_bounds_raise():
    with pytest.raises(ValueError, match="action_high must exceed action_low"):
        DeterministicActor(2, 2, (4,), action_low=[0, 0], action_high=[1, 0])


def test_vae_shapes_latent_and_clip():
    torch.manual_seed(0)
    vae = VAE(3, 2, hidden=(32, 32))
    assert vae.latent_dim == 4
    recon, mean, std = vae(torch.randn(5, 3), torch.rand(5, 2) * 2 - 1)
    assert recon.shape == (5, 2) and mean.shape == (5, 4) and std.shape == (5, 4)
    assert (std >= math.exp(-4) - 1e-6).all()
    assert (vae.decode(torch.randn(7, 3)).abs() <= 1).all()


def test_soft_update():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    before = a.weight.detach().clone()
    soft_update(a, b, 0.25)
    assert torch.allclose(a.weight, 0.75 * before + 0.25 * b.weight)
    soft_update(a, b, 1.0)
    assert torch.allclose(a.weight, b.weight)


# ---- mixed precision: hidden layers in bfloat16, output layers in float32 ----------------------------------------

def _bf16():
    return torch.autocast("cpu", dtype=torch.bfloat16)


def test_under_autocast_hidden_layers_are_bfloat16_and_outputs_float32():
    torch.manual_seed(0)
    net, q = mlp(5, 3, (64, 64)), CriticEnsemble(5, 2, (64, 64), n_critics=3)
    x, a = torch.randn(32, 5), torch.randn(32, 2)
    with _bf16():
        hidden = net[:-1](x)
        y, qa = net(x), q(x, a)
    assert hidden.dtype == torch.bfloat16  # autocast is on for the hidden layers...
    assert y.dtype == qa.dtype == torch.float32  # ...and off for the output layers
    # bfloat16 products change the numbers a little (so the hidden layers really ran in bfloat16), not much
    assert not torch.equal(y, net(x)) and not torch.equal(qa, q(x, a))
    torch.testing.assert_close(y, net(x), rtol=0.05, atol=0.02)
    torch.testing.assert_close(qa, q(x, a), rtol=0.05, atol=0.02)


def test_output_layers_alone_give_float32_numbers_under_autocast():
    torch.manual_seed(0)
    net, q = mlp(5, 3, (64,)), CriticEnsemble(5, 2, (64,), n_critics=2)
    x = torch.randn(16, 64)
    with _bf16():
        y, qy = net[-1](x), q.net[-1](x.expand(2, -1, -1))
    assert torch.equal(y, net[-1](x)) and torch.equal(qy, q.net[-1](x.expand(2, -1, -1)))
    assert set(net.state_dict()) == {"0.weight", "0.bias", "2.weight", "2.bias"}  # nn.Linear's names


def test_gradients_under_autocast_reach_float32_parameters():
    torch.manual_seed(0)
    q = CriticEnsemble(3, 1, (32, 32), n_critics=2)
    with _bf16():
        loss = q(torch.randn(8, 3), torch.randn(8, 1)).square().mean()
    loss.backward()
    assert all(p.dtype == p.grad.dtype == torch.float32 for p in q.parameters())
    assert all(p.grad.abs().sum() > 0 for p in q.parameters())
