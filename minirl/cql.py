"""Conservative Q-learning: CQL(H) on soft actor-critic and its Lagrange variant.

Kumar, Zhou, Tucker and Levine (2020), "Conservative Q-Learning for Offline Reinforcement Learning",
arXiv:2006.04779. The critic minimises the usual TD error plus a penalty that pushes Q down on actions the data
does not support and up on the actions it contains:

    min_Q  alpha * E_s~D [ log sum_a exp Q(s, a)  -  E_a~D(.|s) Q(s, a) ]  +  1/2 E_D [ (Q(s, a) - B Q_target(s, a))^2 ]

The ``log sum exp`` is the solution of the inner maximisation ``max_mu E_mu[Q] + H(mu)`` of CQL(H): the worst-case
action distribution is ``mu = softmax(Q)``. With continuous actions the integral ``log int exp Q(s, a) da`` is
estimated by importance sampling from three proposals, ``N`` actions each (:func:`cql_penalty`):

    uniform actions on [-1, 1]^|A|        weight 1 / 0.5^|A|      covers the whole action box
    policy actions a ~ pi(.|s)            weight 1 / pi(a|s)      where the actor will look for high Q
    policy actions a ~ pi(.|s'), at s     weight 1 / pi(a|s')     more samples from a nearby, slightly different policy

With a temperature T the term is ``T * log int exp(Q / T) da``. The actor is SAC's (``alpha_ent log pi - min_i Q_i``,
automatic entropy tuning to the target entropy ``-|A|``), optionally cloning the data for the first ``bc_steps``.

Lagrange variant (the paper's eq. 30 and Appendix F): ``alpha`` becomes ``cql_alpha * alpha'`` with a learned
``alpha' = clamp(exp(log alpha'), 0, 1e6)`` playing the dual of the constraint ``penalty <= target_action_gap``:

    min_Q max_{alpha' >= 0}  cql_alpha * alpha' * (penalty(Q) - target_action_gap) + TD error

``alpha'`` rises while the penalty (the gap between the soft maximum of Q and Q on the data) is above the target and
falls below it. Its step uses the *detached* penalty, so it never backpropagates through the critic's graph.

With finitely many actions the sum is exact (:func:`discrete_cql_penalty`, the function the tabular chapter applies
to a Q table); the agent that uses it, discrete CQL on double DQN, is :class:`minirl.discrete.DiscreteCQL`.

Which setting follows which reference
-------------------------------------
* Networks 3x256 for actor and critics, two critics, policy lr 1e-4, critic lr 3e-4, tau 5e-3, gamma 0.99,
  alpha 5.0, N = 10, T = 1, target entropy -|A|, no entropy in the TD target (``deterministic_backup``), the
  Lagrange threshold 5.0, log alpha' starting at 0: the authors' MuJoCo script (aviralkumar2907/CQL,
  ``d4rl/examples/cql_mujoco_new.py`` with ``d4rl/rlkit/torch/sac/cql.py``). The reimplementations default
  otherwise: young-geng/CQL (``SimpleSAC/conservative_sac.py``) to 256-256 networks, policy lr 3e-4, Lagrange
  threshold 1.0 and log alpha' starting at 1.0; CORL (``algorithms/offline/cql.py``) to policy lr 3e-5 and alpha 10.
* ``cql_alpha * alpha'`` (the multiplier scales the Lagrange term), ``bc_steps``, ``reward_multiplier`` and
  ``reward_bias``: young-geng/CQL and CORL (``algorithms/offline/cql.py``).

What this file does differently
-------------------------------
* All ``1 + 3N`` actions (data, uniform, policy at s, policy at s') go through the critics in ONE batched call (both
  critics at once, :class:`minirl.nets.CriticEnsemble`); the references make six calls. The N policy actions per state
  come from one actor forward pass per state (N noise draws), not from N copies of the state.
* Importance weights live in the ``[-1, 1]`` box for every environment: policy log-densities are converted to that box
  (``+ sum log(action_scale)``), so the uniform density ``0.5^|A|`` and the policy's are in the same units.
* With a temperature ``T != 1`` the estimate is ``T * logsumexp(Q / T - log p)``; the references compute
  ``T * logsumexp((Q - log p) / T)``, which is the same at the default ``T = 1``.
* Like every reference, the estimate omits the ``- log(3N)`` of a Monte-Carlo average: it shifts the penalty's
  value (hence the meaning of ``target_action_gap``) by a constant and leaves its gradient unchanged.
* The actor's loss uses the critic AFTER this step's critic update (critic step, then actor step); CORL, young-geng
  and rlkit compute the actor loss from the pre-update critic. Not measured whether it matters.
* SAC's temperature compares the target entropy -|A| with log pi(a|s) of the action in the ENVIRONMENT's bounds
  (as the actor's entropy term); the references act in a [-1, 1] box. For bounds [-k, k],
  log pi_env = log pi_box - |A| ln k, so the effective target in box units is -|A| (1 + ln k): on Pendulum
  (k = 2) lower by |A| ln 2 ~ 0.69 than the references'; identical on MuJoCo tasks with k = 1. Pass
  ``target_entropy`` to choose another value.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch.distributions import Normal

from .agent import Algorithm, load_state, state_of
from .config import AT_LEAST_ONE, LAYERS, NON_NEGATIVE, POSITIVE, UserError, check_fields, interval
from .nets import CriticEnsemble, TanhGaussianActor, adam, batch_mean, obs_tensor, soft_update

MAX_ALPHA_PRIME = 1e6  # alpha' is clamped to [0, MAX_ALPHA_PRIME]


# --------------------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------------------

@dataclass
class CQLConfig:
    actor_hidden: tuple[int, ...] = (256, 256, 256)   # policy pi_phi layer sizes
    critic_hidden: tuple[int, ...] = (256, 256, 256)  # Q_theta layer sizes
    n_critics: int = 2                      # Q_1, Q_2 (clipped double Q: the min is used by the actor and target)
    actor_lr: float = 1e-4                  # policy learning rate
    critic_lr: float = 3e-4                 # Q learning rate
    alpha_lr: float = 1e-4                  # learning rate of log alpha_ent (entropy temperature), = policy lr
    alpha_prime_lr: float = 3e-4            # learning rate of log alpha' (Lagrange), = Q lr
    gamma: float = 0.99                     # discount gamma
    tau: float = 5e-3                       # Polyak rate of the target critics
    cql_alpha: float = 5.0                  # alpha (min_q_weight): weight of the conservative penalty
    n_actions: int = 10                     # N: sampled actions per proposal (uniform, pi(.|s), pi(.|s'))
    temperature: float = 1.0                # T in T * log int exp(Q / T)
    importance_sample: bool = True          # CQL(H) with importance weights; False: plain logsumexp of the samples
    lagrange: bool = False                  # learn alpha' so that the penalty stays near target_action_gap
    target_action_gap: float = 5.0          # tau_gap: the threshold of the Lagrange variant
    target_entropy: float | None = None     # SAC's entropy target; None: -|A|
    deterministic_backup: bool = True       # True: no -alpha_ent log pi(a'|s') in the TD target
    max_target_backup: bool = False         # target max over N policy actions at s' instead of one sample
    bc_steps: int = 0                       # first K steps train the actor by behaviour cloning (policy_eval_start)
    reward_multiplier: float = 1.0          # r <- reward_multiplier * r + reward_bias, applied in update()
    reward_bias: float = 0.0                # (the b of r <- m * r + b)
    normalize_states: bool = True           # train on (s - mean) / std of the dataset (train.prepare_dataset)
    reward_scale: Literal["return_range"] | None = None  # None or "return_range" (train.prepare_dataset)

    def __post_init__(self):
        check_fields(self, actor_hidden=LAYERS, critic_hidden=LAYERS, n_critics=AT_LEAST_ONE, actor_lr=POSITIVE,
                     critic_lr=POSITIVE, alpha_lr=POSITIVE, alpha_prime_lr=POSITIVE, gamma=interval("[0, 1)"),
                     tau=interval("(0, 1]"), cql_alpha=NON_NEGATIVE, n_actions=AT_LEAST_ONE, temperature=POSITIVE,
                     bc_steps=NON_NEGATIVE)
        if self.lagrange and self.cql_alpha == 0:
            raise UserError("CQLConfig.cql_alpha must be > 0 when lagrange=True (it multiplies alpha'), got 0")


# --------------------------------------------------------------------------------------------------------------
# The losses, as pure functions of tensors
# --------------------------------------------------------------------------------------------------------------

def cql_penalty(q_data: torch.Tensor, q_sampled: torch.Tensor, log_density: torch.Tensor | float = 0.0,
                temperature: float = 1.0) -> torch.Tensor:
    """The CQL(H) gap ``T * logsumexp_i(Q(s, a_i) / T - log p(a_i)) - Q(s, a_data)``, one value per state.

    Args:
        q_data: ``(...,)`` Q of the dataset's action at each state; the ``- Q(s, a_data)`` term pushes it UP.
        q_sampled: ``(..., K)`` Q of K sampled actions at the same states; the soft maximum pushes them DOWN,
            the highest the most (its gradient is ``softmax(Q / T - log p)``).
        log_density: ``(..., K)`` (or broadcastable) log-density of the proposal each action was drawn from: the
            importance weight ``1 / p(a_i)`` turns the sum into an estimate of ``log int exp(Q(s, a) / T) da``.
            0 (the default) for an exact sum over a finite action set.
        temperature: T > 0; T -> 0 gives the hard maximum of Q (CQL pushes down only the largest Q), a large T
            a uniform average (all sampled actions pushed down equally).

    The penalty added to the critic loss is ``alpha * cql_penalty(...).mean()``. Its value is not a loss to drive to
    zero: in a tabular problem its minimum over Q alone is ``-inf``; the TD error holds Q in place.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if q_sampled.shape[:-1] != q_data.shape:
        raise ValueError(f"q_sampled must have shape q_data.shape + (K,) = {tuple(q_data.shape)} + (K,), "
                         f"got {tuple(q_sampled.shape)}")
    soft_max = temperature * torch.logsumexp(q_sampled / temperature - log_density, dim=-1)
    return soft_max - q_data


