"""TD3+BC: Fujimoto and Gu, "A Minimalist Approach to Offline Reinforcement Learning", NeurIPS 2021,
arXiv:2106.06860.

TD3 (Fujimoto et al. 2018) with one term added to the actor's loss: a squared error to the dataset's action. The
critic is TD3's, unchanged; the data keep the policy near the actions it has seen:

    target action   a' = clip( pi_phi'(s') + clip(eps, -c, c), low, high ),   eps ~ N(0, sigma^2)   (smoothing)
    target          y  = r + gamma (1 - d) min_i Q_theta'_i(s', a')
    critic          L_Q(theta) = sum_i E_(s,a,r,s')~D [ ( Q_theta_i(s, a) - y )^2 ]
    actor           L_pi(phi)  = -lambda E_s~D [ Q_theta_1(s, pi_phi(s)) ] + E_(s,a)~D [ (pi_phi(s) - a)^2 ]
                    lambda     = alpha / ( E_s~D |Q_theta_1(s, pi_phi(s))| )      (not differentiated)

lambda divides by the critic's own scale, so alpha (2.5) alone sets the balance between climbing Q and staying
with the data, whatever the rewards' scale. The actor and the target networks move every d-th critic step
(delayed policy updates); the targets by Polyak averaging, theta' <- tau theta + (1 - tau) theta'. The paper's
other change is to normalise the states by the dataset's mean and std.

Settings (MuJoCo, the paper's appendix and sfujim/TD3_BC): 256-256 ReLU networks for the actor (tanh output, times
the action bound) and two critics, Adam 3e-4 for both, batch 256, gamma 0.99, tau 0.005, sigma = 0.2 and c = 0.5
(both times the action bound), d = 2, alpha = 2.5, no reward scaling.
What this file changes:
* the squared error is the mean over the action's dimensions, as the reference code's ``F.mse_loss`` (BC's
  :func:`minirl.bc.mse_loss` sums over them; here the sum would multiply the data term by ``|A|`` against the
  Q term, which is a different alpha);
* sigma and c are in units of each dimension's half-range, ``(high - low) / 2``: the reference multiplies by one
  ``max_action``, the same for the symmetric boxes of MuJoCo;
* states are normalised with minirl's own epsilon (:meth:`minirl.data.OfflineDataset.normalize_states`; the
  reference adds 1e-3 to the std);
* ``n_critics`` replicas (2 in the paper): the targets take their minimum, the actor climbs the first.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from .agent import Algorithm, load_state, periodic, state_of
from .config import AT_LEAST_ONE, LAYERS, NON_NEGATIVE, POSITIVE, check_fields, interval
from .iql import critic_loss  # sum_i E (Q_i(s, a) - y)^2: the same regression in both papers
from .nets import CriticEnsemble, DeterministicActor, adam, batch_mean, obs_tensor, soft_update


@dataclass
class TD3BCConfig:
    hidden: tuple[int, ...] = (256, 256)  # layer sizes of the actor and the critics
    actor_lr: float = 3e-4                # Adam learning rate of pi_phi
    critic_lr: float = 3e-4               # Adam learning rate of Q_theta
    gamma: float = 0.99                   # discount gamma
    tau: float = 0.005                    # Polyak rate tau of the target actor and critics
    policy_noise: float = 0.2             # sigma: std of the target action's smoothing noise (half-range units)
    noise_clip: float = 0.5               # c: the smoothing noise is clipped to [-c, c] (half-range units)
    policy_freq: int = 2                  # d: the actor and the targets move every d critic steps
    alpha: float = 2.5                    # alpha: lambda = alpha / E|Q_1(s, pi(s))|
    n_critics: int = 2                    # critic replicas; targets use their minimum
    normalize_states: bool = True         # train on (s - mean) / std of the dataset (the paper's)
    reward_scale: Literal["return_range"] | None = None  # the paper leaves MuJoCo's rewards as they are

    def __post_init__(self):
        check_fields(self, hidden=LAYERS, actor_lr=POSITIVE, critic_lr=POSITIVE, gamma=interval("[0, 1)"),
                     tau=interval("(0, 1]"), policy_noise=NON_NEGATIVE, noise_clip=NON_NEGATIVE,
                     policy_freq=AT_LEAST_ONE, alpha=NON_NEGATIVE, n_critics=AT_LEAST_ONE)


# --------------------------------------------------------------------------------------------------------------
# The losses: pure functions of tensors
# --------------------------------------------------------------------------------------------------------------

def smoothed_action(next_pi: torch.Tensor, noise: torch.Tensor, noise_clip: torch.Tensor, low: torch.Tensor,
                    high: torch.Tensor) -> torch.Tensor:
    """``a' = clip(pi'(s') + clip(eps, -c, c), low, high)``: target policy smoothing. ``noise`` is eps (already
    scaled by sigma), ``noise_clip`` is c; both in the action's own units."""
    return (next_pi + torch.maximum(torch.minimum(noise, noise_clip), -noise_clip)).clamp(low, high)


