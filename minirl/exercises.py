"""Classroom exercises: the checkers that exercise notebooks call, the student copies, the self-check, the grader's
command line and a class's release.

A task in an exercise notebook is an answer cell (tagged ``solution`` in the reference notebook) where the student
writes code, then a checker cell::

    check_expectile_loss(expectile_loss)

A checker compares the student's code with minirl's own on fixed and random inputs (edge cases included) and prints
one line per task, e.g. ``expectile_loss: 5/5 checks passed``, after each failed check with its input, the expected
and the obtained values; code that still raises ``NotImplementedError`` prints ``not implemented yet``. Tasks come
at three levels: a *function* (a loss, a target), an *agent* (one update of a whole minirl agent, compared step by
step with the agent's own ``update`` from the same seed on small fixed data: :func:`check_discrete_bcq_update`,
:func:`check_discrete_cql_update`, :func:`check_iql_update`) and an *experiment* (a sweep whose numbers are checked;
its figure and its written answer, a Markdown cell tagged ``written``, go to the instructor).

Solutions live in one place only, the reference notebooks ``notebooks/exercises/solutions/*.ipynb``.
``python -m minirl.exercises make-student`` writes from them the student copies ``notebooks/exercises/*.ipynb``
(answer cells stubbed, written answers replaced by a placeholder, no outputs), the checks file
``notebooks/exercises/checks.json`` (what the grader runs, with no solution text) and the book page
``book/exercises.md`` (``--hide-solutions``: without the solutions); ``make-student --check`` fails if one is stale.
``python -m minirl.exercises check NB.ipynb`` is the student's self-check and ``grade DIR`` grades a class, both with
:mod:`minirl.grading` (against the reference, never against what a notebook stores). ``class-release OUT`` writes the
student copies and the book without any solution text.
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "notebooks" / "exercises"
SOLUTIONS = EXERCISES / "solutions"
BOOK_PAGE = REPO / "book" / "exercises.md"


# ---------------------------------------------------------------------------------------------------------------
# Comparing a student's answer with the reference
# ---------------------------------------------------------------------------------------------------------------

def _as_array(x):
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=float)


def _fmt(x) -> str:
    a = np.round(_as_array(x), 6) + 0.0  # + 0.0 turns -0 into 0
    return " ".join(np.array2string(a, precision=6, separator=", ", threshold=12, max_line_width=10_000).split())


def mismatch(got, want, atol: float = 1e-6, rtol: float = 1e-6) -> str | None:
    """``None`` if ``got`` matches ``want`` (same shape, close values), else a readable description."""
    try:
        g = _as_array(got)
    except (TypeError, ValueError) as e:
        return f"got a {type(got).__name__} that is not an array of numbers ({e})"
    w = _as_array(want)
    if g.shape != w.shape:
        return f"shape {g.shape}, expected shape {w.shape}"
    same_inf = np.isinf(g) & np.isinf(w) & (np.sign(g) == np.sign(w))
    bad = ~(np.isclose(g, w, atol=atol, rtol=rtol) | same_inf)
    if not bad.any():
        return None
    i = np.unravel_index(int(np.flatnonzero(bad)[0]), g.shape) if g.shape else ()
    where = f" at index {tuple(int(k) for k in i)}" if g.shape else ""
    return (f"{int(bad.sum())} of {bad.size} values differ{where}: got {float(g[i]):.6g}, expected {float(w[i]):.6g}"
            f"\n    got      {_fmt(g)}\n    expected {_fmt(w)}")


_VERDICTS: list[dict] = []  # every report() appends its verdict here: the grader reads it (minirl.grading)


class Checks:
    """Run a task's checks, print failures with their inputs, then one summary line ``<task>: k/n checks passed``.

    ``report()`` also records the verdict (task, checks passed, checks run, not implemented) for the grader, which
    takes a task's grade from this record of the reference checker, never from what a notebook stores or prints."""

    def __init__(self, task: str):
        self.task, self.n, self.passed, self.not_implemented = task, 0, 0, None

    def compare(self, description: str, call, want, atol: float = 1e-6, rtol: float = 1e-6) -> None:
        """Call ``call()`` (the student's function on one input) and compare with ``want``."""
        self.n += 1
        if self.not_implemented is not None:
            return
        try:
            got = call()
        except NotImplementedError as e:
            self.not_implemented = str(e) or "NotImplementedError"
            return
        except Exception as e:  # noqa: BLE001 - any error is reported to the student with its input
            print(f"check FAILED: {description}\n    raised {type(e).__name__}: {e}")
            return
        problem = mismatch(got, want, atol, rtol) if not callable(want) else want(got)
        if problem is None:
            self.passed += 1
        else:
            print(f"check FAILED: {description}\n    {problem}")

    def report(self) -> None:
        _VERDICTS.append({"task": self.task, "passed": self.passed, "n": self.n,
                          "not_implemented": self.not_implemented})
        if self.not_implemented is not None:
            print(f"{self.task}: not implemented yet (NotImplementedError: {self.not_implemented})")
        else:
            print(f"{self.task}: {self.passed}/{self.n} checks passed")


# ---------------------------------------------------------------------------------------------------------------
# Chapter 1: finite MDPs, exact policy evaluation, the empirical MDP
# ---------------------------------------------------------------------------------------------------------------

def _random_policy(S: int, A: int, seed: int) -> np.ndarray:
    w = np.random.default_rng(seed).random((S, A)) + 0.05
    return w / w.sum(axis=1, keepdims=True)


def _two_state_mdp():
    """A hand-checkable MDP: action 0 stays, action 1 switches state; reward 1 for being in state 1."""
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[1, 0, 1] = 1.0
    P[0, 1, 1] = P[1, 1, 0] = 1.0
    R = np.array([[0.0, 0.0], [1.0, 1.0]])
    return P, R


def check_policy_transition(fn) -> None:
    """Task: ``policy_transition(P, pi)`` returns ``P^pi[(s,a),(s',a')] = P(s'|s,a) pi(a'|s')``, shape (SA, SA)."""
    from . import tabular as tab
    c = Checks("policy_transition")
    P, _ = _two_state_mdp()
    always_switch = np.array([[0.0, 1.0], [0.0, 1.0]])
    c.compare("two-state MDP, pi = always switch", lambda: fn(P, always_switch), tab.policy_transition(P, always_switch))
    c.compare("two-state MDP, uniform pi", lambda: fn(P, np.full((2, 2), 0.5)), tab.policy_transition(P, np.full((2, 2), 0.5)))
    one = np.ones((1, 1, 1))
    c.compare("one state, one action", lambda: fn(one, np.ones((1, 1))), np.ones((1, 1)))
    for seed, (S, A) in [(0, (4, 3)), (1, (6, 2))]:
        m = tab.random_mdp(S, A, seed=seed)
        pi = _random_policy(S, A, seed + 100)
        c.compare(f"random MDP S={S} A={A} seed={seed}, random pi", lambda: fn(m.P, pi), tab.policy_transition(m.P, pi))
    return c.report()


def check_evaluate_policy(fn) -> None:
    """Task: ``evaluate_policy(P, R, gamma, pi)`` returns ``Q^pi = (I - gamma P^pi)^-1 R`` as an (S, A) table."""
    from . import tabular as tab
    c = Checks("evaluate_policy")
    P, R = _two_state_mdp()
    stay = np.array([[1.0, 0.0], [1.0, 0.0]])
    # by hand: staying in state 1 earns 1 forever (10 at gamma 0.9); in state 0 nothing; switching from 0 reaches 1
    c.compare("two-state MDP, gamma=0.9, pi = always stay", lambda: fn(P, R, 0.9, stay),
              np.array([[0.0, 9.0], [10.0, 1.0]]))
    c.compare("two-state MDP, gamma=0 (Q = R)", lambda: fn(P, R, 0.0, stay), R)
    for seed, (S, A, gamma) in [(0, (4, 3, 0.9)), (1, (6, 2, 0.5)), (2, (5, 4, 0.99))]:
        m = tab.random_mdp(S, A, gamma=gamma, seed=seed)
        pi = _random_policy(S, A, seed + 100)
        c.compare(f"random MDP S={S} A={A} gamma={gamma} seed={seed}", lambda: fn(m.P, m.R, gamma, pi),
                  tab.evaluate_policy_exact(m, pi), atol=1e-5)
    return c.report()


