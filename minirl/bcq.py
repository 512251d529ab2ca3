"""Batch-Constrained deep Q-learning (BCQ): Fujimoto, Meger and Precup 2019, "Off-Policy Deep Reinforcement
Learning without Exploration" (ICML 2019, arXiv:1812.02900).

Extrapolation error: an offline critic is trained on targets ``max_a' Q(s', a')`` whose maximiser ``a'`` may be an
action the data never shows; nothing corrects the value there, so it can be arbitrarily wrong and the greedy policy
walks towards it. BCQ only ever evaluates actions that look like the data's:

    generative model   G_omega(s) = a conditional VAE (E_omega(s, a) -> N(mu, sigma),  D_omega(s, z) -> a)
        L_vae   = mean (D(s, z) - a)^2 + kl_weight * mean KL(N(mu, sigma) || N(0, 1)),   z = mu + sigma * eps
        sampling:  a ~ D(s, z),  z ~ N(0, 1) clipped to [-latent_clip, latent_clip]     (stay near the data)
    perturbation       xi_phi(s, a) in [-Phi, Phi]  (Phi = phi * half the action range), a_hat = clip(a + xi)
        L_actor = -mean Q_theta1(s, a + xi_phi(s, a)),   a ~ G_omega(s)                 (DPG on the perturbation)
    critic target      n actions a_j ~ G_omega(s'), perturbed by the target perturbation model, then
        y = r + gamma * (1 - done) * max_j [ lambda * min_k Q'_k(s', a_j) + (1 - lambda) * max_k Q'_k(s', a_j) ]
        L_critic = sum_k mean (Q_k(s, a) - y)^2          (soft clipped double Q-learning, k = 1, 2)
    policy             pi(s) = argmax over 100 candidates a_j + xi_phi(s, a_j), a_j ~ G_omega(s), of Q_theta1(s, .)
    targets            theta' <- tau theta + (1 - tau) theta',  phi' <- tau phi + (1 - tau) phi'

phi trades imitation for improvement: phi = 0 picks the best of the VAE's samples (a Q-filtered behaviour
cloning), a large phi lets the perturbation reach any action in the bounds (an unconstrained actor-critic).

Settings follow the authors' code (sfujim/BCQ, continuous_BCQ/BCQ.py): VAE 750-750 with latent 2 * act_dim and
log-std clamped to [-4, 15] (``nets.VAE``), KL weight 0.5, perturbation and critics 400-300, Adam with learning rate
1e-3 for all three networks, lambda = 0.75, 10 target samples, 100 action candidates, tau = 0.005, gamma = 0.99;
the reference batch size is 100 (minirl's loop uses the scale's batch, 256). One change: states are normalised
by default (``normalize_states=True``, as minirl's BC), because Pendulum's angular velocity (range +-8) next to
cos/sin slows learning a lot at the short ``cpu`` scale; set it to False to train on raw states as the reference. The
reconstruction and KL terms are averaged over elements (``F.mse_loss`` and ``.mean()`` in the reference).
Candidate evaluations are batched: the ``B * n`` decoded actions go through the VAE, the perturbation model and the
critics in one call each. d3rlpy's BCQ has the same structure (``action_flexibility`` = phi, ``lam`` = lambda,
``beta`` = the KL weight).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from .agent import Algorithm, load_state, state_of
from .config import AT_LEAST_ONE, LAYERS, NON_NEGATIVE, POSITIVE, check_fields, interval, or_none
from .nets import VAE, CriticEnsemble, _ActionScaler, adam, batch_mean, mlp, obs_tensor, soft_update


@dataclass
class BCQConfig:
    actor_hidden: tuple[int, ...] = (400, 300)   # perturbation model xi_phi(s, a) layer sizes
    critic_hidden: tuple[int, ...] = (400, 300)  # Q_theta1, Q_theta2 layer sizes
    vae_hidden: tuple[int, ...] = (750, 750)     # encoder E_omega and decoder D_omega layer sizes
    latent_dim: int | None = None        # dim z; None: 2 * act_dim
    latent_clip: float = 0.5             # sampling z ~ N(0, 1) clipped to [-latent_clip, latent_clip]
    kl_weight: float = 0.5               # weight of KL(N(mu, sigma) || N(0, 1)) in L_vae
    phi: float = 0.05                    # Phi / (half the action range): the perturbation's bound
    lmbda: float = 0.75                  # lambda, soft clipped double-Q weight on min_k Q'_k
    n_target_samples: int = 10           # n, VAE actions per next state in the critic target
    n_action_samples: int = 100          # candidates per state when acting
    gamma: float = 0.99                  # gamma, discount
    tau: float = 0.005                   # tau, Polyak rate of the target critic and perturbation model
    actor_lr: float = 1e-3               # Adam learning rate of xi_phi
    critic_lr: float = 1e-3              # Adam learning rate of Q_theta
    vae_lr: float = 1e-3                 # Adam learning rate of G_omega (PyTorch's Adam default in the reference)
    normalize_states: bool = True        # (s - mean) / std of the dataset; the reference trains on raw states
    reward_scale: Literal["return_range"] | None = None  # None: raw rewards, as the reference

    def __post_init__(self):
        check_fields(self, actor_hidden=LAYERS, critic_hidden=LAYERS, vae_hidden=LAYERS,
                     latent_dim=or_none(AT_LEAST_ONE), latent_clip=NON_NEGATIVE, kl_weight=NON_NEGATIVE,
                     phi=NON_NEGATIVE, lmbda=interval("[0, 1]"), n_target_samples=AT_LEAST_ONE,
                     n_action_samples=AT_LEAST_ONE, gamma=interval("[0, 1)"), tau=interval("(0, 1]"),
                     actor_lr=POSITIVE, critic_lr=POSITIVE, vae_lr=POSITIVE)


# ----------------------------------------------------------------------------------------------------------------
# The losses, as pure functions of tensors
# ----------------------------------------------------------------------------------------------------------------

def kl_to_standard_normal(mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``KL(N(mean, std^2) || N(0, 1))`` per latent coordinate, averaged over all elements:
    ``mean of -1/2 (1 + log std^2 - mean^2 - std^2)``."""
    return batch_mean(-0.5 * (1 + torch.log(std.pow(2)) - mean.pow(2) - std.pow(2)), dims=2)


