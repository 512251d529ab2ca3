"""The training loop every algorithm shares, the scales, evaluation in the environment, and the command line.

``train(agent, dataset, steps, ...)`` samples a batch, calls ``agent.update(batch)``, stops with an error naming the
loss and the step if a loss is NaN or inf (on a GPU: the loss and the window of ``log_every`` steps, because the
losses stay on the device until a log step so that no update waits for the host), evaluates every ``eval_every``
steps (mean return and D4RL-normalised score over seeded episodes, all episodes stepped together so the policy sees
one batch), writes ``log.jsonl`` and ``eval.csv``, and saves a checkpoint every ``checkpoint_every`` steps, and when
interrupted (Ctrl-C). A run resumed from a checkpoint gives the same numbers on the CPU as one that never stopped:
the checkpoint holds the agent (networks and optimisers), the batch sampler's generator, torch's global generator
and the logs. Checkpoints and ``agent.pt`` also record the run's settings, the step and the package versions, and
are written atomically.

``run(algo, dataset, ...)`` is what ``python -m minirl train`` does: it checks every setting first (:func:`plan_run`:
names, fields, device, precision, output directory, checkpoint), then makes the data and trains.
``load_agent(run_dir)`` rebuilds a trained agent from its run directory (``python -m minirl evaluate``).

An agent is any object with ``update(batch) -> dict``, ``act(obs, deterministic=True) -> actions``,
``state_dict()`` and ``load_state_dict()``. ``act`` takes and returns numpy arrays of shape ``(B, dim)``; a discrete
agent returns integer action indices of shape ``(B,)``.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import importlib
import json
import math
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import nets, versions
from .behavior import make_env, progress_bar, single_thread
from .config import UserError, did_you_mean, field_docs, field_types, parse_field
from .data import OfflineDataset, RewardTransform, StateNormalizer, atomic_write


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
    "full": Scale("full", steps=1_000_000, eval_every=5_000, eval_episodes=10, dataset_size=None),
}


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
# Devices and precision
# --------------------------------------------------------------------------------------------------------------

def check_device(device: str) -> str:
    """``device`` if torch can run on it here; a :class:`UserError` saying why not otherwise."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        near = " (did you mean 'cuda'?)" if device.lower().startswith("gpu") else did_you_mean(device, ["cpu", "cuda"])
        raise UserError(f"--device {device!r} is not a device: use cpu, cuda (an NVIDIA GPU), cuda:N or mps{near}")\
            from None
    if dev.type == "cuda":
        if torch.version.cuda is None:
            raise UserError(f"--device {device}: this torch ({torch.__version__}) is built without CUDA; "
                            "use --device cpu or install a CUDA build of torch")
        count = torch.cuda.device_count()
        if count == 0 or (dev.index or 0) >= count:
            raise UserError(f"--device {device}: {count} CUDA GPU(s) visible"
                            + (f" (cuda:0 to cuda:{count - 1})" if count else "; use --device cpu"))
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise UserError(f"--device {device}: Apple's MPS is not available on this machine; use --device cpu")
    elif dev.type != "cpu":
        raise UserError(f"--device {device!r}: minirl runs on cpu, cuda or mps")
    return device


def device_works(device: str) -> bool:
    """Whether one update of a small actor-critic (the layers every algorithm uses) runs on ``device`` and gives
    finite numbers: the check behind :func:`default_device` for Apple's MPS, whose coverage of torch's operators
    varies between torch versions."""
    try:
        gen = torch.Generator().manual_seed(0)
        obs, act = torch.randn(8, 3, generator=gen).to(device), torch.rand(8, 2, generator=gen).to(device) * 2 - 1
        critic = nets.CriticEnsemble(3, 2, (16, 16), 2).to(device)
        actor = nets.TanhGaussianActor(3, 2, (16, 16)).to(device)
        a, logp = actor.sample(obs)
        loss = critic(obs, act).pow(2).mean() + (logp - critic(obs, a).min(0).values).mean()
        loss.backward()
        return bool(torch.isfinite(loss).item())
    except Exception:  # an operator the backend lacks, a driver error: the device does not work for minirl
        return False


def default_device() -> str:
    """The device the notebooks train on: ``$MINIRL_DEVICE`` when set (checked), else the first CUDA GPU, else Apple's
    MPS when :func:`device_works` on it, else the CPU."""
    if os.environ.get("MINIRL_DEVICE"):
        return check_device(os.environ["MINIRL_DEVICE"])
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available() and device_works("mps"):
        return "mps"
    return "cpu"


def default_threads() -> int:
    """The torch threads the notebooks use: ``$MINIRL_THREADS`` when set, else every core this process may run on.

    One process alone on a machine gains from a second thread (CQL 10.1 vs 5.3 updates/s on this project's 2 cores,
    benchmarks/README.md); processes that share the cores should take one thread each (``MINIRL_THREADS=1``):
    a second thread on a busy core made a BC run 57x slower."""
    text = os.environ.get("MINIRL_THREADS")
    if text:
        try:
            return at_least("MINIRL_THREADS", int(text), 1)
        except ValueError:
            raise UserError(f"MINIRL_THREADS must be a whole number of threads >= 1, got {text!r}") from None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


PRECISIONS = ("auto", "float32", "bf16")


def native_bf16(device: str, cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether ``device`` computes bfloat16 matmuls natively: a CUDA GPU with bfloat16 (Ampere or later), or a CPU
    with AVX-512 BF16 or AMX-BF16 (the flags in ``cpuinfo``, else torch's own CPU checks)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if dev.type != "cpu":
        return False
    try:
        with open(cpuinfo) as f:
            flags = {w for line in f if line.startswith("flags") for w in line.split()}
        return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def requested_precision(precision: str | None, amp: bool) -> str:
    """What was asked for: ``amp=True`` (``--amp``, the older flag) is ``"bf16"``; nothing at all is ``"auto"``: bfloat16
    where the hardware computes it natively, float32 elsewhere (:func:`resolve_precision`)."""
    if amp and precision not in (None, "bf16"):
        raise UserError(f"--amp is --precision bf16: it contradicts --precision {precision}")
    return "bf16" if amp else precision or "auto"


def resolve_precision(precision: str, device: str) -> str:
    """``"float32"`` or ``"bf16"``: what ``precision`` (``auto``, ``float32``, ``bf16``) means on ``device``.

    ``auto`` is bf16 only where the hardware computes it natively (:func:`native_bf16`), float32 elsewhere.
    ``bf16`` on a GPU without bfloat16 is an error; on a CPU without native bfloat16 it runs, emulated and slowly.
    """
    if precision not in PRECISIONS:
        raise UserError(f"--precision must be one of {', '.join(PRECISIONS)}, got {precision!r}"
                        f"{did_you_mean(precision, PRECISIONS)}")
    if precision == "auto":
        return "bf16" if native_bf16(device) else "float32"
    if precision == "bf16" and torch.device(device).type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError(f"--precision bf16 needs bfloat16 support, which {torch.cuda.get_device_name(device)} "
                        "lacks; use --precision float32 (or auto)")
    return precision


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
    return _episodes(agent, env_id, episodes, seed, state_normalizer)["returns"]


def _episodes(agent, env_id: str, episodes: int, seed: int, state_normalizer: StateNormalizer | None,
              gamma: float = 1.0, keep_states: bool = False) -> dict:
    """Run the deterministic policy for ``episodes`` seeded episodes side by side: the undiscounted ``returns``, the
    ``discounted`` returns (``sum_t gamma^t r_t``), and the (normalised) start observations and first actions; with
    ``keep_states``, also ``states``: each episode's observations before normalisation (float32), ``(T_i, obs_dim)``."""
    envs = [make_env(env_id) for _ in range(episodes)]
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]).astype(np.float32)
    returns, discounted = np.zeros(episodes), np.zeros(episodes)
    active = np.ones(episodes, bool)
    visited = [[] for _ in range(episodes)]
    first = None
    t = 0
    while active.any():
        idx = np.flatnonzero(active)
        if keep_states:
            for i in idx:
                visited[i].append(obs[i].copy())
        o = obs[idx] if state_normalizer is None else state_normalizer.transform(obs[idx])
        actions = np.asarray(agent.act(o, deterministic=True))
        if first is None:
            first = (np.asarray(o, np.float32), actions.astype(np.float32))
        for j, i in enumerate(idx):
            obs[i], r, term, trunc, _ = envs[i].step(actions[j])
            returns[i] += r
            discounted[i] += gamma ** t * r
            active[i] = not (term or trunc)
        t += 1
    for env in envs:
        env.close()
    out = {"returns": returns, "discounted": discounted, "start_obs": first[0], "start_actions": first[1]}
    if keep_states:
        out["states"] = [np.stack(v) for v in visited]
    return out


