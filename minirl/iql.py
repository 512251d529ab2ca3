"""Implicit Q-learning (IQL): Kostrikov, Nair and Levine, "Offline Reinforcement Learning with Implicit Q-Learning",
ICLR 2022, arXiv:2110.06169.

IQL never evaluates the critic at an action that is not in the dataset. Three regressions, all on dataset tuples
(s, a, r, s', d) with d the terminal flag:

    expectile loss   L2_tau(u) = |tau - 1(u < 0)| * u^2          (tau = 0.5: half the squared error)
    value            L_V(psi)   = E_(s,a)~D [ L2_tau( min_i Qtarget_i(s, a) - V_psi(s) ) ]
    critic           L_Q(theta) = sum_i E_(s,a,r,s')~D [ ( r + gamma (1 - d) V_psi(s') - Q_theta_i(s, a) )^2 ]
    actor (AWR)      L_pi(phi)  = -E_(s,a)~D [ min(exp(beta (Qtarget(s, a) - V_psi(s))), max_exp_adv) log pi_phi(a|s) ]

or, with ``extraction="ddpg_bc"`` (not the paper's: OGBench's goal-conditioned IQL, Park et al. 2024, after TD3+BC,
Fujimoto and Gu 2021), the policy climbs the critic and is held near the data by a behaviour-cloning term:

    actor (DDPG+BC)  L_pi(phi)  = -E_s~D [ Qtarget(s, pi_phi(s)) ] / E_s~D |Qtarget(s, pi_phi(s))|
                                  + alpha E_(s,a)~D ||pi_phi(s) - a||^2          (the normaliser not differentiated)

V is an upper expectile of Q over the dataset's actions: tau = 0.5 gives the behaviour policy's value (SARSA),
tau -> 1 the best action in the data's support (a batch-constrained max, see tabular.expectile_value_iteration).
The actor is then extracted by advantage-weighted regression: beta -> 0 is behaviour cloning, a large beta copies
only the best dataset actions; the clamp keeps one outlier advantage from dominating a batch. AWR's weights depend
on the *spread* of the advantages at a state, DDPG+BC's step on the *direction* of Q's gradient in the action: where
the advantages differ little (far from the goal of a -1-per-step task, where every value is discounted) AWR's
weights differ little and its target is close to the data's mean action, while DDPG+BC's normalised step does not
shrink there.
Neither V nor Q ever sees the policy, so the extraction can also run after the value functions are trained
(:meth:`IQL.extract`; the paper's Algorithm 1 writes the extraction as a loop after the value learning).

Settings (MuJoCo, the paper's appendix and ikostrikov/implicit_q_learning): 256-256 ReLU networks, Adam 3e-4 for
all three, batch 256, gamma 0.99, Polyak tau 0.005 on the target critics, expectile 0.7, beta 3.0, exp-advantage
clamped at 100, cosine decay of the actor's learning rate to 0 over the run, rewards scaled by
1000 / (max episode return - min episode return), a Gaussian actor with tanh on the mean and a state-independent
log-std in [-5, 2] (nets.GaussianActor), no dropout. The update order follows the official code: V first (from the
target critics), then the actor and the critics, both with the freshly updated V, then the target critics.
What this file adds or changes:
* states are normalised by the dataset's mean and std (as in CORL's algorithms/offline/iql.py; the official code
  does not normalise MuJoCo states) -- set ``normalize_states=False`` for the official behaviour;
* ``n_critics`` replicas (2 in the paper, min over all of them) and a ``target_update_period`` (1 in the paper);
* ``actor="deterministic"``: AWR-weighted squared error ``w * ||pi(s) - a||^2`` (CORL's ``iql_deterministic``);
* ``layer_norm=True``: LayerNorm in V and the critics, as OGBench's IQL (Park et al. 2024) has on its mazes;
* ``extraction="ddpg_bc"`` (with the deterministic actor): the DDPG+BC loss above. OGBench's agent has a Gaussian
  actor with a fixed unit std whose ``-log pi(a|s) = ||mean(s) - a||^2 / 2 + const``, so its alpha is twice this
  file's: its pointmaze setting, 0.003, is ``alpha=0.0015`` here. Its mean has no tanh: the critic is evaluated at
  the mean clipped to the action box and the behaviour-cloning term at the unclipped mean, so that term's gradient
  never vanishes. ``actor_squash="clip"`` does the same here; the default, ``"tanh"``, bounds the action with a
  tanh, through which neither term passes a gradient where the actor saturates.
The paper's settings for AntMaze differ from the MuJoCo ones above: expectile 0.9, beta 10, and rewards shifted to
-1 per step and 0 at the goal with no return-range scaling (OGBench's single-task mazes already pay those rewards);
``minirl.runs`` applies them to every maze run (:data:`ALGORITHMS`' maze settings, ``runs.DOMAIN_CONFIG``).
The reward scale 1000 / (max - min episode return) is computed over all the episodes of
``OfflineDataset.episode_bounds``, an unfinished last trajectory included: that is what the official code does
(CORL drops the unfinished trajectory), as ``OfflineDataset.return_range_scaler`` says.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from .agent import Algorithm, load_state, periodic, state_of
from .config import AT_LEAST_ONE, LAYERS, NON_NEGATIVE, POSITIVE, UserError, check_fields, interval
from .nets import (CriticEnsemble, DeterministicActor, GaussianActor, adam, batch_mean, mlp, obs_tensor, scheduled_lr,
                   set_lr, soft_update)


@dataclass
class IQLConfig:
    hidden: tuple[int, ...] = (256, 256)  # layer sizes of the actor, the critics and V
    actor_lr: float = 3e-4              # Adam learning rate of pi_phi (decayed by a cosine, see cosine_actor_lr)
    critic_lr: float = 3e-4             # Adam learning rate of Q_theta
    value_lr: float = 3e-4              # Adam learning rate of V_psi
    gamma: float = 0.99                 # discount gamma
    tau: float = 0.005                  # Polyak rate of the target critics: theta' <- tau theta + (1 - tau) theta'
    target_update_period: int = 1       # update the target critics every this many steps
    expectile: float = 0.7              # expectile tau of the value loss (0.5: SARSA; -> 1: in-support max)
    beta: float = 3.0                   # inverse temperature beta of the advantage weights
    max_exp_adv: float = 100.0          # clamp on exp(beta * advantage)
    n_critics: int = 2                  # critic replicas Q_1..Q_n; targets use their minimum
    actor: Literal["gaussian", "deterministic"] = "gaussian"  # log-likelihood (the paper), or squared error
    cosine_actor_lr: bool = True        # actor lr = actor_lr * (1 + cos(pi t / max_steps)) / 2
    max_steps: int = 1_000_000          # length of the cosine schedule (runs.run sets it to the run's steps)
    normalize_states: bool = True       # train on (s - mean) / std of the dataset
    reward_scale: Literal["return_range"] | None = "return_range"  # r * 1000 / (max R - min R); None: raw rewards
    layer_norm: bool = False            # LayerNorm after each hidden layer of V and the critics (OGBench; not the paper)
    extraction: Literal["awr", "ddpg_bc"] = "awr"  # the actor's loss: AWR (the paper) or DDPG+BC (OGBench's GCIQL)
    alpha: float = 0.0015               # weight of the squared error to the data's action in DDPG+BC
    actor_squash: Literal["tanh", "clip"] = "tanh"  # the deterministic actor's bound: tanh, or OGBench's clip

    def __post_init__(self):
        check_fields(self, hidden=LAYERS, actor_lr=POSITIVE, critic_lr=POSITIVE, value_lr=POSITIVE,
                     gamma=interval("[0, 1)"), tau=interval("(0, 1]"), target_update_period=AT_LEAST_ONE,
                     expectile=interval("(0, 1)"), beta=NON_NEGATIVE, max_exp_adv=POSITIVE, n_critics=AT_LEAST_ONE,
                     max_steps=AT_LEAST_ONE, alpha=NON_NEGATIVE)
        if self.actor_squash == "clip" and self.actor != "deterministic":
            raise UserError(f"IQLConfig.actor must be 'deterministic' with actor_squash='clip' (a Gaussian actor has "
                            f"its own bound), got {self.actor!r}")
        if self.extraction == "ddpg_bc" and self.actor != "deterministic":
            raise UserError(f"IQLConfig.actor must be 'deterministic' with extraction='ddpg_bc' (the critic is "
                            f"climbed at the policy's action), got {self.actor!r}")


# --------------------------------------------------------------------------------------------------------------
# The losses: pure functions of tensors (the notebook applies them to tabular Q tables too)
# --------------------------------------------------------------------------------------------------------------

def expectile_loss(diff: torch.Tensor, tau: float) -> torch.Tensor:
    """``L2_tau(u) = |tau - 1(u < 0)| * u^2`` elementwise (no mean).

    Positive errors (the target above the prediction) weigh ``tau``, negative ones ``1 - tau``: minimising
    ``E L2_tau(x - v)`` over ``v`` gives the tau-expectile of ``x`` (``tau = 0.5``: the mean).
    """
    weight = torch.where(diff < 0, 1.0 - tau, tau)
    return weight * diff ** 2


def value_target(q_target: torch.Tensor) -> torch.Tensor:
    """The regression target of V: the minimum over replicas of the *target* critics, ``(n, B) -> (B,)``."""
    return q_target.min(dim=-2).values


def value_loss(v: torch.Tensor, q: torch.Tensor, tau: float) -> torch.Tensor:
    """``E L2_tau(q - v)``: V regresses to the tau-expectile of Q(s, a) over the dataset's actions at s."""
    return batch_mean(expectile_loss(q - v, tau))


