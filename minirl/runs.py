"""Runs by name: the scales, the algorithms by name, a run planned and checked before any work, and trained agents
reloaded.

``run(algo, dataset, ...)`` is what ``python -m minirl train`` does: it checks every setting first (:func:`plan_run`:
names, fields, device, precision, output directory, checkpoint), then makes the data, builds the agent, writes
``config.json`` and calls :func:`minirl.train.train`. ``load_agent(run_dir)`` rebuilds a trained agent from its run
directory (``python -m minirl evaluate``). :func:`get_scale` says how big a run is at each scale (``smoke``, ``cpu``,
``full``) and :data:`ALGORITHMS` maps each ``--algo`` name to what its algorithm's file declares
(:class:`minirl.agent.Algorithm`).
"""
from __future__ import annotations
import contextlib
import dataclasses
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from . import bc, bcq, cql, iql, nets, td3bc
from .agent import Algorithm
from .config import UserError, at_least, check_writable, did_you_mean, field_types, parse_field
from .data import OfflineDataset, StateNormalizer, atomic_write
from .devices import (COMPILE_MODES, check_capture, check_device, compile_agent, requested_precision,
                      resolve_precision)
from .evaluation import evaluate, make_task_env
from .seeds import check_seed_axis
from .train import LOG_EVERY, hold_run_folder, load_agent_state, prepare_dataset, read_checkpoint, train
# --------------------------------------------------------------------------------------------------------------
# Scales
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scale:
    """How big a run is: gradient steps, evaluation cadence and episodes, the dataset size cap, and the network sizes
    some algorithms use at this scale."""
    name: str
    steps: int
    eval_every: int
    eval_episodes: int
    dataset_size: int | None      # None: the full dataset
    batch_size: int = 256
    algo_steps: tuple = ()        # (algo, steps) pairs for algorithms slower per update than the default allows
    algo_config: tuple = ()       # (algo, ((field, value), ...)) pairs: config fields this scale sets for algo
    fast_on_cuda: bool = False    # on a CUDA device by default: the seeds stacked, each step one CUDA graph

    def steps_for(self, algo: str) -> int:
        """Gradient steps for ``algo`` at this scale (the same for every algorithm, except at ``smoke`` scale)."""
        return dict(self.algo_steps).get(algo, self.steps)

    def config_for(self, algo: str) -> dict:
        """The config fields this scale sets for ``algo`` (before the user's overrides); ``{}`` for the paper's."""
        return dict(dict(self.algo_config).get(algo, ()))


# At the `cpu` scale every algorithm gets the same 50,000 gradient steps (the results of record compare them at equal
# budgets). CQL at the paper's sizes (3 x 256 layers, N = 10 sampled actions per proposal, 1 + 3N critic evaluations
# per state) runs ~11-13 updates/s on one core in bfloat16 and BCQ (750-750 VAE) ~26-28, i.e. 65 and 30 minutes per
# 50k-step run; so the `cpu` scale runs them smaller: CQL (and CQL-Lagrange, and offline SAC, CQL's alpha = 0 case,
# so that the three share their networks) with 2 x 256 layers and N = 4, ~50 updates/s; BCQ with a 256-256 VAE,
# ~50 updates/s (benchmarks/README.md). The `full` scale keeps every paper's sizes.
_CPU_CQL = (("actor_hidden", (256, 256)), ("critic_hidden", (256, 256)), ("n_actions", 4))
SCALES = {
    "smoke": Scale("smoke", steps=200, eval_every=100, eval_episodes=2, dataset_size=5_000,
                   algo_steps=(("cql", 20), ("cql-lagrange", 20), ("bcq", 50))),
    "cpu": Scale("cpu", steps=50_000, eval_every=5_000, eval_episodes=10, dataset_size=None,
                 algo_config=(("cql", _CPU_CQL), ("cql-lagrange", _CPU_CQL), ("sac-offline", _CPU_CQL),
                              ("bcq", (("vae_hidden", (256, 256)),)))),
    "full": Scale("full", steps=1_000_000, eval_every=5_000, eval_episodes=10, dataset_size=None, fast_on_cuda=True),
}


def fast_path(scale: Scale | str | None, device: str) -> bool:
    """Whether runs at ``scale`` on ``device`` take the fast path when not told otherwise: their seeds stacked as one
    update (``experiments/run_suite.py``) and each step replayed as one CUDA graph (:func:`run`'s ``capture``). The
    ``full`` scale on a CUDA device does; everything else trains one seed at a time, eagerly, as it always has."""
    sc = scale if isinstance(scale, Scale) else get_scale(scale)
    return sc.fast_on_cuda and torch.device(device).type == "cuda"


def default_capture(algo: str, config, scale: Scale | str | None, device: str,
                    compile: bool | str = False) -> tuple[bool, str | None]:
    """``(capture, line)``: whether a run of ``algo`` with ``config`` captures its update when ``capture`` is not
    given, and the line the run prints about it (None off the fast path, :func:`fast_path`). On the fast path each
    step is one CUDA graph unless the update has a Python branch on the step count (the agent's
    ``capture_problem()``, e.g. TD3+BC's ``policy_freq=2``) or the networks are compiled (``compile``). Decided from
    the settings alone: nothing is built and no device is touched."""
    sc = scale if isinstance(scale, Scale) else get_scale(scale)
    if not fast_path(sc, device) or compile:
        return False, None
    where = f"the {sc.name} scale on {device}"
    problem = algorithm(algo).capture_problem(config)
    if problem:
        return False, f"{where}: eager updates, {problem} (a CUDA graph replays one branch)"
    return True, f"{where}: each step replayed as one CUDA graph (--no-capture: eager updates)"


