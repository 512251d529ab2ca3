"""Networks shared by every algorithm: MLPs, actors, a batched critic ensemble and a conditional VAE.

Conventions
-----------
* Observations are float tensors of shape ``(B, obs_dim)``; actions ``(B, act_dim)`` in the environment's own
  bounds. Actors receive the bounds (``action_low``/``action_high``) and map their internal ``[-1, 1]`` output
  onto them with a fixed affine transform stored as buffers (so it moves with ``.to(device)`` and is saved).
* A critic ensemble returns ``(n_critics, B)``: all replicas are computed in one batched pass
  (:class:`VectorizedLinear`, a ``torch.baddbmm`` per layer), never in a Python loop.
* Mixed precision (``train(..., amp=True)``, which runs each update under ``torch.autocast`` with bfloat16): the
  hidden layers then multiply in bfloat16, but the **last layer of every network runs in float32**
  (:class:`OutputLinear`, ``VectorizedLinear(..., float32=True)``), so Q-values, log-stds, action means and
  everything the losses compute from them (logsumexp, exp-advantages, log-probabilities) stay in float32.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.distributions import Normal
from torch.nn import functional as F

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


def mlp(in_dim: int, out_dim: int, hidden: Sequence[int] = (256, 256), activation=nn.ReLU,
        output_activation=None, dropout: float = 0.0, layer_norm: bool = False) -> nn.Sequential:
    """A fully connected network ``in_dim -> hidden... -> out_dim`` with ``activation`` between layers."""
    layers: list[nn.Module] = []
    dims = [in_dim, *hidden]
    for a, b in zip(dims[:-1], dims[1:]):
        layers.append(Linear(a, b))
        if layer_norm:
            layers.append(LayerNorm(b))
        layers.append(activation())
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
    layers.append(OutputLinear(dims[-1], out_dim))
    if output_activation is not None:
        layers.append(output_activation())
    return nn.Sequential(*layers)


def _float32(x: torch.Tensor) -> bool:
    """True when autocast would lower this layer's precision: run it in float32 instead."""
    return torch.is_autocast_enabled(x.device.type)


def obs_tensor(obs, device) -> torch.Tensor:
    """Observations as ``act()`` takes them (an array or list: one ``(obs_dim,)`` or a batch ``(B, obs_dim)``), as a
    float32 tensor on ``device``."""
    return torch.as_tensor(np.asarray(obs, dtype=np.float32), device=device)


def batch_mean(x: torch.Tensor, dims: int = 1) -> torch.Tensor:
    """``E`` over the batch: the mean over the last ``dims`` axes (the batch, and any axes within a sample), which is
    ``x.mean()`` for one agent; for a stack of seeds (:mod:`minirl.seeds`, a leading axis ``K``) each seed's mean,
    summed over the seeds, so that each seed's gradient is the one its own run would get (averaging over the seeds
    would divide every gradient by ``K``)."""
    return (x.flatten(-dims) if dims > 1 else x).mean(-1).sum()


class Linear(nn.Linear):
    """``nn.Linear``, and ``K`` of them when :mod:`minirl.seeds` stacks the parameters of ``K`` seeds' networks: a
    weight ``(K, out, in)`` maps ``(K, B, in)`` to ``(K, B, out)``, member ``k``'s rows with member ``k``'s weight.
    Same parameter names and checkpoints as ``nn.Linear``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dim() == 3:  # a stack of seeds
            return torch.baddbmm(self.bias.unsqueeze(-2), x, self.weight.transpose(-1, -2))
        return super().forward(x)


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm``; with the gains and biases of ``K`` seeds stacked, ``(K, d)``, member ``k``'s own."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dim() == 2:  # a stack of seeds
            x = F.layer_norm(x, self.normalized_shape, eps=self.eps)
            return x * self.weight.unsqueeze(-2) + self.bias.unsqueeze(-2)
        return super().forward(x)


class OutputLinear(Linear):
    """:class:`Linear` that stays in float32 under autocast (the output layer of every :func:`mlp`).

    The hidden layers' bfloat16 products keep ~3 significant digits; a Q-value of -1,000 read from a bfloat16
    output layer would be off by up to ~4, more than many TD errors. An ``nn.Linear`` subclass, so parameter names
    and checkpoints are those of ``nn.Linear``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _float32(x):
            with torch.autocast(x.device.type, enabled=False):
                return super().forward(x.float())
        return super().forward(x)


