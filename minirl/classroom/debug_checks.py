"""The "find the bug" tasks: a broken update step given to the student, who writes the fixed function.

Each task's notebook shows a function that runs, returns finite numbers of the right shapes, and is wrong in a few
places (:data:`IQL_LOSSES_BUGGY`, :data:`CQL_CRITIC_LOSS_BUGGY`: the given code, kept here too so that the tests can
show it failing). The student writes the corrected function; the checker compares its losses and their gradients
with minirl's on random batches drawn per grading run (:func:`~minirl.classroom.checks.fresh`), so a bug that only
shows in a gradient (a tensor not detached) or at a setting the public inputs avoid is exposed. The references
(:func:`iql_losses`, :func:`cql_critic_loss`) are written with minirl's own pure losses and are disabled while the
student's code runs, as every task's reference is. How a check compares: :mod:`minirl.classroom.checks`.
"""
from __future__ import annotations

import math

from .checks import Checks, Ref, _clone, _randn, _t, fresh


# ---------------------------------------------------------------------------------------------------------------
# Chapter 4: IQL's three losses from the networks' outputs
# ---------------------------------------------------------------------------------------------------------------

IQL_LOSSES_BUGGY = '''\
def iql_losses_buggy(v, next_v, q, q_target, log_prob, rew, done, gamma=0.9, expectile=0.7, beta=3.0,
                     max_weight=100.0):
    """IQL's value, actor and critic losses at one batch, from the networks' outputs (a colleague's version)."""
    q_min = q.min(dim=0).values                                    # (B,)
    diff = q_min - v
    weight = torch.where(diff > 0, 1.0 - expectile, expectile)
    value_loss = (weight * diff ** 2).mean()
    adv = q_min - v
    weights = torch.exp(beta * adv).clamp(max=max_weight)
    actor_loss = -(weights * log_prob).mean()
    y = rew + gamma * (1.0 - done) * next_v.detach()
    critic_loss = ((q - y) ** 2).mean(dim=1).sum()
    return value_loss, actor_loss, critic_loss
'''


def iql_losses(v, next_v, q, q_target, log_prob, rew, done, gamma=0.9, expectile=0.7, beta=3.0, max_weight=100.0):
    """The reference of the IQL "find the bug" task: ``(value_loss, actor_loss, critic_loss)`` of IQL at one batch,
    from ``V(s)``, ``V(s')`` (``(B,)``), the critics and target critics at the data's pairs (``(n, B)``), the actor's
    ``log pi(a|s)`` (``(B,)``), rewards and terminal flags; each loss reaches its own network's outputs only."""
    from .. import iql
    q_min = iql.value_target(q_target.detach())
    value_loss = iql.value_loss(v, q_min, expectile)
    actor_loss = iql.awr_actor_loss(iql.awr_weights(q_min - v, beta, max_weight), -log_prob)
    y = iql.q_target(rew, done, next_v.detach(), gamma)
    return value_loss, actor_loss, iql.critic_loss(q, y)


def _gradients(fn, args: tuple, k: int, wrt: tuple[int, ...]):
    """The gradient of output ``k`` of ``fn(*args)`` with respect to ``args[i]`` for ``i`` in ``wrt``, flattened and
    joined (zeros where it does not reach): in the child a list of numbers, never a verdict."""
    import torch
    a = _clone(args)
    out = fn(*a)
    out = out[k] if k is not None else out
    if not isinstance(out, torch.Tensor) or out.numel() != 1:
        raise ValueError(f"expected a scalar tensor (a loss), got {type(out).__name__}"
                         + (f" of shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else ""))
    inputs = [a[i] for i in wrt]
    grads = (torch.autograd.grad(out.reshape(()), inputs, allow_unused=True) if out.requires_grad
             else [None] * len(inputs))
    return torch.cat([(torch.zeros_like(x) if g is None else g).reshape(-1) for x, g in zip(inputs, grads)])


def _loss(fn, args: tuple, k: int | None, n: int = 3):
    import torch
    out = fn(*_clone(args))
    if k is not None:
        if not isinstance(out, (tuple, list)) or len(out) != n:
            raise ValueError(f"expected a tuple of {n} losses, got {type(out).__name__}"
                             + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""))
        out = out[k]
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"expected a loss as a tensor (for backward), got {type(out).__name__}")
    return out.detach()