def check_empirical_mdp(fn) -> None:
    """Task: ``empirical_mdp(s, a, r, s_next, S, A)`` returns ``(T_hat, r_hat, counts)``; unseen pairs loop with r 0."""
    from . import tabular as tab
    c = Checks("empirical_mdp")

    def reference(s, a, r, s_next, S, A):
        data = {"s": np.asarray(s), "a": np.asarray(a), "r": np.asarray(r, dtype=float),
                "s_next": np.asarray(s_next), "done": np.zeros(len(s), dtype=bool)}
        m, counts = tab.empirical_mdp(data, S, A, gamma=0.9)
        return m.P, m.R, counts

    def compare_all(description, args):
        want = reference(*args)
        for k, name in enumerate(("T_hat", "r_hat", "counts")):
            c.compare(f"{description}: {name}", lambda k=k: _pick(fn(*args), k, 3), want[k])

    compare_all("s=[0, 0, 1], a=[1, 1, 0], r=[1, 3, 2], s_next=[1, 0, 1], S=2, A=2 (pair (0,0) and (1,1) unseen)",
                ([0, 0, 1], [1, 1, 0], [1.0, 3.0, 2.0], [1, 0, 1], 2, 2))
    rng = np.random.default_rng(7)
    m = tab.random_mdp(5, 3, seed=3)
    d = tab.sample_dataset(m, _random_policy(5, 3, 4), 200, seed=int(rng.integers(1000)))
    compare_all("200 transitions of a random MDP S=5 A=3 seed=3", (d["s"], d["a"], d["r"], d["s_next"], 5, 3))
    return c.report()


def _pick(result, k: int, n: int):
    if not isinstance(result, (tuple, list)) or len(result) != n:
        raise ValueError(f"expected a tuple of {n} arrays, got {type(result).__name__}"
                         + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else ""))
    return result[k]


def optimism_experiment(unseen_reward: float = 1.0, n_transitions: int = 300, seed: int = 0) -> dict:
    """The reference answer of chapter 1's experiment: plan in the empirical MDP of a small dataset whose unseen pairs
    pay ``unseen_reward`` forever, then run the greedy policy in the true MDP.  Returns the value the empirical MDP
    promises (``J_hat``), the true return (``J_true``) and the behaviour policy's true return (``J_beta``)."""
    from . import tabular as tab
    mdp = tab.random_mdp(8, 4, gamma=0.9, seed=seed, branching=3)
    pi_beta = np.zeros((8, 4))
    pi_beta[:, 0], pi_beta[:, 1] = 0.7, 0.3  # the behaviour policy never takes actions 2 and 3
    data = tab.sample_dataset(mdp, pi_beta, n_transitions, seed=seed)
    mdp_hat, _ = tab.empirical_mdp(data, 8, 4, gamma=0.9, init=mdp.init, unseen_reward=unseen_reward)
    pi = tab.greedy_policy(tab.value_iteration(mdp_hat))
    return {"J_hat": tab.policy_return(mdp_hat, pi), "J_true": tab.policy_return(mdp, pi),
            "J_beta": tab.policy_return(mdp, pi_beta)}


def check_optimism_experiment(fn) -> None:
    """Task: ``fn()`` returns the pair ``(J_hat, J_true)`` of the optimism experiment (:func:`optimism_experiment`)."""
    want = optimism_experiment()
    c = Checks("optimism_experiment")
    c.compare("J_hat: the return the empirical MDP promises", lambda: _pick(fn(), 0, 2), want["J_hat"], atol=1e-4)
    c.compare("J_true: the greedy policy's return in the true MDP", lambda: _pick(fn(), 1, 2), want["J_true"],
              atol=1e-4)
    return c.report()


# ---------------------------------------------------------------------------------------------------------------
# Chapters 2-4: the losses of BCQ, CQL and IQL, checked against minirl's own pure functions
# ---------------------------------------------------------------------------------------------------------------

def _t(x, requires_grad: bool = False):
    import torch
    return torch.tensor(x, dtype=torch.float32, requires_grad=requires_grad)


def _clone(args):
    return tuple(a.detach().clone().requires_grad_(a.requires_grad) if hasattr(a, "detach") else a for a in args)


def _check_cases(task: str, fn, reference, cases, atol: float = 1e-5) -> Checks:
    """Compare ``fn(*args)`` with ``reference(*args)`` for every ``(description, args)`` in ``cases``."""
    c = Checks(task)
    for description, args in cases:
        c.compare(description, lambda args=args: fn(*_clone(args)), reference(*_clone(args)), atol=atol, rtol=1e-5)
    return c


def _randn(*shape, seed: int, scale: float = 1.0):
    import torch
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _check_detached(c: Checks, fn, args: tuple, index: int, name: str, description: str) -> None:
    """One check: ``fn(*args)`` must carry no gradient to ``args[index]`` (it must be detached there)."""
    import torch

    def gradient_problem():
        a = _clone(args)
        out = fn(*a)
        if not getattr(out, "requires_grad", False):
            return None
        grad = torch.autograd.grad(out.sum(), a[index], allow_unused=True)[0]
        if grad is not None and bool(grad.abs().sum() > 0):
            return f"the output has a gradient with respect to {name}: detach {name} (make it a constant)"
        return None

    c.compare(description, gradient_problem, lambda problem: problem)


def check_expectile_loss(fn) -> None:
    """Task: ``expectile_loss(diff, tau) = |tau - 1(diff < 0)| * diff^2``, elementwise."""
    from .iql import expectile_loss
    c = _check_cases("expectile_loss", fn, expectile_loss, [
        ("diff=[-2, -0.5, 0, 0.5, 2], tau=0.7 (by hand: [1.2, 0.075, 0, 0.175, 2.8])",
         (_t([-2.0, -0.5, 0.0, 0.5, 2.0]), 0.7)),
        ("diff=[-1, 1, 3], tau=0.5 (half the squared error)", (_t([-1.0, 1.0, 3.0]), 0.5)),
        ("random diff of shape (3, 4), tau=0.9", (_randn(3, 4, seed=0), 0.9)),
        ("random diff of shape (6,), tau=0.1 (below the median: negative errors weigh more)", (_randn(6, seed=1), 0.1)),
        ("diff all zero, tau=0.99", (_t([0.0, 0.0, 0.0]), 0.99)),
    ])
    c.report()


def check_q_target(fn) -> None:
    """Task: IQL's critic target ``y = r + gamma (1 - done) V(s')``."""
    from .iql import q_target
    _check_cases("q_target", fn, q_target, [
        ("rew=[1, 2], done=[0, 1], next_v=[10, 10], gamma=0.9 (by hand: [10, 2])",
         (_t([1.0, 2.0]), _t([0.0, 1.0]), _t([10.0, 10.0]), 0.9)),
        ("gamma=0: the target is the reward", (_t([1.0, -1.0, 3.0]), _t([0.0, 0.0, 0.0]), _t([5.0, 6.0, 7.0]), 0.0)),
        ("every transition terminal", (_t([0.5, 0.25]), _t([1.0, 1.0]), _t([100.0, -100.0]), 0.99)),
        ("random batch of 8, gamma=0.99", (_randn(8, seed=2), (_randn(8, seed=3) > 1).float(), _randn(8, seed=4),
                                           0.99)),
    ]).report()