def critic_target(rew: torch.Tensor, done: torch.Tensor, q_next: torch.Tensor, gamma: float) -> torch.Tensor:
    """``y = r + gamma (1 - d) min_i Q'_i(s', a')`` for ``q_next`` of shape ``(n, B)``: clipped double Q."""
    return rew + gamma * (1.0 - done) * q_next.min(dim=-2).values


def actor_loss(q_pi: torch.Tensor, pi: torch.Tensor, act: torch.Tensor, alpha: float) -> torch.Tensor:
    """``-lambda E Q_1(s, pi(s)) + E (pi(s) - a)^2`` with ``lambda = alpha / E |Q_1(s, pi(s))|`` (a constant).

    ``q_pi`` is ``(B,)`` (or ``(K, B)`` for a stack of seeds: one lambda per seed); the squared error is the mean
    over the action's dimensions, as in the reference code."""
    lam = alpha / q_pi.detach().abs().mean(-1, keepdim=True)
    return batch_mean(-lam * q_pi) + batch_mean((pi - act).pow(2).mean(-1))


# --------------------------------------------------------------------------------------------------------------
# The agent
# --------------------------------------------------------------------------------------------------------------

class TD3BC:
    seed_axis = True  # its update runs on K seeds stacked (minirl.seeds): the losses broadcast over a leading axis
    modules = ("actor", "actor_target", "critic", "critic_target")  # its pieces by name (minirl.agent)
    optimizers, tensors, counters = ("actor_opt", "critic_opt"), (), ("step",)
    capture_problem = periodic("policy_freq")  # a CUDA graph replays no "every d-th step" (minirl.devices)

    def __init__(self, obs_dim: int, act_dim: int, action_low=None, action_high=None,
                 config: TD3BCConfig | None = None, device: str = "cpu"):
        self.cfg = cfg = config or TD3BCConfig()
        self.device = torch.device(device)
        self.actor = DeterministicActor(obs_dim, act_dim, cfg.hidden, action_low, action_high).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic = CriticEnsemble(obs_dim, act_dim, cfg.hidden, cfg.n_critics).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = adam(self.actor.parameters(), cfg.actor_lr)
        self.critic_opt = adam(self.critic.parameters(), cfg.critic_lr)
        self.step = 0  # critic updates so far (the actor moves when it is a multiple of policy_freq)

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        cfg, actor = self.cfg, self.actor
        obs, act = batch["obs"], batch["act"]
        self.step += 1
        # 1. the critics towards r + gamma (1 - d) min_i Q'_i(s', a'), a' the target actor's smoothed action
        with torch.no_grad():
            half_range, mid = actor.action_scale, actor.action_bias   # (high - low) / 2 and (high + low) / 2
            noise = torch.randn_like(act) * (cfg.policy_noise * half_range)
            next_act = smoothed_action(self.actor_target(batch["next_obs"]), noise, cfg.noise_clip * half_range,
                                       mid - half_range, mid + half_range)
            y = critic_target(batch["rew"], batch["done"], self.critic_target(batch["next_obs"], next_act),
                              cfg.gamma)
        q = self.critic(obs, act)
        loss_q = critic_loss(q, y)
        self.critic_opt.zero_grad(set_to_none=True)
        loss_q.backward()
        self.critic_opt.step()
        logs = {"critic_loss": loss_q.detach(), "q": q.detach().mean()}

        # 2. every d-th step: the actor climbs Q_1, held to the data; then the targets follow
        if self.step % cfg.policy_freq == 0:
            pi = actor(obs)
            q_pi = self.critic(obs, pi).select(-2, 0)                # Q_1(s, pi(s)), (B,) or (K, B)
            loss_pi = actor_loss(q_pi, pi, act, cfg.alpha)
            self.actor_opt.zero_grad(set_to_none=True)
            loss_pi.backward()
            self.actor_opt.step()
            soft_update(self.critic_target, self.critic, cfg.tau)
            soft_update(self.actor_target, self.actor, cfg.tau)
            logs |= {"actor_loss": loss_pi.detach(), "q_pi": q_pi.detach().mean()}
        return logs

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        return self.actor(obs_tensor(obs, self.device)).cpu().numpy()

    state_dict, load_state_dict = state_of, load_state  # its declared pieces, counters and config (minirl.agent)


ALGORITHMS = (Algorithm("td3+bc", TD3BC, TD3BCConfig),)  # its --algo name (minirl.runs): the paper's settings
