"""The training loop every algorithm shares, the scales, and evaluation in the environment.

``train(agent, dataset, steps, ...)`` samples a batch, calls ``agent.update(batch)``, stops with an error naming the
loss and the step if a loss is NaN or inf (on a GPU: the loss and the window of ``log_every`` steps, because the
losses stay on the device until a log step so that no update waits for the host), evaluates every ``eval_every`` steps (mean return and D4RL-normalised
score over seeded episodes, all episodes stepped together so the policy sees one batch), writes ``log.jsonl`` and
``eval.csv``, and saves a checkpoint every ``checkpoint_every`` steps. A run resumed from a checkpoint gives the same
numbers on the CPU as one that never stopped: the checkpoint holds the agent (networks and optimisers), the batch
sampler's generator, torch's global generator and the logs.

An agent is any object with ``update(batch) -> dict``, ``act(obs, deterministic=True) -> actions``,
``state_dict()`` and ``load_state_dict()``. ``act`` takes and returns numpy arrays of shape ``(B, dim)``; a discrete
agent returns integer action indices of shape ``(B,)``.
"""
from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from .behavior import make_env, single_thread
from .data import OfflineDataset, RewardTransform, StateNormalizer


# --------------------------------------------------------------------------------------------------------------
# Scales
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scale:
    """How big a run is: gradient steps, evaluation cadence and episodes, and the dataset size cap."""
    name: str
    steps: int
    eval_every: int
    eval_episodes: int
    dataset_size: int | None      # None: the full dataset
    batch_size: int = 256
    algo_steps: tuple = ()        # (algo, steps) pairs for algorithms slower per update than the default allows

    def steps_for(self, algo: str) -> int:
        """Gradient steps for ``algo`` at this scale (slow updates such as CQL's get fewer at ``cpu`` scale)."""
        return dict(self.algo_steps).get(algo, self.steps)


SCALES = {
    # CQL evaluates 1 + 3 x 10 actions per state through 3x256 critics: ~3 updates per CPU-second at the paper's
    # sizes (offline SAC, its alpha = 0 case, ~25); BCQ decodes 10 actions per next state through a 750-750 VAE:
    # ~5-6 per second at batch 256. So the CPU scales give them fewer steps (benchmarks/speed.py).
    "smoke": Scale("smoke", steps=200, eval_every=100, eval_episodes=2, dataset_size=5_000,
                   algo_steps=(("cql", 20), ("cql-lagrange", 20), ("bcq", 50))),
    "cpu": Scale("cpu", steps=20_000, eval_every=2_000, eval_episodes=10, dataset_size=None,
                 algo_steps=(("cql", 1_200), ("cql-lagrange", 1_200), ("sac-offline", 10_000), ("bcq", 2_000))),
    "full": Scale("full", steps=1_000_000, eval_every=5_000, eval_episodes=10, dataset_size=None),
}


def get_scale(name: str | None = None) -> Scale:
    """The :class:`Scale` called ``name``, or ``$MINIRL_SCALE`` (default ``cpu``)."""
    name = name or os.environ.get("MINIRL_SCALE") or "cpu"
    if name not in SCALES:
        raise ValueError(f"MINIRL_SCALE must be one of {sorted(SCALES)}, got {name!r}")
    return SCALES[name]


# --------------------------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------------------------

@single_thread()
def evaluate(agent, env_id: str, episodes: int = 10, seed: int = 0,
             state_normalizer: StateNormalizer | None = None) -> np.ndarray:
    """Undiscounted returns of ``agent.act(obs, deterministic=True)`` over ``episodes`` seeded episodes.

    All episodes run side by side (one environment each, reset with seeds ``seed, seed + 1, ...``) so that the agent
    acts on a batch of observations per step.
    """
    envs = [make_env(env_id) for _ in range(episodes)]
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]).astype(np.float32)
    returns = np.zeros(episodes)
    active = np.ones(episodes, bool)
    while active.any():
        idx = np.flatnonzero(active)
        o = obs[idx] if state_normalizer is None else state_normalizer.transform(obs[idx])
        actions = np.asarray(agent.act(o, deterministic=True))
        for j, i in enumerate(idx):
            obs[i], r, term, trunc, _ = envs[i].step(actions[j])
            returns[i] += r
            active[i] = not (term or trunc)
    for env in envs:
        env.close()
    return returns