def check_awr_weights(fn) -> None:
    """Task: ``awr_weights(adv, beta, max_weight) = min(exp(beta * adv), max_weight)``, detached."""
    from .iql import awr_weights
    c = _check_cases("awr_weights", fn, awr_weights, [
        ("adv=[-1, 0, 1, 2], beta=3, max_weight=100 (exp(6) = 403 is clamped to 100)",
         (_t([-1.0, 0.0, 1.0, 2.0]), 3.0, 100.0)),
        ("beta=0: every weight is 1 (behaviour cloning)", (_randn(5, seed=5), 0.0, 100.0)),
        ("random advantages, beta=10, max_weight=20", (_randn(4, 3, seed=6), 10.0, 20.0)),
        ("huge advantages [50, 1000], beta=3: clamped, never inf or nan", (_t([50.0, 1000.0]), 3.0, 100.0)),
    ])
    _check_detached(c, fn, (_t([0.5, -0.5, 1.5], requires_grad=True), 3.0, 100.0), 0, "adv",
                    "adv requires grad: the weights must be constants for the actor")
    c.report()


def check_expectile_experiment(fn) -> None:
    """Task: ``fn()`` returns the 0.9-expectile of the values [0, 1, 5] with probabilities [0.5, 0.3, 0.2]."""
    from .tabular import expectile
    want = float(expectile(np.array([0.0, 1.0, 5.0]), np.array([0.5, 0.3, 0.2]), 0.9))
    c = Checks("expectile_experiment")
    c.compare("the 0.9-expectile, within 1e-3", lambda: float(fn()), want, atol=1e-3)
    c.report()


def check_discrete_cql_penalty(fn) -> None:
    """Task: discrete CQL's ``logsumexp_a Q(s, a) - Q(s, a_data)`` per state."""
    import torch
    from .cql import discrete_cql_penalty
    long = lambda x: torch.tensor(x, dtype=torch.long)  # noqa: E731
    _check_cases("discrete_cql_penalty", fn, discrete_cql_penalty, [
        ("q_all=[[1, 2, 3]], actions=[0] (by hand: log(e + e^2 + e^3) - 1 = 2.4076)", (_t([[1.0, 2.0, 3.0]]), long([0]))),
        ("all Q equal: the penalty is log |A|", (_t([[0.5, 0.5, 0.5, 0.5]]), long([2]))),
        ("random Q of shape (5, 4)", (_randn(5, 4, seed=7), long([0, 1, 2, 3, 0]))),
        ("Q values near 1000 (compute logsumexp stably)", (_t([[1000.0, 1001.0], [999.0, 1000.0]]), long([1, 0]))),
        ("the data action has the largest Q", (_t([[0.0, 5.0, 1.0]]), long([1]))),
    ]).report()


def check_cql_penalty(fn) -> None:
    """Task: ``T * logsumexp_i(Q(s, a_i) / T - log p(a_i)) - Q(s, a_data)`` per state."""
    from .cql import cql_penalty
    log_u = float(-3 * np.log(0.5))  # -log of the uniform density on [-1, 1]^3 is +3 log 2; log p = 3 log 0.5
    _check_cases("cql_penalty", fn, cql_penalty, [
        ("q_data=[1], q_sampled=[[1, 2, 3]], log_density=0, T=1", (_t([1.0]), _t([[1.0, 2.0, 3.0]]), 0.0, 1.0)),
        ("uniform actions in [-1, 1]^3: log_density = 3 log 0.5 for every sample",
         (_t([0.0, 1.0]), _t([[0.0, 1.0], [2.0, 0.5]]), -log_u, 1.0)),
        ("per-sample log-densities of shape (B, K)", (_randn(3, seed=8), _randn(3, 4, seed=9), _randn(3, 4, seed=10),
                                                      1.0)),
        ("temperature 0.1 (close to the hard max)", (_randn(4, seed=11), _randn(4, 6, seed=12), 0.0, 0.1)),
        ("temperature 10", (_randn(4, seed=13), _randn(4, 6, seed=14), _randn(4, 6, seed=15), 10.0)),
    ]).report()


def check_lagrange_loss(fn) -> None:
    """Task: the dual loss ``-cql_alpha * alpha' * (penalty.detach() - gap)``, ``alpha' = clamp(exp(log a'), 0, 1e6)``."""
    import torch
    from .cql import lagrange_loss
    c = _check_cases("lagrange_loss", fn, lagrange_loss, [
        ("log_alpha'=0, penalty=[7], gap=5, cql_alpha=1 (by hand: -2)", (_t(0.0), _t([7.0]), 5.0, 1.0)),
        ("penalty below the gap: the loss is positive", (_t(0.5), _t([2.0]), 5.0, 5.0)),
        ("per-critic penalties [3, 9] are averaged", (_t(-1.0), _t([3.0, 9.0]), 5.0, 1.0)),
        ("log_alpha'=20: alpha' is clamped at 1e6", (_t(20.0), _t([6.0]), 5.0, 1.0)),
    ], atol=1e-3)
    for description, penalty, gap in (("penalty 7 > gap 5: a descent step raises alpha'", 7.0, 5.0),
                                      ("penalty 2 < gap 5: a descent step lowers alpha'", 2.0, 5.0)):
        def grad_of(f, penalty=penalty, gap=gap):
            log_a = _t(0.3, requires_grad=True)
            out = f(log_a, _t([penalty]), gap, 1.0)
            return torch.autograd.grad(out, log_a)[0]
        c.compare(f"{description} (gradient on log alpha')", lambda g=grad_of: g(fn), grad_of(lagrange_loss))
    _check_detached(c, fn, (_t(0.0, requires_grad=True), _t([4.0, 6.0], requires_grad=True), 5.0, 1.0), 1,
                    "penalty", "penalty requires grad (it belongs to the critic's graph): the loss must not reach it")
    c.report()


def check_soft_clipped_double_q(fn) -> None:
    """Task: ``lambda * min(q1, q2) + (1 - lambda) * max(q1, q2)``."""
    from .bcq import soft_clipped_double_q
    _check_cases("soft_clipped_double_q", fn, soft_clipped_double_q, [
        ("q1=[1, 5], q2=[3, 2], lambda=0.75 (by hand: [1.5, 2.75])", (_t([1.0, 5.0]), _t([3.0, 2.0]), 0.75)),
        ("lambda=1: clipped double Q, the minimum", (_randn(5, seed=16), _randn(5, seed=17), 1.0)),
        ("lambda=0: the maximum", (_randn(5, seed=18), _randn(5, seed=19), 0.0)),
        ("random (4, 10) candidates, lambda=0.75", (_randn(4, 10, seed=20), _randn(4, 10, seed=21), 0.75)),
        ("q1 == q2: both", (_t([2.0, -3.0]), _t([2.0, -3.0]), 0.75)),
    ]).report()


