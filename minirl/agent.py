"""What an agent is: the one contract that the training loop, the seed stack, the CUDA-graph capture, checkpoints and
evaluation rely on.

An agent class declares its pieces by name, in four class attributes, beside its update:

    class IQL:
        modules = ("actor", "critic", "critic_target", "value")   # its networks (torch.nn.Module), targets included
        optimizers = ("actor_opt", "critic_opt", "value_opt")    # its torch.optim.Optimizer objects
        tensors = ("t",)                                         # tensors held directly (CQL's log-temperatures)
        counters = ("step",)                                     # Python ints its update advances

Nothing else of the agent is looked at. :mod:`minirl.seeds` stacks the declared modules' parameters, the declared
trained tensors and the declared optimisers' moments (a tensor that takes no gradient, a count on the device, is
shared); :class:`minirl.devices.CapturedStep` saves and restores exactly those, and keeps the declared counters in
step with its replays; :func:`state_of` (what every agent's ``state_dict()`` returns, so what a checkpoint holds)
is the declared pieces, the counters and the config (a class says ``state_dict, load_state_dict = state_of,
load_state``); evaluation checks the critic where ``"critic"`` is a declared module. :func:`check_agent` compares
the declarations with the agent (every declared name holds its kind; every trained parameter belongs to a declared
module and is stepped by a declared optimiser; ``step`` is counted) and says what is missing, so that a forgotten
declaration is an error, not a piece silently left out of checkpoints.

Optional, read where present: ``cfg`` (the config dataclass), ``name`` (the progress bar's label), ``seed_axis = True``
(the update runs on ``K`` seeds stacked, :mod:`minirl.seeds`) and ``capture_problem()`` (why a CUDA graph cannot
replay the update, or None; it reads only ``cfg`` and the counters: :func:`periodic` makes the common one).

An algorithm's file also says how :mod:`minirl.runs` trains it by name: a tuple ``ALGORITHMS`` of :class:`Algorithm`,
one per ``--algo`` name built on its agent, with the settings and special cases that are the algorithm's own.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from types import SimpleNamespace
from typing import Callable, Mapping, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn


@runtime_checkable
class Agent(Protocol):
    """An offline RL agent as :func:`minirl.train.train` trains it (see the module's docstring)."""
    modules: tuple[str, ...]      # attribute names of its networks (nn.Module), target networks included
    optimizers: tuple[str, ...]   # attribute names of its optimisers
    tensors: tuple[str, ...]      # attribute names of the tensors it holds outside its networks
    counters: tuple[str, ...]     # attribute names of its integer counters, "step" (updates done) among them

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient step on ``batch`` (``obs, act, rew, next_obs, done``); returns its logs."""

    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """Actions for a batch of observations ``(B, obs_dim)``: ``(B, act_dim)``, or indices ``(B,)``."""

    def state_dict(self) -> dict:
        """Everything declared, the counters and the config (:func:`state_of`)."""

    def load_state_dict(self, state: dict) -> None:
        """The inverse of ``state_dict()`` (:func:`load_state`)."""


KINDS = (("modules", nn.Module, "a torch.nn.Module"), ("optimizers", torch.optim.Optimizer, "a torch.optim.Optimizer"),
         ("tensors", torch.Tensor, "a torch.Tensor"), ("counters", int, "an int"))


def declares(agent) -> bool:
    """Whether ``agent`` (an agent or its class) declares any of its pieces: then :func:`check_agent` holds it to the
    whole :class:`Agent` protocol (an object with an ``update`` and no networks, a test's stand-in, declares none)."""
    return any(hasattr(agent, kind) for kind, _, _ in KINDS)


def declared(agent, kind: str) -> dict:
    """``{name: value}`` of the pieces of one kind (``"modules"``, ``"optimizers"``, ``"tensors"``, ``"counters"``)
    that ``agent`` declares, in their declared order; empty for an object that declares none."""
    return {name: getattr(agent, name) for name in getattr(agent, kind, ())}


def check_agent(agent) -> None:
    """A :class:`TypeError` naming what is missing unless ``agent`` follows :class:`Agent`: the four declarations
    exist and each name holds its kind; ``step`` is a counter; every declared optimiser steps only parameters of
    declared modules and tensors; every parameter that takes a gradient (a target network's take none) is stepped by
    a declared optimiser; ``state_dict()`` holds every declared piece."""
    cls = type(agent).__name__
    missing = [kind for kind, _, _ in KINDS if not hasattr(agent, kind)]
    if missing:
        raise TypeError(f"{cls} does not declare its {', '.join(missing)}: an agent names its pieces in class "
                        f"attributes (modules = ('actor', ...), optimizers, tensors, counters; minirl.agent.Agent)")
    for kind, expected, label in KINDS:
        for name in getattr(agent, kind):
            value = getattr(agent, name, None)
            if not hasattr(agent, name):
                raise TypeError(f"{cls}.{kind} names {name!r}, which {cls} does not have")
            if not isinstance(value, expected) or isinstance(value, bool):
                raise TypeError(f"{cls}.{kind} names {name!r}, of type {type(value).__name__}, not {label}")
    if "step" not in agent.counters:
        raise TypeError(f"{cls}.counters must include 'step', the updates done (checkpoints and stacks record it)")
    trained = {id(p): (name, p) for name, module in declared(agent, "modules").items() for p in module.parameters()}
    trained |= {id(t): (name, t) for name, t in declared(agent, "tensors").items()}
    stepped = set()
    for name, opt in declared(agent, "optimizers").items():
        for p in (p for group in opt.param_groups for p in group["params"]):
            if id(p) not in trained:
                raise TypeError(f"{cls}.{name} steps a parameter of no declared module or tensor: add the network it "
                                f"trains to {cls}.modules (or the tensor to {cls}.tensors)")
            stepped.add(id(p))
    for name, p in trained.values():
        if p.requires_grad and id(p) not in stepped:
            raise TypeError(f"{cls}.{name} takes a gradient but no declared optimiser steps it: add its optimiser to "
                            f"{cls}.optimizers (or requires_grad_(False) it, as a target network)")
    saved = agent.state_dict()
    left_out = [name for kind, _, _ in KINDS for name in getattr(agent, kind) if name not in saved]
    if left_out:
        raise TypeError(f"{cls}.state_dict() leaves out {', '.join(left_out)}: a checkpoint would not hold them "
                        f"(return minirl.agent.state_of(self))")


def state_of(agent) -> dict:
    """An agent's state from its declarations: its config (a dataclass, as a dict), its counters, the
    ``state_dict()`` of every declared module and optimiser, and a copy of every declared tensor."""
    cfg = getattr(agent, "cfg", None)
    pieces = declared(agent, "modules") | declared(agent, "optimizers")
    return {**({"config": asdict(cfg)} if is_dataclass(cfg) else {}),
            **{name: int(value) for name, value in declared(agent, "counters").items()},
            **{name: value.state_dict() for name, value in pieces.items()},
            **{name: value.detach().clone() for name, value in declared(agent, "tensors").items()}}


def load_state(agent, state: dict) -> None:
    """Put ``state`` (from :func:`state_of`) back into ``agent``: modules, optimisers, tensors (in place) and
    counters. A counter missing from ``state`` (a file written before the agent counted it) is left as it is."""
    for name, value in (declared(agent, "modules") | declared(agent, "optimizers")).items():
        value.load_state_dict(state[name])
    with torch.no_grad():
        for name, value in declared(agent, "tensors").items():
            value.copy_(state[name])
    for name in agent.counters:
        if name in state:
            setattr(agent, name, int(state[name]))


def periodic(field: str):
    """The ``capture_problem`` of an agent whose update does part of its work every ``cfg.<field>`` steps (``if
    step % period``: a Python branch on the step count, which a CUDA graph replays as it was recorded): ``None``
    when the period is 1, else the reason. ``capture_problem = periodic("policy_freq")`` in the class body."""
    def capture_problem(agent) -> str | None:
        period = getattr(agent.cfg, field)
        return None if period == 1 else f"{field}={period} is a Python branch on the step count"
    return capture_problem


@dataclass(frozen=True, eq=False)
class Algorithm:
    """One ``--algo`` name, declared in its algorithm's file (``ALGORITHMS``) and listed by
    :data:`minirl.runs.ALGORITHMS`: the agent and config it builds, the config fields the name presets, the papers'
    settings for a kind of task, and what is special about training it. The hooks take the run's
    :class:`minirl.runs.RunPlan` (its ``algo``, ``dataset``, ``named``, ``config``, ``precision``)."""
    name: str                       # the --algo name
    agent: type                     # built as agent(obs_dim, act_dim, action_low, action_high, config, device)
    config: type                    # its config dataclass
    preset: Mapping = field(default_factory=dict)   # fields the name sets over the defaults (10%BC: top_fraction=0.1)
    domains: Mapping = field(default_factory=dict)  # {kind of task: fields}: the papers' settings there ("maze")
    steps_field: str | None = None  # the config field that takes the run's length (IQL's cosine schedule: max_steps)
    data: Callable | None = None    # data(dataset, plan): what the agent trains on (10%BC: the best episodes)
    check: Callable | None = None   # check(plan): a UserError before any work (goal-BC without a maze)
    notes: Callable | None = None   # notes(plan): lines the run prints before training (CQL-Lagrange in bfloat16)

    def for_domain(self, domain: str | None) -> dict:
        """The config fields the papers set on ``domain``'s tasks (``{}`` where the defaults are the paper's)."""
        return dict(self.domains.get(domain, {}))

    def for_steps(self, steps: int) -> dict:
        """The config fields that follow a run of ``steps`` updates (a schedule's length), ``{}`` for none."""
        return {} if self.steps_field is None else {self.steps_field: steps}

    def capture_problem(self, config, step: int = 0) -> str | None:
        """The agent's ``capture_problem()`` before it is built: why its update with ``config`` cannot be replayed as
        a CUDA graph at update ``step``, or None (it reads only the config and the counters)."""
        problem = getattr(self.agent, "capture_problem", None)
        counters = {name: 0 for name in getattr(self.agent, "counters", ())}
        return None if problem is None else problem(SimpleNamespace(cfg=config, **(counters | {"step": step})))
