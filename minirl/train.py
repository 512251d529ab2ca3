"""The training loop every algorithm shares: ``train(agent, dataset, steps, ...)``.

The training loop every algorithm shares, the scales, evaluation in the environment, and the command line.

The rest of a run lives beside it: :mod:`minirl.runs` (the scales, the algorithms by name, ``run`` and
``load_agent``: what ``python -m minirl train`` does), :mod:`minirl.evaluation` (the episodes and the value check the
loop calls), :mod:`minirl.devices` (device, threads, precision, compilation) and :mod:`minirl.cli` (the command line).

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
import signal
import threading
import time
from pathlib import Path

import torch

from . import versions
from .agent import declared
from .config import UserError, at_least
from .data import OfflineDataset, RewardTransform, StateNormalizer, atomic_write
from .devices import CapturedStep, check_capture, graph_context, update_context
from .evaluation import has_value_estimate, run_episodes, value_check
from .seeds import check_seed_axis, member, stack, stack_batches
from .utils import progress_bar
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


# --------------------------------------------------------------------------------------------------------------
# One run per folder
# --------------------------------------------------------------------------------------------------------------

LOCK_FILE = ".lock"  # in a run folder: an OS lock (flock) held while a run writes there
_held: dict[Path, list] = {}  # folders this process holds: resolved path -> [open lock file, depth]


class RunFolderBusy(UserError):
    """Another process is writing a run into this folder."""


@contextlib.contextmanager
def hold_run_folder(out: str | os.PathLike):
    """Hold ``out`` (made if missing) for one run: an exclusive ``fcntl.flock`` on ``out/.lock`` for the block's
    life, so that a second run into the same folder stops at once with :class:`RunFolderBusy` (one line, naming the
    process that holds it) instead of interleaving its files with the first's. The operating system releases the
    lock when the process ends, however it ends (a crash, ``kill -9``): no stale marker to delete. Re-entrant within
    one process (:func:`minirl.runs.run` holds the folder from its checks on, :func:`train` inside it again).
    Leftover temporary files of interrupted writes (``.checkpoint.<pid>.tmp.pt``, ...) are removed once held."""
    import fcntl
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    key = out.resolve()
    if key in _held:
        _held[key][1] += 1
        try:
            yield out
        finally:
            _held[key][1] -= 1
        return
    f = open(out / LOCK_FILE, "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise RunFolderBusy(f"{out} is in use by another run ({holder}): wait for it to end, or choose another "
                            f"--out") from None
    except OSError as e:  # a file system without locks (some network mounts)
        f.close()
        raise UserError(f"{out}: cannot lock {LOCK_FILE} ({e}); choose an --out on a local disk") from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()}\n")
    f.flush()
    _held[key] = [f, 1]
    try:
        remove_temporary_files(out)
        yield out
    finally:
        del _held[key]
        f.close()  # closing the file releases the lock


def remove_temporary_files(out: Path) -> list[Path]:
    """Delete the temporary files :func:`minirl.data.atomic_write` leaves when a process is killed while writing
    (``.<name>.<pid>.tmp<suffix>``, e.g. ``.checkpoint.4242.tmp.pt``); only safe while holding the folder
    (:func:`hold_run_folder`), when no other process writes there. Returns what was deleted."""
    import re
    gone = [p for p in Path(out).glob(".*.tmp*") if re.fullmatch(r"\..+\.\d+\.tmp(\.\w+)?", p.name)]
    for p in gone:
        p.unlink(missing_ok=True)
    return gone


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
          progress: bool = True, sync_every_step: bool | None = None, precision: str | None = None,
          amp: bool = False, meta: dict | None = None, tensorboard: bool = False, update=None,
          capture: bool = False) -> dict:
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

    ``capture=True`` (on a CUDA device) records one step, the batch drawn on the GPU and ``agent.update()``, as a
    CUDA graph and replays it at every step (:class:`minirl.devices.CapturedStep`): the same updates as eager ones
    from the same seed, 4-9x faster on an H100 (benchmarks/README.md). Its batches come from the default CUDA
    generator instead of the run's sampler, so a captured run and an eager one with the same seed draw different
    batches.

    ``dataset`` is used as given (already preprocessed, see :func:`prepare_dataset`); ``state_normalizer`` is
    applied to the environment's observations at evaluation, and both transforms are saved with checkpoints.
    ``task`` (e.g. ``"hopper"``) adds the normalised score to each evaluation, and an environment that reports
    success (OGBench's mazes) adds ``success_rate``; ``eval_every=None`` evaluates never.
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

    ``update``, a function ``update(agent, batch) -> logs``, is called in place of ``agent.update(batch)`` at every
    step (the classroom trains a student's update this way); everything else (sampling, evaluation, checkpoints of
    ``agent``'s state) is unchanged.

    **Seeds as a batch axis.** ``agent`` may be a list of ``K`` agents of one algorithm (each built from its own
    seed), with ``seed`` the list of their seeds and ``out`` a list of ``K`` directories (or None): they are trained
    together as one stacked agent (:mod:`minirl.seeds`), one update per step on ``K`` batches, each drawn by its
    seed's own sampler, so each seed sees the batches its own run would. Each directory gets what a single run
    writes (its evaluations, made with its seed, checkpoints and ``agent.pt`` of its seed alone), so a seed of a
    batched run resumes, loads and evaluates like any run; the training entries of ``log.jsonl`` are the stack's:
    losses summed over the ``K`` seeds, other statistics averaged over them, with ``"members": K``. The agents in
    the list end trained, and a list of ``K`` histories comes back. For an algorithm whose update draws random
    numbers (CQL's and BCQ's sampled actions), the ``K`` seeds draw them from one stream (seeded with the first
    seed), so they are statistically, not exactly, the ``K`` separate runs; IQL and BC draw none.

    ``tensorboard=True`` (needs ``out`` and the ``tensorboard`` package, extra ``minirl-book[tensorboard]``) also
    writes every ``log.jsonl`` entry as TensorBoard scalars (``train/<name>``, ``eval/<name>``) to event files in
    ``out``: ``tensorboard --logdir runs/`` then shows the runs side by side. A resumed run adds an event file; the
    steps an interrupted run made after its last checkpoint then appear twice.
    """
    outs_ = [o for o in (out if isinstance(out, (list, tuple)) else [out]) if o is not None]
    with contextlib.ExitStack() as held:  # one run per folder: each out directory held for the run's life
        for o in outs_:
            held.enter_context(hold_run_folder(o))
        if meta is None and outs_:  # called from Python: write what load_agent needs (runs.run writes its own)
            agents_ = agent if isinstance(agent, (list, tuple)) else [agent]
            seeds_ = seed if isinstance(seed, (list, tuple)) else [seed]
            for one, s, o in zip(agents_, seeds_, out if isinstance(out, (list, tuple)) else [out]):
                if o is not None and not (resume and (Path(o) / "checkpoint.pt").exists()):  # resumed: kept
                    _write_run_config(Path(o), one, dataset, steps=steps, seed=s, batch_size=batch_size,
                                      eval_env=eval_env, task=task)
        return _train(agent, dataset, steps, batch_size=batch_size, eval_env=eval_env, eval_every=eval_every,
                      eval_episodes=eval_episodes, task=task, seed=seed, device=device, out=out, log_every=log_every,
                      checkpoint_every=checkpoint_every, resume=resume, state_normalizer=state_normalizer,
                      reward_transform=reward_transform, progress=progress, sync_every_step=sync_every_step,
                      precision=precision, amp=amp, meta=meta, tensorboard=tensorboard, update=update,
                      capture=capture)