def _iql_case(B: int, n: int, seed: int, scale: float = 1.0):
    """Random network outputs: V and the critics with gradient, the target critics near the critics (not equal)."""
    import torch
    q = _randn(n, B, seed=seed, scale=scale)
    q_target = q + 0.5 * _randn(n, B, seed=seed + 1)
    return (_randn(B, seed=seed + 2, scale=scale).requires_grad_(), _randn(B, seed=seed + 3).requires_grad_(),
            q.requires_grad_(), q_target, (-1.0 - _randn(B, seed=seed + 4).abs()).requires_grad_(),
            _randn(B, seed=seed + 5), (torch.rand(B, generator=torch.Generator().manual_seed(fresh(seed + 6))) < 0.3).float())


IQL_LOSS_NAMES = ("value loss", "actor loss", "critic loss")
IQL_INPUTS = "v, next_v, q and log_prob"


def check_iql_losses(fn) -> None:
    """Task (find the bug): ``iql_losses(v, next_v, q, q_target, log_prob, rew, done, gamma, expectile, beta,
    max_weight)`` returns IQL's three losses (:func:`iql_losses`); compared, value and gradient with respect to
    ``v, next_v, q, log_prob``, on a small batch by hand and two random batches (drawn per grading run)."""
    c = Checks("iql_losses", reference=iql_losses)
    v, next_v = _t([0.5, 1.0, -0.5], requires_grad=True), _t([1.0, 2.0, 0.0], requires_grad=True)
    q = _t([[1.0, 0.0, 0.5], [2.0, 1.5, -1.0]], requires_grad=True)
    cases = [("B=3 by hand, two critics, expectile 0.7, beta 3",
              (v, next_v, q, _t([[1.5, 2.0, 0.0], [1.0, 0.5, -0.5]]), _t([-1.0, -2.0, -0.5], requires_grad=True),
               _t([0.0, 1.0, 0.5]), _t([0.0, 0.0, 1.0]), 0.9, 0.7, 3.0, 100.0))]
    for description, (B, n, seed, kw) in (("random batch of 8, two critics, expectile 0.9, beta 1, gamma 0.99",
                                           (8, 2, 40, (0.99, 0.9, 1.0, 100.0))),
                                          ("random batch of 6, three critics, expectile 0.8, beta 10 (some weights "
                                           "clamped at 20)", (6, 3, 50, (0.9, 0.8, 10.0, 20.0)))):
        cases.append((description, _iql_case(B, n, seed) + kw))
    for description, args in cases:
        for k, name in enumerate(IQL_LOSS_NAMES):
            c.compare(f"{description}: the {name}", lambda a=args, k=k: _loss(fn, a, k),
                      Ref(lambda a=args, k=k: _loss(iql_losses, a, k)), atol=1e-5, rtol=1e-5)
        for k, name in enumerate(IQL_LOSS_NAMES):
            c.compare(f"{description}: the gradient of the {name} with respect to {IQL_INPUTS} (joined, in that "
                      "order)", lambda a=args, k=k: _gradients(fn, a, k, (0, 1, 2, 4)),
                      Ref(lambda a=args, k=k: _gradients(iql_losses, a, k, (0, 1, 2, 4))), atol=1e-5, rtol=1e-5)
    c.report()


# ---------------------------------------------------------------------------------------------------------------
# Chapter 3: continuous CQL's critic loss, TD error plus the importance-sampled penalty
# ---------------------------------------------------------------------------------------------------------------

CQL_CRITIC_LOSS_BUGGY = '''\
def cql_critic_loss_buggy(q_data, q_rand, q_pi, log_pi, target, act_dim, cql_alpha=5.0, temperature=1.0):
    """TD error + cql_alpha * CQL(H)'s penalty, summed over the critics (a colleague's version)."""
    td_loss = ((q_data - target) ** 2).mean(dim=-1).sum()
    q_sampled = torch.cat([q_rand, q_pi], dim=-1)                          # (n, B, 2N)
    log_uniform = torch.full_like(log_pi, math.log(0.5))                   # the uniform density on [-1, 1]
    log_density = torch.cat([log_uniform, log_pi], dim=-1)                 # (B, 2N)
    soft_max = torch.logsumexp(q_sampled / temperature - log_density, dim=-1)
    penalty = (soft_max - q_data).mean(dim=-1)                             # (n,)
    return td_loss + cql_alpha * penalty.sum()
'''