def check_vae_loss(fn) -> None:
    """Task: ``mean (recon - a)^2 + kl_weight * mean KL(N(mean, std^2) || N(0, 1))``."""
    from .bcq import vae_loss
    _check_cases("vae_loss", fn, vae_loss, [
        ("recon=[[0.5]], a=[[0]], mean=[[0]], std=[[1]]: the KL is 0 (loss 0.25)",
         (_t([[0.5]]), _t([[0.0]]), _t([[0.0]]), _t([[1.0]]), 0.5)),
        ("perfect reconstruction, mean=[[1, 0]], std=[[1, 2]] (KL only)",
         (_t([[0.2, -0.3]]), _t([[0.2, -0.3]]), _t([[1.0, 0.0]]), _t([[1.0, 2.0]]), 0.5)),
        ("random batch: actions (8, 3), latent (8, 6)",
         (_randn(8, 3, seed=22), _randn(8, 3, seed=23), _randn(8, 6, seed=24), _randn(8, 6, seed=25).exp(), 0.5)),
        ("kl_weight=0: the reconstruction error only",
         (_randn(4, 2, seed=26), _randn(4, 2, seed=27), _randn(4, 4, seed=28), _randn(4, 4, seed=29).exp(), 0.0)),
        ("small std 0.05 (log std^2 is large and negative)",
         (_randn(2, 1, seed=30), _randn(2, 1, seed=31), _t([[0.1, 0.0], [0.0, 0.2]]), _t([[0.05, 0.05], [0.1, 0.5]]), 0.5)),
    ]).report()


def check_critic_target(fn) -> None:
    """Task: BCQ's ``y = r + gamma (1 - done) max_j [soft_clipped_double_q(Q'_1, Q'_2)](s', a_j)``."""
    from .bcq import critic_target
    _check_cases("critic_target", fn, critic_target, [
        ("r=[1], done=[0], next_q1=[[1, 4]], next_q2=[[2, 3]], gamma=0.9, lambda=0.75 (by hand: 1 + 0.9 * 3.25)",
         (_t([1.0]), _t([0.0]), _t([[1.0, 4.0]]), _t([[2.0, 3.0]]), 0.9, 0.75)),
        ("done=[1]: the target is the reward", (_t([2.0]), _t([1.0]), _t([[10.0, 20.0]]), _t([[5.0, 6.0]]), 0.99, 0.75)),
        ("one candidate per next state", (_randn(3, seed=32), _t([0.0, 1.0, 0.0]), _randn(3, 1, seed=33),
                                           _randn(3, 1, seed=34), 0.99, 0.75)),
        ("random batch of 5 with 10 candidates", (_randn(5, seed=35), (_randn(5, seed=36) > 1).float(),
                                                  _randn(5, 10, seed=37), _randn(5, 10, seed=38), 0.99, 0.75)),
    ]).report()


def check_bcq_action_mask(fn) -> None:
    """Task: discrete BCQ's mask ``G(a|s) / max_a' G(a'|s) >= threshold`` from log-probabilities."""
    import torch
    from .bcq import bcq_action_mask
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    _check_cases("bcq_action_mask", fn, bcq_action_mask, [
        ("probs=[0.5, 0.3, 0.15, 0.05], threshold=0.3 (ratios 1, 0.6, 0.3, 0.1)", (probs.log(), 0.3)),
        ("threshold=0: every action allowed", (probs.log(), 0.0)),
        ("threshold=1: only the most likely action", (probs.log(), 1.0)),
        ("a state where no action reaches probability 0.3 (the threshold is relative)",
         (torch.tensor([[0.25, 0.25, 0.2, 0.2, 0.1]]).log(), 0.5)),
        ("tiny probabilities: log-probs [-200, -201, -210] (ratios 1, e^-1, e^-10)",
         (torch.tensor([[-200.0, -201.0, -210.0]]), 0.3)),
    ]).report()


# ---------------------------------------------------------------------------------------------------------------
# Agent and experiment tasks: small fixed problems, agents built from a seed, checks against minirl's own agents
# ---------------------------------------------------------------------------------------------------------------

THRESHOLDS = (0.0, 0.1, 0.5, 1.0)      # discrete BCQ's threshold tau, chapter 2's experiment
ALPHAS = (0.0, 0.1, 1.0, 10.0)         # discrete CQL's alpha, chapter 3's experiment
EXPECTILES = (0.5, 0.7, 0.9, 0.99)     # IQL's expectile tau, chapter 4's experiment
AGENT_STEPS = 20                       # updates compared step by step in an agent task


def tabular_exercise():
    """The small offline problem of chapters 2 and 3's agent and experiment tasks.

    An 8-state, 4-action random MDP (rewards in [-1, 0], gamma 0.9) and 400 transitions of a behaviour policy that
    takes action 0 (70%) or 1 (30%), never 2 or 3. States are one-hot vectors. Returns a namespace with ``mdp``,
    ``pi_beta``, ``data`` (the tabular arrays), ``states`` (the 8 one-hot states, float32), ``bcq_batch`` (``act`` of
    shape (N, 1), as discrete BCQ takes it) and ``cql_batch`` (``act`` int64 of shape (N,)), the whole dataset as one
    batch.
    """
    from types import SimpleNamespace

    import torch

    from . import tabular as tab
    S, A = 8, 4
    mdp = tab.random_mdp(S, A, gamma=0.9, seed=0, branching=3, reward_range=(-1.0, 0.0))
    pi_beta = np.zeros((S, A))
    pi_beta[:, 0], pi_beta[:, 1] = 0.7, 0.3
    data = tab.sample_dataset(mdp, pi_beta, 400, seed=0)
    eye = torch.eye(S)
    common = {"obs": eye[data["s"]], "next_obs": eye[data["s_next"]],
              "rew": torch.as_tensor(data["r"], dtype=torch.float32),
              "done": torch.as_tensor(data["done"], dtype=torch.float32)}
    return SimpleNamespace(mdp=mdp, pi_beta=pi_beta, data=data, states=np.eye(S, dtype=np.float32),
                           bcq_batch={**common, "act": torch.as_tensor(data["a"], dtype=torch.float32)[:, None]},
                           cql_batch={**common, "act": torch.as_tensor(data["a"])})


def make_discrete_bcq(threshold: float = 0.3, seed: int = 0):
    """Discrete BCQ for :func:`tabular_exercise`: 32-32 networks, Adam 1e-2, gamma 0.9, Polyak 0.1; seeded."""
    import torch

    from .bcq import DiscreteBCQ, DiscreteBCQConfig
    torch.manual_seed(seed)
    return DiscreteBCQ(8, 1, config=DiscreteBCQConfig(n_actions=4, hidden=(32, 32), lr=1e-2, gamma=0.9,
                                                      threshold=threshold, target_tau=0.1))


def make_discrete_cql(cql_alpha: float = 0.5, seed: int = 0):
    """Discrete CQL for :func:`tabular_exercise`: 32-32 network, Adam 1e-2, gamma 0.9, target copied every 25."""
    import torch

    from .cql import DiscreteCQL, DiscreteCQLConfig
    torch.manual_seed(seed)
    return DiscreteCQL(8, 4, config=DiscreteCQLConfig(hidden=(32, 32), lr=1e-2, gamma=0.9, cql_alpha=cql_alpha,
                                                      target_update_every=25))


def greedy_return(agent, problem) -> float:
    """The true return, in ``problem.mdp``, of the deterministic policy ``agent.act`` at every state."""
    from . import tabular as tab
    actions = np.asarray(agent.act(problem.states)).reshape(-1)
    return tab.policy_return(problem.mdp, np.eye(problem.mdp.n_actions)[actions])


def continuous_exercise(n: int = 256, seed: int = 0) -> dict:
    """The small continuous dataset of chapter 4's agent and experiment tasks, as one batch of tensors.

    States ``s`` uniform in [-1, 1]^2; the behaviour aims at ``a = s_0 / 2`` with noise 0.5 (clipped to [-1, 1]);
    the reward ``1 - 4 (a - s_0)^2`` is best at ``a = s_0``; next states are ``s`` plus noise, and half the
    transitions are terminal.
    """
    import torch
    rng = np.random.default_rng(seed)
    s = rng.uniform(-1.0, 1.0, (n, 2))
    a = np.clip(0.5 * s[:, :1] + rng.normal(0.0, 0.5, (n, 1)), -1.0, 1.0)
    r = 1.0 - 4.0 * (a[:, 0] - s[:, 0]) ** 2
    s_next = np.clip(s + rng.normal(0.0, 0.3, s.shape), -1.0, 1.0)
    done = (rng.random(n) < 0.5).astype(float)
    f = lambda x: torch.as_tensor(x, dtype=torch.float32)  # noqa: E731
    return {"obs": f(s), "act": f(a), "rew": f(r), "next_obs": f(s_next), "done": f(done)}


