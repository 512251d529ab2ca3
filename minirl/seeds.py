"""Seeds as a batch axis: ``K`` seeds of one algorithm trained as one update.

A batch of 256 through 256-wide networks leaves a GPU idle between its kernel launches, and one CPU core spends much
of an update in Python; ``K`` seeds computed together share those costs. :func:`stack` turns ``K`` agents of one
algorithm (each built from its own seed) into one agent whose every parameter has a leading seed axis
(``torch.stack`` of theirs, the layout of ``torch.func.stack_module_state``). The agent's own ``update()`` then runs
unchanged on a batch with the same leading axis, ``(K, B, ...)``, one batch per seed:

* the networks apply member ``k``'s weights to member ``k``'s rows (:class:`minirl.nets.Linear`,
  :class:`~minirl.nets.LayerNorm`, :class:`~minirl.nets.VectorizedLinear`, the Gaussian actor's log-std);
* the losses broadcast over the axis and reduce with :func:`minirl.nets.batch_mean`: each seed's mean over its
  batch, **summed** over the seeds, so each seed's gradient is exactly the one its own run would get;
* Adam works elementwise, so one optimiser over the stacked parameters takes each seed's step as its own optimiser
  would (no gradient clipping or other coupling across seeds).

So a reader of ``iql.py`` still reads the paper's update, and ``K`` seeds given the same batches as ``K`` separate
runs make the same updates up to float rounding (``tests/test_seeds.py``). Why not ``torch.func.vmap`` over the
losses (``benchmarks/batched_seeds.py``): the update would have to be written again as pure functions of the
parameters, a second copy of every algorithm's update order beside the readable one, and on the project's CPU
vmap's own cost ate the gain (benchmarks/README.md).

:func:`member` takes seed ``k`` back out as a plain agent (to evaluate or save it); :func:`stack_batches` stacks
the ``K`` batches. ``minirl.train.train`` does all of this when given a list of agents and a list of seeds.
BC, BCQ, CQL (with its Lagrange variant and offline SAC) and IQL have the seed axis (``seed_axis = True``); the
discrete agents of the recommendation chapter do not (:func:`check_seed_axis` says so), and run one seed at a time.
Where an update draws random numbers (CQL's and BCQ's sampled actions, the VAE's latents), the stack draws them for
all its seeds at once from one generator: each seed gets its own numbers, not those its separate run would draw, so a
stacked run is statistically, not exactly, the separate runs (the tests give both the same noise to compare them).
"""
from __future__ import annotations

import copy
from dataclasses import asdict
from typing import Callable, Sequence

import torch
from torch import nn

from .agent import check_agent, declared
from .config import UserError


def check_seed_axis(agent) -> None:
    """A one-line :class:`UserError` unless ``agent`` (an agent or its class) trains with a leading seed axis
    (``seed_axis = True``)."""
    cls = agent if isinstance(agent, type) else type(agent)
    if not getattr(cls, "seed_axis", False):
        raise UserError(f"{cls.__name__} cannot train several seeds as one batch (its update is not written "
                        f"for a leading seed axis; BC, BCQ, CQL and IQL are): run its seeds one at a time")


def members(agent) -> int | None:
    """How many seeds a stacked agent holds, None for a plain agent."""
    return getattr(agent, "members", None)


def stack(agents: Sequence) -> object:
    """One agent holding ``agents`` (same class, same settings, same step) with their parameters and optimiser
    moments stacked along a new leading axis; the agents themselves are untouched."""
    agents = list(agents)
    if not agents:
        raise ValueError("stack needs at least one agent")
    first = agents[0]
    check_seed_axis(first)
    check_agent(first)
    for other in agents[1:]:
        if type(other) is not type(first) or _settings(other) != _settings(first):
            raise ValueError("stack: the agents differ in class or settings; only seeds of one configuration stack")
        if declared(other, "counters") != declared(first, "counters"):
            raise ValueError("stack: the agents are at different steps")
    for name, module in declared(first, "modules").items():
        for bname, buf in module.named_buffers():
            if any(not torch.equal(buf, getattr(a, name).get_buffer(bname)) for a in agents[1:]):
                raise ValueError(f"stack: the agents' {name}.{bname} differ (one dataset's bounds for all seeds)")
    stacked = _rebuild(first, agents, torch.stack)
    stacked.members = len(agents)
    return stacked


