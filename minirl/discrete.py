"""Offline RL with finitely many actions: discrete BCQ and discrete CQL, one constructor and one action convention.

Both agents are built as ``Agent(obs_dim, n_actions, config=None, device="cpu")``. Actions are the indices
``0 .. n_actions - 1``: in a batch, ``act`` is the dataset's action column, shape ``(B, 1)`` as an
:class:`~minirl.data.OfflineDataset` stores it (float, ``action_low = 0``, ``action_high = n_actions - 1``:
:mod:`minirl.discrete_data` makes such datasets), or a vector ``(B,)``; ``act(obs)`` returns int64 indices of shape
``(B,)`` for observations ``(B, obs_dim)`` and ``()`` for one observation ``(obs_dim,)``, which
:func:`minirl.evaluation.evaluate` passes to a Gymnasium ``Discrete`` environment as they are.

Discrete BCQ (Fujimoto, Conti, Ghavamzadeh and Pineau 2019, "Benchmarking Batch Deep Reinforcement Learning
Algorithms", arXiv:1910.01708). With finitely many actions no generative model is needed: a behaviour-cloning head
G_omega(a|s) ~ pi_beta(a|s) (a softmax classifier trained on the data) says which actions the data supports, and
the Q-learning max runs only over those:

    allowed(s) = { a : G_omega(a|s) / max_a' G_omega(a'|s) >= threshold }                   (threshold: tau)
    a'(s')     = argmax_{a in allowed(s')} Q_theta(s', a)                   (online network: double-DQN style)
    y          = r + gamma * (1 - d) * Q_theta'(s', a'(s'))                   (target network evaluates a')
    L(theta)   = Huber(Q_theta(s, a) - y)                                   (smooth L1, delta = 1)
    L(omega)   = -log G_omega(a|s) + 1e-2 * mean(logits(s)^2)              (NLL + the reference's logit penalty)
    pi(s)      = argmax_{a in allowed(s)} Q_theta(s, a)

threshold = 0 allows every action (double DQN on the batch); threshold = 1 allows only argmax G (behaviour cloning,
greedy). Settings follow sfujim/BCQ discrete_BCQ (its "regular", non-Atari parameters): separate 256-256 Q and
imitation networks (FC_Q), Adam 3e-4, gamma 0.99, threshold 0.3, Polyak tau 0.005 every step. Its Atari setting
copies the target every 8000 steps: target_tau=1.0, target_update_every=8000. One deliberate difference from the
reference: an action is allowed when the ratio is >= threshold (the reference uses >), so the behaviour head's own
argmax (ratio exactly 1) is always allowed and threshold = 1 is greedy behaviour cloning rather than an empty set.
d3rlpy's DiscreteBCQ computes the same mask in log space, as :func:`bcq_action_mask` does.

Discrete CQL (Kumar, Zhou, Tucker and Levine 2020, arXiv:2006.04779; the continuous algorithm is
:mod:`minirl.cql`): (double) DQN whose loss adds the CQL(H) penalty with every action enumerated,

    L(theta) = mean (Q_theta(s, a) - y)^2 + alpha * mean [ log sum_a' exp Q_theta(s, a') - Q_theta(s, a) ],
    y        = r + gamma * (1 - d) * Q_theta'(s', argmax_a' Q_theta(s', a'))       (double DQN; else max_a' Q_theta')

(:func:`minirl.cql.discrete_cql_penalty`, the function the tabular chapter applies to a Q table), with a hard copy
of the online network into the target every ``target_update_every`` steps. It follows the structure of d3rlpy's
``DiscreteCQL`` (double DQN, hard target copies, alpha 1.0), but NOT its TD loss: d3rlpy's DQN uses a Huber loss,
this one the plain squared error; for TD errors below 1 the Huber loss is half the squared error, so at the same
``cql_alpha`` d3rlpy's penalty weighs twice as much against the TD term.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch.nn import functional as F

from .agent import load_state, periodic, state_of
from .config import AT_LEAST_ONE, LAYERS, NON_NEGATIVE, POSITIVE, check_fields, interval
from .cql import discrete_cql_penalty
from .nets import adam, mlp, obs_tensor, soft_update


@dataclass
class DiscreteBCQConfig:
    hidden: tuple[int, ...] = (256, 256)  # layers of the Q network and of the (separate) imitation network G_omega
    lr: float = 3e-4               # Adam learning rate (both networks, one optimiser)
    gamma: float = 0.99            # discount gamma
    threshold: float = 0.3         # tau: a is allowed in s iff G(a|s) / max_a' G(a'|s) >= tau
    logit_reg: float = 1e-2        # weight of the L2 penalty on the imitation logits
    target_tau: float = 0.005      # target <- target_tau * Q + (1 - target_tau) * target ...
    target_update_every: int = 1   # ... every this many updates (Atari reference: target_tau=1, every 8000)
    normalize_states: bool = False  # the reference feeds raw states
    reward_scale: Literal["return_range"] | None = None  # None: raw rewards

    def __post_init__(self):
        check_fields(self, hidden=LAYERS, lr=POSITIVE, gamma=interval("[0, 1)"), threshold=interval("[0, 1]"),
                     logit_reg=NON_NEGATIVE, target_tau=interval("(0, 1]"), target_update_every=AT_LEAST_ONE)


@dataclass
class DiscreteCQLConfig:
    hidden: tuple[int, ...] = (256, 256)  # Q-network layer sizes (obs -> one Q per action)
    lr: float = 6.25e-5               # Adam learning rate (d3rlpy's DQN / DiscreteCQL default)
    gamma: float = 0.99               # discount gamma
    cql_alpha: float = 1.0            # alpha: weight of logsumexp_a Q(s, a) - Q(s, a_data); 0 gives (double) DQN
    double_dqn: bool = True           # target Q'(s', argmax_a Q(s', a)) instead of max_a Q'(s', a)
    target_update_every: int = 8000   # hard copy of the online network into the target every this many steps

    def __post_init__(self):
        check_fields(self, hidden=LAYERS, lr=POSITIVE, gamma=interval("[0, 1)"), cql_alpha=NON_NEGATIVE,
                     target_update_every=AT_LEAST_ONE)


# ----------------------------------------------------------------------------------------------------------------
# The losses, as pure functions of tensors
# ----------------------------------------------------------------------------------------------------------------

def bcq_action_mask(log_probs: torch.Tensor, threshold: float) -> torch.Tensor:
    """Allowed actions: ``G(a|s) / max_a' G(a'|s) >= threshold`` from log-probabilities ``(..., |A|)``.

    Computed in log space (``log G(a|s) - max log G >= log threshold``), so it is exact for tiny probabilities; for
    plain probabilities pass ``probs.log()`` (a probability of 0 gives -inf and is masked for every threshold > 0).
    The most likely action always passes (ratio 1), so every state keeps at least one action.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    if threshold == 0.0:
        return torch.ones_like(log_probs, dtype=torch.bool)
    log_ratio = log_probs - log_probs.max(dim=-1, keepdim=True).values
    return log_ratio >= float(np.log(threshold))