def _write_run_config(out: Path, agent, dataset: OfflineDataset, **settings) -> None:
    """``out/config.json`` for a run that :func:`train` was given directly (no ``meta``): the agent's class and
    config, the environment, the dimensions and action bounds, so that :func:`minirl.runs.load_agent`
    rebuilds the agent (a resumed run keeps the one its start wrote)."""
    from dataclasses import asdict, is_dataclass
    cfg = getattr(agent, "cfg", None)
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()} if is_dataclass(cfg) else None
    bounds = [None if b is None else b.tolist() for b in (dataset.action_low, dataset.action_high)]
    cls = type(agent)
    record = {"agent": f"{cls.__module__}.{cls.__name__}", "dataset": None, "env_id": settings.pop("eval_env"),
              "task": settings.pop("task"), "obs_dim": dataset.obs_dim, "act_dim": dataset.act_dim,
              "action_low": bounds[0], "action_high": bounds[1], **settings, "config": fields,
              "data": {"episodes": len(dataset.episode_bounds()), "sha256": dataset.fingerprint()},
              "written_by": "minirl.train.train"}
    with atomic_write(out / "config.json") as tmp:
        tmp.write_text(json.dumps(record, indent=1))


def _train(agent, dataset, steps, *, batch_size, eval_env, eval_every, eval_episodes, task, seed, device, out,
           log_every, checkpoint_every, resume, state_normalizer, reward_transform, progress, sync_every_step,
           precision, amp, meta, tensorboard, update, capture):
    """:func:`train`'s work, with its out directories held."""
    group = isinstance(agent, (list, tuple))
    agents, seeds, outs = _members(agent, seed, out) if group else ([agent], [seed], [out])
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
    if batch_size > len(dataset):  # drawn with replacement it runs, each batch repeating transitions: said, not refused
        import warnings      # (a small filtered dataset, 10%BC's at the smoke scale, is a real case; the command line
        warnings.warn(       # refuses a --batch-size above the dataset before any work, runs.plan_run)
            f"batch_size {batch_size:,d} is larger than the dataset ({len(dataset):,d} transitions): each batch "
            f"draws transitions several times (with replacement)", stacklevel=2)
    if dataset.flag_problem():
        import warnings
        warnings.warn(f"the dataset's episode flags: {dataset.flag_problem()}", stacklevel=3)
    outs = [Path(o) if o is not None else None for o in outs]
    out = outs[0]
    if checkpoint_every and out is None:
        raise ValueError("checkpoint_every needs out= (the directory the checkpoint is written to)")
    if resume and out is None:
        raise ValueError("resume=True needs out= (the directory holding checkpoint.pt)")
    if tensorboard and out is None:
        raise ValueError("tensorboard=True needs out= (the directory the event files are written to)")
    writer = _tensorboard_writer(out) if tensorboard else None
    precision_ctx = update_context(device, precision, amp)  # raises here, not at the first update, if bf16 is missing
    if capture:
        check_capture(device)
    if capture and update is not None:
        raise ValueError("capture=True records agent.update(); a custom update= cannot be captured")
    if group and update is not None:
        raise ValueError("a custom update= trains one agent: pass one agent, not a list")
    if sync_every_step is None:
        sync_every_step = torch.device(device).type == "cpu"  # reading a CPU tensor costs nothing
    torch.manual_seed(seeds[0])
    samplers = [torch.Generator(device=device).manual_seed(s) for s in seeds]  # each seed's own batches
    histories: list[dict[str, list]] = [{"train": [], "eval": []} for _ in agents]
    start, resumed_running, earlier_segments, earlier_update_s, earlier_update_cpu_s = 0, ({}, 0), [], 0.0, 0.0
    resumed = [resume and o is not None and (o / "checkpoint.pt").exists() for o in outs]
    if group and any(resumed) and not all(resumed):
        raise UserError(f"--resume: of a batch of seeds, only {sum(resumed)} of {len(outs)} have a checkpoint.pt; "
                        f"resume them one at a time, or start the batch again")
    for k, (one, sampler, o) in enumerate(zip(agents, samplers, outs)):
        if o is None:
            continue
        o.mkdir(parents=True, exist_ok=True)
        if resumed[k]:
            ck = read_checkpoint(o / "checkpoint.pt")
            if ck["step"] > steps:
                raise UserError(f"--resume: {o / 'checkpoint.pt'} is at step {ck['step']}, beyond --steps "
                                f"{steps}; ask for at least {ck['step']} steps")
            if k and ck["step"] != start:
                raise UserError(f"--resume: {o / 'checkpoint.pt'} is at step {ck['step']}, {outs[0] / 'checkpoint.pt'} "
                                f"at {start}: a batch of seeds resumes from one step")
            load_agent_state(one, ck["agent"], o / "checkpoint.pt", keep_optimizer_settings=True)
            # on the CPU: generator states must stay CPU byte tensors; load_state_dict copied onto the agent's device
            sampler.set_state(ck["sampler"])
            start, histories[k] = ck["step"], ck["history"]
            if k == 0:  # what the seeds share: the global generators, the running logs, the clocks
                torch.set_rng_state(ck["torch_rng"])
                if ck.get("cuda_rng") is not None:
                    torch.cuda.set_rng_state(ck["cuda_rng"], torch.device(device))
                resumed_running = ck.get("running", ({}, 0))
                # seconds of each earlier part of the run, up to its checkpoint; None: a checkpoint that did not record it
                earlier_segments = ck.get("segments_s", [None])
                earlier_update_s = ck.get("update_s")  # None: an older checkpoint, the earlier update time unknown
                earlier_update_cpu_s = ck.get("update_cpu_s")
        elif resume:
            print(f"resume: no checkpoint in {o}, starting from step 0")
        # the logs end where the checkpoint was taken, even if the interrupted run got further
        history = histories[k]
        entries = sorted(({"kind": kind, **e} for kind in history for e in history[kind]),
                         key=lambda e: (e["step"], e["kind"] == "eval"))  # the order the run wrote them in
        with atomic_write(o / "log.jsonl") as tmp:
            tmp.write_text("".join(json.dumps(e) + "\n" for e in entries))
        (o / "eval.csv").unlink(missing_ok=True)
        if history["eval"]:
            _write_csv(o / "eval.csv", history["eval"])
        if start == 0:
            (o / "checkpoint.pt").unlink(missing_ok=True)  # another run's: it must never be resumed into this one
    learner = stack(agents) if group else agent  # what the updates train: K seeds stacked, or the one agent
    metas = list(meta) if group and isinstance(meta, (list, tuple)) else [meta] * len(agents)
    dataset.to_tensors(device)  # move the data to the device once

    def sample(generators) -> dict:
        if not group:
            return dataset.sample(batch_size, device, generators[0])
        return stack_batches([dataset.sample(batch_size, device, g) for g in generators])

    captured = None
    if capture:  # batches from the default CUDA generator (seeded above, or restored from the checkpoint)
        captured = CapturedStep(lambda: learner.update(sample([None] * len(agents))), learner,
                                context=graph_context(device, precision, amp))

    def seed_agent(k: int):
        """Seed ``k``'s agent as a plain agent (to evaluate or save)."""
        return member(learner, k) if group else agent

    def log(kind: str, entry: dict, k: int | None = None) -> None:
        """Log ``entry`` for seed ``k``, or for every seed."""
        for i in range(len(agents)) if k is None else [k]:
            histories[i][kind].append(entry)
            if outs[i] is not None:
                with open(outs[i] / "log.jsonl", "a") as f:
                    f.write(json.dumps({"kind": kind, **entry}) + "\n")
        if writer is not None and (k or 0) == 0:
            for name, value in entry.items():
                if name != "step":
                    writer.add_scalar(f"{kind}/{name}", value, entry["step"])
            if kind == "eval":
                writer.flush()  # an interrupted run keeps its curves up to the last evaluation

    def save(name: str, step: int, k: int, **extra) -> None:
        with atomic_write(outs[k] / name) as tmp:
            torch.save({"agent": seed_agent(k).state_dict(), "step": step, "meta": metas[k], "versions": versions(),
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
        for k in range(len(agents)):
            save("checkpoint.pt", step, k, sampler=samplers[k].get_state(), torch_rng=torch.get_rng_state(),
                 cuda_rng=cuda_rng, history=histories[k],
                 running=({n: float(v) for n, v in running.items()}, n_running),
                 segments_s=earlier_segments + [time.perf_counter() - t0],
                 update_s=seconds.get("update_s"), update_cpu_s=seconds.get("update_cpu_s"))

    # sums of the update logs since the last "train" entry, and how many updates they hold; a checkpoint keeps
    # them, so a run resumed between two log steps writes the same averages as one that never stopped
    running, n_running = resumed_running
    t0, eval_seconds = time.perf_counter(), 0.0
    c0, eval_cpu_seconds = time.process_time(), 0.0
    name = getattr(agents[0], "name", type(agents[0]).__name__)
    bar = progress_bar(range(start, steps), initial=start, total=steps, enabled=progress,
                       desc=f"{name} x {len(agents)} seeds" if group else name)
    with _interrupt_at_step_end() as stop:
        for t in bar:
            step = t + 1
            if captured is not None:
                logs = captured()  # sampling and update, replayed as one CUDA graph
            else:
                with precision_ctx:
                    batch = sample(samplers)
                    logs = learner.update(batch) if update is None else update(agent, batch)
                if not isinstance(logs, dict):
                    raise TypeError(f"the update returned a {type(logs).__name__}, expected a dict of logs "
                                    "(name -> number)")
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
                              "updates_per_s": (step - start) / part_s, **update_seconds(part_s, part_cpu_s),
                              **({"members": len(agents)} if group else {})})
                running, n_running = {}, 0
            if eval_every and (step % eval_every == 0 or step == steps):
                t_eval, c_eval = time.perf_counter(), time.process_time()
                for k in range(len(agents)):
                    entry = _evaluate(seed_agent(k), eval_env, eval_episodes, seeds[k], step, task, state_normalizer,
                                      reward_transform)
                    log("eval", entry, k)
                    if outs[k] is not None:
                        _write_csv(outs[k] / "eval.csv", histories[k]["eval"])
                eval_seconds += time.perf_counter() - t_eval
                eval_cpu_seconds += time.process_time() - c_eval
                mean_return = sum(h["eval"][-1]["return_mean"] for h in histories) / len(histories)
                bar.set_postfix(ret=f"{mean_return:.1f}")
            saved = checkpoint_every and step % checkpoint_every == 0
            if saved or (stop.requested and out is not None):
                checkpoint(step)
            if stop.requested and step < steps:
                bar.close()
                raise Interrupted(step, out)
    if out is not None:
        for k in range(len(agents)):
            save("agent.pt", steps, k)
    if writer is not None:
        writer.close()
    segments = earlier_segments + [time.perf_counter() - t0]
    if not group:
        return {**histories[0], "segments_s": segments}
    for k, one in enumerate(agents):  # the caller's agents end trained, as after K separate runs
        one.load_state_dict(member(learner, k).state_dict())
    return [{**h, "segments_s": segments} for h in histories]


