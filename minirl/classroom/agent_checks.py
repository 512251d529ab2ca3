"""The agent and experiment tasks: small fixed problems, agents built from a seed, checks against minirl's own.

An *agent* task is one update of a whole minirl agent, compared step by step with the agent's own ``update`` from the
same seed on small fixed data (:func:`check_discrete_bcq_update`, :func:`check_discrete_cql_update`,
:func:`check_iql_update`); an *experiment* task is a sweep whose numbers are checked against minirl's own run of it
(:func:`check_threshold_sweep`, :func:`check_alpha_sweep`, :func:`check_expectile_sweep`). Its figure and its written
answer (a Markdown cell tagged ``written``) go to the instructor. How a check compares: :mod:`minirl.classroom.checks`.
"""
from __future__ import annotations

import numpy as np

from .checks import Checks, Ref


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

    from .. import tabular as tab
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

    from ..discrete import DiscreteBCQ, DiscreteBCQConfig
    torch.manual_seed(seed)
    return DiscreteBCQ(8, 4, DiscreteBCQConfig(hidden=(32, 32), lr=1e-2, gamma=0.9, threshold=threshold,
                                               target_tau=0.1))


def make_discrete_cql(cql_alpha: float = 0.5, seed: int = 0):
    """Discrete CQL for :func:`tabular_exercise`: 32-32 network, Adam 1e-2, gamma 0.9, target copied every 25."""
    import torch

    from ..discrete import DiscreteCQL, DiscreteCQLConfig
    torch.manual_seed(seed)
    return DiscreteCQL(8, 4, DiscreteCQLConfig(hidden=(32, 32), lr=1e-2, gamma=0.9, cql_alpha=cql_alpha,
                                               target_update_every=25))


def greedy_return(agent, problem) -> float:
    """The true return, in ``problem.mdp``, of the deterministic policy ``agent.act`` at every state."""
    from .. import tabular as tab
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

    from ..iql import IQL, IQLConfig
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


def _check_agent(task: str, fn, make_agent, batch, keys: tuple[str, ...], probes: dict, reference) -> None:
    """Train a seeded agent with ``fn`` and minirl's agent with ``agent.update`` for :data:`AGENT_STEPS` updates on
    the same batch; compare the losses after the first and the last update, then every ``probes[name](agent)``.
    While grading, both agents start from the seed drawn for the task (:func:`~minirl.classroom.checks.fresh`)."""
    from . import checks
    if checks._FRESH is not None:
        make_agent = (lambda make: lambda: make(seed=checks.fresh(0) % (2 ** 31)))(make_agent)
    reference_run: dict = {}

    def want():  # minirl's own agent, trained where verdicts are computed (never in the grading child)
        if not reference_run:
            agent = make_agent()
            reference_run["logs"] = _train(agent, None, batch, AGENT_STEPS, keys)
            reference_run["agent"] = agent
        return reference_run
    c = Checks(task, reference=reference)
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
                      Ref(lambda k=k, step=step: want()["logs"][step][k]), atol=1e-5, rtol=1e-4)
    for name, probe in probes.items():
        c.compare(f"{name} after {AGENT_STEPS} updates", lambda probe=probe: probe(run()["agent"]),
                  Ref(lambda probe=probe: probe(want()["agent"])), atol=1e-4, rtol=1e-3)
    c.report()


def _method(module: str, cls: str, name: str):
    """``minirl.<module>.<cls>.<name>``: an agent's own method, the reference of an agent task."""
    import importlib
    return getattr(getattr(importlib.import_module(f"minirl.{module}"), cls), name)


def _values(net_call):
    """``net_call()`` without gradient, as a NumPy array: a probe of an agent's networks after an agent task."""
    import torch
    with torch.no_grad():
        return net_call().numpy()


def _q_table(net, states):
    import torch
    with torch.no_grad():
        return net(torch.as_tensor(states)).numpy()


def check_discrete_bcq_update(fn) -> None:
    """Task: ``fn(agent, batch)`` does one update of a ``minirl.discrete.DiscreteBCQ``: its losses, networks and step
    counter must follow ``agent.update`` on :func:`tabular_exercise`'s data from the same seed."""
    p = tabular_exercise()
    _check_agent("discrete_bcq_update", fn, make_discrete_bcq, p.bcq_batch, ("q_loss", "imitation_loss"), {
        "Q(s, .) at the 8 states": lambda a: _q_table(a.q, p.states),
        "the target network Q'(s, .)": lambda a: _q_table(a.q_target, p.states),
        "the imitation logits": lambda a: _q_table(a.imitation, p.states),
        "agent.steps": lambda a: a.steps,
    }, reference=_method("discrete", "DiscreteBCQ", "update"))


def check_discrete_cql_update(fn) -> None:
    """Task: ``fn(agent, batch)`` does one update of a ``minirl.discrete.DiscreteCQL`` (alpha 0.5): losses, Q-network,
    target network and step counter as ``agent.update`` on :func:`tabular_exercise`'s data from the same seed."""
    p = tabular_exercise()
    _check_agent("discrete_cql_update", fn, make_discrete_cql, p.cql_batch, ("loss", "td_loss", "cql_gap"), {
        "Q(s, .) at the 8 states": lambda a: _q_table(a.q, p.states),
        "the target network Q'(s, .)": lambda a: _q_table(a.q_target, p.states),
        "agent.step": lambda a: a.step,
    }, reference=_method("discrete", "DiscreteCQL", "update"))