def member(agent, k: int) -> object:
    """Seed ``k`` of a stacked agent as a plain agent (a copy: its networks and optimiser moments)."""
    n = members(agent)
    if n is None:
        raise ValueError("member: the agent is not a stack of seeds (minirl.seeds.stack)")
    if not 0 <= k < n:
        raise IndexError(f"member: k={k} outside the {n} seeds")
    single = _rebuild(agent, [agent], lambda tensors: tensors[0][k].clone())
    del single.members
    return single


def stack_batches(batches: Sequence[dict]) -> dict:
    """``K`` batches (dicts of tensors with the same keys and shapes) as one, each tensor ``(K, ...)``."""
    return {key: torch.stack([b[key] for b in batches]) for key in batches[0]}


def _settings(agent):
    cfg = getattr(agent, "cfg", None)
    return asdict(cfg) if cfg is not None else None


def _set_parameter(module: nn.Module, name: str, value: nn.Parameter) -> None:
    owner, _, leaf = name.rpartition(".")
    setattr(module.get_submodule(owner) if owner else module, leaf, value)


def _rebuild(template, sources: list, combine: Callable):
    """A copy of ``template`` whose every parameter of a declared module (and declared trained tensor,
    :mod:`minirl.agent`) is ``combine`` of the same one in each of ``sources``, and whose declared optimisers are
    rebuilt over them with the same settings; an optimiser state tensor shaped like its parameter (Adam's moments) is
    combined the same way, the step count is shared."""
    new = copy.deepcopy(template)
    replaced: dict[int, nn.Parameter] = {}  # id(template's parameter) -> the new one

    def parameter(p: torch.Tensor, tensors: list[torch.Tensor]) -> torch.Tensor:
        value = combine([t.detach() for t in tensors])
        q = nn.Parameter(value, requires_grad=p.requires_grad) if isinstance(p, nn.Parameter) \
            else value.requires_grad_(True)  # a bare trained tensor (CQL's log-temperatures)
        replaced[id(p)] = q
        return q

    for name, module in declared(template, "modules").items():
        for pname, p in module.named_parameters():
            _set_parameter(getattr(new, name), pname,
                           parameter(p, [getattr(s, name).get_parameter(pname) for s in sources]))
    for name, value in declared(template, "tensors").items():  # a tensor that takes no gradient (a count) is shared
        if value.requires_grad and value.is_leaf:
            setattr(new, name, parameter(value, [getattr(s, name) for s in sources]))
    for name, opt in declared(template, "optimizers").items():
        copied = getattr(new, name)  # its settings (a tensor learning rate included) are already copies
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [replaced[id(p)] for p in tg["params"]]}
                  for g, tg in zip(copied.param_groups, opt.param_groups)]
        rebuilt = type(opt)(groups, **opt.defaults)  # the groups' own settings override the defaults
        source_params = [[p for g in getattr(s, name).param_groups for p in g["params"]] for s in sources]
        for i, p in enumerate(q for g in opt.param_groups for q in g["params"]):
            states = [getattr(s, name).state.get(params[i]) for s, params in zip(sources, source_params)]
            if not states[0]:
                continue
            rebuilt.state[replaced[id(p)]] = {
                key: combine([st[key] for st in states]) if torch.is_tensor(value) and key != "step"
                and value.shape == p.shape
                else (value.clone() if torch.is_tensor(value) else copy.deepcopy(value))
                for key, value in states[0].items()}
        setattr(new, name, rebuilt)
    return new