def has_value_estimate(agent) -> bool:
    """Whether ``agent`` has a continuous-action critic ensemble ``agent.critic(obs, act) -> (n, B)`` and a discount."""
    return hasattr(agent, "critic") and hasattr(getattr(agent, "cfg", None), "gamma")


@single_thread()
def value_check(agent, env_id: str, episodes: int = 10, seed: int = 0,
                state_normalizer: StateNormalizer | None = None,
                reward_transform: RewardTransform | None = None) -> dict:
    """The critic's estimate at the start states against the Monte-Carlo return of the agent's own policy.

    Runs ``episodes`` deterministic episodes (as :func:`evaluate`, the same seeds) and returns
    ``return_mean`` (undiscounted), ``mc_discounted`` (the mean discounted return ``sum_t gamma^t r_t`` from the start
    states, the true value of the policy there up to the 1,000-step time limit) and ``q_start``: the mean over
    the start states of ``min_k Q_k(s_0, pi(s_0))`` (the smallest of the critic ensemble, in raw reward units:
    ``reward_transform``, e.g. IQL's reward scaling, is undone as ``(q - bias / (1 - gamma)) / scale``, exact for
    ``bias = 0``, the only case minirl makes). Extrapolation error shows as ``q_start`` far above ``mc_discounted``,
    a conservative critic (CQL) as ``q_start`` below it.
    """
    if not has_value_estimate(agent):
        raise TypeError(f"{type(agent).__name__} has no critic to check: value_check needs agent.critic(obs, act) "
                        f"and agent.cfg.gamma")
    gamma = float(agent.cfg.gamma)
    ep = _episodes(agent, env_id, episodes, seed, state_normalizer, gamma)
    dev = next(agent.critic.parameters()).device
    with torch.no_grad():
        q = agent.critic(torch.as_tensor(ep["start_obs"], device=dev),
                         torch.as_tensor(ep["start_actions"], device=dev)).float().min(0).values.mean().item()
    if reward_transform is not None:
        q = (q - reward_transform.bias / (1.0 - gamma)) / reward_transform.scale
    return {"return_mean": float(ep["returns"].mean()), "return_std": float(ep["returns"].std()),
            "returns": ep["returns"], "mc_discounted": float(ep["discounted"].mean()), "q_start": q}


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


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`train` at the end of step ``step``; with ``out`` set, a checkpoint of that step is saved
    there, so the run resumes (``resume=True``, ``--resume``) where it stopped."""

    def __init__(self, step: int, out: Path | None):
        self.step, self.out = step, out
        saved = (f"checkpoint saved in {out}; add --resume to the same command to continue" if out is not None
                 else "nothing saved (no out directory)")
        super().__init__(f"interrupted at step {step}: {saved}")


def _check_finite(logs: dict, step: int, first: int | None = None) -> None:
    """Raise if a log is NaN or inf; ``first`` set: ``logs`` are sums over steps ``first..step``."""
    for k, v in logs.items():
        x = float(v)
        if not math.isfinite(x):
            where = f"at step {step}" if first is None or first == step else f"in steps {first}-{step}"
            raise NonFiniteLossError(f"{k} is {x} {where}: training stopped "
                                     f"(lower the learning rate, check the data, or normalise rewards)")


def at_least(name: str, value, low: int) -> int:
    """``value`` if it is an integer >= ``low``; a :class:`UserError` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise UserError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def train(agent, dataset: OfflineDataset, steps: int, *, batch_size: int = 256, eval_env: str | None = None,
          eval_every: int | None = None, eval_episodes: int = 10, task: str | None = None, seed: int = 0,
          device: str = "cpu", out: str | os.PathLike | None = None, log_every: int = 1000,
          checkpoint_every: int | None = None, resume: bool = False,
          state_normalizer: StateNormalizer | None = None, reward_transform: RewardTransform | None = None,
          progress: bool = True, sync_every_step: bool | None = None, precision: str | None = None,
          amp: bool = False, meta: dict | None = None, tensorboard: bool = False) -> dict:
    """Train ``agent`` on ``dataset`` for ``steps`` gradient steps; returns ``{"train": [...], "eval": [...],
    "segments_s": [...]}``, the last the wall-clock seconds of each part of the run (one unless resumed: each earlier
    part up to its checkpoint, kept in the checkpoint, ``None`` if that checkpoint did not record it; then this call's).
    Each ``train`` entry has ``updates_per_s``, the mean rate since this part of the run started (evaluations
    excluded), and ``update_s``, the seconds of updates since step 0 over every part (evaluations excluded; the
    updates an interrupted part made after its checkpoint are not counted, as they are made again); ``update_s`` is
    absent after a resume from a checkpoint that did not record it. ``update_cpu_s`` counts the same updates in this
    process's CPU seconds (``time.process_time``, all its threads) instead of the clock's: a process that is stopped
    (``kill -STOP``) or waits for a busy core adds to ``update_s`` but not to ``update_cpu_s``, so for a one-thread run
    the two differ by exactly such pauses; it too is absent after a resume from a checkpoint that did not record it.

    ``dataset`` is used as given (already preprocessed, see :func:`prepare_dataset`); ``state_normalizer`` is
    applied to the environment's observations at evaluation, and both transforms are saved with checkpoints.
    ``task`` (e.g. ``"hopper"``) adds the normalised score to each evaluation; ``eval_every=None`` evaluates never.
    With ``out`` set, logs go to ``out/log.jsonl`` and ``out/eval.csv``, checkpoints to ``out/checkpoint.pt`` and
    the final agent to ``out/agent.pt`` (both written atomically, with ``meta``, the step and :func:`minirl.versions`).
    ``resume=True`` continues from ``out/checkpoint.pt`` when it exists: the networks, the optimiser states and the
    generators come from the checkpoint, the optimisers' settings (learning rates) from ``agent`` as built.
    Ctrl-C stops the run at the end of the current step, saves a checkpoint there (with ``out`` set) and raises
    :class:`Interrupted`; a second Ctrl-C stops at once.

    ``sync_every_step`` (default: True on the CPU, False on other devices) reads every update's logs on the host,
    so a NaN is reported at its step. Off, the logs are summed on the device and read once per log step: on a GPU
    that removes one host-device synchronisation per update, and a NaN is reported with its window of steps.

    ``precision="bf16"`` (``amp=True`` is the older spelling) runs every update under bfloat16 autocast
    (:func:`autocast`): the hidden layers multiply in bfloat16, the output layers, the losses, parameters and
    optimiser states stay float32. Evaluation runs in float32. The default, ``None`` or ``"auto"``, is bf16 where the
    hardware computes it natively and float32 elsewhere (:func:`resolve_precision`); ``"float32"`` asks for float32.

    ``tensorboard=True`` (needs ``out`` and the ``tensorboard`` package, extra ``minirl-book[tensorboard]``) also
    writes every ``log.jsonl`` entry as TensorBoard scalars (``train/<name>``, ``eval/<name>``) to event files in
    ``out``: ``tensorboard --logdir runs/`` then shows the runs side by side. A resumed run adds an event file; the
    steps an interrupted run made after its last checkpoint then appear twice.
    """
    at_least("steps", steps, 0)
    at_least("batch_size", batch_size, 1)
    at_least("log_every", log_every, 1)
    if eval_every is not None:
        at_least("eval_every", eval_every, 1)
        at_least("eval_episodes", eval_episodes, 1)
    if checkpoint_every is not None:
        at_least("checkpoint_every", checkpoint_every, 1)
    if eval_every and eval_env is None:
        raise ValueError("eval_every is set but eval_env is None: pass the environment id to evaluate in")
    out = Path(out) if out is not None else None
    if checkpoint_every and out is None:
        raise ValueError("checkpoint_every needs out= (the directory the checkpoint is written to)")
    if resume and out is None:
        raise ValueError("resume=True needs out= (the directory holding checkpoint.pt)")
    if tensorboard and out is None:
        raise ValueError("tensorboard=True needs out= (the directory the event files are written to)")
    writer = _tensorboard_writer(out) if tensorboard else None
    precision_ctx = update_context(device, precision, amp)  # raises here, not at the first update, if bf16 is missing
    if sync_every_step is None:
        sync_every_step = torch.device(device).type == "cpu"  # reading a CPU tensor costs nothing
    torch.manual_seed(seed)
    sampler = torch.Generator(device=device).manual_seed(seed)
    history: dict[str, list] = {"train": [], "eval": []}
    start, resumed_running, earlier_segments, earlier_update_s, earlier_update_cpu_s = 0, ({}, 0), [], 0.0, 0.0
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if resume and (out / "checkpoint.pt").exists():
            ck = read_checkpoint(out / "checkpoint.pt")
            if ck["step"] > steps:
                raise UserError(f"--resume: {out / 'checkpoint.pt'} is at step {ck['step']}, beyond --steps "
                                f"{steps}; ask for at least {ck['step']} steps")
            load_agent_state(agent, ck["agent"], out / "checkpoint.pt", keep_optimizer_settings=True)
            # on the CPU: generator states must stay CPU byte tensors; load_state_dict copied onto the agent's device
            sampler.set_state(ck["sampler"])
            torch.set_rng_state(ck["torch_rng"])
            if ck.get("cuda_rng") is not None:
                torch.cuda.set_rng_state(ck["cuda_rng"], torch.device(device))
            start, history = ck["step"], ck["history"]
            resumed_running = ck.get("running", ({}, 0))
            # seconds of each earlier part of the run, up to its checkpoint; None: a checkpoint that did not record it
            earlier_segments = ck.get("segments_s", [None])
            earlier_update_s = ck.get("update_s")  # None: an older checkpoint, the earlier update time unknown
            earlier_update_cpu_s = ck.get("update_cpu_s")
        elif resume:
            print(f"resume: no checkpoint in {out}, starting from step 0")
        # the logs end where the checkpoint was taken, even if the interrupted run got further
        entries = sorted(({"kind": kind, **e} for kind in history for e in history[kind]),
                         key=lambda e: (e["step"], e["kind"] == "eval"))  # the order the run wrote them in
        with atomic_write(out / "log.jsonl") as tmp:
            tmp.write_text("".join(json.dumps(e) + "\n" for e in entries))
        (out / "eval.csv").unlink(missing_ok=True)
        if history["eval"]:
            _write_csv(out / "eval.csv", history["eval"])
        if start == 0:
            (out / "checkpoint.pt").unlink(missing_ok=True)  # another run's: it must never be resumed into this one
    dataset.to_tensors(device)  # move the data to the device once

    def log(kind: str, entry: dict) -> None:
        history[kind].append(entry)
        if out is not None:
            with open(out / "log.jsonl", "a") as f:
                f.write(json.dumps({"kind": kind, **entry}) + "\n")
        if writer is not None:
            for name, value in entry.items():
                if name != "step":
                    writer.add_scalar(f"{kind}/{name}", value, entry["step"])
            if kind == "eval":
                writer.flush()  # an interrupted run keeps its curves up to the last evaluation

    def save(name: str, step: int, **extra) -> None:
        with atomic_write(out / name) as tmp:
            torch.save({"agent": agent.state_dict(), "step": step, "meta": meta, "versions": versions(),
                        **_transforms(state_normalizer, reward_transform), **extra}, tmp)

    def part_seconds() -> tuple[float, float]:
        """Seconds of updates in this part of the run (evaluations excluded), by the clock and in CPU time."""
        return time.perf_counter() - t0 - eval_seconds, time.process_time() - c0 - eval_cpu_seconds

    def update_seconds(part_s: float, part_cpu_s: float) -> dict[str, float]:
        """Seconds of updates since step 0 (``update_s``, ``update_cpu_s``): this part's plus the earlier parts';
        a clock the earlier parts did not record is left out."""
        return {k: earlier + part for k, earlier, part in (("update_s", earlier_update_s, part_s),
                                                          ("update_cpu_s", earlier_update_cpu_s, part_cpu_s))
                if earlier is not None}

    def checkpoint(step: int) -> None:
        cuda_rng = torch.cuda.get_rng_state(torch.device(device)) if torch.device(device).type == "cuda" else None
        seconds = update_seconds(*part_seconds())  # None in the checkpoint: still unknown when resumed from it
        save("checkpoint.pt", step, sampler=sampler.get_state(), torch_rng=torch.get_rng_state(), cuda_rng=cuda_rng,
             history=history, running=({k: float(v) for k, v in running.items()}, n_running),
             segments_s=earlier_segments + [time.perf_counter() - t0],
             update_s=seconds.get("update_s"), update_cpu_s=seconds.get("update_cpu_s"))

    # sums of the update logs since the last "train" entry, and how many updates they hold; a checkpoint keeps
    # them, so a run resumed between two log steps writes the same averages as one that never stopped
    running, n_running = resumed_running
    t0, eval_seconds = time.perf_counter(), 0.0
    c0, eval_cpu_seconds = time.process_time(), 0.0
    bar = progress_bar(range(start, steps), initial=start, total=steps, enabled=progress,
                       desc=getattr(agent, "name", type(agent).__name__))
    with _interrupt_at_step_end() as stop:
        for t in bar:
            step = t + 1
            with precision_ctx:
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
                part_s, part_cpu_s = part_seconds()
                log("train", {"step": step, **{k: v / n_running for k, v in sums.items()},
                              "updates_per_s": (step - start) / part_s, **update_seconds(part_s, part_cpu_s)})
                running, n_running = {}, 0
            if eval_every and (step % eval_every == 0 or step == steps):
                t_eval, c_eval = time.perf_counter(), time.process_time()
                if has_value_estimate(agent):  # the returns and, from the same episodes, the critic's value check
                    check = value_check(agent, eval_env, eval_episodes, seed=10_000 * (seed + 1),
                                        state_normalizer=state_normalizer, reward_transform=reward_transform)
                    returns = check["returns"]
                    values = {"q_start": check["q_start"], "mc_discounted": check["mc_discounted"]}
                else:
                    returns = evaluate(agent, eval_env, eval_episodes, seed=10_000 * (seed + 1),
                                       state_normalizer=state_normalizer)
                    values = {}
                entry = {"step": step, "return_mean": float(returns.mean()), "return_std": float(returns.std())}
                if task is not None:
                    from .datasets import normalized_score
                    scores = normalized_score(task, returns)
                    entry |= {"score_mean": float(scores.mean()), "score_std": float(scores.std())}
                log("eval", entry | values)
                eval_seconds += time.perf_counter() - t_eval
                eval_cpu_seconds += time.process_time() - c_eval
                if out is not None:
                    _write_csv(out / "eval.csv", history["eval"])
                bar.set_postfix(ret=f"{entry['return_mean']:.1f}")
            saved = checkpoint_every and step % checkpoint_every == 0
            if saved or (stop.requested and out is not None):
                checkpoint(step)
            if stop.requested and step < steps:
                bar.close()
                raise Interrupted(step, out)
    if out is not None:
        save("agent.pt", steps)
    if writer is not None:
        writer.close()
    return {**history, "segments_s": earlier_segments + [time.perf_counter() - t0]}