def q_target(rew: torch.Tensor, done: torch.Tensor, next_v: torch.Tensor, gamma: float) -> torch.Tensor:
    """``y = r + gamma (1 - d) V(s')``: no action at s' is needed, so no action outside the data is queried."""
    return rew + gamma * (1.0 - done) * next_v


def critic_loss(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``sum_i E (Q_i(s, a) - y)^2`` for ``q`` of shape ``(n, B)`` and ``target`` of shape ``(B,)``.

    Summed over replicas (as in the official code) so each replica's gradient does not depend on ``n``.
    """
    return ((q - target.detach().unsqueeze(-2)) ** 2).mean(-1).sum()


def awr_weights(adv: torch.Tensor, beta: float, max_weight: float = 100.0) -> torch.Tensor:
    """``min(exp(beta * adv), max_weight)``, detached: the weights are constants for the actor's gradient."""
    return torch.exp(beta * adv.detach()).clamp(max=max_weight)


def awr_actor_loss(weights: torch.Tensor, nll: torch.Tensor) -> torch.Tensor:
    """``E [ w * nll ]`` with ``nll = -log pi(a|s)`` (Gaussian actor) or ``||pi(s) - a||^2`` (deterministic).

    With all weights equal this is behaviour cloning; the advantage weights tilt it towards better actions.
    """
    return batch_mean(weights * nll)


def ddpg_bc_actor_loss(q_pi: torch.Tensor, nll: torch.Tensor, alpha: float) -> torch.Tensor:
    """``-E Q(s, pi(s)) / E |Q(s, pi(s))| + alpha E nll``, with ``nll = ||pi(s) - a||^2``.

    ``q_pi`` is the critic at the policy's own action (the gradient flows through the action into the actor). The
    normaliser ``E |Q|`` is a constant (detached, one per seed): it makes the step independent of the reward's scale,
    so that ``alpha`` alone sets how close to the data the policy stays.
    """
    scale = q_pi.detach().abs().mean(-1, keepdim=True) + 1e-6
    return batch_mean(-q_pi / scale) + alpha * batch_mean(nll)


def cosine_lr(step, max_steps: int, lr: float):
    """``lr * (1 + cos(pi * min(step, max_steps) / max_steps)) / 2``: ``lr`` at step 0, 0 at ``max_steps``.

    ``step`` is an int (a float comes back) or a tensor (a tensor comes back, computed where it lives: the agent keeps
    its step count on its device, so that an update replayed as a CUDA graph follows the schedule)."""
    if isinstance(step, torch.Tensor):
        return lr * 0.5 * (1.0 + torch.cos(math.pi * step.clamp(max=max_steps) / max_steps))
    return lr * 0.5 * (1.0 + math.cos(math.pi * min(step, max_steps) / max_steps))


# --------------------------------------------------------------------------------------------------------------
# The agent
# --------------------------------------------------------------------------------------------------------------

class IQL:
    seed_axis = True  # its update runs on K seeds stacked (minirl.seeds): the losses broadcast over a leading axis
    modules = ("actor", "critic", "critic_target", "value")  # its pieces by name (minirl.agent)
    optimizers, tensors, counters = ("actor_opt", "critic_opt", "value_opt"), ("t",), ("step",)
    capture_problem = periodic("target_update_period")  # a CUDA graph replays no "every d-th step" (minirl.devices)

    def __init__(self, obs_dim: int, act_dim: int, action_low=None, action_high=None,
                 config: IQLConfig | None = None, device: str = "cpu"):
        self.cfg = cfg = config or IQLConfig()
        self.device = torch.device(device)
        if cfg.actor == "gaussian":
            self.actor = GaussianActor(obs_dim, act_dim, cfg.hidden, action_low, action_high).to(self.device)
        else:
            self.actor = DeterministicActor(obs_dim, act_dim, cfg.hidden, action_low, action_high,
                                            squash=cfg.actor_squash).to(self.device)
        self.critic = CriticEnsemble(obs_dim, act_dim, cfg.hidden, cfg.n_critics, cfg.layer_norm).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.value = mlp(obs_dim, 1, cfg.hidden, layer_norm=cfg.layer_norm).to(self.device)
        self.actor_opt = adam(self.actor.parameters(), cfg.actor_lr)
        self.critic_opt = adam(self.critic.parameters(), cfg.critic_lr)
        self.value_opt = adam(self.value.parameters(), cfg.value_lr)
        scheduled_lr(self.actor_opt)  # the cosine schedule sets it every step (a tensor where Adam takes one)
        self.step = 0  # updates done so far (drives the target update period)
        self.t = torch.zeros((), device=self.device)  # the same count on the device (drives the cosine schedule)

    def V(self, obs: torch.Tensor) -> torch.Tensor:
        return self.value(obs).squeeze(-1)

    def actor_lr(self):
        """The actor's learning rate for the next update (a 0-d tensor with the cosine schedule, else a number)."""
        cfg = self.cfg
        return cosine_lr(self.t, cfg.max_steps, cfg.actor_lr) if cfg.cosine_actor_lr else cfg.actor_lr

    def actor_nll(self, obs: torch.Tensor, act: torch.Tensor, pi: torch.Tensor | None = None) -> torch.Tensor:
        """Per-sample ``-log pi(a|s)`` (Gaussian) or ``||pi(s) - a||^2`` (deterministic, before any clip), shape
        ``(B,)``; ``pi``: the deterministic actor's unclipped ``pi(s)`` where the caller has it already."""
        if self.cfg.actor == "gaussian":
            return -self.actor.log_prob(obs, act)
        return ((self.actor.unclipped(obs) if pi is None else pi) - act).pow(2).sum(-1)

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        obs, act = batch["obs"], batch["act"]
        with torch.no_grad():
            q_min = value_target(self.critic_target(obs, act))       # min_i Qtarget_i(s, a), (B,)

        # 1. V towards the expectile of the target critics at the dataset's actions
        loss_v = value_loss(self.V(obs), q_min, cfg.expectile)
        self.value_opt.zero_grad(set_to_none=True)
        loss_v.backward()
        self.value_opt.step()

        with torch.no_grad():
            v = self.V(obs)                                           # the updated V, as in the official code
            y = q_target(batch["rew"], batch["done"], self.V(batch["next_obs"]), cfg.gamma)
        adv = q_min - v

        # 2. the actor: advantage-weighted regression onto the dataset's actions (or DDPG+BC)
        actor_logs = self.update_actor(obs, act, adv)

        # 3. the critics towards r + gamma (1 - d) V(s')
        q = self.critic(obs, act)
        loss_q = critic_loss(q, y)
        self.critic_opt.zero_grad(set_to_none=True)
        loss_q.backward()
        self.critic_opt.step()

        # 4. the target critics
        self.step += 1
        self.t += 1
        if self.step % cfg.target_update_period == 0:
            soft_update(self.critic_target, self.critic, cfg.tau)

        return {"value_loss": loss_v.detach(), "critic_loss": loss_q.detach(), "v": v.mean(), "q": q.detach().mean(),
                "adv": adv.mean(), **actor_logs}

    def update_actor(self, obs: torch.Tensor, act: torch.Tensor, adv: torch.Tensor) -> dict[str, torch.Tensor]:
        """One step of the actor's loss, given the advantages ``Qtarget(s, a) - V(s)`` of the batch's actions."""
        cfg = self.cfg
        if cfg.extraction == "awr":
            weights = awr_weights(adv, cfg.beta, cfg.max_exp_adv)
            loss_pi = awr_actor_loss(weights, self.actor_nll(obs, act))
            logs = {"weight": weights.mean(), "weight_clamped": (weights >= cfg.max_exp_adv).float().mean()}
        else:  # DDPG+BC: the target critics at the policy's action (they take no gradient step from it)
            raw = self.actor.unclipped(obs)                           # = pi(s) unless actor_squash="clip"
            q_pi = value_target(self.critic_target(obs, self.actor.clip(raw)))
            loss_pi = ddpg_bc_actor_loss(q_pi, self.actor_nll(obs, act, raw), cfg.alpha)
            logs = {"q_pi": q_pi.detach().mean()}
        lr = self.actor_lr()
        set_lr(self.actor_opt, lr)
        self.actor_opt.zero_grad(set_to_none=True)
        loss_pi.backward()
        self.actor_opt.step()
        return {"actor_loss": loss_pi.detach(), "actor_lr": lr, **logs}

    def extract(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One actor step against the current V and target critics, which stay as they are: the policy extraction
        alone, for value functions trained already (V and Q never see the policy, so this is the actor's part of
        :meth:`update` run after them; ``experiments/maze_extraction.py``). Advances the cosine schedule."""
        obs, act = batch["obs"], batch["act"]
        with torch.no_grad():
            adv = value_target(self.critic_target(obs, act)) - self.V(obs)
        logs = self.update_actor(obs, act, adv)
        self.t += 1
        return logs

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        # both actor kinds take (obs, deterministic)
        return self.actor(obs_tensor(obs, self.device), deterministic).cpu().numpy()

    state_dict = state_of  # the config, step, t (the updates plus any extract() steps) and every declared piece

    def load_state_dict(self, state: dict) -> None:
        older = torch.tensor(float(state.get("schedule_t", state["step"])))  # a file older than t: schedule_t or step
        load_state(self, {"t": older, **state})
        scheduled_lr(self.actor_opt)  # a saved learning rate comes back as a number


# Its --algo name (minirl.runs). The paper tunes its goal-reaching mazes (AntMaze, -1 per step until the goal) apart
# from MuJoCo: expectile 0.9, beta 10 and the rewards as they are, not rescaled by the return range (Kostrikov et al.
# 2022, appendix B; OGBench's single-task mazes pay -1 per step and 0 at the goal already). The cosine schedule spans
# the run (max_steps). Written into every run's config.json like any other setting.
ALGORITHMS = (Algorithm("iql", IQL, IQLConfig, domains={"maze": {"expectile": 0.9, "beta": 10.0, "reward_scale": None}},
                        steps_field="max_steps"),)