# --------------------------------------------------------------------------------------------------------------
# Data preparation
# --------------------------------------------------------------------------------------------------------------

def prepare_dataset(dataset: OfflineDataset, normalize_states: bool = False, reward_scale: str | None = None):
    """Apply the preprocessing an algorithm asks for; returns ``(dataset, state_normalizer, reward_transform)``.

    ``reward_scale``: ``None`` or ``"return_range"`` (IQL's ``1000 / (max return - min return)``).
    """
    if reward_scale not in (None, "return_range"):
        raise ValueError(f"reward_scale must be None or 'return_range', got {reward_scale!r}")
    state = dataset.state_normalizer() if normalize_states else None
    reward = dataset.return_range_scaler() if reward_scale == "return_range" else None
    if state is None and reward is None:
        return dataset, None, None
    return dataset.transformed(state=state, reward=reward), state, reward


# --------------------------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------------------------

class NonFiniteLossError(FloatingPointError):
    """Raised when an agent's update returns a NaN or infinite loss."""


def _check_finite(logs: dict, step: int, first: int | None = None) -> None:
    """Raise if a log is NaN or inf; ``first`` set: ``logs`` are sums over steps ``first..step``."""
    for k, v in logs.items():
        x = float(v)
        if not math.isfinite(x):
            where = f"at step {step}" if first is None or first == step else f"in steps {first}-{step}"
            raise NonFiniteLossError(f"{k} is {x} {where}: training stopped "
                                     f"(lower the learning rate, check the data, or normalise rewards)")