def estimate_seconds(agent, dataset: OfflineDataset, steps: int, *, batch_size: int = 256, device: str = "cpu",
                     precision: str | None = None, probe_seconds: float = 1.0) -> float:
    """How long ``steps`` updates of ``agent`` on ``dataset`` should take here: a copy of the agent (the agent itself
    is untouched) is timed over about ``probe_seconds`` of updates after 3 warm-up updates, in the precision
    :func:`train` would use. Evaluations are not included (their cost depends on how long the policy's episodes
    last). The notebooks print it before a long cell starts."""
    import copy
    at_least("steps", steps, 0)
    probe = copy.deepcopy(agent)
    dataset.to_tensors(device)
    gen = torch.Generator(device=device).manual_seed(0)
    with update_context(device, precision):
        for _ in range(3):
            probe.update(dataset.sample(batch_size, device, gen))
        n, start = 0, time.perf_counter()
        while n < 3 or time.perf_counter() - start < probe_seconds:
            logs = probe.update(dataset.sample(batch_size, device, gen))
            n += 1
        for v in logs.values():  # wait for the device
            float(v)
    return steps * (time.perf_counter() - start) / n


def describe_seconds(seconds: float) -> str:
    """``"about 40 s"``, ``"about 12 min"``, ``"about 2.5 h"``."""
    if seconds < 90:
        return f"about {seconds:.0f} s"
    if seconds < 5400:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"