def discrete_cql_penalty(q_all: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Discrete CQL(H): ``logsumexp_a Q(s, a) - Q(s, a_data)`` with every action enumerated, one value per state.

    ``q_all`` is ``(..., A)``, ``actions`` ``(...,)`` integer. It is :func:`cql_penalty` with the exact sum (no
    importance weights) at T = 1: the function the tabular chapter applies to a Q table.
    """
    if actions.shape != q_all.shape[:-1]:
        raise ValueError(f"actions must have shape q_all.shape[:-1] = {tuple(q_all.shape[:-1])}, "
                         f"got {tuple(actions.shape)}")
    q_data = q_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
    return cql_penalty(q_data, q_all)


def alpha_prime_value(log_alpha_prime: torch.Tensor) -> torch.Tensor:
    """``alpha' = clamp(exp(log alpha'), 0, 1e6)``: the Lagrange multiplier is non-negative and bounded."""
    return log_alpha_prime.exp().clamp(0.0, MAX_ALPHA_PRIME)


def lagrange_loss(log_alpha_prime: torch.Tensor, penalty: torch.Tensor, target_action_gap: float,
                  cql_alpha: float = 1.0) -> torch.Tensor:
    """The dual step's loss ``-cql_alpha * alpha' * (penalty - target_action_gap)``, to MINIMISE over log alpha'.

    Minimising it maximises the Lagrangian over alpha': the gradient on log alpha' is
    ``-cql_alpha * alpha' * (penalty - gap)``, so a descent step raises alpha' when the penalty exceeds the gap and
    lowers it when the penalty is below. ``penalty`` is detached here: this loss reaches log alpha' only, and its
    backward never enters the critic's graph (no "backward through the graph a second time"). A tensor of
    per-critic penalties is averaged.
    """
    gap = penalty.detach() - target_action_gap
    # alpha' per seed (a stack of seeds, minirl.seeds: one alpha' and one row of penalties per seed)
    return -batch_mean(cql_alpha * alpha_prime_value(log_alpha_prime).unsqueeze(-1) * gap)


def sample_actions(actor: TanhGaussianActor, mean: torch.Tensor, std: torch.Tensor, n: int):
    """``n`` actions per state from the actor's tanh-Gaussian with pre-tanh ``(mean, std)`` of shape ``(B, d)``.

    Returns ``(actions (B, n, d) in the environment's bounds, log pi(a|s) (B, n) in the [-1, 1] box)``. One actor
    forward pass per state gives the mean and std; the n draws only cost the noise.
    """
    shape = (*mean.shape[:-1], n, mean.shape[-1])  # (B, n, d), or (K, B, n, d) for a stack of seeds
    dist = Normal(mean.unsqueeze(-2).expand(shape), std.unsqueeze(-2).expand(shape), validate_args=False)
    # mean + std * noise: the same numbers as dist.sample(), which checks std >= 0 on the host (a sync that a CUDA
    # graph cannot hold, minirl.devices.CapturedStep); no gradient is wanted here
    u = dist.rsample().detach()
    # nets' log-density of the squashed action is in environment units; adding log|scale| gives it in the box
    log_p = actor._squash_log_prob(dist, u) + actor.action_scale.log().sum()
    return actor.to_env(torch.tanh(u)), log_p


def _repeat(x: torch.Tensor, n: int) -> torch.Tensor:
    """``(B, d) -> (B, n, d)``: each row ``n`` times (a view)."""
    return x.unsqueeze(-2).expand(*x.shape[:-1], n, x.shape[-1])


# --------------------------------------------------------------------------------------------------------------
# The agent
# --------------------------------------------------------------------------------------------------------------

class CQL:
    """CQL(H) on SAC for continuous actions; ``cql_alpha = 0`` without ``lagrange`` is plain offline SAC."""
    seed_axis = True  # its update runs on K seeds stacked (minirl.seeds): the losses broadcast over a leading axis
    modules = ("actor", "critic", "critic_target")  # its pieces by name (minirl.agent)
    optimizers = ("actor_opt", "critic_opt", "alpha_opt", "alpha_prime_opt")
    tensors, counters = ("log_alpha", "log_alpha_prime"), ("step",)

    def __init__(self, obs_dim: int, act_dim: int, action_low=None, action_high=None,
                 config: CQLConfig | None = None, device: str = "cpu"):
        self.cfg = cfg = config or CQLConfig()
        self.device = torch.device(device)
        self.act_dim = act_dim
        self.actor = TanhGaussianActor(obs_dim, act_dim, cfg.actor_hidden, action_low, action_high).to(self.device)
        self.critic = CriticEnsemble(obs_dim, act_dim, cfg.critic_hidden, cfg.n_critics).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.target_entropy = -float(act_dim) if cfg.target_entropy is None else float(cfg.target_entropy)
        self.log_alpha = torch.zeros((), device=self.device, requires_grad=True)        # entropy temperature
        self.log_alpha_prime = torch.zeros((), device=self.device, requires_grad=True)  # Lagrange multiplier
        self.actor_opt = adam(self.actor.parameters(), cfg.actor_lr)
        self.critic_opt = adam(self.critic.parameters(), cfg.critic_lr)
        self.alpha_opt = adam([self.log_alpha], cfg.alpha_lr)
        self.alpha_prime_opt = adam([self.log_alpha_prime], cfg.alpha_prime_lr)
        # the uniform proposal's log-density in the [-1, 1] box: log 0.5^|A|
        self.log_uniform_density = act_dim * math.log(0.5)
        self.step = 0
        # the progress bar's label (minirl.train.train): the variant, not just the class
        self.name = "CQL-Lagrange" if cfg.lagrange else ("offline SAC" if cfg.cql_alpha == 0 else "CQL")

    @property
    def uses_penalty(self) -> bool:
        return self.cfg.cql_alpha > 0 or self.cfg.lagrange

    def _target(self, b: dict, next_mean: torch.Tensor, next_std: torch.Tensor, alpha: torch.Tensor):
        """``r + gamma (1 - done) [min_i Q'_i(s', a') (- alpha_ent log pi(a'|s'))]`` with a' from the policy."""
        cfg = self.cfg
        n = cfg.n_actions if cfg.max_target_backup else 1
        a_next, logp_next = sample_actions(self.actor, next_mean, next_std, n)              # (B, n, d), (B, n)
        B = a_next.shape[-3]
        next_obs = _repeat(b["next_obs"], n).flatten(-3, -2)                                     # (B * n, d)
        q_next = self.critic_target(next_obs, a_next.flatten(-3, -2)).unflatten(-1, (B, n)).min(-3).values  # (B, n)
        # max-target backup: the best of N policy actions (the authors' max_q_backup); else the single sample
        q_next, idx = q_next.max(-1)
        if not cfg.deterministic_backup:  # soft backup; log pi in environment units, as the actor's entropy term
            logp_env = logp_next.gather(-1, idx.unsqueeze(-1)).squeeze(-1) - self.actor.action_scale.log().sum()
            q_next = q_next - alpha * logp_env
        rew = cfg.reward_multiplier * b["rew"] + cfg.reward_bias
        return rew + cfg.gamma * (1.0 - b["done"]) * q_next

    def sampled_q(self, obs, act, mean, std, next_mean, next_std):
        """The penalty's Q-values and proposals: ``(Q at 1 + 3N actions (n_critics, B, 1 + 3N), log p (B, 3N))``.

        The actions per state: the data's, N uniform on the box, N from pi(.|s) and N from pi(.|s') (evaluated at s),
        all in one batched call of every critic. ``log p`` is each sampled action's proposal density in the [-1, 1]
        box: uniform actions get weight 1 / 0.5^|A| (they cover the box, including actions pi never proposes), the
        policy's 1 / pi(a|.), where the actor looks for high Q. Drawn without gradient: the weights are constants
        for the critic. (experiments/cql_gap.py takes the penalty apart with the same call.)
        """
        B, N = obs.shape[-2], self.cfg.n_actions
        with torch.no_grad():
            unit = torch.rand(*obs.shape[:-1], N, self.act_dim, device=self.device) * 2 - 1       # uniform on box
            a_rand = self.actor.to_env(unit)
            a_pi, logp_pi = sample_actions(self.actor, mean, std, N)                               # pi(.|s)
            a_pi_next, logp_pi_next = sample_actions(self.actor, next_mean, next_std, N)           # pi(.|s')
            log_uniform = torch.full_like(logp_pi, self.log_uniform_density)
        actions = torch.cat([act.unsqueeze(-2), a_rand, a_pi, a_pi_next], -2)                     # (B, 1+3N, d)
        M = actions.shape[-2]
        q_all = self.critic(_repeat(obs, M).flatten(-3, -2), actions.flatten(-3, -2)).unflatten(-1, (B, M))
        return q_all, torch.cat([log_uniform, logp_pi, logp_pi_next], -1)

    def update(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        obs, act = b["obs"], b["act"]
        N = cfg.n_actions
        alpha = self.log_alpha.exp().detach().unsqueeze(-1)  # (1,), or (K, 1): one temperature per seed
        logs = {}

        # The actor's Gaussian at s (with gradient: reused by the actor loss below) and at s' (no gradient).
        mean, std = self.actor.mean_std(obs)
        with torch.no_grad():
            next_mean, next_std = self.actor.mean_std(b["next_obs"])
            target = self._target(b, next_mean, next_std, alpha)

        # ---- critic: TD error (+ the conservative penalty) ----------------------------------------------------
        if not self.uses_penalty:
            # offline SAC: nothing but the TD error (the naive actor-critic of the extrapolation-error story)
            q_data = self.critic(obs, act)                                                         # (n_critics, B)
            critic_loss = td_loss = ((q_data - target.unsqueeze(-2)) ** 2).mean(-1).sum()
        else:
            q_all, log_proposal = self.sampled_q(obs, act, mean.detach(), std.detach(), next_mean, next_std)
            q_data, q_sampled = q_all[..., 0], q_all[..., 1:]                                     # (n, B, 1+3N)
            td_loss = ((q_data - target.unsqueeze(-2)) ** 2).mean(-1).sum()
            if cfg.importance_sample:
                log_density = log_proposal.unsqueeze(-3)                                          # each critic
            else:  # the references' unweighted variant: the data action joins the samples, no weights
                q_sampled, log_density = q_all, 0.0
            gap = cql_penalty(q_data, q_sampled, log_density, cfg.temperature).mean(-1)           # (n_critics,)
            if cfg.lagrange:
                # the critic minimises cql_alpha * alpha' * (gap - target) with the current alpha' held fixed ...
                alpha_prime = alpha_prime_value(self.log_alpha_prime).detach().unsqueeze(-1)
                penalty = (cfg.cql_alpha * alpha_prime * (gap - cfg.target_action_gap)).sum()
                # ... and the dual step maximises it over alpha' with the gap detached: alpha' rises iff gap > target
                alpha_prime_loss = lagrange_loss(self.log_alpha_prime, gap, cfg.target_action_gap, cfg.cql_alpha)
                self.alpha_prime_opt.zero_grad(set_to_none=True)
                alpha_prime_loss.backward()
                self.alpha_prime_opt.step()
                logs |= {"alpha_prime": alpha_prime.mean(), "alpha_prime_loss": alpha_prime_loss.detach()}
            else:
                penalty = cfg.cql_alpha * gap.sum()
            critic_loss = td_loss + penalty
            with torch.no_grad():
                logs |= {"cql_gap": gap.mean(), "q_rand": q_all[..., 1:1 + N].mean(),
                         "q_pi_sampled": q_all[..., 1 + N:1 + 2 * N].mean()}
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        # ---- actor: SAC, or behaviour cloning during the first bc_steps -------------------------------------------
        dist = Normal(mean, std, validate_args=False)
        u = dist.rsample()
        a_new = self.actor.to_env(torch.tanh(u))
        logp = self.actor._squash_log_prob(dist, u)                                              # env units
        self.critic.requires_grad_(False)  # the gradient flows through Q into the actor; critic weights stay put
        q_new = self.critic(obs, a_new).min(-2).values
        self.critic.requires_grad_(True)
        if self.step < cfg.bc_steps:
            actor_loss = batch_mean(alpha * logp - self.actor.log_prob(obs, act))
        else:
            actor_loss = batch_mean(alpha * logp - q_new)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()

        # ---- entropy temperature -----------------------------------------------------------------------------
        alpha_loss = -batch_mean(self.log_alpha.unsqueeze(-1) * (logp.detach() + self.target_entropy))
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()

        soft_update(self.critic_target, self.critic, cfg.tau)
        self.step += 1
        return logs | {"critic_loss": critic_loss.detach(), "td_loss": td_loss.detach(),
                       "actor_loss": actor_loss.detach(), "alpha": alpha.mean(),
                       "q_data": q_data.detach().mean(), "q_policy": q_new.detach().mean()}

    def capture_problem(self) -> str | None:
        """Why this agent's update cannot be replayed as a CUDA graph (``minirl.devices.CapturedStep``), or None."""
        if self.step < self.cfg.bc_steps:  # a graph replays the branch taken when it was recorded
            return f"the first bc_steps={self.cfg.bc_steps} updates clone the data: a Python branch on the step count"
        return None

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        return self.actor.sample(obs_tensor(obs, self.device), deterministic)[0].cpu().numpy()

    # the config, the step, both temperatures and every declared piece (minirl.agent)
    state_dict, load_state_dict = state_of, load_state


# --------------------------------------------------------------------------------------------------------------
# The --algo names built on CQL (minirl.runs)
# --------------------------------------------------------------------------------------------------------------

def precision_note(plan) -> list[str]:
    """What a run of CQL-Lagrange in bfloat16 says before training (:func:`minirl.runs.run`)."""
    if plan.config.lagrange and plan.precision == "bf16":
        return ["note: CQL-Lagrange in bf16: rounding in the critics' hidden layers raises the penalty's gap (by "
                "0.7-0.8 at |Q| ~ 700 on pointmaze-medium-stitch, book/lab/stitching.md), which a small "
                "target_action_gap cannot absorb; --precision float32 avoids it"]
    return []


# CQL on a maze, as CORL (configs/offline/cql/antmaze/*.yaml) and Cal-QL (scripts/run_antmaze.sh) run it on AntMaze:
# the Lagrange variant with threshold 0.8 on alpha 5 times alpha' (our CQL-Lagrange form), the max-target backup, and
# the sparse reward centred at zero, +-5 (their 10 r - 5 on D4RL's 0/1 reward is 10 r + 5 on OGBench's -1/0). The
# original code's threshold of 5.0 belongs to another form, alpha' (5 gap - 5), and its (r - 0.5) * 4 centres at +-2
# instead. Written into every run's config.json like any other setting.
MAZE = {"lagrange": True, "cql_alpha": 5.0, "target_action_gap": 0.8, "max_target_backup": True,
        "reward_multiplier": 10.0, "reward_bias": 5.0}
ALGORITHMS = (
    Algorithm("cql", CQL, CQLConfig, domains={"maze": MAZE}, notes=precision_note),
    Algorithm("cql-lagrange", CQL, CQLConfig, {"lagrange": True}, domains={"maze": MAZE}, notes=precision_note),
    # offline SAC with no conservatism at all: the naive actor-critic of the BCQ chapter (extrapolation error)
    Algorithm("sac-offline", CQL, CQLConfig, {"cql_alpha": 0.0, "lagrange": False}, notes=precision_note),
)