def vae_loss(recon: torch.Tensor, actions: torch.Tensor, mean: torch.Tensor, std: torch.Tensor,
             kl_weight: float = 0.5) -> torch.Tensor:
    """``L_vae = mean (recon - a)^2 + kl_weight * KL``, both terms averaged over elements (as the reference)."""
    return reconstruction_loss(recon, actions) + kl_weight * kl_to_standard_normal(mean, std)


def reconstruction_loss(recon: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """``mean (recon - a)^2`` over the batch and the action's coordinates (``F.mse_loss``, as the reference)."""
    return batch_mean((recon - actions) ** 2, dims=2)


def soft_clipped_double_q(q1: torch.Tensor, q2: torch.Tensor, lmbda: float = 0.75) -> torch.Tensor:
    """``lambda * min(q1, q2) + (1 - lambda) * max(q1, q2)``, elementwise: lambda = 1 is clipped double Q
    (TD3), lambda = 0.5 the mean of the two, lambda = 0 the optimistic max."""
    return lmbda * torch.min(q1, q2) + (1 - lmbda) * torch.max(q1, q2)


def critic_target(rewards: torch.Tensor, dones: torch.Tensor, next_q1: torch.Tensor, next_q2: torch.Tensor,
                  gamma: float = 0.99, lmbda: float = 0.75) -> torch.Tensor:
    """The BCQ target ``y = r + gamma (1 - done) max_j soft_clipped_double_q(Q'_1, Q'_2)(s', a_j)``.

    ``next_q1``/``next_q2`` have shape ``(B, n)``: the target critics at the ``n`` perturbed VAE actions of each next
    state; ``rewards``/``dones`` have shape ``(B,)``. Returns ``(B,)`` (with a leading seed axis, ``(K, B)``).
    """
    if next_q1.dim() < 2 or next_q1.shape != next_q2.shape or next_q1.shape[:-1] != rewards.shape:
        raise ValueError(f"next_q1 and next_q2 must both have shape (B, n) with B = len(rewards) = "
                         f"{rewards.shape[-1]}, got {tuple(next_q1.shape)} and {tuple(next_q2.shape)}")
    v_next = soft_clipped_double_q(next_q1, next_q2, lmbda).max(dim=-1).values
    return rewards + gamma * (1.0 - dones) * v_next


def perturbation_loss(q1_perturbed: torch.Tensor) -> torch.Tensor:
    """``L_actor = -mean Q_theta1(s, a + xi_phi(s, a))`` over the batch (deterministic policy gradient)."""
    return -batch_mean(q1_perturbed)


# ----------------------------------------------------------------------------------------------------------------
# The perturbation model and the agent
# ----------------------------------------------------------------------------------------------------------------

class Perturbation(_ActionScaler):
    """``xi_phi(s, a) = phi * half_range * tanh(f(s, a))``; ``forward`` returns ``clip(a + xi_phi(s, a))`` in the
    action bounds. The offset is at most ``phi * half_range`` per dimension (less where the clip bites)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden=(400, 300), phi: float = 0.05,
                 action_low=None, action_high=None):
        super().__init__(act_dim, action_low, action_high)
        self.net = mlp(obs_dim + act_dim, act_dim, hidden, output_activation=nn.Tanh)
        self.phi = phi

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        xi = self.phi * self.action_scale * self.net(torch.cat([obs, action], -1))
        low, high = self.action_bias - self.action_scale, self.action_bias + self.action_scale
        return torch.max(torch.min(action + xi, high), low)


class BCQ:
    seed_axis = True  # its update runs on K seeds stacked (minirl.seeds): the losses broadcast over a leading axis
    modules = ("vae", "actor", "actor_target", "critic", "critic_target")  # its pieces by name (minirl.agent)
    optimizers, tensors, counters = ("vae_opt", "actor_opt", "critic_opt"), (), ("step",)

    def __init__(self, obs_dim: int, act_dim: int, action_low=None, action_high=None,
                 config: BCQConfig | None = None, device: str = "cpu"):
        self.cfg = cfg = config or BCQConfig()
        for name in ("phi", "tau", "kl_weight", "latent_clip"):
            if getattr(cfg, name) < 0:
                raise ValueError(f"BCQConfig.{name} must be >= 0, got {getattr(cfg, name)}")
        if not 0.0 <= cfg.lmbda <= 1.0:
            raise ValueError(f"BCQConfig.lmbda must be in [0, 1], got {cfg.lmbda}")
        if not 0.0 <= cfg.gamma < 1.0:
            raise ValueError(f"BCQConfig.gamma must be in [0, 1), got {cfg.gamma}")
        for name in ("n_target_samples", "n_action_samples"):
            if int(getattr(cfg, name)) < 1:
                raise ValueError(f"BCQConfig.{name} must be >= 1, got {getattr(cfg, name)}")
        self.device = torch.device(device)
        self.act_dim = act_dim
        self.vae = VAE(obs_dim, act_dim, cfg.latent_dim, cfg.vae_hidden, action_low, action_high,
                       cfg.latent_clip).to(self.device)
        self.actor = Perturbation(obs_dim, act_dim, cfg.actor_hidden, cfg.phi, action_low,
                                  action_high).to(self.device)
        self.critic = CriticEnsemble(obs_dim, act_dim, cfg.critic_hidden, n_critics=2).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.vae_opt = adam(self.vae.parameters(), cfg.vae_lr)
        self.actor_opt = adam(self.actor.parameters(), cfg.actor_lr)
        self.critic_opt = adam(self.critic.parameters(), cfg.critic_lr)
        self.step = 0  # updates done so far

    def candidates(self, obs: torch.Tensor, n: int, target: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` perturbed VAE actions per state, batched: returns ``(obs_rep, actions)``, both ``(B * n, .)``,
        rows ``i * n ... i * n + n - 1`` belonging to ``obs[i]``."""
        obs_rep = obs.repeat_interleave(n, dim=-2)
        actor = self.actor_target if target else self.actor
        return obs_rep, actor(obs_rep, self.vae.decode(obs_rep))

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        obs, act, rew, next_obs, done = (batch[k] for k in ("obs", "act", "rew", "next_obs", "done"))
        B = obs.shape[-2]

        # 1. the generative model G_omega: a conditional VAE of the data's actions
        recon, mean, std = self.vae(obs, act)
        recon_loss = reconstruction_loss(recon, act)
        kl = kl_to_standard_normal(mean, std)
        loss_vae = recon_loss + cfg.kl_weight * kl
        self.vae_opt.zero_grad(set_to_none=True)
        loss_vae.backward()
        self.vae_opt.step()

        # 2. the critics: soft clipped double Q on the best of n perturbed VAE actions at s'
        with torch.no_grad():
            next_rep, next_act = self.candidates(next_obs, cfg.n_target_samples, target=True)
            q_next = self.critic_target(next_rep, next_act).unflatten(-1, (B, cfg.n_target_samples))  # (2, B, n)
            y = critic_target(rew, done, *q_next.unbind(-3), cfg.gamma, cfg.lmbda)
        q = self.critic(obs, act)                                   # (2, B)
        critic_loss = ((q - y.unsqueeze(-2)) ** 2).mean(-1).sum()   # mse(Q1, y) + mse(Q2, y)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        # 3. the perturbation model: deterministic policy gradient through Q_theta1
        with torch.no_grad():
            sampled = self.vae.decode(obs)
        self.critic.requires_grad_(False)  # the gradient flows through Q_theta1 into xi_phi; the critic stays put
        actor_loss = perturbation_loss(self.critic(obs, self.actor(obs, sampled)).select(-2, 0))  # Q_theta1
        self.critic.requires_grad_(True)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()

        # 4. target networks
        soft_update(self.critic_target, self.critic, cfg.tau)
        soft_update(self.actor_target, self.actor, cfg.tau)
        self.step += 1
        return {"vae_loss": loss_vae.detach(), "recon_loss": recon_loss.detach(), "kl": kl.detach(),
                "critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(),
                "q_data": q.select(-2, 0).detach().mean(), "target": y.mean()}

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """The argmax of ``Q_theta1`` over ``n_action_samples`` perturbed VAE actions per state (the policy is the
        same whether or not ``deterministic``: its randomness is the VAE's sampling)."""
        o = obs_tensor(obs, self.device)
        single = o.dim() == 1
        o = o.reshape(1, -1) if single else o
        n = self.cfg.n_action_samples
        obs_rep, actions = self.candidates(o, n)
        q1 = self.critic(obs_rep, actions)[0].view(-1, n)
        best = actions.view(-1, n, self.act_dim)[torch.arange(o.shape[0], device=self.device), q1.argmax(dim=1)]
        best = best.cpu().numpy()
        return best[0] if single else best

    state_dict, load_state_dict = state_of, load_state  # its declared pieces, counters and config (minirl.agent)


ALGORITHMS = (Algorithm("bcq", BCQ, BCQConfig),)  # its --algo name (minirl.runs): the paper's settings