def get_scale(name: str | None = None) -> Scale:
    """The :class:`Scale` called ``name``, or ``$MINIRL_SCALE`` (default ``cpu``)."""
    if name is None:
        name = os.environ.get("MINIRL_SCALE") or "cpu"
        source = "MINIRL_SCALE"
    else:
        source = "--scale"
    if name not in SCALES:
        raise UserError(f"{source} must be smoke (seconds, for tests), cpu (minutes on a laptop) or full (the papers' "
                        f"settings, one GPU), got {name!r}{did_you_mean(name, SCALES)}")
    return SCALES[name]


# --------------------------------------------------------------------------------------------------------------
# Algorithms by name
# --------------------------------------------------------------------------------------------------------------

# Every --algo name, in --help's order, each declared in its algorithm's file (its ALGORITHMS, minirl.agent.Algorithm:
# the agent and config, the fields the name presets, the papers' settings per kind of task, its special cases); a new
# algorithm's file adds its names here.
_BC, *_FILTERED_BC = bc.ALGORITHMS  # bc, then 10%bc, goal-bc, path-bc after the others
ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (_BC, *bcq.ALGORITHMS, *cql.ALGORITHMS, *iql.ALGORITHMS,
                                                        *td3bc.ALGORITHMS, *_FILTERED_BC)}
# (algo, kind of task) -> the config fields the papers set there (IQL's and CQL's on a maze): what the files declare
DOMAIN_CONFIG = {(a.name, domain): dict(fields) for a in ALGORITHMS.values() for domain, fields in a.domains.items()}


def algorithm(algo: str) -> Algorithm:
    """The :class:`~minirl.agent.Algorithm` called ``algo`` (a :class:`UserError` with the nearest name if none)."""
    return ALGORITHMS[check_algo(algo)]


def domain_config(algo: str, dataset) -> dict:
    """The config fields the papers set for ``algo`` on ``dataset``'s kind of task (:data:`DOMAIN_CONFIG`); ``{}`` where
    the algorithm's defaults are the paper's, and for a file of your own (``dataset`` None). ``dataset``: a name or
    its :class:`minirl.datasets.DatasetName`."""
    from .datasets import parse
    return algorithm(algo).for_domain(None if dataset is None else parse(dataset).domain)


def check_algo(algo: str) -> str:
    if algo not in ALGORITHMS:
        raise UserError(f"unknown algorithm {algo!r}{did_you_mean(algo, ALGORITHMS)}; expected one of "
                        f"{', '.join(ALGORITHMS)}")
    return algo


def config_class(algo: str):
    """The config dataclass of ``algo`` (e.g. ``IQLConfig`` for ``"iql"``)."""
    return algorithm(algo).config


def make_config(algo: str, overrides: dict | None = None):
    """The config of ``algo``: its preset (e.g. ``lagrange=True`` for ``cql-lagrange``) and then ``overrides``, checked
    field by field (:class:`UserError` for an unknown field, with the nearest name, or a wrong value)."""
    entry = algorithm(algo)
    cls = entry.config
    fields = field_types(cls)
    for k in overrides or {}:
        if k not in fields:
            raise UserError(f"{cls.__name__} has no field {k!r}{did_you_mean(k, fields)} (algorithm {algo!r}); "
                            f"fields: {', '.join(fields)}")
    return cls(**{**entry.preset, **(overrides or {})})