def make_iql(expectile: float = 0.7, seed: int = 0):
    """IQL for :func:`continuous_exercise`: 32-32 networks, gamma 0.9, Polyak 0.05, no cosine schedule, raw states
    and rewards; seeded."""
    import torch

    from .iql import IQL, IQLConfig
    torch.manual_seed(seed)
    cfg = IQLConfig(hidden=(32, 32), actor_lr=1e-3, critic_lr=3e-3, value_lr=3e-3, gamma=0.9, tau=0.05,
                    expectile=expectile, beta=3.0, cosine_actor_lr=False, normalize_states=False, reward_scale=None)
    return IQL(2, 1, -1.0, 1.0, config=cfg)


def _train(agent, update, batch, steps: int, keys: tuple[str, ...]) -> list[dict]:
    """``steps`` calls of ``update(agent, batch)`` (``None``: ``agent.update``); the logged ``keys`` as floats."""
    logs = []
    for _ in range(steps):
        out = agent.update(batch) if update is None else update(agent, batch)
        if not isinstance(out, dict):
            raise TypeError(f"the update returned a {type(out).__name__}, expected a dict with keys {list(keys)}")
        missing = [k for k in keys if k not in out]
        if missing:
            raise KeyError(f"the update's dict has no {missing[0]!r} (expected keys {list(keys)})")
        logs.append({k: float(out[k]) for k in keys})
    return logs


def _check_agent(task: str, fn, make_agent, batch, keys: tuple[str, ...], probes: dict) -> None:
    """Train a seeded agent with ``fn`` and minirl's agent with ``agent.update`` for :data:`AGENT_STEPS` updates on
    the same batch; compare the losses after the first and the last update, then every ``probes[name](agent)``."""
    want_agent = make_agent()
    want = _train(want_agent, None, batch, AGENT_STEPS, keys)
    c = Checks(task)
    state: dict = {}

    def run():
        if not state:
            agent = make_agent()
            try:
                state["logs"] = _train(agent, fn, batch, AGENT_STEPS, keys)
                state["agent"] = agent
            except Exception as e:  # noqa: BLE001 - reported by each check
                state["error"] = e
        if "error" in state:
            raise state["error"]
        return state

    for step in (0, AGENT_STEPS - 1):
        for k in keys:
            c.compare(f"{k} returned by update {step + 1}", lambda k=k, step=step: run()["logs"][step][k],
                      want[step][k], atol=1e-5, rtol=1e-4)
    for name, probe in probes.items():
        c.compare(f"{name} after {AGENT_STEPS} updates", lambda probe=probe: probe(run()["agent"]), probe(want_agent),
                  atol=1e-4, rtol=1e-3)
    c.report()


def _q_table(net, states):
    import torch
    with torch.no_grad():
        return net(torch.as_tensor(states)).numpy()


def check_discrete_bcq_update(fn) -> None:
    """Task: ``fn(agent, batch)`` does one update of a ``minirl.bcq.DiscreteBCQ``: its losses, networks and step
    counter must follow ``agent.update`` on :func:`tabular_exercise`'s data from the same seed."""
    p = tabular_exercise()
    _check_agent("discrete_bcq_update", fn, make_discrete_bcq, p.bcq_batch, ("q_loss", "imitation_loss"), {
        "Q(s, .) at the 8 states": lambda a: _q_table(a.q, p.states),
        "the target network Q'(s, .)": lambda a: _q_table(a.q_target, p.states),
        "the imitation logits": lambda a: _q_table(a.imitation, p.states),
        "agent.steps": lambda a: a.steps,
    })


def check_discrete_cql_update(fn) -> None:
    """Task: ``fn(agent, batch)`` does one update of a ``minirl.cql.DiscreteCQL`` (alpha 0.5): losses, Q-network,
    target network and step counter as ``agent.update`` on :func:`tabular_exercise`'s data from the same seed."""
    p = tabular_exercise()
    _check_agent("discrete_cql_update", fn, make_discrete_cql, p.cql_batch, ("loss", "td_loss", "cql_gap"), {
        "Q(s, .) at the 8 states": lambda a: _q_table(a.q, p.states),
        "the target network Q'(s, .)": lambda a: _q_table(a.q_target, p.states),
        "agent.step": lambda a: a.step,
    })


def check_iql_update(fn) -> None:
    """Task: ``fn(agent, batch)`` does one update of a ``minirl.iql.IQL`` (V, then the actor, then the critics, then
    the target critics), as ``agent.update`` on :func:`continuous_exercise`'s data from the same seed."""
    import torch
    batch = continuous_exercise()
    probe = batch["obs"][:16], batch["act"][:16]

    def values(net_call):
        with torch.no_grad():
            return net_call().numpy()

    _check_agent("iql_update", fn, make_iql, batch, ("value_loss", "actor_loss", "critic_loss"), {
        "V(s) at 16 states": lambda a: values(lambda: a.V(probe[0])),
        "Q_i(s, a) of both critics at 16 pairs": lambda a: values(lambda: a.critic(*probe)),
        "the target critics": lambda a: values(lambda: a.critic_target(*probe)),
        "the actor's log-probabilities of 16 data actions": lambda a: values(lambda: a.actor.log_prob(*probe)),
        "agent.step": lambda a: a.step,
    })


_REFERENCE_CACHE: dict = {}


def threshold_sweep_reference(thresholds=THRESHOLDS, steps: int = 150) -> np.ndarray:
    """Chapter 2's experiment with minirl's discrete BCQ: the true return of the greedy allowed policy after
    ``steps`` full-batch updates, one run per threshold (seed 0)."""
    p = tabular_exercise()
    out = []
    for threshold in thresholds:
        agent = make_discrete_bcq(threshold)
        _train(agent, None, p.bcq_batch, steps, ())
        out.append(greedy_return(agent, p))
    return np.array(out)


def alpha_sweep_reference(alphas=ALPHAS, steps: int = 150) -> tuple[np.ndarray, np.ndarray]:
    """Chapter 3's experiment with minirl's discrete CQL: per alpha, the greedy policy's true return and the gap
    ``mean Q(s, unseen actions 2, 3) - mean Q(s, seen actions 0, 1)`` over the 8 states."""
    p = tabular_exercise()
    returns, gaps = [], []
    for alpha in alphas:
        agent = make_discrete_cql(alpha)
        _train(agent, None, p.cql_batch, steps, ())
        q = agent.q_values(p.states)
        returns.append(greedy_return(agent, p))
        gaps.append(float(q[:, 2:].mean() - q[:, :2].mean()))
    return np.array(returns), np.array(gaps)


def expectile_sweep_reference(expectiles=EXPECTILES, steps: int = 100) -> np.ndarray:
    """Chapter 4's experiment with minirl's IQL: the mean of V(s) over the dataset's states after ``steps``
    full-batch updates, one run per expectile (seed 0)."""
    import torch
    batch = continuous_exercise()
    out = []
    for tau in expectiles:
        agent = make_iql(tau)
        _train(agent, None, batch, steps, ())
        with torch.no_grad():
            out.append(float(agent.V(batch["obs"]).mean()))
    return np.array(out)