def cql_critic_loss(q_data, q_rand, q_pi, log_pi, target, act_dim, cql_alpha=5.0, temperature=1.0):
    """The reference of the CQL "find the bug" task: the critics' loss of continuous CQL(H), ``sum_i [mean (Q_i(s, a)
    - y)^2 + cql_alpha * mean cql_penalty_i]``, the penalty estimated from N uniform actions on ``[-1, 1]^act_dim``
    (density ``0.5^act_dim``) and N actions of the policy at s (``log_pi``, constants for the critic), with the
    temperature of :func:`minirl.cql.cql_penalty`."""
    import torch

    from ..cql import cql_penalty
    td_loss = ((q_data - target.detach()) ** 2).mean(-1).sum()
    log_density = torch.cat([torch.full_like(log_pi, act_dim * math.log(0.5)), log_pi.detach()], -1)
    gap = cql_penalty(q_data, torch.cat([q_rand, q_pi], -1), log_density, temperature).mean(-1)
    return td_loss + cql_alpha * gap.sum()


def _cql_case(n: int, B: int, N: int, act_dim: int, seed: int):
    """Random critic outputs (with gradient), the policy's log-densities (from the actor's graph: with gradient) and
    a TD target (computed without gradient)."""
    q_data = _randn(n, B, seed=seed).requires_grad_()
    q_rand = (_randn(n, B, N, seed=seed + 1) - 1.0).requires_grad_()
    q_pi = (_randn(n, B, N, seed=seed + 2) + 0.5).requires_grad_()
    log_pi = (0.5 * _randn(B, N, seed=seed + 3) - 0.3 * act_dim).requires_grad_()
    return q_data, q_rand, q_pi, log_pi, _randn(B, seed=seed + 4)


def check_cql_critic_loss(fn) -> None:
    """Task (find the bug): ``cql_critic_loss(q_data, q_rand, q_pi, log_pi, target, act_dim, cql_alpha,
    temperature)`` returns the critics' loss of continuous CQL(H) (:func:`cql_critic_loss`); compared, value and
    gradients, on four random batches (drawn per grading run) of one to six action dimensions and temperatures 1,
    0.5 and 5."""
    c = Checks("cql_critic_loss", reference=cql_critic_loss)
    for description, (n, B, N, act_dim, alpha, T, seed) in (
            ("2 critics, batch 4, N=3, one action dimension, alpha 5, T 1", (2, 4, 3, 1, 5.0, 1.0, 60)),
            ("2 critics, batch 5, N=4, three action dimensions, alpha 5, T 1", (2, 5, 4, 3, 5.0, 1.0, 70)),
            ("2 critics, batch 3, N=5, six action dimensions, alpha 1, T 0.5", (2, 3, 5, 6, 1.0, 0.5, 80)),
            ("3 critics, batch 4, N=2, two action dimensions, alpha 10, T 5", (3, 4, 2, 2, 10.0, 5.0, 90))):
        args = _cql_case(n, B, N, act_dim, seed) + (act_dim, alpha, T)
        c.compare(f"{description}: the loss", lambda a=args: _loss(fn, a, None),
                  Ref(lambda a=args: _loss(cql_critic_loss, a, None)), atol=1e-4, rtol=1e-5)
        c.compare(f"{description}: its gradient with respect to the critics' outputs q_data, q_rand, q_pi (joined, "
                  "in that order)", lambda a=args: _gradients(fn, a, None, (0, 1, 2)),
                  Ref(lambda a=args: _gradients(cql_critic_loss, a, None, (0, 1, 2))), atol=1e-5, rtol=1e-5)
        c.compare(f"{description}: its gradient with respect to log_pi", lambda a=args: _gradients(fn, a, None, (3,)),
                  Ref(lambda a=args: _gradients(cql_critic_loss, a, None, (3,))), atol=1e-5, rtol=1e-5)
    c.report()