def parse_overrides(algo: str, items: list[str]) -> dict:
    """``["lr=1e-3", "hidden=[128,128]"]`` -> ``{"lr": 0.001, "hidden": (128, 128)}``, each value parsed by the
    declared type of ``algo``'s config field (:func:`minirl.config.parse_field`)."""
    cls, out = config_class(algo), {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set expects NAME=VALUE, got {item!r} (quote it in zsh: --set 'hidden=[128,128]')")
        if key in out:
            raise UserError(f"--set {key} is given twice ({key}={out[key]!r} and {item!r})")
        out[key] = parse_field(cls, key, value)
    return out


def algo_name(agent_class_path: str) -> str | None:
    """The ``--algo`` name of an agent class given as ``"minirl.bc.BC"`` (the first of :data:`ALGORITHMS` built from
    it; its config fields then say the rest, e.g. ``top_fraction`` for 10%BC), or ``None`` for a class minirl does
    not know."""
    return next((a.name for a in ALGORITHMS.values()
                 if agent_class_path == f"{a.agent.__module__}.{a.agent.__name__}"), None)


def agent_class(algo: str) -> type:
    """The agent class of ``algo``."""
    return algorithm(algo).agent


def build_agent(algo: str, obs_dim: int, act_dim: int, action_low, action_high, config, device: str = "cpu"):
    """The agent ``algo`` for these dimensions and action bounds, with ``config`` (see :func:`make_config`)."""
    return agent_class(algo)(obs_dim, act_dim, action_low, action_high, config, check_device(device))


def make_agent(algo: str, dataset: OfflineDataset, device: str = "cpu", **overrides):
    """Build the agent ``algo`` for ``dataset``'s dimensions; ``overrides`` set fields of its config."""
    config = make_config(algo, overrides)
    agent = build_agent(algo, dataset.obs_dim, dataset.act_dim, dataset.action_low, dataset.action_high, config,
                        device)
    return agent, config


def _eval_every(scale: Scale, steps: int) -> int:
    """The scale's evaluation period, shortened for runs shorter than the scale's default (at least 4 points)."""
    return scale.eval_every if steps >= scale.steps else min(scale.eval_every, max(steps // 4, 1))


# --------------------------------------------------------------------------------------------------------------
# Runs: every setting checked before any work, then the data, the training and config.json
# --------------------------------------------------------------------------------------------------------------

RUN_FILES = ("config.json", "log.jsonl", "eval.csv", "checkpoint.pt", "agent.pt")  # what a run writes in --out
# settings that a resumed run must share with its checkpoint (besides the config fields), unless --override names
# them; steps may grow, evaluation cadence, device, threads and compilation may change freely
RESUME_SETTINGS = ("dataset", "transitions", "seed", "batch_size", "precision")


@dataclass
class RunPlan:
    """A run's settings, resolved and checked by :func:`plan_run` before any data is made."""
    algo: str
    dataset: str
    scale: Scale
    steps: int
    seed: int
    device: str
    out: Path
    config: object                 # the algorithm's config dataclass
    transitions: int               # dataset size at this scale
    env_id: str | None             # None: no environment (a file of your own trained with --no-eval)
    task: str | None               # None: raw returns, no normalised score (a file of your own, --raw-returns)
    batch_size: int
    eval_every: int | None         # None: no evaluation
    eval_episodes: int
    checkpoint_every: int | None
    log_every: int                 # steps between two training entries of log.jsonl
    resume: bool
    overwrite: bool
    precision: str                 # resolved: "float32" or "bf16"
    requested_precision: str       # as asked: "auto", "float32" or "bf16"
    threads: int | None            # torch threads; None leaves torch's setting
    compile: bool | str
    capture: bool = False          # each step replayed as a CUDA graph (train(capture=True))
    fast_path: str | None = None   # what the fast path chose when capture was not given (default_capture's line)
    file_data: OfflineDataset | None = dataclasses.field(default=None, repr=False)  # --dataset FILE, read and checked
    named: object = None           # a named dataset parsed once (minirl.datasets.DatasetName); None: a file of your own

    def settings(self) -> dict:
        """What ``config.json``, the checkpoints and ``agent.pt`` record about the run."""
        return {"algo": self.algo, "dataset": self.dataset, "transitions": self.transitions, "scale": self.scale.name,
                "steps": self.steps, "seed": self.seed, "device": self.device, "batch_size": self.batch_size,
                "eval_every": self.eval_every, "eval_episodes": self.eval_episodes, "log_every": self.log_every,
                "precision": self.precision,
                "precision_requested": self.requested_precision,
                "threads": self.threads or torch.get_num_threads(), "compile": self.compile, "capture": self.capture,
                "adam": "fused" if nets._FUSED_ADAM else "plain",  # nets.adam (plain before commit 724dda5)
                "config": _jsonable(self.config)}


def plan_run(algo: str, dataset: str, *, scale: str | None = None, steps: int | None = None, seed: int = 0,
             device: str = "cpu", out: str | Path | None = None, overrides: dict | None = None,
             batch_size: int | None = None, eval_every: int | None = None, eval_episodes: int | None = None,
             evaluate: bool = True, checkpoint_every: int | None = None, resume: bool = False,
             overwrite: bool = False, override: tuple | list = (), compile: bool | str = False,
             precision: str | None = None, amp: bool = False, threads: int | None = None,
             capture: bool | None = None, env: str | None = None, raw_returns: bool = False,
             log_every: int | None = None) -> RunPlan:
    """Check every setting of a run, and the output directory and checkpoint it would use, without making any
    data; :class:`UserError` names the first wrong one. ``None`` takes the scale's value; ``evaluate=False`` switches
    evaluation off (``eval_every=0`` is an error, not "off"). ``log_every``: steps between two training entries of
    the run's ``log.jsonl`` (default 1,000).

    ``dataset`` a file of your own (``.npz`` or D4RL ``.hdf5``, :func:`load_data_file`): ``env`` names the
    gymnasium environment to evaluate in (its action bounds are the data's when the file has none), and returns stay
    raw (no reference returns, no normalised score). ``raw_returns``: a named dataset without reference returns (a
    Minari dataset with no ``ref_min_score``/``ref_max_score``) trains and evaluates with raw returns.

    ``capture``: each training step replayed as one CUDA graph (``True`` needs a CUDA device); ``None``, the default,
    is the scale's (:func:`default_capture`): on at the ``full`` scale on a CUDA device where the update allows it,
    off everywhere else; ``False`` turns it off."""
    from . import datasets

    entry = algorithm(algo)
    sc = get_scale(scale)
    file_data = named = None
    if is_data_file(dataset):
        if env is None and evaluate:
            raise UserError(f"--dataset {dataset} is a file of your own: pass --env ENV_ID, the gymnasium environment "
                            f"to evaluate in (e.g. --env Pendulum-v1), or --no-eval")
        file_data = load_data_file(dataset, env)
        env_id, task_name, size = env, None, len(file_data)
    else:
        if env is not None:
            raise UserError(f"--env is for a dataset file of your own (PATH.npz or PATH.hdf5); {dataset} names its "
                            f"environment itself")
        named = check_dataset(dataset)  # parsed once: the plan carries it to the data and the settings
        task = named.task
        if task.ref_random is None and not raw_returns:
            raise UserError(f"{dataset} records no reference returns (ref_min_score / ref_max_score), so it has no "
                            f"normalised score: pass --raw-returns to train and evaluate with raw returns")
        env_id, task_name, size = task.env_id, None if raw_returns else task.name, datasets.full_size(named)
    steps = sc.steps_for(algo) if steps is None else at_least("--steps", steps, 1)
    at_least("--seed", seed, 0)
    batch_size = sc.batch_size if batch_size is None else at_least("--batch-size", batch_size, 1)
    if not evaluate and (eval_every is not None or eval_episodes is not None):
        raise UserError("--no-eval switches evaluation off: drop --eval-every and --eval-episodes, or --no-eval")
    if evaluate:
        eval_every = _eval_every(sc, steps) if eval_every is None else at_least("--eval-every", eval_every, 1)
    eval_episodes = sc.eval_episodes if eval_episodes is None else at_least("--eval-episodes", eval_episodes, 1)
    if checkpoint_every is not None:
        at_least("--checkpoint-every", checkpoint_every, 1)
    log_every = LOG_EVERY if log_every is None else at_least("--log-every", log_every, 1)
    if threads is not None:
        at_least("--threads", threads, 1)
    check_device(device)
    if capture:  # asked for: refused off a GPU (None: the scale's default, below)
        check_capture(device)
    requested = requested_precision(precision, amp)
    resolved = resolve_precision(requested, device)
    if compile not in (False, True, *COMPILE_MODES):
        raise UserError(f"--compile mode must be one of {', '.join(COMPILE_MODES)}, got {compile!r}"
                        f"{did_you_mean(compile, COMPILE_MODES)}")
    # the paper's settings for this kind of task, the scale's sizes, the run's length (a schedule's), the user's
    overrides = {**entry.for_domain(named and named.domain), **sc.config_for(algo), **entry.for_steps(steps),
                 **(overrides or {})}
    config = make_config(algo, overrides)
    fast = None
    if capture is None:  # the full scale on a GPU: each step one CUDA graph where the update allows it
        capture, fast = default_capture(algo, config, sc, device, compile)
    plan = RunPlan(algo=algo, dataset=dataset, scale=sc, steps=steps, seed=seed, device=device,
                   out=Path(out or f"runs/{algo}-{run_folder_name(dataset)}-s{seed}"),
                   config=config,
                   transitions=min(sc.dataset_size, size) if sc.dataset_size else size, env_id=env_id,
                   task=task_name, batch_size=batch_size, eval_every=eval_every if evaluate else None,
                   eval_episodes=eval_episodes, checkpoint_every=checkpoint_every, log_every=log_every, resume=resume,
                   overwrite=overwrite,
                   precision=resolved, requested_precision=requested, threads=threads, compile=compile,
                   capture=capture, fast_path=fast, file_data=file_data, named=named)
    if entry.check is not None:  # the algorithm's own (goal-BC needs a maze)
        entry.check(plan)
    if plan.batch_size > plan.transitions:
        raise UserError(f"--batch-size {plan.batch_size:,d} is larger than the dataset ({plan.transitions:,d} "
                        f"transitions of {dataset} at the {sc.name} scale); use at most {plan.transitions:,d}")
    _check_out(plan, override)
    if file_data is None:
        cache = datasets.cache_path(named, plan.transitions)
        if not cache.exists():
            check_writable(cache.parent, f"the dataset cache (MINIRL_DATA={datasets.data_dir()})")
    return plan


DATA_FILE_SUFFIXES = (".npz", ".hdf5", ".h5")


def is_data_file(dataset: str) -> bool:
    """Whether ``dataset`` names a file of your own (``PATH.npz``, ``PATH.hdf5``) rather than a named dataset."""
    return str(dataset).lower().endswith(DATA_FILE_SUFFIXES)


def run_folder_name(dataset: str) -> str:
    """``dataset`` as one folder name that every OS accepts: a file's stem (``data/my.npz`` -> ``my``); a Minari
    id's ``:`` and ``/`` made ``-`` (``minari:byo/pendulum/random-v0`` -> ``minari-byo-pendulum-random-v0``)."""
    from .datasets import file_stem
    return Path(dataset).stem if is_data_file(dataset) else file_stem(dataset)


def load_data_file(path: str | os.PathLike, env_id: str | None = None) -> OfflineDataset:
    """Your own data: an ``.npz`` (:meth:`OfflineDataset.load`: the six D4RL arrays) or a D4RL ``.hdf5``
    (:meth:`OfflineDataset.from_hdf5`). With ``env_id`` its action bounds are the environment's (a file's own bounds
    must agree with them) and its dimensions must be the environment's; without, the file's own bounds or none
    (then its actions must lie in [-1, 1]). Every problem is a one-line :class:`UserError` naming the file."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--dataset {path}: no such file (a file of your own ends in .npz or .hdf5; "
                        f"`minirl dataset list` lists the named datasets)")
    low = high = obs_dim = None
    if env_id is not None:
        import gymnasium as gym
        try:
            env = make_task_env(env_id)
        except Exception as e:  # gymnasium raises several kinds (NameNotFound, VersionNotFound, ImportError...)
            first = (str(e).strip().splitlines() or [""])[0]
            raise UserError(f"--env {env_id}: gymnasium cannot make it ({type(e).__name__}: {first})") from None
        act_space, obs_space = env.action_space, env.observation_space
        env.close()
        if not isinstance(act_space, gym.spaces.Box) or len(act_space.shape) != 1 or len(obs_space.shape) != 1:
            raise UserError(f"--env {env_id}: minirl trains on flat Box observations and actions, this environment "
                            f"has {obs_space} and {act_space}")
        low, high, obs_dim = act_space.low, act_space.high, obs_space.shape[0]
    try:
        if p.suffix.lower() == ".npz":
            ds = OfflineDataset.load(p, action_low=low, action_high=high)
        else:
            ds = OfflineDataset.from_hdf5(p, action_low=low, action_high=high)
    except UserError:
        raise
    except (ValueError, OSError, ImportError) as e:
        if env_id is None and "no action bounds were given" in str(e):  # say it in the command line's words
            e = (f"{str(e).split(' and no action bounds')[0]}, and the file stores no action_low / action_high: "
                 f"pass --env ENV_ID (its action space gives the bounds) or save them in the file")
        dims = _file_dims(p)  # the wrong environment says so before what its bounds make of the actions
        if env_id is not None and dims is not None and dims != (obs_dim, len(low)):
            e = f"has obs_dim={dims[0]}, act_dim={dims[1]}; --env {env_id} has obs_dim={obs_dim}, act_dim={len(low)}"
        raise UserError(f"--dataset {path}: {' '.join(str(e).split())}") from None
    if env_id is not None and (ds.obs_dim, ds.act_dim) != (obs_dim, len(low)):
        raise UserError(f"--dataset {path}: has obs_dim={ds.obs_dim}, act_dim={ds.act_dim}; --env {env_id} has "
                        f"obs_dim={obs_dim}, act_dim={len(low)}")
    return ds


def _file_dims(path: Path) -> tuple[int, int] | None:
    """``(obs_dim, act_dim)`` from the shapes of a data file's arrays, or None when they cannot be read."""
    try:
        if path.suffix.lower() == ".npz":
            with np.load(path, allow_pickle=False) as f:
                shapes = f["observations"].shape, f["actions"].shape
        else:
            import h5py
            with h5py.File(path, "r") as f:
                shapes = f["observations"].shape, f["actions"].shape
        return shapes[0][1], shapes[1][1]
    except Exception:  # the loader's own error says what is wrong with such a file
        return None


def check_dataset(name: str):
    """Dataset ``name`` parsed (a :class:`minirl.datasets.DatasetName`: its task, tier and kind of task); a
    :class:`UserError` with the nearest name when there is no such dataset, or saying why it is not available yet."""
    from . import datasets
    names = datasets.dataset_names()
    try:
        return datasets.parse(name)
    except ImportError as e:  # minari:<id> without the minari package
        raise UserError(str(e)) from None
    except (ValueError, FileNotFoundError) as e:
        if name.startswith(datasets.MINARI) or datasets.maze.is_maze_name(name):  # its own one-line error names the field
            raise UserError(str(e)) from None
        task, _, tier = name.partition("-")
        if task in datasets.available_tasks() and tier in datasets.TIERS:  # a real name, not made yet (no expert)
            raise UserError(str(e)) from None
        raise UserError(f"unknown dataset {name!r}{did_you_mean(name, names)}; the datasets are "
                        f"{', '.join(names)}; or a file of your own, PATH.npz or PATH.hdf5, with --env ENV_ID"
                        ) from None


def _check_out(plan: RunPlan, override) -> None:
    """The output directory: a new run needs one without another run in it (or ``overwrite``); a resumed run needs
    a checkpoint of the same algorithm, dataset and settings, except those named in ``override``."""
    out = plan.out
    if plan.resume and plan.overwrite:
        raise UserError("--resume continues the run in --out and --overwrite replaces it: choose one")
    if override and not plan.resume:
        raise UserError("--override names settings a resumed run may change: it needs --resume")
    check_writable(out, f"--out {out}")
    found = [name for name in RUN_FILES if (out / name).exists()]
    if plan.resume:
        if (out / "checkpoint.pt").exists():
            _check_resumable(plan, read_checkpoint(out / "checkpoint.pt"), override)
        elif found:
            raise UserError(f"--resume: {out} holds a run ({', '.join(found)}) but no checkpoint.pt to resume from; "
                            f"pass --overwrite to start it again, or choose another --out")
    elif found and not plan.overwrite:
        raise UserError(f"--out {out} already holds a run ({', '.join(found)}): pass --resume to continue it, "
                        f"--overwrite to replace it, or choose another --out")


def _check_resumable(plan: RunPlan, ck: dict, override) -> None:
    path = plan.out / "checkpoint.pt"
    meta = ck.get("meta")
    if not meta:
        print(f"resume: {path} records no settings (an older minirl wrote it): not checked against this run's")
        return
    if meta["algo"] != plan.algo:
        raise UserError(f"--resume: {path} was made by --algo {meta['algo']}, not {plan.algo}; use another --out "
                        f"(or --overwrite to replace it)")
    if ck["step"] > plan.steps:
        raise UserError(f"--resume: {path} is at step {ck['step']}, beyond --steps {plan.steps}; ask for at least "
                        f"{ck['step']} steps")
    now = json.loads(json.dumps(plan.settings()))
    names = [*RESUME_SETTINGS, *now["config"]]
    for k in override:
        if k not in names:
            raise UserError(f"--override {k}: not a setting of this run{did_you_mean(k, names)}; settings: "
                            f"{', '.join(names)}")
    # a config field added after the checkpoint was written is absent from it; the code that wrote it behaved as
    # the field's default does, so a run that keeps the default is not changed by it
    defaults = json.loads(json.dumps(_jsonable(config_class(plan.algo)())))
    was = {**{k: meta.get(k) for k in RESUME_SETTINGS}, **defaults, **meta.get("config", {})}
    new = {**{k: now[k] for k in RESUME_SETTINGS}, **now["config"]}
    changed = [k for k in new if was.get(k) != new[k] and k not in override]
    if changed:
        diff = ", ".join(f"{k} {was.get(k)!r} -> {new[k]!r}" for k in changed)
        raise UserError(f"--resume: this run changes {diff} from its checkpoint in {plan.out}; repeat the settings it "
                        f"was made with, or pass --override {' '.join(changed)} to change them")


def run(algo: str, dataset: str, *, scale: str | None = None, steps: int | None = None,
        seed: int | Sequence[int] = 0, device: str = "cpu", out: str | Path | Sequence | None = None,
        overrides: dict | None = None,
        batch_size: int | None = None, eval_every: int | None = None, eval_episodes: int | None = None,
        evaluate: bool = True, checkpoint_every: int | None = None, resume: bool = False, overwrite: bool = False,
        override: tuple | list = (), progress: bool = True, compile: bool | str = False,
        precision: str | None = None, amp: bool = False, threads: int | None = None,
        tensorboard: bool = False, capture: bool | None = None, env: str | None = None, raw_returns: bool = False,
        log_every: int | None = None) -> dict:
    """Train ``algo`` on the named ``dataset`` at a scale: what ``python -m minirl train`` does.

    First checks every setting (:func:`plan_run`), then loads (or makes) the dataset at the scale's size, builds the
    agent with ``overrides``, prepares states and rewards as its config asks, writes ``config.json`` and trains.
    A new run refuses an ``out`` holding another run unless ``overwrite``; ``resume`` continues the checkpoint in
    ``out`` if it was made with the same settings, except those named in ``override``. ``threads`` sets torch's
    thread count. Returns the history of :func:`train` with ``config`` (the run's settings), ``segments_s`` (the
    seconds of each part of the run: the earlier parts of a resumed run up to their checkpoints, then this call's,
    setup included) and ``wall_time`` (their sum; ``None`` when an earlier part's time is unknown because its
    checkpoint predates this record).

    ``seed`` a list of seeds (``out`` then a list of directories, or None for ``runs/<algo>-<dataset>-s<seed>``):
    the seeds train together as one stacked agent (seeds as a batch axis, :func:`minirl.train.train`), each seed
    into its own directory, written as its own run would be; a list of the seeds' results comes back. ``capture``:
    see :func:`plan_run` (``None``: replayed as CUDA graphs at the ``full`` scale on a CUDA device).
    """
    from . import datasets

    group = not isinstance(seed, int)
    seed_list = list(seed) if group else [seed]
    if group and not seed_list:
        raise UserError("--seeds: give at least one seed")
    if group and len(set(seed_list)) != len(seed_list):
        raise UserError(f"--seeds: the seeds of a batch must differ, got {' '.join(map(str, seed_list))}")
    if group:
        check_seed_axis(agent_class(algo))
        if isinstance(out, (str, os.PathLike)):
            raise UserError(f"--out: {len(seed_list)} seeds of a batch need one directory each, got one")
        if compile:
            raise UserError("--compile compiles one agent's networks: train a batch of seeds without it")
    out_list = [None] * len(seed_list) if out is None else list(out) if group else [out]
    if len(out_list) != len(seed_list):
        raise UserError(f"--out: {len(seed_list)} seeds need {len(seed_list)} directories, got {len(out_list)}")
    plans = [plan_run(algo, dataset, scale=scale, steps=steps, seed=s, device=device, out=o, overrides=overrides,
                      batch_size=batch_size, eval_every=eval_every, eval_episodes=eval_episodes, evaluate=evaluate,
                      checkpoint_every=checkpoint_every, resume=resume, overwrite=overwrite, override=override,
                      compile=compile, precision=precision, amp=amp, threads=threads, capture=capture, env=env,
                      raw_returns=raw_returns, log_every=log_every)
             for s, o in zip(seed_list, out_list)]
    plan = plans[0]
    if group and len({p.out.resolve() for p in plans}) != len(plans):
        raise UserError("--out: each seed of a batch needs its own directory")
    with contextlib.ExitStack() as held:  # one run per folder, held from here to the end of the run
        for p in plans:
            held.enter_context(hold_run_folder(p.out))
            _check_out(p, override)  # again, now that no other run can write there
        return _run_held(plans, group, seed_list, overrides=overrides, device=device, compile=compile,
                         progress=progress, tensorboard=tensorboard)


def _run_held(plans: list, group: bool, seed_list: list, *, overrides, device, compile, progress, tensorboard):
    """:func:`run`'s work once its settings are checked and its out directories held."""
    from . import datasets
    plan = plans[0]
    if plan.threads is not None:
        torch.set_num_threads(plan.threads)
    if plan.file_data is not None:  # a file of your own, read and checked by plan_run
        data = plan.file_data
        raw = full = data if plan.transitions == len(data) else data.take(plan.transitions)
    else:
        raw = full = datasets.load_dataset(plan.named, plan.transitions, progress=progress)
    entry = algorithm(plan.algo)
    if entry.data is not None:  # what the algorithm trains on (10%BC: the best episodes)
        raw = entry.data(raw, plan)
    agents = []
    for p in plans:
        torch.manual_seed(p.seed)  # the initial weights depend on the seed too
        agents.append(build_agent(p.algo, raw.obs_dim, raw.act_dim, raw.action_low, raw.action_high, p.config,
                                  device))
    agent = agents[0]
    if compile:  # True, or a torch.compile mode such as "reduce-overhead" (CUDA graphs)
        mode = None if compile is True else compile
        print(f"torch.compile (mode {mode or 'default'}): {', '.join(compile_agent(agent, mode=mode))}")
    data, state_norm, reward_tf = prepare_dataset(raw, plan.config.normalize_states, plan.config.reward_scale)
    all_settings = []
    for p in plans:
        if p.overwrite:
            for name in RUN_FILES:
                (p.out / name).unlink(missing_ok=True)
        settings = p.settings()
        # which data the run saw (before 10%BC's filter): rolled out again on another CPU, a dataset can differ
        settings["data"] = {"episodes": len(full.episode_bounds()), "sha256": full.fingerprint()}
        if p.file_data is not None or p.task is None:  # what load_agent needs without a named dataset
            settings |= {"env_id": p.env_id, "task": p.task, "obs_dim": raw.obs_dim, "act_dim": raw.act_dim,
                         **{k: None if b is None else b.tolist()
                            for k, b in (("action_low", raw.action_low), ("action_high", raw.action_high))}}
        if group:  # trained together with these seeds (seeds as a batch axis)
            settings["batch_of_seeds"] = seed_list
        p.out.mkdir(parents=True, exist_ok=True)
        with atomic_write(p.out / "config.json") as tmp:
            tmp.write_text(json.dumps(settings, indent=1))
        all_settings.append(settings)
    settings = all_settings[0]
    seeds_text = f"seeds={' '.join(map(str, seed_list))} (one batch)" if group else f"seed={plan.seed}"
    outs_text = " ".join(str(p.out) for p in plans)
    print(f"minirl train: algo={plan.algo} dataset={plan.dataset} ({len(raw)} transitions) scale={plan.scale.name} "
          f"steps={plan.steps} {seeds_text} device={device} precision={plan.precision} "
          f"threads={settings['threads']} out={outs_text}")
    if plan.fast_path:  # the full scale on a GPU, capture not given
        print(f"  {plan.fast_path}")
    kind = plan.named and plan.named.domain
    domain = {k: v for k, v in entry.for_domain(kind).items() if k not in (overrides or {})}
    if domain:
        print(f"  the paper's settings for {plan.algo} on a {kind}: "
              + ", ".join(f"{k}={v}" for k, v in domain.items()))
    for line in entry.notes(plan) if entry.notes is not None else ():
        print(f"  {line}")
    scale_config = {k: v for k, v in plan.scale.config_for(plan.algo).items() if k not in (overrides or {})}
    if scale_config:
        print(f"  {plan.scale.name} scale sizes for {plan.algo}: "
              + ", ".join(f"{k}={v}" for k, v in scale_config.items()) + " (the paper's at --scale full)")
    start = time.perf_counter()
    histories = train(agents if group else agent, data, plan.steps, batch_size=plan.batch_size,
                      eval_env=plan.env_id, eval_every=plan.eval_every, eval_episodes=plan.eval_episodes,
                      task=plan.task, seed=seed_list if group else plan.seed, device=device,
                      out=[p.out for p in plans] if group else plan.out, checkpoint_every=plan.checkpoint_every,
                      log_every=plan.log_every,
                      resume=plan.resume, state_normalizer=state_norm, reward_transform=reward_tf,
                      progress=progress, precision=plan.precision, meta=all_settings if group else settings,
                      tensorboard=tensorboard, capture=plan.capture)
    results = []
    for s, history, settings in zip(seed_list, histories if group else [histories], all_settings):
        if history["eval"]:
            e = history["eval"][-1]
            success = f", success rate {e['success_rate']:.2f}" if "success_rate" in e else ""
            score = f", normalised score {e['score_mean']:.1f}" if "score_mean" in e else " (raw returns)"
            print(f"final evaluation at step {e['step']}{f' (seed {s})' if group else ''}: return "
                  f"{e['return_mean']:.1f} +- {e['return_std']:.1f}{score}{success}")
        # the run's wall time over all its parts: the earlier ones (each up to its checkpoint) and this process's
        segments = history["segments_s"][:-1] + [time.perf_counter() - start]
        total = None if None in segments else sum(segments)
        results.append({**history, "segments_s": segments, "config": settings, "wall_time": total})
    return results if group else results[0]


def _jsonable(config) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}


# --------------------------------------------------------------------------------------------------------------
# Trained agents, reloaded
# --------------------------------------------------------------------------------------------------------------

@dataclass
class LoadedAgent:
    """A trained agent rebuilt from its run directory by :func:`load_agent`. ``act`` takes raw observations (it
    applies the run's state normalisation); ``evaluate`` runs it in the run's environment."""
    agent: object
    config: object                 # the algorithm's config dataclass
    settings: dict                 # the run's config.json
    step: int                      # gradient steps it was trained for
    env_id: str | None             # None: trained with no environment recorded (train() from Python, no eval_env)
    task: str | None               # None: no reference returns, so no normalised score (your own data)
    state_normalizer: StateNormalizer | None

    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float32)
        o = obs if self.state_normalizer is None else self.state_normalizer.transform(obs)
        return self.agent.act(o, deterministic)

    def evaluate(self, episodes: int = 10, seed: int = 0) -> dict:
        """``{"returns": array, "scores": array}`` over ``episodes`` seeded episodes (normalised D4RL scores;
        ``scores`` is None for a run without reference returns)."""
        from .datasets import normalized_score
        if self.env_id is None:
            raise UserError(f"this run ({self.settings.get('algo')}) recorded no environment to evaluate in; "
                            "train with eval_env= (or --env)")
        returns = evaluate(self.agent, self.env_id, at_least("--episodes", episodes, 1), seed=seed,
                           state_normalizer=self.state_normalizer)
        return {"returns": returns, "scores": None if self.task is None else normalized_score(self.task, returns)}


def saved_agent(run_dir: str | os.PathLike) -> Path:
    """The weights :func:`load_agent` reads from ``run_dir``: ``agent.pt`` (a finished run keeps it) or, for a run
    still training or interrupted, its latest ``checkpoint.pt``; a :class:`UserError` naming the folder if neither."""
    run_dir = Path(run_dir)
    weights = next((run_dir / n for n in ("agent.pt", "checkpoint.pt") if (run_dir / n).exists()), None)
    if weights is None:
        raise UserError(f"{run_dir} has no agent.pt (nor checkpoint.pt): its run saved no agent yet (both stay out "
                        f"of git: a run made on another machine must be trained again here)")
    return weights


def load_agent(run_dir: str | os.PathLike, device: str = "cpu") -> LoadedAgent:
    """Rebuild the agent a run trained, from ``run_dir/config.json`` and ``run_dir/agent.pt`` (or, for a run that
    was interrupted, its latest ``checkpoint.pt``). The networks' sizes come from the environment named by the
    dataset, so no data is loaded."""
    from .datasets import parse
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        raise UserError(f"{run_dir} is not a run directory (no config.json); `python -m minirl train ... --out DIR` "
                        f"makes one")
    weights = saved_agent(run_dir)
    try:
        settings = json.loads((run_dir / "config.json").read_text())
        # a run that train() wrote from Python records its agent's class instead of an --algo name
        algo = settings["algo"] if "algo" in settings else algo_name(settings["agent"])
        dataset, fields = settings["dataset"], settings["config"]
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"{run_dir / 'config.json'} is damaged ({type(e).__name__}: {e}); it cannot say which agent "
                        f"to build") from None
    if algo is None or algo not in ALGORITHMS:
        raise UserError(f"{run_dir / 'config.json'}: {settings.get('agent', algo)!r} is not an agent minirl builds "
                        f"(one of {', '.join(ALGORITHMS)}); rebuild the agent yourself and load {weights.name} into it")
    if "env_id" in settings:  # your own data (train --dataset FILE --env ID), or train() called from Python
        env_id, task_name = settings["env_id"], settings.get("task")
    else:
        task = parse(dataset).task
        env_id, task_name = task.env_id, task.name
    if "obs_dim" in settings:  # recorded: no environment needed to rebuild the networks
        obs_dim, act_dim, low, high = (settings[k] for k in ("obs_dim", "act_dim", "action_low", "action_high"))
    else:
        env = make_task_env(env_id)  # a maze's is OGBench's single-task environment
        obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
        low, high = env.action_space.low, env.action_space.high
        env.close()
    config = make_config(algo, fields)
    agent = build_agent(algo, obs_dim, act_dim, None if low is None else np.asarray(low, np.float32),
                        None if high is None else np.asarray(high, np.float32), config, device)
    state = read_checkpoint(weights)
    load_agent_state(agent, state["agent"], weights)
    normalizer = state.get("state_normalizer")
    return LoadedAgent(agent, config, settings, state["step"], env_id, task_name,
                       None if normalizer is None else StateNormalizer.from_state_dict(normalizer))