def check_iql_update(fn) -> None:
    """Task: ``fn(agent, batch)`` does one update of a ``minirl.iql.IQL`` (V, then the actor, then the critics, then
    the target critics), as ``agent.update`` on :func:`continuous_exercise`'s data from the same seed."""
    batch = continuous_exercise()
    probe = batch["obs"][:16], batch["act"][:16]
    _check_agent("iql_update", fn, make_iql, batch, ("value_loss", "actor_loss", "critic_loss"), {
        "V(s) at 16 states": lambda a: _values(lambda: a.V(probe[0])),
        "Q_i(s, a) of both critics at 16 pairs": lambda a: _values(lambda: a.critic(*probe)),
        "the target critics": lambda a: _values(lambda: a.critic_target(*probe)),
        "the actor's log-probabilities of 16 data actions": lambda a: _values(lambda: a.actor.log_prob(*probe)),
        "agent.step": lambda a: a.step,
    }, reference=_method("iql", "IQL", "update"))


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


def _check_sweep(task: str, fn, arg, want: tuple, labels: tuple[str, ...], descriptions: list[str], atol: float,
                 reference):
    """Call ``fn(arg)`` once; compare each of its outputs (one array per label) value by value with ``want``."""
    c = Checks(task, reference=reference)
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
                      Ref(lambda i=i, j=j: (want() if callable(want) else want)[j][i]), atol=atol, rtol=1e-3)
    c.report()
    return tuple(state["got"]) if "got" in state and len(labels) > 1 else (state["got"][0] if "got" in state
                                                                          else None)


# while grading, a sweep runs at settings drawn from these pools (as many as the public ones), per student and task
POOLS = {"threshold": (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0),
         "alpha": (0.0, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0),
         "expectile": (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99),
         "stitching": (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)}


def sweep_settings(name: str, public: tuple) -> tuple:
    """The settings a sweep is checked at: ``public`` for the self-check, and while grading as many drawn (sorted,
    distinct) from ``POOLS[name]`` by the task's draw (:func:`~minirl.classroom.checks.fresh`)."""
    from . import checks
    if checks._FRESH is None:
        return tuple(public)
    rng = np.random.default_rng(checks.fresh(len(name)))
    return tuple(float(v) for v in sorted(rng.choice(POOLS[name], len(public), replace=False)))


def sweep_reference(name: str, settings: tuple, reference, public: tuple, parts: int = 1):
    """A thunk giving the reference's outputs at ``settings`` (a tuple of ``parts`` arrays): the whole public sweep
    cached once, drawn settings each cached on its own (every setting of a sweep is its own run from seed 0)."""
    def want():
        if tuple(settings) == tuple(public):
            out = _cached(name, reference)
        else:
            per = [_cached((name, v), lambda v=v: reference((v,))) for v in settings]
            out = tuple(np.concatenate([np.asarray(p[k] if parts > 1 else p).reshape(-1) for p in per])
                        for k in range(parts))
            out = out if parts > 1 else out[0]
        return out if parts > 1 else (out,)
    return want


def _index(values: np.ndarray, i: int, n: int) -> float:
    if values.shape != (n,):
        raise ValueError(f"expected {n} values (one per setting), got shape {values.shape}")
    return values[i]


def check_threshold_sweep(fn):
    """Task: ``fn(thresholds)`` returns the true return of discrete BCQ's greedy allowed policy, one per threshold
    (:func:`threshold_sweep_reference`). Returns the student's returns (``None`` if the function fails), to plot."""
    settings = sweep_settings("threshold", THRESHOLDS)
    want = sweep_reference("threshold", settings, threshold_sweep_reference, THRESHOLDS)
    return _check_sweep("threshold_sweep", fn, settings, want, ("the return",),
                        [f"threshold {t:g}" for t in settings], atol=1e-3,
                        reference=threshold_sweep_reference)


def check_alpha_sweep(fn):
    """Task: ``fn(alphas)`` returns ``(returns, gaps)`` of discrete CQL, one per alpha (:func:`alpha_sweep_reference`).
    Returns the student's pair (``None`` if the function fails), to plot."""
    settings = sweep_settings("alpha", ALPHAS)
    want = sweep_reference("alpha", settings, alpha_sweep_reference, ALPHAS, parts=2)
    return _check_sweep("alpha_sweep", fn, settings, want, ("the return", "the Q gap unseen - seen"),
                        [f"alpha {a:g}" for a in settings], atol=1e-3,
                        reference=alpha_sweep_reference)


def check_expectile_sweep(fn):
    """Task: ``fn(expectiles)`` returns IQL's mean V(s) over the data, one per expectile
    (:func:`expectile_sweep_reference`). Returns the student's values (``None`` if the function fails), to plot."""
    settings = sweep_settings("expectile", EXPECTILES)
    want = sweep_reference("expectile", settings, expectile_sweep_reference, EXPECTILES)
    return _check_sweep("expectile_sweep", fn, settings, want, ("the mean V(s)",),
                        [f"expectile {t:g}" for t in settings], atol=1e-3,
                        reference=expectile_sweep_reference)