def _cached(name: str, compute):
    if name not in _REFERENCE_CACHE:
        _REFERENCE_CACHE[name] = compute()
    return _REFERENCE_CACHE[name]


def _check_sweep(task: str, fn, arg, want: tuple, labels: tuple[str, ...], descriptions: list[str], atol: float):
    """Call ``fn(arg)`` once; compare each of its outputs (one array per label) value by value with ``want``."""
    c = Checks(task)
    state: dict = {}

    def run():
        if not state:
            try:
                got = fn(arg)
                got = got if len(labels) > 1 else (got,)
                if not isinstance(got, (tuple, list)) or len(got) != len(labels):
                    raise ValueError(f"expected {len(labels)} arrays ({', '.join(labels)}), got {type(got).__name__}")
                state["got"] = [np.asarray(g, dtype=float).reshape(-1) for g in got]
            except Exception as e:  # noqa: BLE001 - reported by each check
                state["error"] = e
        if "error" in state:
            raise state["error"]
        return state["got"]

    for j, label in enumerate(labels):
        for i, description in enumerate(descriptions):
            c.compare(f"{label} at {description}", lambda i=i, j=j: _index(run()[j], i, len(descriptions)),
                      want[j][i], atol=atol, rtol=1e-3)
    c.report()
    return tuple(state["got"]) if "got" in state and len(labels) > 1 else (state["got"][0] if "got" in state
                                                                          else None)


def _index(values: np.ndarray, i: int, n: int) -> float:
    if values.shape != (n,):
        raise ValueError(f"expected {n} values (one per setting), got shape {values.shape}")
    return values[i]


def check_threshold_sweep(fn):
    """Task: ``fn(thresholds)`` returns the true return of discrete BCQ's greedy allowed policy, one per threshold
    (:func:`threshold_sweep_reference`). Returns the student's returns (``None`` if the function fails), to plot."""
    want = _cached("threshold", threshold_sweep_reference)
    return _check_sweep("threshold_sweep", fn, THRESHOLDS, (want,), ("the return",),
                        [f"threshold {t:g}" for t in THRESHOLDS], atol=1e-3)


def check_alpha_sweep(fn):
    """Task: ``fn(alphas)`` returns ``(returns, gaps)`` of discrete CQL, one per alpha (:func:`alpha_sweep_reference`).
    Returns the student's pair (``None`` if the function fails), to plot."""
    want = _cached("alpha", alpha_sweep_reference)
    return _check_sweep("alpha_sweep", fn, ALPHAS, want, ("the return", "the Q gap unseen - seen"),
                        [f"alpha {a:g}" for a in ALPHAS], atol=1e-3)


def check_expectile_sweep(fn):
    """Task: ``fn(expectiles)`` returns IQL's mean V(s) over the data, one per expectile
    (:func:`expectile_sweep_reference`). Returns the student's values (``None`` if the function fails), to plot."""
    want = _cached("expectile", expectile_sweep_reference)
    return _check_sweep("expectile_sweep", fn, EXPECTILES, (want,), ("the mean V(s)",),
                        [f"expectile {t:g}" for t in EXPECTILES], atol=1e-3)


# ---------------------------------------------------------------------------------------------------------------
# Student copies, the checks file and the book page: generated from the reference notebooks
# ---------------------------------------------------------------------------------------------------------------

STUB_MESSAGE = "your code here: replace this line"
WRITTEN_PLACEHOLDER = "_Your answer here: two or three sentences that cite the figure. Graded by the instructor._"
CHECKS_FILE = EXERCISES / "checks.json"
LEVEL_TAGS = ("agent", "experiment")  # a solution cell's level; untagged: a function task


def stub_source(source: str) -> str:
    """A solution cell's source with every function body replaced by ``raise NotImplementedError``.

    Imports, comments above the functions, signatures and docstrings stay; everything else at the top level of the
    cell (an assignment the student must make, e.g. ``answer = ...``) becomes ``name = None  # your answer``.
    """
    tree = ast.parse(source)
    lines = source.splitlines()
    out: list[str] = []
    prev_end = 0
    for node in tree.body:
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        out.extend(lines[prev_end:start])  # comments and blank lines between statements
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            has_doc = (isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
                       and isinstance(body[0].value.value, str))
            keep_until = body[0].end_lineno if has_doc else body[0].lineno - 1
            out.extend(lines[start:keep_until])
            indent = " " * body[0].col_offset
            out.append(f'{indent}raise NotImplementedError("{node.name}: {STUB_MESSAGE}")')
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.extend(lines[start:node.end_lineno])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = ", ".join(ast.unparse(t) for t in targets)
            out.append(f"{names} = None  # your answer")
        else:
            raise ValueError(f"a solution cell may hold imports, functions and assignments; line {node.lineno} is a "
                             f"{type(node).__name__}")
        prev_end = node.end_lineno
    return "\n".join(out).rstrip() + "\n"


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _defined_names(source: str) -> list[str]:
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def checker_task(source: str) -> str | None:
    """The task a checker cell checks (``check_expectile_loss(expectile_loss)`` or ``returns =
    check_threshold_sweep(threshold_sweep)`` -> the name after ``check_``), or ``None`` if the cell is not one call
    of a ``check_*`` function (possibly assigned to a name)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if len(body) != 1:
        return None
    node = body[0]
    call = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id.startswith("check_"):
        return call.func.id[len("check_"):]
    return None


def written_marker(task: str) -> str:
    return f"**Your answer ({task}):**"


def notebook_spec(nb: dict, name: str) -> dict:
    """The checks-file entry of one reference notebook: its cells as given / answer / check / written, the expected
    verdict of every checker read from the reference's stored output. No solution text."""
    cells, pending, last_task = [], None, None
    for cell in nb["cells"]:
        src, tags = _src(cell), _tags(cell)
        if cell["cell_type"] == "markdown":
            if "written" in tags:
                if last_task is None:
                    raise ValueError(f"{name}: a written-answer cell before any task")
                task = f"{last_task}_answer"
                cells.append({"kind": "written", "task": task, "level": "written", "marker": written_marker(task),
                              "placeholder": WRITTEN_PLACEHOLDER})
            continue
        if "solution" in tags:
            level = next((t for t in LEVEL_TAGS if t in tags), "function")
            pending = {"kind": "answer", "names": _defined_names(src), "stub": stub_source(src), "level": level}
            cells.append(pending)
            continue
        task = checker_task(src)
        if task is None:
            cells.append({"kind": "given", "source": src})
            continue
        if pending is None:
            raise ValueError(f"{name}: the checker of {task} has no solution cell before it")
        if task in pending["names"]:
            pending["names"] = [task] + [n for n in pending["names"] if n != task]
        pending["task"] = task
        text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        m = re.search(rf"^{re.escape(task)}: (\d+)/(\d+) checks passed$", text, re.M)
        if not m or m.group(1) != m.group(2):
            raise ValueError(f"{name}: the reference's checker of {task} did not print '{task}: n/n checks passed' "
                             f"(re-execute notebooks/exercises/solutions/{name}.ipynb)")
        cells.append({"kind": "check", "task": task, "level": pending["level"], "source": src,
                      "expected": m.group(0), "n": int(m.group(2))})
        last_task, pending = task, None
    title = _src(nb["cells"][0]).splitlines()[0].lstrip("# ").strip()
    return {"title": title, "cells": cells}