def _tensorboard_writer(out: Path):
    """A ``SummaryWriter`` writing into ``out``; a :class:`UserError` saying what to install when tensorboard is
    missing (torch's writer needs the ``tensorboard`` package)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UserError("--tensorboard needs the tensorboard package: pip install -e '.[tensorboard]' "
                        "(or pip install tensorboard)") from None
    out.mkdir(parents=True, exist_ok=True)
    return SummaryWriter(log_dir=str(out))


class _StopFlag:
    requested = False


@contextlib.contextmanager
def _interrupt_at_step_end():
    """Inside the block, Ctrl-C (SIGINT) sets ``.requested`` instead of raising, so that the loop ends its step
    and saves a consistent checkpoint; the handler is removed at the first Ctrl-C, so a second one stops at once.
    Only the main thread can catch signals: elsewhere Ctrl-C keeps its usual effect."""
    flag = _StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        flag.requested = True
        signal.signal(signal.SIGINT, previous)
    signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def read_checkpoint(path: Path) -> dict:
    """A checkpoint or ``agent.pt`` written by :func:`train`; a one-line :class:`UserError` naming the file if it is
    unreadable."""
    try:
        ck = torch.load(path, map_location="cpu", weights_only=False)
        if not isinstance(ck, dict) or "agent" not in ck or "step" not in ck:
            raise ValueError("it holds no agent and step")
    except Exception as e:  # torch.load fails in many ways on a damaged file (zip, pickle, EOF errors)
        first = (str(e).strip().splitlines() or [""])[0]
        raise UserError(f"{path} is damaged or not a minirl checkpoint ({type(e).__name__}: {first}); delete it "
                        f"and train again") from None
    return ck


def load_agent_state(agent, state: dict, path: Path, keep_optimizer_settings: bool = False) -> None:
    """``agent.load_state_dict(state)`` with a one-line :class:`UserError` naming ``path`` when the networks do not
    fit. ``keep_optimizer_settings``: the optimisers keep the learning rates (and other settings) they were built
    with, taking only their moments and step counts from ``state``."""
    optimizers = [v for v in vars(agent).values() if isinstance(v, torch.optim.Optimizer)]
    settings = [[{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups] for opt in optimizers]
    try:
        agent.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError) as e:
        first = (str(e).strip().splitlines() or [""])[0]
        raise UserError(f"{path} does not fit this agent ({type(e).__name__}: {first}); resume with the settings "
                        f"it was made with, or start the run again") from None
    if keep_optimizer_settings:
        for opt, groups in zip(optimizers, settings):
            for group, kept in zip(opt.param_groups, groups):
                group.update(kept)


def update_context(device: str, precision: str | None = None, amp: bool = False):
    """The context :func:`train` runs every update in: :func:`autocast` with bfloat16 when ``precision`` (or
    ``amp=True``) resolves to bf16 on ``device`` (:func:`requested_precision`, :func:`resolve_precision`)."""
    return autocast(device, resolve_precision(requested_precision(precision, amp), device) == "bf16")


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
    with atomic_write(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


# --------------------------------------------------------------------------------------------------------------
# Algorithms by name
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
    # filtered BC: behaviour cloning on the best 10% of episodes by return (Chen et al. 2021), the baseline that
    # tells whether an offline RL algorithm does more than pick the good episodes
    "10%bc": ("minirl.bc", "BC", "BCConfig", {"top_fraction": 0.1}),
}


def check_algo(algo: str) -> str:
    if algo not in ALGORITHMS:
        raise UserError(f"unknown algorithm {algo!r}{did_you_mean(algo, ALGORITHMS)}; expected one of "
                        f"{', '.join(ALGORITHMS)}")
    return algo


def config_class(algo: str):
    """The config dataclass of ``algo`` (e.g. ``IQLConfig`` for ``"iql"``)."""
    module, _, config_name, *_ = ALGORITHMS[check_algo(algo)]
    return getattr(importlib.import_module(module), config_name)


def _config_fields(algo: str) -> set[str]:
    return {f.name for f in dataclasses.fields(config_class(algo))}


def make_config(algo: str, overrides: dict | None = None):
    """The config of ``algo``: its preset (e.g. ``lagrange=True`` for ``cql-lagrange``) and then ``overrides``, checked
    field by field (:class:`UserError` for an unknown field, with the nearest name, or a wrong value)."""
    cls = config_class(algo)
    fields = field_types(cls)
    for k in overrides or {}:
        if k not in fields:
            raise UserError(f"{cls.__name__} has no field {k!r}{did_you_mean(k, fields)} (algorithm {algo!r}); "
                            f"fields: {', '.join(fields)}")
    preset = ALGORITHMS[algo][3] if len(ALGORITHMS[algo]) > 3 else {}
    return cls(**{**preset, **(overrides or {})})


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


def build_agent(algo: str, obs_dim: int, act_dim: int, action_low, action_high, config, device: str = "cpu"):
    """The agent ``algo`` for these dimensions and action bounds, with ``config`` (see :func:`make_config`)."""
    module, agent_name, *_ = ALGORITHMS[check_algo(algo)]
    agent_cls = getattr(importlib.import_module(module), agent_name)
    return agent_cls(obs_dim, act_dim, action_low, action_high, config, check_device(device))


def make_agent(algo: str, dataset: OfflineDataset, device: str = "cpu", **overrides):
    """Build the agent ``algo`` for ``dataset``'s dimensions; ``overrides`` set fields of its config."""
    config = make_config(algo, overrides)
    agent = build_agent(algo, dataset.obs_dim, dataset.act_dim, dataset.action_low, dataset.action_high, config,
                        device)
    return agent, config


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
    env_id: str
    task: str
    batch_size: int
    eval_every: int | None         # None: no evaluation
    eval_episodes: int
    checkpoint_every: int | None
    resume: bool
    overwrite: bool
    precision: str                 # resolved: "float32" or "bf16"
    requested_precision: str       # as asked: "auto", "float32" or "bf16"
    threads: int | None            # torch threads; None leaves torch's setting
    compile: bool | str

    def settings(self) -> dict:
        """What ``config.json``, the checkpoints and ``agent.pt`` record about the run."""
        return {"algo": self.algo, "dataset": self.dataset, "transitions": self.transitions, "scale": self.scale.name,
                "steps": self.steps, "seed": self.seed, "device": self.device, "batch_size": self.batch_size,
                "eval_every": self.eval_every, "eval_episodes": self.eval_episodes, "precision": self.precision,
                "precision_requested": self.requested_precision,
                "threads": self.threads or torch.get_num_threads(), "compile": self.compile,
                "adam": "fused" if nets._FUSED_ADAM else "plain",  # nets.adam (plain before commit 724dda5)
                "config": _jsonable(self.config)}