def masked_argmax(q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``argmax_a q[..., a]`` over the actions where ``mask`` is True (ties: the lowest index)."""
    return q.masked_fill(~mask, float("-inf")).argmax(dim=-1)


def discrete_bcq_target(rew: torch.Tensor, done: torch.Tensor, next_q: torch.Tensor, next_q_target: torch.Tensor,
                        next_log_probs: torch.Tensor, gamma: float, threshold: float) -> torch.Tensor:
    """``y = r + gamma (1 - d) Q'(s', a')`` with ``a' = argmax`` of the online ``Q(s', .)`` over the allowed actions.

    ``next_q`` (online) and ``next_q_target`` are ``(B, |A|)``; ``next_log_probs`` is ``log G(.|s')``, ``(B, |A|)``.
    """
    a_next = masked_argmax(next_q, bcq_action_mask(next_log_probs, threshold))
    return rew + gamma * (1.0 - done) * next_q_target.gather(-1, a_next.unsqueeze(-1)).squeeze(-1)


def imitation_loss(logits: torch.Tensor, actions: torch.Tensor, logit_reg: float = 1e-2) -> torch.Tensor:
    """``-E log G(a|s) + logit_reg * mean(logits^2)``: the behaviour head's NLL plus the reference's logit penalty.

    ``logits`` is ``(B, |A|)``, ``actions`` int64 ``(B,)``.
    """
    return F.cross_entropy(logits, actions) + logit_reg * logits.pow(2).mean()


# ----------------------------------------------------------------------------------------------------------------
# What both agents share: the action convention
# ----------------------------------------------------------------------------------------------------------------

def check_n_actions(n_actions) -> int:
    """``n_actions`` as an int, at least 2 (one action leaves nothing to learn)."""
    if isinstance(n_actions, bool) or int(n_actions) != n_actions or n_actions < 2:
        raise ValueError(f"n_actions must be a whole number >= 2 (the actions are 0 .. n_actions - 1), "
                         f"got {n_actions!r}")
    return int(n_actions)


def action_indices(act: torch.Tensor, n_actions: int) -> torch.Tensor:
    """A batch's ``act`` (the dataset's column ``(B, 1)``, or ``(B,)``) as int64 indices ``(B,)``, checked to lie in
    ``[0, n_actions)`` (except while a CUDA graph is recorded: the check reads the values on the host)."""
    if not (act.dim() == 1 or (act.dim() == 2 and act.shape[1] == 1)):
        raise ValueError(f"batch['act'] must have shape (B, 1) or (B,) holding action indices, got {tuple(act.shape)}")
    a = act.reshape(-1).long()
    recording = a.is_cuda and torch.cuda.is_current_stream_capturing()
    if a.numel() and not recording and (a.min() < 0 or a.max() >= n_actions):
        raise ValueError(f"batch['act'] must hold integers in [0, {n_actions}), "
                         f"got values in [{int(a.min())}, {int(a.max())}]")
    return a


def _observations(obs, device) -> tuple[torch.Tensor, bool]:
    """``obs`` as a float tensor ``(B, obs_dim)`` on ``device``, and whether it was a single observation."""
    o = obs_tensor(obs, device)
    return (o.unsqueeze(0), True) if o.dim() == 1 else (o, False)


def _greedy(q: torch.Tensor, single: bool, mask: torch.Tensor | None = None) -> np.ndarray:
    """The act() convention: int64 indices ``(B,)`` of the best (allowed) action, ``()`` for one observation."""
    a = (q.argmax(dim=-1) if mask is None else masked_argmax(q, mask)).cpu().numpy()
    return a[0] if single else a


# ----------------------------------------------------------------------------------------------------------------
# The agents
# ----------------------------------------------------------------------------------------------------------------

class DiscreteBCQ:
    """Discrete BCQ: Q-learning whose max runs over the actions the behaviour head allows."""
    modules, optimizers, tensors, counters = ("q", "imitation", "q_target"), ("opt",), (), ("step",)  # minirl.agent
    capture_problem = periodic("target_update_every")  # a CUDA graph replays no "every n-th step" (minirl.devices)

    def __init__(self, obs_dim: int, n_actions: int, config: DiscreteBCQConfig | None = None, device: str = "cpu"):
        self.cfg = cfg = config or DiscreteBCQConfig()
        self.n_actions = n = check_n_actions(n_actions)
        self.device = torch.device(device)
        self.q = mlp(obs_dim, n, cfg.hidden).to(self.device)            # Q_theta(s, .)
        self.imitation = mlp(obs_dim, n, cfg.hidden).to(self.device)    # logits of G_omega(. | s)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)      # Q_theta'
        self.opt = adam([*self.q.parameters(), *self.imitation.parameters()], cfg.lr)
        self.step = 0  # updates done so far (agent.steps in the exercises: the same count)

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        obs, next_obs = batch["obs"], batch["next_obs"]
        a = action_indices(batch["act"], self.n_actions)
        with torch.no_grad():
            target = discrete_bcq_target(batch["rew"], batch["done"], self.q(next_obs), self.q_target(next_obs),
                                         F.log_softmax(self.imitation(next_obs), dim=-1), self.cfg.gamma,
                                         self.cfg.threshold)
        q = self.q(obs).gather(1, a.unsqueeze(1)).squeeze(1)
        q_loss = F.smooth_l1_loss(q, target)
        i_loss = imitation_loss(self.imitation(obs), a, self.cfg.logit_reg)
        self.opt.zero_grad(set_to_none=True)
        (q_loss + i_loss).backward()
        self.opt.step()
        self.step += 1
        if self.step % self.cfg.target_update_every == 0:
            soft_update(self.q_target, self.q, self.cfg.target_tau)
        return {"q_loss": q_loss.detach(), "imitation_loss": i_loss.detach(), "q_mean": q.detach().mean()}

    @torch.no_grad()
    def allowed(self, obs: torch.Tensor) -> torch.Tensor:
        """The mask of allowed actions in ``obs`` (a tensor ``(B, obs_dim)``), ``(B, |A|)`` bool."""
        return bcq_action_mask(F.log_softmax(self.imitation(obs), dim=-1), self.cfg.threshold)

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """The best allowed action: int64 indices ``(B,)``, ``()`` for a single observation."""
        o, single = _observations(obs, self.device)
        return _greedy(self.q(o), single, self.allowed(o))

    steps = property(lambda self: self.step, lambda self, n: setattr(self, "step", n))  # step, as the exercises say

    state_dict = state_of  # its declared pieces, counters and config (minirl.agent)

    def load_state_dict(self, state: dict) -> None:
        load_state(self, state)
        self.step = int(state.get("step", state.get("steps", self.step)))  # "steps": a file written before "step"


class DiscreteCQL:
    """Q-learning on a finite action set with the CQL(H) penalty (``cql_alpha = 0``: (double) DQN)."""
    modules, optimizers, tensors, counters = ("q", "q_target"), ("opt",), (), ("step",)  # its pieces (minirl.agent)
    capture_problem = periodic("target_update_every")  # a CUDA graph replays no "every n-th step" (minirl.devices)

    def __init__(self, obs_dim: int, n_actions: int, config: DiscreteCQLConfig | None = None, device: str = "cpu"):
        self.cfg = cfg = config or DiscreteCQLConfig()
        self.n_actions = n = check_n_actions(n_actions)
        self.device = torch.device(device)
        self.q = mlp(obs_dim, n, cfg.hidden).to(self.device)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self.opt = adam(self.q.parameters(), cfg.lr)
        self.step = 0

    def update(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        act = action_indices(b["act"], self.n_actions)
        with torch.no_grad():
            q_next_target = self.q_target(b["next_obs"])
            if cfg.double_dqn:  # the online network picks, the target network evaluates
                a_next = self.q(b["next_obs"]).argmax(-1, keepdim=True)
                v_next = q_next_target.gather(-1, a_next).squeeze(-1)
            else:
                v_next = q_next_target.max(-1).values
            target = b["rew"] + cfg.gamma * (1.0 - b["done"]) * v_next
        q_all = self.q(b["obs"])
        q_data = q_all.gather(-1, act.unsqueeze(-1)).squeeze(-1)
        td_loss = ((q_data - target) ** 2).mean()
        loss = td_loss
        logs = {}
        if cfg.cql_alpha > 0:
            gap = discrete_cql_penalty(q_all, act).mean()
            loss = td_loss + cfg.cql_alpha * gap
            logs["cql_gap"] = gap.detach()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.step += 1
        if self.step % cfg.target_update_every == 0:
            self.q_target.load_state_dict(self.q.state_dict())
        return logs | {"loss": loss.detach(), "td_loss": td_loss.detach(), "q_data": q_data.detach().mean()}

    @torch.no_grad()
    def q_values(self, obs) -> np.ndarray:
        """``Q(s, .)`` for observations ``(B, obs_dim)``: ``(B, |A|)`` (``(|A|,)`` for a single observation)."""
        return self.q(obs_tensor(obs, self.device)).cpu().numpy()

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """The greedy action: int64 indices ``(B,)``, ``()`` for a single observation."""
        o, single = _observations(obs, self.device)
        return _greedy(self.q(o), single)

    state_dict, load_state_dict = state_of, load_state  # its declared pieces, counters and config (minirl.agent)