def student_notebook(nb: dict, name: str | None = None) -> dict:
    """The student copy of a reference notebook (as a JSON dict): ``solution`` cells stubbed, ``written`` answers
    replaced by a placeholder, every output dropped (a student copy shows no verdict before it is run)."""
    nb = copy.deepcopy(nb)
    if name:
        nb.setdefault("metadata", {})["minirl_exercise"] = name
    last_task = None
    for cell in nb["cells"]:
        tags = _tags(cell)
        if cell["cell_type"] == "code":
            last_task = checker_task(_src(cell)) or last_task
            if "solution" in tags:
                cell["source"] = stub_source(_src(cell)).splitlines(keepends=True)
                cell["metadata"]["tags"] = [t for t in tags if t != "solution"] + ["student"]
            cell["outputs"] = []
            cell["execution_count"] = None
            cell["metadata"].pop("execution", None)
        elif "written" in tags:
            cell["source"] = f"{written_marker(f'{last_task}_answer')}\n\n{WRITTEN_PLACEHOLDER}\n".splitlines(
                keepends=True)
    return nb


def _fence(text: str, minimum: int = 3) -> str:
    """A backtick fence longer than any run of backticks in ``text``."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(minimum, longest + 1)


def book_page(notebooks: list[Path], hide_solutions: bool = False) -> str:
    """``book/exercises.md``: every task as an ``exercise``; its solution behind a dropdown, or absent with
    ``hide_solutions`` (the build of a class)."""
    intro = ("Generated by `python -m minirl.exercises make-student` from the reference notebooks in "
             "`notebooks/exercises/solutions/`; do not edit by hand. Each task is code to write in the student "
             "notebook `notebooks/exercises/<name>.ipynb`, at one of three levels: a *function* (a loss, a target), an "
             "*agent* (one update of a whole agent, compared with minirl's own on fixed data and seed) and an "
             "*experiment* (a sweep whose numbers are checked, with a figure and a written answer that the instructor "
             "marks). Check a notebook with `python -m minirl.exercises check <name>.ipynb` (the grader's verdict). "
             "How to hand the notebooks out and grade them: {doc}`instructors`.")
    if hide_solutions:
        intro += "\n\nThis build of the book leaves the solutions out (`make-student --hide-solutions`)."
    parts = ["# Exercises\n", intro + "\n"]
    for path in notebooks:
        nb = json.loads(path.read_text())
        cells = nb["cells"]
        title = _src(cells[0]).splitlines()[0].lstrip("# ").strip()
        parts.append(f"## {title}\n\nNotebook: `notebooks/exercises/{path.name}`.\n")
        explanation, last = "", None
        for cell in cells[1:]:
            src = _src(cell)
            tags = _tags(cell)
            if cell["cell_type"] == "markdown" and "written" not in tags:
                explanation = src
            elif cell["cell_type"] == "markdown":
                label = f"ex-{path.stem.replace('_', '-')}-{last.replace('_', '-')}-answer"
                heading, _, body = explanation.partition("\n")
                parts.append(f"````{{exercise}} {heading.lstrip('# ').strip()}\n:label: {label}\n\n{body.strip()}\n"
                             f"````\n")
                if not hide_solutions:
                    answer = src.split("\n", 1)[1].strip() if "\n" in src else ""
                    parts.append(f"````{{solution}} {label}\n:class: dropdown\n\n{answer}\n````\n")
            elif "solution" in tags:
                func = _defined_names(src)[-1] if _defined_names(src) else f"answer-{len(parts)}"
                last = func
                label = f"ex-{path.stem.replace('_', '-')}-{func.replace('_', '-')}"
                heading, _, body = explanation.partition("\n")
                stub = stub_source(src).rstrip()
                fence = _fence(body + stub + src, 4)
                parts.append(f"{fence}{{exercise}} {heading.lstrip('# ').strip()}\n:label: {label}\n\n{body.strip()}\n"
                             f"\n```python\n{stub}\n```\n{fence}\n")
                if not hide_solutions:
                    parts.append(f"{fence}{{solution}} {label}\n:class: dropdown\n\n```python\n{src.rstrip()}\n```\n"
                                 f"{fence}\n")
    return "\n".join(parts)


def _setup_cell_problem(nb: dict, name: str) -> str | None:
    """Why the reference's setup cell differs from ``scripts/setup_cell.py``'s, or ``None``."""
    script = REPO / "scripts" / "setup_cell.py"
    if not script.exists():
        return None  # an installed copy without the repository's scripts: nothing to compare with
    import importlib.util
    spec = importlib.util.spec_from_file_location("_minirl_setup_cell", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    want = module.cell_source(module.configured_repository())
    found = [c for c in nb["cells"] if module.TAG in _tags(c)]
    if not found:
        return f"{name}: no setup cell (run python scripts/setup_cell.py notebooks/exercises/solutions/*.ipynb)"
    if _src(found[0]) != want:
        return f"{name}: stale setup cell (run python scripts/setup_cell.py notebooks/exercises/solutions/*.ipynb)"
    return None


def make_student(check: bool = False, hide_solutions: bool = False) -> list[str]:
    """Write (or with ``check``, compare) the student copies, the checks file and the book page; returns the stale
    files. ``hide_solutions`` writes the book page without any solution (a class's build)."""
    solutions = sorted(SOLUTIONS.glob("*.ipynb"))
    if not solutions:
        raise FileNotFoundError(f"no reference notebooks in {SOLUTIONS}")
    references = {p: json.loads(p.read_text()) for p in solutions}
    problems = [m for p, nb in references.items() if (m := _setup_cell_problem(nb, p.name))]
    if problems:
        raise ValueError("; ".join(problems))
    dump = lambda x: json.dumps(x, indent=1, ensure_ascii=False) + "\n"  # noqa: E731
    targets = {EXERCISES / p.name: dump(student_notebook(nb, p.stem)) for p, nb in references.items()}
    targets[CHECKS_FILE] = dump({"version": 1, "notebooks": {p.stem: notebook_spec(nb, p.stem)
                                                             for p, nb in references.items()}})
    targets[BOOK_PAGE] = book_page(solutions, hide_solutions)
    stale = []
    for path, text in targets.items():
        if not path.exists() or path.read_text() != text:
            stale.append(str(path.relative_to(REPO)))
            if not check:
                path.write_text(text)
    return stale


# ---------------------------------------------------------------------------------------------------------------
# A class's release: the book and the student copies without any solution text
# ---------------------------------------------------------------------------------------------------------------

def strip_solutions(markdown: str) -> str:
    """``markdown`` without its ``{solution}`` directives (fenced with backticks or colons, any length)."""
    out, fence = [], None
    for line in markdown.splitlines(keepends=True):
        if fence is None:
            m = re.match(r"^(`{3,}|:{3,})\{solution\}", line)
            if m:
                fence = m.group(1)
                continue
            out.append(line)
        elif line.strip() == fence:
            fence = None
    return "".join(out)


def solution_lines() -> list[str]:
    """Distinctive lines of the reference solutions (code lines that are not in the student copies): what a class's
    release must not contain."""
    lines, public = set(), ""
    for p in sorted(SOLUTIONS.glob("*.ipynb")):
        for cell in json.loads(p.read_text())["cells"]:
            if "solution" in _tags(cell):
                stub = stub_source(_src(cell))
                public += stub + "\n"
                lines |= {ln.strip() for ln in _src(cell).splitlines()
                          if len(ln.strip()) > 24 and not ln.strip().startswith("#")}
            elif "written" in _tags(cell):
                lines |= {ln.strip() for ln in _src(cell).splitlines()[1:] if len(ln.strip()) > 24}
            else:
                public += _src(cell) + "\n"  # the task's own words (a line quoted there is not a leak)
    return sorted(ln for ln in lines if ln not in public)


def class_release(out: Path, build: bool = True, toc_files: list[str] | None = None) -> list[str]:
    """Write ``out/`` for a class: ``out/notebooks/exercises/`` (the student copies and the checks file) and, with
    ``build``, ``out/book/`` (the book built from a copy of the sources with every solution removed: the exercises
    page from :func:`book_page` with ``hide_solutions``, the chapters' ``{solution}`` blocks stripped, and
    sphinx-exercise's ``hide_solutions`` on). ``toc_files`` builds only those pages (tests). Returns the files of
    ``out`` that still contain a solution line (empty when the release is clean)."""
    import shutil
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: give a new folder for the class's release")
    if make_student(check=True):
        raise ValueError("the student copies are out of date: run python -m minirl.exercises make-student first")
    nb_out = out / "notebooks" / "exercises"
    nb_out.mkdir(parents=True)
    for p in sorted(SOLUTIONS.glob("*.ipynb")):
        shutil.copy(EXERCISES / p.name, nb_out / p.name)
    shutil.copy(CHECKS_FILE, nb_out / CHECKS_FILE.name)
    if build:
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "src"
            src.mkdir()
            for name in ("_config.yml", "_toc.yml"):
                shutil.copy(REPO / name, src / name)
            shutil.copytree(REPO / "book", src / "book")
            (src / "notebooks").mkdir()
            for nb in (REPO / "notebooks").glob("*.ipynb"):
                shutil.copy(nb, src / "notebooks" / nb.name)
            for page in (src / "book").glob("*.md"):
                page.write_text(strip_solutions(page.read_text()))
            (src / "book" / "exercises.md").write_text(book_page(sorted(SOLUTIONS.glob("*.ipynb")), True))
            config = (src / "_config.yml").read_text()
            config = config.replace("  config:\n", "  config:\n    hide_solutions: true  # a class's release\n", 1)
            (src / "_config.yml").write_text(config)
            if toc_files:
                toc = "format: jb-book\nroot: book/intro\nchapters:\n" + "".join(f"  - file: {f}\n" for f in toc_files)
                (src / "_toc.yml").write_text(toc)
            result = subprocess.run(["jupyter-book", "build", "--path-output", str(out / "book"), str(src)],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(f"jupyter-book build failed:\n{(result.stdout + result.stderr)[-3000:]}")
    needles = solution_lines()
    return [str(f.relative_to(out)) for f in out.rglob("*")
            if f.is_file() and f.suffix in (".html", ".md", ".ipynb", ".json", ".txt", ".js", ".py")
            and any(n in readable_text(f) for n in needles)]


def readable_text(path: Path) -> str:
    """A file's text as a reader sees it: for HTML, without tags (syntax highlighting splits code into spans) and with
    entities decoded."""
    import html
    text = Path(path).read_text(errors="replace")
    if Path(path).suffix == ".html":
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return text


# ---------------------------------------------------------------------------------------------------------------
# Grading (minirl/grading.py does the work) and the command line
# ---------------------------------------------------------------------------------------------------------------

def grade(folder: Path, **kwargs) -> str:
    """Grade ``folder/<student>/<exercise>.ipynb`` against the reference; returns the Markdown table."""
    from . import grading
    results, _ = grading.grade_folder(folder, **kwargs)
    return grading.table(results)


def _print_check(rows, job) -> bool:
    """The self-check's report: one line per task, then the failed checks of each failed task."""
    check_step = {s["task"]: k for k, s in enumerate(job.steps or []) if s["kind"] == "check"}
    auto = [r for r in rows if r.level != "written"]
    for r in rows:
        if r.status == "passed":
            print(f"ok      {r.task} ({r.level}): {r.checks_passed}/{r.checks_total} checks passed")
        elif r.status == "manual":
            print(f"manual  {r.task} (written): {'answered, for the instructor' if r.answer else r.message}")
        elif r.status == "failed":
            print(f"FAILED  {r.task} ({r.level}): {r.checks_passed}/{r.checks_total} checks passed")
            output = (job.details or {}).get(check_step.get(r.task), "")
            failures = [ln for ln in output.splitlines() if ln.strip() and not ln.startswith(f"{r.task}: ")][:8]
            print("\n".join("        " + ln for ln in failures) or f"        {r.message}")
        else:
            print(f"FAILED  {r.task} ({r.level}): {r.status}" + (f": {r.message}" if r.message else ""))
    passed = sum(r.passed for r in auto)
    print(f"{job.notebook}: {passed}/{len(auto)} tasks passed"
          + (f", {len(rows) - len(auto)} written answer(s) for the instructor" if len(rows) > len(auto) else "")
          + " (graded against the reference, as the instructor's grader does)")
    return passed == len(auto)


def main(argv: list[str] | None = None) -> int:
    from . import grading
    p = argparse.ArgumentParser(prog="python -m minirl.exercises", description="exercise notebooks: student copies "
                                "from the reference notebooks, the self-check, grading, a class's release")
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make-student", help="write notebooks/exercises/*.ipynb, checks.json and book/exercises.md")
    m.add_argument("--check", action="store_true", help="only check they are up to date (exit 1 if not)")
    m.add_argument("--hide-solutions", action="store_true", help="book/exercises.md without the solutions")
    c = sub.add_parser("check", help="self-check one saved notebook: the grader's verdict for each task")
    c.add_argument("notebook", type=Path)
    c.add_argument("--exercise", help="which exercise it is (default: from the notebook, else its file name)")
    c.add_argument("--time-limit", type=float, default=grading.DEFAULT_TIME_LIMIT, help="seconds (default %(default)s)")
    g = sub.add_parser("grade", help="grade a folder of submissions: DIR/<student>/<exercise>.ipynb")
    g.add_argument("folder", type=Path)
    g.add_argument("--csv", type=Path, help="write one row per student and task to this CSV file")
    g.add_argument("--json", type=Path, help="write one row per student and task to this JSON file")
    g.add_argument("--time-limit", type=float, default=grading.DEFAULT_TIME_LIMIT,
                   help="seconds per notebook (default %(default)s)")
    g.add_argument("--parallel", type=int, default=min(4, os.cpu_count() or 1),
                   help="notebooks graded at once (default %(default)s)")
    g.add_argument("--notebooks", help="comma-separated exercises to grade (default: every one submitted)")
    r = sub.add_parser("class-release", help="the book and the student copies without any solution text")
    r.add_argument("out", type=Path, help="a new folder")
    r.add_argument("--no-build", action="store_true", help="only the student copies, not the book")
    a = p.parse_args(argv)
    prog = f"python -m minirl.exercises {a.command}"
    try:
        if a.command == "make-student":
            stale = make_student(check=a.check, hide_solutions=a.hide_solutions)
            verb = "out of date" if a.check else "written"
            print("\n".join(f"{verb}: {s}" for s in stale) or "all student copies are up to date")
            return 1 if (a.check and stale) else 0
        if a.command == "check":
            rows, job = grading.check_notebook(a.notebook, time_limit=a.time_limit, exercise=a.exercise)
            _print_check(rows, job)
            return 0 if all(r.passed for r in rows if r.level != "written") else 1
        if a.command == "grade":
            notebooks = [n.strip().removesuffix(".ipynb") for n in a.notebooks.split(",")] if a.notebooks else None
            results, _ = grading.grade_folder(a.folder, time_limit=a.time_limit, parallel=a.parallel,
                                              notebooks=notebooks)
            print(grading.table(results))
            if a.csv:
                grading.write_csv(results, a.csv)
            if a.json:
                grading.write_json(results, a.json)
            return 0
        leaks = class_release(a.out, build=not a.no_build)
        if leaks:
            print(f"{prog}: error: solution text found in {', '.join(leaks)}", file=sys.stderr)
            return 1
        print(f"class release written to {a.out}: notebooks/exercises/ (student copies, checks.json)"
              + ("" if a.no_build else ", book/_build/html/ (the book without solutions)"))
        return 0
    except (grading.GradingError, ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