def plan_run(algo: str, dataset: str, *, scale: str | None = None, steps: int | None = None, seed: int = 0,
             device: str = "cpu", out: str | Path | None = None, overrides: dict | None = None,
             batch_size: int | None = None, eval_every: int | None = None, eval_episodes: int | None = None,
             evaluate: bool = True, checkpoint_every: int | None = None, resume: bool = False,
             overwrite: bool = False, override: tuple | list = (), compile: bool | str = False,
             precision: str | None = None, amp: bool = False, threads: int | None = None) -> RunPlan:
    """Check every setting of a run, and the output directory and checkpoint it would use, without making any
    data; :class:`UserError` names the first wrong one. ``None`` takes the scale's value; ``evaluate=False`` switches
    evaluation off (``eval_every=0`` is an error, not "off")."""
    from . import datasets

    check_algo(algo)
    sc = get_scale(scale)
    task = check_dataset(dataset)
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
    if threads is not None:
        at_least("--threads", threads, 1)
    check_device(device)
    requested = requested_precision(precision, amp)
    resolved = resolve_precision(requested, device)
    if compile not in (False, True, *COMPILE_MODES):
        raise UserError(f"--compile mode must be one of {', '.join(COMPILE_MODES)}, got {compile!r}"
                        f"{did_you_mean(compile, COMPILE_MODES)}")
    overrides = {**sc.config_for(algo), **(overrides or {})}  # the scale's sizes, then the user's settings
    if "max_steps" in _config_fields(algo):  # schedules (e.g. IQL's cosine actor lr) must know the run's length
        overrides.setdefault("max_steps", steps)
    size = datasets.full_size(dataset)
    plan = RunPlan(algo=algo, dataset=dataset, scale=sc, steps=steps, seed=seed, device=device,
                   out=Path(out or f"runs/{algo}-{dataset}-s{seed}"), config=make_config(algo, overrides),
                   transitions=min(sc.dataset_size, size) if sc.dataset_size else size, env_id=task.env_id,
                   task=task.name, batch_size=batch_size, eval_every=eval_every if evaluate else None,
                   eval_episodes=eval_episodes, checkpoint_every=checkpoint_every, resume=resume, overwrite=overwrite,
                   precision=resolved, requested_precision=requested, threads=threads, compile=compile)
    _check_out(plan, override)
    cache = datasets.cache_path(dataset, plan.transitions)
    if not cache.exists():
        _check_writable(cache.parent, f"the dataset cache (MINIRL_DATA={datasets.data_dir()})")
    return plan


def check_dataset(name: str):
    """The task of dataset ``name`` (see :mod:`minirl.datasets`); a :class:`UserError` with the nearest name when
    there is no such dataset, or saying why it is not available yet."""
    from . import datasets
    names = datasets.dataset_names()
    try:
        return datasets.parse_name(name)[0]
    except ImportError as e:  # minari:<id> without the minari package
        raise UserError(str(e)) from None
    except (ValueError, FileNotFoundError) as e:
        if name.startswith(datasets.MINARI):  # no such local Minari dataset, or one minirl cannot score
            raise UserError(str(e)) from None
        task, _, tier = name.partition("-")
        if task in datasets.available_tasks() and tier in datasets.TIERS:  # a real name, not made yet (no expert)
            raise UserError(str(e)) from None
        raise UserError(f"unknown dataset {name!r}{did_you_mean(name, names)}; the datasets are "
                        f"{', '.join(names)}") from None