def train(agent, dataset: OfflineDataset, steps: int, *, batch_size: int = 256, eval_env: str | None = None,
          eval_every: int | None = None, eval_episodes: int = 10, task: str | None = None, seed: int = 0,
          device: str = "cpu", out: str | os.PathLike | None = None, log_every: int = 1000,
          checkpoint_every: int | None = None, resume: bool = False,
          state_normalizer: StateNormalizer | None = None, reward_transform: RewardTransform | None = None,
          progress: bool = True, sync_every_step: bool | None = None, amp: bool = False) -> dict:
    """Train ``agent`` on ``dataset`` for ``steps`` gradient steps; returns ``{"train": [...], "eval": [...]}``.

    ``dataset`` is used as given (already preprocessed, see :func:`prepare_dataset`); ``state_normalizer`` is
    applied to the environment's observations at evaluation, and both transforms are saved with checkpoints.
    ``task`` (e.g. ``"hopper"``) adds the normalised score to each evaluation. With ``out`` set, logs go to
    ``out/log.jsonl`` and ``out/eval.csv``, checkpoints to ``out/checkpoint.pt`` and the final agent to
    ``out/agent.pt``. ``resume=True`` continues from ``out/checkpoint.pt`` when it exists.

    ``sync_every_step`` (default: True on the CPU, False on other devices) reads every update's logs on the host,
    so a NaN is reported at its step. Off, the logs are summed on the device and read once per log step: on a GPU
    that removes one host-device synchronisation per update, and a NaN is reported with its window of steps.

    ``amp=True`` runs every update under bfloat16 autocast (:func:`autocast`): the hidden layers multiply in
    bfloat16, the output layers, the losses, parameters and optimiser states stay float32. Evaluation runs in float32.
    """
    if steps < 0 or batch_size < 1:
        raise ValueError(f"steps must be >= 0 and batch_size >= 1, got steps={steps}, batch_size={batch_size}")
    if eval_every and eval_env is None:
        raise ValueError("eval_every is set but eval_env is None: pass the environment id to evaluate in")
    out = Path(out) if out is not None else None
    if checkpoint_every and out is None:
        raise ValueError("checkpoint_every needs out= (the directory the checkpoint is written to)")
    if resume and out is None:
        raise ValueError("resume=True needs out= (the directory holding checkpoint.pt)")
    precision = autocast(device, amp)  # raises here, not at the first update, when bfloat16 is not supported
    if sync_every_step is None:
        sync_every_step = torch.device(device).type == "cpu"  # reading a CPU tensor costs nothing
    torch.manual_seed(seed)
    sampler = torch.Generator(device=device).manual_seed(seed)
    history: dict[str, list] = {"train": [], "eval": []}
    start, resumed_running = 0, ({}, 0)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for name in ("log.jsonl", "eval.csv"):  # rewritten from the checkpoint's history when resuming
            (out / name).unlink(missing_ok=True)
        if resume and (out / "checkpoint.pt").exists():
            # on the CPU: generator states must stay CPU byte tensors; load_state_dict copies onto the agent's device
            ck = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=False)
            agent.load_state_dict(ck["agent"])
            sampler.set_state(ck["sampler"])
            torch.set_rng_state(ck["torch_rng"])
            if ck.get("cuda_rng") is not None:
                torch.cuda.set_rng_state(ck["cuda_rng"], torch.device(device))
            start, history = ck["step"], ck["history"]
            resumed_running = ck.get("running", ({}, 0))
            # the logs end where the checkpoint was taken, even if the interrupted run got further
            entries = sorted(({"kind": kind, **e} for kind in history for e in history[kind]),
                             key=lambda e: (e["step"], e["kind"] == "eval"))  # the order the run wrote them in
            with open(out / "log.jsonl", "w") as f:
                f.writelines(json.dumps(e) + "\n" for e in entries)
            if history["eval"]:
                _write_csv(out / "eval.csv", history["eval"])
        elif resume:
            print(f"resume: no checkpoint in {out}, starting from step 0")
    dataset.to_tensors(device)  # move the data to the device once

    def log(kind: str, entry: dict) -> None:
        history[kind].append(entry)
        if out is not None:
            with open(out / "log.jsonl", "a") as f:
                f.write(json.dumps({"kind": kind, **entry}) + "\n")

    def checkpoint(step: int) -> None:
        tmp = out / "checkpoint.pt.tmp"
        cuda_rng = torch.cuda.get_rng_state(torch.device(device)) if torch.device(device).type == "cuda" else None
        torch.save({"agent": agent.state_dict(), "sampler": sampler.get_state(), "torch_rng": torch.get_rng_state(),
                    "cuda_rng": cuda_rng,
                    "step": step, "history": history,
                    "running": ({k: float(v) for k, v in running.items()}, n_running),
                    **_transforms(state_normalizer, reward_transform)}, tmp)
        os.replace(tmp, out / "checkpoint.pt")

    # sums of the update logs since the last "train" entry, and how many updates they hold; a checkpoint keeps
    # them, so a run resumed between two log steps writes the same averages as one that never stopped
    running, n_running = resumed_running
    t0, eval_seconds = time.perf_counter(), 0.0
    bar = tqdm(range(start, steps), initial=start, total=steps, disable=not progress, mininterval=1.0,
               desc=getattr(agent, "name", type(agent).__name__))
    for t in bar:
        step = t + 1
        with precision:
            logs = agent.update(dataset.sample(batch_size, device, sampler))
        if sync_every_step:
            logs = {k: float(v) for k, v in logs.items()}
            _check_finite(logs, step)
        for k, v in logs.items():
            running[k] = running.get(k, 0.0) + (v.detach() if torch.is_tensor(v) else float(v))
        n_running += 1
        if step % log_every == 0 or step == steps:
            sums = {k: float(v) for k, v in running.items()}  # the one read of the logs per window
            if not sync_every_step:
                _check_finite(sums, step, first=step - n_running + 1)
            entry = {"step": step, **{k: v / n_running for k, v in sums.items()},
                     "updates_per_s": (step - start) / (time.perf_counter() - t0 - eval_seconds)}
            log("train", entry)
            running, n_running = {}, 0
        if eval_every and (step % eval_every == 0 or step == steps):
            t_eval = time.perf_counter()
            returns = evaluate(agent, eval_env, eval_episodes, seed=10_000 * (seed + 1),
                               state_normalizer=state_normalizer)
            entry = {"step": step, "return_mean": float(returns.mean()), "return_std": float(returns.std())}
            if task is not None:
                from .datasets import normalized_score
                scores = normalized_score(task, returns)
                entry |= {"score_mean": float(scores.mean()), "score_std": float(scores.std())}
            log("eval", entry)
            eval_seconds += time.perf_counter() - t_eval
            if out is not None:
                _write_csv(out / "eval.csv", history["eval"])
            bar.set_postfix(ret=f"{entry['return_mean']:.1f}")
        if checkpoint_every and step % checkpoint_every == 0:
            checkpoint(step)
    if out is not None:
        torch.save({"agent": agent.state_dict(), "step": steps,
                    **_transforms(state_normalizer, reward_transform)}, out / "agent.pt")
    return history