class _ActionScaler(nn.Module):
    """Holds the affine map between ``[-1, 1]`` and the action bounds ``[low, high]``."""

    def __init__(self, act_dim: int, action_low=None, action_high=None):
        super().__init__()
        low = -np.ones(act_dim) if action_low is None else np.broadcast_to(np.asarray(action_low, float), act_dim)
        high = np.ones(act_dim) if action_high is None else np.broadcast_to(np.asarray(action_high, float), act_dim)
        if np.any(high <= low):
            raise ValueError(f"action_high must exceed action_low in every dimension, got low={low}, high={high}")
        self.register_buffer("action_scale", torch.as_tensor((high - low) / 2, dtype=torch.float32))
        self.register_buffer("action_bias", torch.as_tensor((high + low) / 2, dtype=torch.float32))

    def to_env(self, u: torch.Tensor) -> torch.Tensor:
        return u * self.action_scale + self.action_bias

    def to_unit(self, a: torch.Tensor) -> torch.Tensor:
        return (a - self.action_bias) / self.action_scale


class TanhGaussianActor(_ActionScaler):
    """SAC's policy: ``a = tanh(u)``, ``u ~ N(mu(s), sigma(s))``, both heads state dependent.

    ``log_prob`` includes the tanh change of variables and the log-determinant of the scaling to the bounds.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (256, 256),
                 action_low=None, action_high=None):
        super().__init__(act_dim, action_low, action_high)
        self.trunk = mlp(obs_dim, 2 * act_dim, hidden)
        self.act_dim = act_dim

    def mean_std(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and standard deviation of the pre-tanh Gaussian."""
        mu, log_std = self.trunk(obs).chunk(2, dim=-1)
        return mu, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp()

    def _dist(self, obs: torch.Tensor) -> Normal:
        return Normal(*self.mean_std(obs), validate_args=False)

    def action(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """``tanh(mu + sigma * noise)`` in the bounds, without log-probabilities (cheap, for acting).

        ``noise=None`` gives the deterministic action ``tanh(mu)``.
        """
        mu, std = self.mean_std(obs)
        return self.to_env(torch.tanh(mu if noise is None else mu + std * noise))

    def _squash_log_prob(self, dist: Normal, u: torch.Tensor) -> torch.Tensor:
        # log pi(a|s) = log N(u) - sum log(1 - tanh(u)^2) - sum log(scale); the middle term in a stable form.
        correction = 2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))
        return (dist.log_prob(u) - correction).sum(-1) - self.action_scale.log().sum()

    def sample(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(action, log_prob)``; the action is reparameterised (differentiable)."""
        dist = self._dist(obs)
        u = dist.mean if deterministic else dist.rsample()
        return self.to_env(torch.tanh(u)), self._squash_log_prob(dist, u)

    def log_prob(self, obs: torch.Tensor, action: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        """Log-density of given (dataset) actions; actions at the bounds are pulled in by ``eps``."""
        u = torch.atanh(self.to_unit(action).clamp(-1 + eps, 1 - eps))
        return self._squash_log_prob(self._dist(obs), u)

    def forward(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        return self.sample(obs, deterministic)[0]


class GaussianActor(_ActionScaler):
    """IQL's policy: ``N(tanh(mu(s)), exp(log_std))`` with a state-independent ``log_std`` parameter.

    The mean is squashed, the sample is not (it is clipped to the bounds when acting), as in the official IQL code.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (256, 256),
                 action_low=None, action_high=None, log_std_min: float = -5.0, log_std_max: float = 2.0):
        super().__init__(act_dim, action_low, action_high)
        self.mean_net = mlp(obs_dim, act_dim, hidden, output_activation=nn.Tanh)
        self.log_std = nn.Parameter(torch.zeros(act_dim))
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def dist(self, obs: torch.Tensor) -> Normal:
        mean = self.to_env(self.mean_net(obs))
        # (1, act_dim), or (K, 1, act_dim) for a stack of K seeds (minirl.seeds): one log-std per seed
        std = self.log_std.clamp(self.log_std_min, self.log_std_max).exp().unsqueeze(-2) * self.action_scale
        return Normal(mean, std, validate_args=False)

    def log_prob(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.dist(obs).log_prob(action).sum(-1)

    def sample(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        dist = self.dist(obs)
        a = dist.mean if deterministic else dist.sample()
        low = self.action_bias - self.action_scale
        high = self.action_bias + self.action_scale
        return torch.max(torch.min(a, high), low), dist.log_prob(a).sum(-1)

    def forward(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        a = self.sample(obs, deterministic)[0]
        return a[0] if obs.dim() == 1 else a  # one observation (obs_dim,): one action (act_dim,), not (1, act_dim)


class DeterministicActor(_ActionScaler):
    """``a = scale * tanh(f(s)) + bias``: TD3-style and the deterministic options of BC and IQL.

    ``squash="clip"``: ``a = scale * clip(f(s), -1, 1) + bias``, OGBench's DDPG+BC actor (the mean of its Gaussian
    has no tanh; it is clipped where the critic is evaluated and left unclipped in the behaviour-cloning term). Where
    ``|f(s)|`` is large a tanh passes no gradient back, to either term; the unclipped output always gets the
    behaviour-cloning term's (:meth:`unclipped`).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (256, 256),
                 action_low=None, action_high=None, squash: str = "tanh"):
        super().__init__(act_dim, action_low, action_high)
        if squash not in ("tanh", "clip"):
            raise ValueError(f"squash must be 'tanh' or 'clip', got {squash!r}")
        self.squash = squash
        self.net = mlp(obs_dim, act_dim, hidden, output_activation=nn.Tanh if squash == "tanh" else None)

    def unclipped(self, obs: torch.Tensor) -> torch.Tensor:
        """``scale * f(s) + bias`` before the clip (``squash="tanh"``: the action itself)."""
        return self.to_env(self.net(obs))

    def clip(self, a: torch.Tensor) -> torch.Tensor:
        """``a`` clipped to the action bounds (``squash="tanh"``: ``a``, inside them already)."""
        return self.to_env(self.to_unit(a).clamp(-1, 1)) if self.squash == "clip" else a

    def forward(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return self.clip(self.unclipped(obs))


class VectorizedLinear(nn.Module):
    """``n`` independent linear layers applied in one ``baddbmm``: input ``(n, B, in)`` -> ``(n, B, out)``.

    ``float32=True`` (the output layer of a :class:`CriticEnsemble`) keeps it in float32 under autocast.
    """

    def __init__(self, in_features: int, out_features: int, n: int, float32: bool = False):
        super().__init__()
        self.float32 = float32
        self.weight = nn.Parameter(torch.empty(n, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(n, 1, out_features))
        # the same initialisation nn.Linear uses, per replica
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.float32 and _float32(x):
            with torch.autocast(x.device.type, enabled=False):
                return self._apply_to(x.float())
        return self._apply_to(x)

    def _apply_to(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dim() == 4:  # K seeds' ensembles stacked (minirl.seeds): (K, n, B, in) -> (K, n, B, out)
            return torch.matmul(x, self.weight) + self.bias
        return torch.baddbmm(self.bias, x, self.weight)


class VectorizedLayerNorm(nn.Module):
    """LayerNorm over the last dimension of ``(n, B, d)`` with a gain and a bias of its own for each of the ``n``
    members (``nn.LayerNorm`` would share one between them)."""

    def __init__(self, dim: int, n: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, 1, dim))
        self.bias = nn.Parameter(torch.zeros(n, 1, dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], eps=self.eps) * self.weight + self.bias


class CriticEnsemble(nn.Module):
    """``n_critics`` Q-functions ``Q_i(s, a)`` evaluated together; ``forward`` returns ``(n_critics, B)``.

    ``obs``/``action`` may be ``(B, d)`` (shared by all replicas) or ``(n_critics, B, d)`` (one batch each). With
    ``K`` seeds' ensembles stacked (:mod:`minirl.seeds`) they are ``(K, B, d)`` and the result ``(K, n_critics, B)``.
    ``layer_norm``: a :class:`VectorizedLayerNorm` after each hidden layer, before its ReLU (OGBench's critics).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (256, 256), n_critics: int = 2,
                 layer_norm: bool = False):
        super().__init__()
        dims = [obs_dim + act_dim, *hidden]
        layers: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [VectorizedLinear(a, b, n_critics)] + ([VectorizedLayerNorm(b, n_critics)] if layer_norm else [])
            layers.append(nn.ReLU())
        layers.append(VectorizedLinear(dims[-1], 1, n_critics, float32=True))
        self.net = nn.Sequential(*layers)
        self.n_critics = n_critics

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1)
        if self.net[0].weight.dim() == 4:  # a stack of seeds: each seed's batch to all of its replicas
            x = x.unsqueeze(1).expand(-1, self.n_critics, -1, -1)
        elif x.dim() == 2:
            x = x.unsqueeze(0).expand(self.n_critics, -1, -1)
        return self.net(x).squeeze(-1)


class VAE(nn.Module):
    """Conditional VAE over actions given states (BCQ): ``E(s, a) -> (mu, sigma)``, ``D(s, z) -> a``.

    Reference settings: 750-750 layers, latent size ``2 * act_dim``, encoder log-std clamped to ``[-4, 15]``,
    and when decoding without an encoder, ``z ~ N(0, 1)`` clipped to ``[-latent_clip, latent_clip]``.
    """

    def __init__(self, obs_dim: int, act_dim: int, latent_dim: int | None = None, hidden: Sequence[int] = (750, 750),
                 action_low=None, action_high=None, latent_clip: float = 0.5):
        super().__init__()
        self.latent_dim = latent_dim or 2 * act_dim
        self.encoder = mlp(obs_dim + act_dim, 2 * self.latent_dim, hidden)
        self.decoder = DeterministicActor(obs_dim + self.latent_dim, act_dim, hidden, action_low, action_high)
        self.latent_clip = latent_clip

    def encode(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.encoder(torch.cat([obs, action], -1)).chunk(2, dim=-1)
        return mean, log_std.clamp(-4.0, 15.0).exp()

    def decode(self, obs: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        if z is None:  # obs (B, d), or (K, B, d) for a stack of seeds
            z = torch.randn(*obs.shape[:-1], self.latent_dim, device=obs.device).clamp(-self.latent_clip,
                                                                                       self.latent_clip)
        return self.decoder(torch.cat([obs, z], -1))

    def forward(self, obs: torch.Tensor, action: torch.Tensor):
        """Return ``(reconstruction, mean, std)`` for the VAE loss."""
        mean, std = self.encode(obs, action)
        z = mean + std * torch.randn_like(std)
        return self.decode(obs, z), mean, std


def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging ``target <- tau * source + (1 - tau) * target`` (one fused call over all parameters)."""
    with torch.no_grad():
        torch._foreach_lerp_(list(target.parameters()), list(source.parameters()), tau)


_FUSED_ADAM = tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 4)  # CPU fused Adam since torch 2.4


def adam(params, lr: float) -> torch.optim.Adam:
    """``torch.optim.Adam(params, lr)`` with ``fused=True`` where torch has it: the whole step in one kernel
    over all parameters, the same update as the default implementation up to float rounding (IQL's update on one
    CPU core runs ~25 % faster, benchmarks/README.md)."""
    return torch.optim.Adam(params, lr=lr, fused=True if _FUSED_ADAM else None)


def scheduled_lr(opt: torch.optim.Optimizer) -> None:
    """Prepare ``opt`` for a learning rate that changes every step: where the optimiser accepts it (fused Adam), the
    learning rate becomes a float32 tensor on the parameters' device that :func:`set_lr` overwrites in place, so an
    update recorded as a CUDA graph (:class:`minirl.devices.CapturedStep`) reads the current value at every replay; a
    Python number would be frozen in the graph. Elsewhere it stays a number."""
    for group in opt.param_groups:
        lr, device = group["lr"], group["params"][0].device
        if group.get("fused") and not (isinstance(lr, torch.Tensor) and lr.device == device):
            group["lr"] = torch.tensor(float(lr), dtype=torch.float32, device=device)


def set_lr(opt: torch.optim.Optimizer, lr) -> None:
    """Set the learning rate of every parameter group of ``opt`` to ``lr`` (a number or a 0-d tensor): in place into
    a tensor learning rate (see :func:`scheduled_lr`), else as a number."""
    for group in opt.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].copy_(lr)
        else:
            group["lr"] = float(lr)