def _check_writable(path: Path, what: str) -> None:
    """``path`` is a directory that exists or can be made, and can be written to."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{what}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{what}: {existing} is not writable")


def _check_out(plan: RunPlan, override) -> None:
    """The output directory: a new run needs one without another run in it (or ``overwrite``); a resumed run needs
    a checkpoint of the same algorithm, dataset and settings, except those named in ``override``."""
    out = plan.out
    if plan.resume and plan.overwrite:
        raise UserError("--resume continues the run in --out and --overwrite replaces it: choose one")
    if override and not plan.resume:
        raise UserError("--override names settings a resumed run may change: it needs --resume")
    _check_writable(out, f"--out {out}")
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
    was = {**{k: meta.get(k) for k in RESUME_SETTINGS}, **meta.get("config", {})}
    new = {**{k: now[k] for k in RESUME_SETTINGS}, **now["config"]}
    changed = [k for k in new if was.get(k) != new[k] and k not in override]
    if changed:
        diff = ", ".join(f"{k} {was.get(k)!r} -> {new[k]!r}" for k in changed)
        raise UserError(f"--resume: this run changes {diff} from its checkpoint in {plan.out}; repeat the settings it "
                        f"was made with, or pass --override {' '.join(changed)} to change them")


def run(algo: str, dataset: str, *, scale: str | None = None, steps: int | None = None, seed: int = 0,
        device: str = "cpu", out: str | Path | None = None, overrides: dict | None = None,
        batch_size: int | None = None, eval_every: int | None = None, eval_episodes: int | None = None,
        evaluate: bool = True, checkpoint_every: int | None = None, resume: bool = False, overwrite: bool = False,
        override: tuple | list = (), progress: bool = True, compile: bool | str = False,
        precision: str | None = None, amp: bool = False, threads: int | None = None,
        tensorboard: bool = False) -> dict:
    """Train ``algo`` on the named ``dataset`` at a scale: what ``python -m minirl train`` does.

    First checks every setting (:func:`plan_run`), then loads (or makes) the dataset at the scale's size, builds the
    agent with ``overrides``, prepares states and rewards as its config asks, writes ``config.json`` and trains.
    A new run refuses an ``out`` holding another run unless ``overwrite``; ``resume`` continues the checkpoint in
    ``out`` if it was made with the same settings, except those named in ``override``. ``threads`` sets torch's
    thread count. Returns the history of :func:`train` with ``config`` (the run's settings), ``segments_s`` (the
    seconds of each part of the run: the earlier parts of a resumed run up to their checkpoints, then this call's,
    setup included) and ``wall_time`` (their sum; ``None`` when an earlier part's time is unknown because its
    checkpoint predates this record).
    """
    from . import datasets

    plan = plan_run(algo, dataset, scale=scale, steps=steps, seed=seed, device=device, out=out, overrides=overrides,
                    batch_size=batch_size, eval_every=eval_every, eval_episodes=eval_episodes, evaluate=evaluate,
                    checkpoint_every=checkpoint_every, resume=resume, overwrite=overwrite, override=override,
                    compile=compile, precision=precision, amp=amp, threads=threads)
    if plan.threads is not None:
        torch.set_num_threads(plan.threads)
    raw = full = datasets.load_dataset(plan.dataset, plan.transitions, progress=progress)
    if getattr(plan.config, "top_fraction", 1.0) < 1.0:  # filtered BC (10%BC): only the best episodes
        raw = raw.best_episodes(plan.config.top_fraction)
    torch.manual_seed(plan.seed)  # the initial weights depend on the seed too
    agent = build_agent(plan.algo, raw.obs_dim, raw.act_dim, raw.action_low, raw.action_high, plan.config, device)
    if compile:  # True, or a torch.compile mode such as "reduce-overhead" (CUDA graphs)
        mode = None if compile is True else compile
        print(f"torch.compile (mode {mode or 'default'}): {', '.join(compile_agent(agent, mode=mode))}")
    data, state_norm, reward_tf = prepare_dataset(raw, plan.config.normalize_states, plan.config.reward_scale)
    if plan.overwrite:
        for name in RUN_FILES:
            (plan.out / name).unlink(missing_ok=True)
    settings = plan.settings()
    # which data the run saw (before 10%BC's filter): rolled out again on another CPU, a dataset can differ
    settings["data"] = {"episodes": len(full.episode_bounds()), "sha256": full.fingerprint()}
    plan.out.mkdir(parents=True, exist_ok=True)
    with atomic_write(plan.out / "config.json") as tmp:
        tmp.write_text(json.dumps(settings, indent=1))
    print(f"minirl train: algo={plan.algo} dataset={plan.dataset} ({len(raw)} transitions) scale={plan.scale.name} "
          f"steps={plan.steps} seed={plan.seed} device={device} precision={plan.precision} "
          f"threads={settings['threads']} out={plan.out}")
    scale_config = {k: v for k, v in plan.scale.config_for(plan.algo).items() if k not in (overrides or {})}
    if scale_config:
        print(f"  {plan.scale.name} scale sizes for {plan.algo}: "
              + ", ".join(f"{k}={v}" for k, v in scale_config.items()) + " (the paper's at --scale full)")
    start = time.perf_counter()
    history = train(agent, data, plan.steps, batch_size=plan.batch_size, eval_env=plan.env_id,
                    eval_every=plan.eval_every, eval_episodes=plan.eval_episodes, task=plan.task, seed=plan.seed,
                    device=device, out=plan.out, checkpoint_every=plan.checkpoint_every, resume=plan.resume,
                    state_normalizer=state_norm, reward_transform=reward_tf, progress=progress,
                    precision=plan.precision, meta=settings, tensorboard=tensorboard)
    if history["eval"]:
        e = history["eval"][-1]
        print(f"final evaluation at step {e['step']}: return {e['return_mean']:.1f} +- {e['return_std']:.1f}, "
              f"normalised score {e['score_mean']:.1f}")
    # the run's wall time over all its parts: the earlier ones (each up to its checkpoint) and this process's
    segments = history["segments_s"][:-1] + [time.perf_counter() - start]
    total = None if None in segments else sum(segments)
    return {**history, "segments_s": segments, "config": settings, "wall_time": total}


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
    env_id: str
    task: str
    state_normalizer: StateNormalizer | None

    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float32)
        o = obs if self.state_normalizer is None else self.state_normalizer.transform(obs)
        return self.agent.act(o, deterministic)

    def evaluate(self, episodes: int = 10, seed: int = 0) -> dict:
        """``{"returns": array, "scores": array}`` over ``episodes`` seeded episodes (normalised D4RL scores)."""
        from .datasets import normalized_score
        returns = evaluate(self.agent, self.env_id, at_least("--episodes", episodes, 1), seed=seed,
                           state_normalizer=self.state_normalizer)
        return {"returns": returns, "scores": normalized_score(self.task, returns)}


def load_agent(run_dir: str | os.PathLike, device: str = "cpu") -> LoadedAgent:
    """Rebuild the agent a run trained, from ``run_dir/config.json`` and ``run_dir/agent.pt`` (or, for a run that
    was interrupted, its latest ``checkpoint.pt``). The networks' sizes come from the environment named by the
    dataset, so no data is loaded."""
    from .datasets import parse_name
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        raise UserError(f"{run_dir} is not a run directory (no config.json); `python -m minirl train ... --out DIR` "
                        f"makes one")
    weights = next((run_dir / n for n in ("agent.pt", "checkpoint.pt") if (run_dir / n).exists()), None)
    if weights is None:
        raise UserError(f"{run_dir} has no agent.pt (nor checkpoint.pt): its run saved no agent yet")
    try:
        settings = json.loads((run_dir / "config.json").read_text())
        algo, dataset, fields = settings["algo"], settings["dataset"], settings["config"]
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"{run_dir / 'config.json'} is damaged ({type(e).__name__}: {e}); it cannot say which agent "
                        f"to build") from None
    task, _ = parse_name(dataset)
    env = make_env(task.env_id)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    low, high = env.action_space.low, env.action_space.high
    env.close()
    config = make_config(algo, fields)
    agent = build_agent(algo, obs_dim, act_dim, low, high, config, device)
    state = read_checkpoint(weights)
    load_agent_state(agent, state["agent"], weights)
    normalizer = state.get("state_normalizer")
    return LoadedAgent(agent, config, settings, state["step"], task.env_id, task.name,
                       None if normalizer is None else StateNormalizer.from_state_dict(normalizer))


VIDEO_FORMATS = {".gif": ("PIL", "pillow"), ".mp4": ("imageio_ffmpeg", "imageio-ffmpeg")}


def check_video(path: str | os.PathLike) -> Path:
    """``path`` if minirl can write a video there with what is installed; a :class:`UserError` naming what is
    missing otherwise (``.gif`` needs pillow, ``.mp4`` imageio-ffmpeg, which requirements.txt does not install)."""
    path = Path(path)
    if path.suffix.lower() not in VIDEO_FORMATS:
        raise UserError(f"--video {path}: the file must end in .gif or .mp4")
    module, package = VIDEO_FORMATS[path.suffix.lower()]
    try:
        importlib.import_module("imageio")
        importlib.import_module(module)
    except ImportError:
        other = "; or write a .gif" if path.suffix.lower() != ".gif" else ""
        raise UserError(f"--video {path}: writing {path.suffix} needs the {package} package "
                        f"(pip install imageio {package}){other}") from None
    _check_writable(path.parent, f"--video {path}")
    return path


def record_video(loaded: LoadedAgent, path: str | os.PathLike, seed: int = 0, size: int = 240) -> int:
    """One deterministic episode of ``loaded`` from seed ``seed``, written to ``path`` (.gif or .mp4); returns the
    number of frames. MuJoCo renders off-screen through EGL unless ``MUJOCO_GL`` says otherwise."""
    import imageio
    path = check_video(path)
    if "DISPLAY" not in os.environ:
        os.environ.setdefault("MUJOCO_GL", "egl")
    import gymnasium
    mujoco = "mujoco" in str(gymnasium.spec(loaded.env_id).entry_point)  # MuJoCo's renderer takes a frame size
    kwargs = {"width": size, "height": size} if mujoco else {}
    try:
        env = make_env(loaded.env_id, render_mode="rgb_array", **kwargs)
        obs, _ = env.reset(seed=seed)
        frames, done = [env.render()], False
    except Exception as e:  # a missing package (pygame) or no OpenGL: the ways vary with the machine
        raise UserError(f"--video: rendering {loaded.env_id} failed: {' '.join(str(e).split())}") from None
    while not done:
        obs, _, term, trunc, _ = env.step(loaded.act(obs[None])[0])
        frames.append(env.render())
        done = term or trunc
    fps = env.metadata.get("render_fps") or 30
    env.close()
    if path.suffix.lower() == ".gif":  # browsers slow down GIF frames shorter than 20 ms: keep every k-th frame
        k = max(1, math.ceil(fps / 50))
        frames, fps = frames[::k], fps / k
        imageio.mimsave(path, frames, duration=1000 / fps, loop=0)
    else:
        imageio.mimsave(path, frames, fps=fps)
    return len(frames)


# --------------------------------------------------------------------------------------------------------------
# The command line: python -m minirl (or the `minirl` console script)
# --------------------------------------------------------------------------------------------------------------

def _parser_class():
    """argparse's parser, but a usage mistake raises :class:`UserError` (one line, exit status 2) instead of
    printing the usage block."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise UserError(f"{message} (see {self.prog} --help)")
    return Parser