def autocast(device: str, amp: bool):
    """The context an update runs in: bfloat16 autocast on ``device`` when ``amp``, else a no-op.

    bfloat16 rather than float16: it has float32's exponent range, so no loss scaling is needed and no gradient
    underflows. What stays in float32 is listed in :mod:`minirl.nets`. A reusable context (``torch.autocast``
    objects can be entered again after they exit).
    """
    dev = torch.device(device)
    if not amp:
        return contextlib.nullcontext()
    if dev.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"amp=True needs bfloat16 support, which {torch.cuda.get_device_name(dev)} lacks; "
                         "run without amp (--amp)")
    return torch.autocast(dev.type, dtype=torch.bfloat16)


def _transforms(state: StateNormalizer | None, reward: RewardTransform | None) -> dict:
    return {"state_normalizer": None if state is None else state.state_dict(),
            "reward_transform": None if reward is None else reward.state_dict()}


def _write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


# --------------------------------------------------------------------------------------------------------------
# Algorithms by name, and the command line: python -m minirl ...
# --------------------------------------------------------------------------------------------------------------

# name -> (module, agent class, config class[, preset config overrides]); an algorithm's issue adds its line here.
ALGORITHMS = {
    "bc": ("minirl.bc", "BC", "BCConfig"),
    "bcq": ("minirl.bcq", "BCQ", "BCQConfig"),
    "cql": ("minirl.cql", "CQL", "CQLConfig"),
    "cql-lagrange": ("minirl.cql", "CQL", "CQLConfig", {"lagrange": True}),
    # offline SAC with no conservatism at all: the naive actor-critic of the BCQ chapter (extrapolation error)
    "sac-offline": ("minirl.cql", "CQL", "CQLConfig", {"cql_alpha": 0.0, "lagrange": False}),
    "iql": ("minirl.iql", "IQL", "IQLConfig"),
}


def _config_fields(algo: str) -> set[str]:
    import dataclasses
    import importlib
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algo!r}; expected one of {sorted(ALGORITHMS)}")
    module, _, config_name, *_ = ALGORITHMS[algo]
    return {f.name for f in dataclasses.fields(getattr(importlib.import_module(module), config_name))}


def make_agent(algo: str, dataset: OfflineDataset, device: str = "cpu", **overrides):
    """Build the agent ``algo`` for ``dataset``'s dimensions; ``overrides`` set fields of its config."""
    import dataclasses
    import importlib
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algo!r}; expected one of {sorted(ALGORITHMS)}")
    module, agent_name, config_name, *preset = ALGORITHMS[algo]
    overrides = {**(preset[0] if preset else {}), **overrides}
    mod = importlib.import_module(module)
    config_cls = getattr(mod, config_name)
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    for k in overrides:
        if k not in fields:
            raise ValueError(f"{config_name} has no field {k!r}; fields: {sorted(fields)}")
    config = config_cls(**overrides)
    agent = getattr(mod, agent_name)(dataset.obs_dim, dataset.act_dim, dataset.action_low, dataset.action_high,
                                     config, device)
    return agent, config