def _members(agents, seeds, outs) -> tuple[list, list, list]:
    """Check a batch of seeds (:func:`train` given a list of agents): one seed and one directory (or None) each."""
    agents = list(agents)
    if not agents:
        raise ValueError("train: the list of agents is empty")
    check_seed_axis(agents[0])
    if isinstance(seeds, int) or len(seeds) != len(agents):
        raise ValueError(f"train: {len(agents)} agents need a list of {len(agents)} seeds, got seed={seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"train: the seeds of a batch must differ, got {list(seeds)}")
    if outs is None:
        outs = [None] * len(agents)
    elif isinstance(outs, (str, os.PathLike)) or len(outs) != len(agents):
        raise ValueError(f"train: {len(agents)} agents need a list of {len(agents)} out directories (or None)")
    if len({Path(o).resolve() for o in outs if o is not None}) != sum(o is not None for o in outs):
        raise ValueError("train: each seed of a batch needs its own out directory")
    return agents, list(seeds), list(outs)


def _evaluate(agent, eval_env, episodes: int, seed: int, step: int, task, state_normalizer, reward_transform) -> dict:
    """One evaluation's log entry: the returns over ``episodes`` seeded episodes, the normalised score with ``task``,
    the success rate on a goal task, and the critic's value check where the agent has a critic."""
    if has_value_estimate(agent):  # the returns and, from the same episodes, the critic's value check
        episodes_ = value_check(agent, eval_env, episodes, seed=10_000 * (seed + 1),
                                state_normalizer=state_normalizer, reward_transform=reward_transform)
        values = {"q_start": episodes_["q_start"], "mc_discounted": episodes_["mc_discounted"]}
    else:
        episodes_ = run_episodes(agent, eval_env, episodes, seed=10_000 * (seed + 1),
                                 state_normalizer=state_normalizer)
        values = {}
    returns = episodes_["returns"]
    entry = {"step": step, "return_mean": float(returns.mean()), "return_std": float(returns.std())}
    if "successes" in episodes_:  # a goal task (OGBench's mazes): the share of episodes that reached it
        entry["success_rate"] = float(episodes_["successes"].mean())
    if task is not None:
        from .datasets import normalized_score
        scores = normalized_score(task, returns)
        entry |= {"score_mean": float(scores.mean()), "score_std": float(scores.std())}
    return entry | values


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
    fit. ``keep_optimizer_settings``: the optimisers the agent declares (:mod:`minirl.agent`) keep the learning
    rates (and other settings) they were built with, taking only their moments and step counts from ``state``."""
    optimizers = list(declared(agent, "optimizers").values())
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


def _transforms(state: StateNormalizer | None, reward: RewardTransform | None) -> dict:
    return {"state_normalizer": None if state is None else state.state_dict(),
            "reward_transform": None if reward is None else reward.state_dict()}


def _write_csv(path: Path, rows: list[dict]) -> None:
    with atomic_write(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