def _train_epilog() -> str:
    """``train --help``'s list of datasets and of every algorithm's config fields with their comments."""
    from . import datasets
    try:
        names = ", ".join(datasets.dataset_names())
    except (OSError, ValueError) as e:
        names = f"(none: {e})"
    lines = [f"datasets: {names}",
             "  or minari:<id>, a Minari dataset stored locally (pip install 'minari>=0.5.4,<0.6'), e.g. "
             "minari:mujoco/hopper/medium-v0", "", "config fields (--set NAME=VALUE; quote in zsh: --set 'hidden=[128,128]'):"]
    seen = {}
    for algo, (_, _, config_name, *preset) in ALGORITHMS.items():
        cls = config_class(algo)
        if config_name in seen:
            preset_text = ", ".join(f"{k}={v}" for k, v in preset[0].items())
            lines.append(f"\n  {algo}: {seen[config_name]}'s fields with {preset_text}")
            continue
        seen[config_name] = algo
        lines.append(f"\n  {algo} ({config_name}):")
        for name, type_name, default, comment in field_docs(cls):
            default = list(default) if isinstance(default, tuple) else default
            lines.append(f"    {name:22s} {type_name:24s} {str(default):16s} {comment}")
    return "\n".join(lines)


def build_parser(prog: str = "minirl"):
    import argparse
    Parser = _parser_class()
    p = Parser(prog=prog, description="minirl: offline RL, executed.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    t = sub.add_parser("train", help="train an agent on a named dataset", epilog=_train_epilog(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--algo", required=True, help=f"one of {', '.join(ALGORITHMS)}".replace("%", "%%"))  # argparse formats help with %
    t.add_argument("--dataset", required=True, help="e.g. pendulum-medium, hopper-medium-replay (listed below)")
    t.add_argument("--scale", default=None, help="smoke | cpu | full (default: $MINIRL_SCALE or cpu)")
    t.add_argument("--steps", type=int, default=None, help="gradient steps (default: the scale's)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps")
    t.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: one run per core; several runs side by side need no more)")
    t.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="auto (default): bf16 where the hardware computes it natively (AVX-512 BF16 / AMX CPUs, "
                        "Ampere+ GPUs), float32 elsewhere; bf16: updates under bfloat16 autocast; float32")
    t.add_argument("--amp", action="store_true", help="the same as --precision bf16")
    t.add_argument("--out", default=None, help="run directory (default: runs/<algo>-<dataset>-s<seed>)")
    t.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    t.add_argument("--batch-size", type=int, default=None, help="(default: the scale's, 256)")
    t.add_argument("--eval-every", type=int, default=None, help="steps between evaluations (default: the scale's)")
    t.add_argument("--eval-episodes", type=int, default=None, help="episodes per evaluation (default: the scale's)")
    t.add_argument("--no-eval", action="store_true", help="no evaluation at all")
    t.add_argument("--checkpoint-every", type=int, default=None, help="steps between checkpoints (default: none; "
                   "Ctrl-C saves one anyway)")
    t.add_argument("--resume", action="store_true", help="continue from <out>/checkpoint.pt (same settings)")
    t.add_argument("--override", nargs="+", default=[], metavar="NAME",
                   help="with --resume: settings the resumed run may change (config fields, or dataset, "
                        "transitions, seed, batch_size, precision)")
    t.add_argument("--compile", nargs="?", const=True, default=False, choices=[True, *COMPILE_MODES],
                   metavar="MODE", help="torch.compile the networks (for GPUs; falls back to eager where a graph "
                   "fails); MODE reduce-overhead also records CUDA graphs, max-autotune tunes matmuls")
    t.add_argument("--tensorboard", action="store_true",
                   help="also write the logs as TensorBoard event files in --out (pip install -e '.[tensorboard]')")
    t.add_argument("--lagrange", action="store_true", help="CQL only: learn alpha' (same as --algo cql-lagrange)")
    t.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                   help="config fields, parsed by their type (listed below); may be repeated")
    e = sub.add_parser("evaluate", help="evaluate a trained run (and film one episode)")
    e.add_argument("run_dir", help="a run directory written by train (config.json + agent.pt)")
    e.add_argument("--episodes", type=int, default=10)
    e.add_argument("--seed", type=int, default=0, help="episodes reset with seeds seed, seed + 1, ...")
    e.add_argument("--device", default="cpu")
    e.add_argument("--video", default=None, metavar="FILE", help="film one episode into FILE.gif (or .mp4, which "
                   "needs imageio-ffmpeg)")
    d = sub.add_parser("dataset", help="make, list or describe the named datasets")
    d.add_argument("action", choices=["make", "list", "info"])
    d.add_argument("names", nargs="*", help="dataset names (make/info); 'all' for every dataset")
    d.add_argument("--size", type=int, default=None, help="transitions (default: the full dataset)")
    return p, {"train": t, "evaluate": e, "dataset": d}