def _parse_overrides(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set expects key=value, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
        if isinstance(out[key], list):
            out[key] = tuple(out[key])
    return out


def _eval_every(scale: Scale, steps: int) -> int:
    """The scale's evaluation period, shortened for runs shorter than the scale's default (at least 4 points)."""
    return scale.eval_every if steps >= scale.steps else min(scale.eval_every, max(steps // 4, 1))


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def compile_agent(agent, backend: str = "inductor", mode: str | None = None) -> list[str]:
    """Compile every network of ``agent`` in place with ``torch.compile`` (``nn.Module.compile``); returns their names.

    In place, so parameter names, checkpoints and optimisers are unchanged. The fallback: if a graph fails to
    compile, torch runs that piece eagerly instead of stopping (``torch._dynamo.config.suppress_errors``), with a
    warning. Meant for GPUs; on this project's CPU compiled updates ran 0.89x (BCQ) to 1.14x (CQL) the eager rate (see
    benchmarks/README.md).

    ``mode`` is ``torch.compile``'s: ``"reduce-overhead"`` records **CUDA graphs** of the compiled networks on a GPU
    (one replay per call instead of one kernel launch per op), ``"max-autotune"`` also searches matmul kernels. A
    mode needs the default backend, inductor.
    """
    import torch._dynamo
    if mode is not None and mode not in COMPILE_MODES:
        raise ValueError(f"compile mode must be one of {COMPILE_MODES}, got {mode!r}")
    if mode is not None and backend != "inductor":
        raise ValueError(f"a compile mode ({mode!r}) needs the inductor backend, got backend={backend!r}")
    torch._dynamo.config.suppress_errors = True
    names = []
    for name, value in getattr(agent, "__dict__", {}).items():
        if isinstance(value, torch.nn.Module):
            value.compile(backend=backend, **({"mode": mode} if mode is not None else {}))
            names.append(name)
    if not names:
        raise ValueError(f"{type(agent).__name__} has no torch.nn.Module attributes to compile")
    return names


def run(algo: str, dataset: str, *, scale: str | None = None, steps: int | None = None, seed: int = 0,
        device: str = "cpu", out: str | Path | None = None, overrides: dict | None = None,
        batch_size: int | None = None, eval_every: int | None = None, eval_episodes: int | None = None,
        checkpoint_every: int | None = None, resume: bool = False, progress: bool = True,
        compile: bool | str = False, amp: bool = False) -> dict:
    """Train ``algo`` on the named ``dataset`` at a scale: what ``python -m minirl train`` does.

    Loads (or makes) the dataset at the scale's size, builds the agent with ``overrides``, prepares states and
    rewards as its config asks, trains, and writes ``config.json`` next to the logs in ``out``.  Returns the
    history of :func:`train` with ``config`` (the run's settings) and ``wall_time`` (seconds) added.
    """
    import time
    from . import datasets

    sc = get_scale(scale)
    task, _ = datasets.parse_name(dataset)
    size = sc.dataset_size and min(sc.dataset_size, datasets.full_size(dataset))
    raw = datasets.load_dataset(dataset, size, progress=progress)
    steps = steps if steps is not None else sc.steps_for(algo)
    overrides = dict(overrides or {})
    if "max_steps" in _config_fields(algo):  # schedules (e.g. IQL's cosine actor lr) must know the run's length
        overrides.setdefault("max_steps", steps)
    torch.manual_seed(seed)  # the initial weights depend on the seed too
    agent, config = make_agent(algo, raw, device, **overrides)
    if compile:  # True, or a torch.compile mode such as "reduce-overhead" (CUDA graphs)
        mode = None if compile is True else compile
        print(f"torch.compile (mode {mode or 'default'}): {', '.join(compile_agent(agent, mode=mode))}")
    data, state_norm, reward_tf = prepare_dataset(raw, getattr(config, "normalize_states", False),
                                                  getattr(config, "reward_scale", None))
    out = Path(out or f"runs/{algo}-{dataset}-s{seed}")
    print(f"minirl train: algo={algo} dataset={dataset} ({len(raw)} transitions) scale={sc.name} "
          f"steps={steps} seed={seed} device={device} out={out}")
    start = time.perf_counter()
    history = train(agent, data, steps, batch_size=batch_size or sc.batch_size, eval_env=task.env_id,
                    eval_every=eval_every or _eval_every(sc, steps),
                    eval_episodes=eval_episodes or sc.eval_episodes, task=task.name, seed=seed,
                    device=device, out=out, checkpoint_every=checkpoint_every, resume=resume,
                    state_normalizer=state_norm, reward_transform=reward_tf, progress=progress, amp=amp)
    settings = {"algo": algo, "dataset": dataset, "transitions": len(raw), "scale": sc.name, "steps": steps,
                "seed": seed, "device": device, "compile": compile, "amp": amp, "config": _jsonable(config)}
    (out / "config.json").write_text(json.dumps(settings, indent=1))
    if history["eval"]:
        e = history["eval"][-1]
        print(f"final evaluation at step {e['step']}: return {e['return_mean']:.1f} +- {e['return_std']:.1f}, "
              f"normalised score {e['score_mean']:.1f}")
    return {**history, "config": settings, "wall_time": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> int:
    import argparse
    from . import datasets

    p = argparse.ArgumentParser(prog="python -m minirl", description="minirl: offline RL, executed.")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train an agent on a named dataset")
    t.add_argument("--algo", required=True, choices=sorted(ALGORITHMS))
    t.add_argument("--dataset", required=True, help="e.g. pendulum-medium, hopper-medium-replay")
    t.add_argument("--scale", default=None, help="smoke | cpu | full (default: $MINIRL_SCALE or cpu)")
    t.add_argument("--steps", type=int, default=None, help="gradient steps (default: the scale's)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--device", default="cpu")
    t.add_argument("--out", default=None, help="run directory (default: runs/<algo>-<dataset>-s<seed>)")
    t.add_argument("--batch-size", type=int, default=None)
    t.add_argument("--eval-every", type=int, default=None)
    t.add_argument("--eval-episodes", type=int, default=None)
    t.add_argument("--checkpoint-every", type=int, default=None)
    t.add_argument("--resume", action="store_true", help="continue from <out>/checkpoint.pt")
    t.add_argument("--compile", nargs="?", const=True, default=False, choices=[True, *COMPILE_MODES],
                   metavar="MODE", help="torch.compile the networks (for GPUs; falls back to eager where a graph "
                   "fails); MODE reduce-overhead also records CUDA graphs, max-autotune tunes matmuls")
    t.add_argument("--amp", action="store_true",
                   help="bfloat16 autocast in the updates (hidden layers only; outputs and losses in float32)")
    t.add_argument("--lagrange", action="store_true", help="CQL only: learn alpha' (same as --algo cql-lagrange)")
    t.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override config fields")
    d = sub.add_parser("dataset", help="make, list or describe the named datasets")
    d.add_argument("action", choices=["make", "list", "info"])
    d.add_argument("names", nargs="*", help="dataset names (make/info); 'all' for every dataset")
    d.add_argument("--size", type=int, default=None, help="transitions (default: the full dataset)")
    a = p.parse_args(argv)

    if a.command == "dataset":
        if a.action == "list":
            for name in datasets.dataset_names():
                cached = datasets.cache_path(name, a.size).exists()
                print(f"{name:28s} {datasets.full_size(name):>9d} transitions  {'cached' if cached else ''}")
            return 0
        names = datasets.dataset_names() if a.names == ["all"] else a.names
        if not names:
            p.error(f"dataset {a.action} needs at least one dataset name (see `python -m minirl dataset list`)")
        for name in names:
            if a.action == "make":
                datasets.load_dataset(name, a.size)
                print(f"{name}: {datasets.cache_path(name, a.size)}")
            else:
                print(json.dumps(datasets.dataset_info(name, a.size)))
        return 0

    run(a.algo, a.dataset, scale=a.scale, steps=a.steps, seed=a.seed, device=a.device, out=a.out,
        overrides={**({"lagrange": True} if a.lagrange else {}), **_parse_overrides(a.set)},
        batch_size=a.batch_size, eval_every=a.eval_every, eval_episodes=a.eval_episodes,
        checkpoint_every=a.checkpoint_every, resume=a.resume, compile=a.compile,
        amp=a.amp)
    return 0


def _jsonable(config) -> dict:
    import dataclasses
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}
