"""Soft actor-critic (SAC), online: Haarnoja, Zhou, Hartikainen, Tucker, Ha, Tan, Kumar, Zhu, Gupta, Abbeel and
Levine, "Soft Actor-Critic Algorithms and Applications", arXiv:1812.05905 (2018), with automatic entropy tuning.

The agent that trains minirl's behaviour policies (:func:`minirl.behavior.train_sac`, as D4RL trained its own) and
the online replay buffer it learns from; the offline algorithms sample from :class:`minirl.data.OfflineDataset`.
On tuples (s, a, r, s', d) from the buffer, with d the true terminal:

    critic    L_Q(theta) = sum_i E [ (Q_theta_i(s, a) - y)^2 ],
              y = r + gamma (1 - d) [ min_j Q_target_j(s', a') - alpha log pi(a'|s') ],   a' ~ pi(.|s')
    actor     L_pi(phi)  = E [ alpha log pi_phi(a|s) - min_j Q_theta_j(s, a) ],   a ~ pi_phi(.|s) (reparameterised)
    alpha     L(alpha)   = E [ -log alpha (log pi(a|s) + target_entropy) ],   target_entropy = -|A|
    targets   theta_target <- tau theta + (1 - tau) theta_target

Settings follow the paper's MuJoCo table: 256-256 networks, Adam 3e-4 for all three, gamma 0.99, tau 0.005, batch
256, two critics, a buffer of 1M transitions, one gradient update per environment step. What this file changes:
the temperature is learned as ``log alpha`` (from ``init_alpha`` = 1), the first ``start_steps`` actions are uniform
and updates start after ``update_after`` transitions (the reference implementations' warm-up), and the buffer
records time-limit cuts apart from true terminals, so that a dataset made from it has D4RL's ``timeouts``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from .agent import load_state, state_of
from .nets import CriticEnsemble, TanhGaussianActor, soft_update


@dataclass
class SACConfig:
    hidden: tuple = (256, 256)     # actor and critic layer sizes
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4
    gamma: float = 0.99           # discount
    tau: float = 0.005            # Polyak rate of the target critics
    batch_size: int = 256
    n_critics: int = 2
    init_alpha: float = 1.0
    start_steps: int = 5000       # uniform random actions before the policy acts
    update_after: int = 1000      # gradient updates start once the buffer holds this many transitions
    buffer_size: int = 1_000_000


class SAC:
    """Soft actor-critic; ``update(batch)`` takes a dict of tensors ``obs, act, rew, next_obs, done``."""
    modules, optimizers = ("actor", "critic", "critic_target"), ("actor_opt", "critic_opt", "alpha_opt")
    tensors, counters = ("log_alpha",), ("step",)  # its pieces by name (minirl.agent)

    def __init__(self, obs_dim: int, act_dim: int, action_low, action_high, config: SACConfig | None = None,
                 device: str = "cpu"):
        self.cfg = cfg = config or SACConfig()
        self.device = torch.device(device)
        self.actor = TanhGaussianActor(obs_dim, act_dim, cfg.hidden, action_low, action_high).to(self.device)
        self.critic = CriticEnsemble(obs_dim, act_dim, cfg.hidden, cfg.n_critics).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(np.log(cfg.init_alpha), dtype=torch.float32, device=self.device,
                                      requires_grad=True)
        self.target_entropy = -float(act_dim)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.alpha_lr)
        self.step = 0  # updates done so far

    def update(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            next_a, next_logp = self.actor.sample(b["next_obs"])
            next_q = self.critic_target(b["next_obs"], next_a).min(0).values - alpha * next_logp
            target = b["rew"] + self.cfg.gamma * (1.0 - b["done"]) * next_q
        critic_loss = ((self.critic(b["obs"], b["act"]) - target) ** 2).mean(1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        a, logp = self.actor.sample(b["obs"])
        self.critic.requires_grad_(False)  # the actor's gradient flows through Q, the critic's weights stay put
        actor_loss = (alpha * logp - self.critic(b["obs"], a).min(0).values).mean()
        self.critic.requires_grad_(True)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()

        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()
        soft_update(self.critic_target, self.critic, self.cfg.tau)
        self.step += 1
        return {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "alpha": alpha}

    state_dict, load_state_dict = state_of, load_state  # its declared pieces, counters and config (minirl.agent)


class ReplayBuffer:
    """The online replay buffer SAC needs (offline algorithms sample from :class:`minirl.data.OfflineDataset`).

    ``done`` is the true terminal (the target's ``1 - d``); ``timeout`` marks an episode cut by the time limit, which
    SAC must bootstrap through but a dataset made from the buffer must record (D4RL's ``timeouts``).
    """

    KEYS = ("obs", "act", "rew", "next_obs", "done", "timeout")

    def __init__(self, obs_dim: int, act_dim: int, size: int):
        self.obs = np.zeros((size, obs_dim), np.float32)
        self.next_obs = np.zeros((size, obs_dim), np.float32)
        self.act = np.zeros((size, act_dim), np.float32)
        self.rew = np.zeros(size, np.float32)
        self.done = np.zeros(size, np.float32)
        self.timeout = np.zeros(size, bool)
        self.n, self.size = 0, size

    def add(self, o, a, r, o2, d, timeout=False):
        i = self.n % self.size
        self.obs[i], self.act[i], self.rew[i], self.next_obs[i], self.done[i] = o, a, r, o2, d
        self.timeout[i] = timeout
        self.n += 1

    def sample(self, rng: np.random.Generator, batch_size: int, device) -> dict[str, torch.Tensor]:
        idx = rng.integers(0, min(self.n, self.size), batch_size)
        return {k: torch.as_tensor(getattr(self, k)[idx], device=device)
                for k in ("obs", "act", "rew", "next_obs", "done")}

    def since(self, first: int) -> dict[str, np.ndarray]:
        """The transitions added from the ``first``-th on, in the order they were added (still held by the ring)."""
        if first < self.n - self.size:
            raise ValueError(f"transitions before {self.n - self.size} were overwritten (buffer size {self.size})")
        idx = np.arange(first, self.n) % self.size
        return {k: getattr(self, k)[idx] for k in self.KEYS}

    def state(self) -> dict:
        m = min(self.n, self.size)
        return {"n": self.n} | {k: getattr(self, k)[:m] for k in self.KEYS}

    def load(self, s: dict) -> None:
        self.n = int(s["n"])
        m = min(self.n, self.size)
        for k in self.KEYS:
            getattr(self, k)[:m] = s[k]