def main(argv: list[str] | None = None, prog: str = "minirl") -> int:
    """The command line (see :func:`user_errors` for how it ends)."""
    with user_errors(prog):
        code = _main(argv, prog)
        sys.stdout.flush()  # here, where a closed pipe is caught, rather than at exit
        return code


@contextlib.contextmanager
def user_errors(prog: str):
    """How a command ends: a :class:`UserError` prints one line and exits with status 2; Ctrl-C prints one line
    (training saved a checkpoint) and exits with status 130; a closed pipe (``minirl dataset list | head``) ends
    quietly with status 1. Anything else is a bug and keeps its traceback."""
    try:
        yield
    except UserError as e:
        print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt as e:
        print(f"{prog}: {e or 'interrupted'}", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:  # the reader stopped reading: not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that Python's exit does not fail flushing stdout again
        raise SystemExit(1) from None


def _main(argv, prog) -> int:
    parser, commands = build_parser(prog)
    a, unknown = parser.parse_known_args(argv)
    if unknown:
        options = [o for action in commands[a.command]._actions for o in action.option_strings]
        first = next((u for u in unknown if u.startswith("-")), unknown[0])
        raise UserError(f"unrecognized arguments: {' '.join(unknown)}{did_you_mean(first.split('=')[0], options)} "
                        f"(see {prog} {a.command} --help)")
    if a.command == "dataset":
        return _dataset_command(a)
    if a.command == "evaluate":
        return _evaluate_command(a)
    check_algo(a.algo)
    overrides = parse_overrides(a.algo, a.set)
    if a.lagrange:
        if config_class(a.algo).__name__ != "CQLConfig":
            raise UserError(f"--lagrange is for the CQL algorithms (--algo cql), not {a.algo}")
        overrides.setdefault("lagrange", True)
    run(a.algo, a.dataset, scale=a.scale, steps=a.steps, seed=a.seed, device=a.device, out=a.out,
        overrides=overrides, batch_size=a.batch_size, eval_every=a.eval_every, eval_episodes=a.eval_episodes,
        evaluate=not a.no_eval, checkpoint_every=a.checkpoint_every, resume=a.resume, overwrite=a.overwrite,
        override=a.override, compile=a.compile, precision=a.precision, amp=a.amp, threads=a.threads,
        tensorboard=a.tensorboard)
    return 0


def _dataset_command(a) -> int:
    from . import datasets
    names = datasets.dataset_names()
    wanted = names if a.names == ["all"] else a.names
    if a.action != "list" and not wanted:
        raise UserError(f"dataset {a.action} needs at least one dataset name (see `minirl dataset list`)")
    for name in wanted:
        check_dataset(name)
        if a.size is not None and not 1 <= a.size <= datasets.full_size(name):
            raise UserError(f"--size must be between 1 and {datasets.full_size(name)} for {name}, got {a.size}")
    if a.action == "list":
        for name in names:
            if a.size is not None and a.size > datasets.full_size(name):
                continue
            cached = datasets.cache_path(name, a.size).exists()
            print(f"{name:28s} {datasets.full_size(name):>9d} transitions  {'cached' if cached else ''}")
        return 0
    for name in wanted:
        if a.action == "make":
            datasets.load_dataset(name, a.size)
            print(f"{name}: {datasets.cache_path(name, a.size)}")
        else:
            print(json.dumps(datasets.dataset_info(name, a.size)))
    return 0


def _evaluate_command(a) -> int:
    at_least("--episodes", a.episodes, 1)
    at_least("--seed", a.seed, 0)
    check_device(a.device)
    video = check_video(a.video) if a.video else None
    loaded = load_agent(a.run_dir, a.device)
    if video is not None:  # first, so that a machine that cannot render says so before the evaluation
        n = record_video(loaded, video, seed=a.seed)
        print(f"video: {video} ({n} frames, the episode of seed {a.seed})")
    result = loaded.evaluate(a.episodes, a.seed)
    r, s = result["returns"], result["scores"]
    print(f"{a.run_dir}: {loaded.settings['algo']} on {loaded.settings['dataset']}, step {loaded.step}: return "
          f"{r.mean():.1f} +- {r.std():.1f}, normalised score {s.mean():.1f} over {a.episodes} episode(s) "
          f"(seeds {a.seed}-{a.seed + a.episodes - 1})")
    return 0
