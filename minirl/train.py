"""The training loop every algorithm shares: ``train(agent, dataset, steps, ...)``.

:func:`train` is the loop, one screen long; its pieces follow it, each named for what it does: :class:`Seeds` (the
one agent, or ``K`` seeds trained as one stack), :class:`Step` (a batch per seed and one update, eager or replayed as
a CUDA graph), :class:`LogWindow` (the update logs between two entries), :class:`Clock` (the seconds of updates,
evaluations excluded), :class:`RunLog` (the history, ``log.jsonl``, ``eval.csv``, TensorBoard), :class:`Checkpoints`
(``checkpoint.pt``, ``agent.pt`` and the exact resume), :class:`Evaluation` (an evaluation's log entry) and
:func:`_interrupt_at_step_end` (Ctrl-C at the end of a step). What an agent is, the pieces it declares and the
methods it has, is :class:`minirl.agent.Agent`. ``act`` takes and returns numpy arrays of shape ``(B, dim)``; a
discrete agent returns integer action indices of shape ``(B,)``.

The rest of a run lives beside it: :mod:`minirl.runs` (the scales, the algorithms by name, ``run`` and
``load_agent``: what ``python -m minirl train`` does), :mod:`minirl.evaluation` (the episodes and the value check the
loop calls), :mod:`minirl.devices` (device, threads, precision, compilation) and :mod:`minirl.cli` (the command line).
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
from dataclasses import dataclass
from pathlib import Path

import torch

from . import versions
from .agent import check_agent, declared, declares
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


LOG_EVERY = 1000  # steps between two training entries of a run's log (train's log_every, --log-every)


def train(agent, dataset: OfflineDataset, steps: int, *, batch_size: int = 256, eval_env: str | None = None,
          eval_every: int | None = None, eval_episodes: int = 10, task: str | None = None, seed: int = 0,
          device: str = "cpu", out: str | os.PathLike | None = None, log_every: int = LOG_EVERY,
          checkpoint_every: int | None = None, resume: bool = False,
          state_normalizer: StateNormalizer | None = None, reward_transform: RewardTransform | None = None,
          progress: bool = True, sync_every_step: bool | None = None, precision: str | None = None,
          amp: bool = False, meta: dict | None = None, tensorboard: bool = False, update=None,
          capture: bool = False) -> dict:
    """Train ``agent`` (:class:`minirl.agent.Agent`) on ``dataset`` for ``steps`` gradient steps; returns
    ``{"train": [...], "eval": [...], "segments_s": [...]}``: an entry every ``log_every`` steps (the update's logs
    averaged since the last one, :class:`LogWindow`, and the update rates and seconds, :class:`Clock`), an evaluation
    every ``eval_every`` steps in ``eval_env`` (``None``: never; :class:`Evaluation`), the seconds of each part of
    the run. ``dataset`` is used as given (preprocessed by :func:`prepare_dataset`); ``state_normalizer`` is applied
    to the environment's observations at evaluation, and both transforms are saved with checkpoints.

    With ``out`` set, the run writes ``out/log.jsonl`` and ``out/eval.csv`` (:class:`RunLog`; ``tensorboard=True``
    adds TensorBoard event files), a checkpoint every ``checkpoint_every`` steps and ``out/agent.pt`` at the end
    (:class:`Checkpoints`); ``resume=True`` continues exactly from ``out/checkpoint.pt`` when it exists. Ctrl-C
    stops the run at the end of the current step, saves a checkpoint there (with ``out`` set) and raises
    :class:`Interrupted`; a second Ctrl-C stops at once. ``meta`` is saved with them; without it (a call from Python)
    ``out/config.json`` records what :func:`minirl.runs.load_agent` needs.

    ``sync_every_step`` (default: on the CPU) reads every update's logs on the host, so that a NaN is reported at
    its step; off, they are read once per entry. ``precision``: ``None`` or ``"auto"`` is bfloat16 autocast where the
    hardware computes it natively, float32 elsewhere; ``"bf16"`` (``amp=True``) or ``"float32"`` asks for one
    (:func:`minirl.devices.update_context`); evaluation runs in float32. ``update(agent, batch) -> logs`` replaces
    ``agent.update(batch)`` (the classroom trains a student's update this way). ``capture=True`` (on a CUDA device)
    replays each step as one CUDA graph (:class:`Step`).

    ``agent`` a list of ``K`` agents of one algorithm, ``seed`` the list of their seeds and ``out`` a list of ``K``
    directories (or None): they train together as one stacked agent (:class:`Seeds`), each directory written as its
    own run would be, and a list of ``K`` histories comes back.
    """
    run = Seeds(agent, seed, out)  # the one agent, or K seeds trained as one stack
    sync_every_step, precision_context = _check_settings(
        run, dataset, steps, batch_size=batch_size, eval_env=eval_env, eval_every=eval_every,
        eval_episodes=eval_episodes, log_every=log_every, checkpoint_every=checkpoint_every, resume=resume,
        tensorboard=tensorboard, device=device, precision=precision, amp=amp, update=update, capture=capture,
        sync_every_step=sync_every_step)
    with run.holding_folders(), RunLog(run.outs, tensorboard, len(run) if run.group else None) as log:
        if meta is None:  # called from Python: write what load_agent needs (runs.run writes its own)
            run.write_configs(dataset, resume, steps, batch_size, eval_env, task)
        run.seed_generators(device)
        saved = Checkpoints(run, log, meta, state_normalizer, reward_transform, device)
        start, running, clocks = saved.restore(resume, steps)  # the networks, generators, logs and clocks
        run.stack()  # what the updates train: the K seeds stacked, or the one agent
        dataset.to_tensors(device)  # the data moves to the device once
        one_step = Step(run, dataset, batch_size, device, precision_context, update,
                        graph_context(device, precision, amp) if capture else None)
        window, clock = LogWindow(sync_every_step, *running), Clock(*clocks)
        evaluate = Evaluation(eval_env, eval_episodes, task, state_normalizer, reward_transform)
        bar = progress_bar(range(start, steps), initial=start, total=steps, enabled=progress, desc=run.label())
        with _interrupt_at_step_end() as stop:
            for t in bar:
                step = t + 1
                window.add(one_step(), step)  # a batch per seed and one update; its logs summed (and checked)
                if step % log_every == 0 or step == steps:
                    log.train(step, window.means(step), clock.rates(step - start))
                if eval_every and (step % eval_every == 0 or step == steps):
                    with clock.paused():  # evaluations are not update time
                        for k in range(len(run)):
                            log.eval(k, evaluate(run.member(k), run.seeds[k], step))
                    bar.set_postfix(ret=f"{log.mean_return():.1f}")
                if (checkpoint_every and step % checkpoint_every == 0) or (stop.requested and run.out is not None):
                    saved.checkpoint(step, window, clock)
                if stop.requested and step < steps:
                    bar.close()
                    raise Interrupted(step, run.out)
        saved.final(steps)
    return run.results(log.histories, clock.segments())


# --------------------------------------------------------------------------------------------------------------
# The loop's pieces: its settings, the seeds it trains, one step, the logs, the clocks, checkpoints, evaluation
# --------------------------------------------------------------------------------------------------------------

def _check_settings(run: "Seeds", dataset: OfflineDataset, steps: int, *, batch_size, eval_env, eval_every,
                    eval_episodes, log_every, checkpoint_every, resume, tensorboard, device, precision, amp, update,
                    capture, sync_every_step) -> tuple[bool, object]:
    """Every setting of :func:`train` checked before any work (an error or a warning); returns ``sync_every_step``
    (its default on ``device`` where None) and the context every update runs in (:func:`update_context`)."""
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
            f"draws transitions several times (with replacement)", stacklevel=3)
    if dataset.flag_problem():
        import warnings
        warnings.warn(f"the dataset's episode flags: {dataset.flag_problem()}", stacklevel=3)
    for name, wanted, what in (("checkpoint_every", checkpoint_every, "the directory the checkpoint is written to"),
                               ("resume=True", resume, "the directory holding checkpoint.pt"),
                               ("tensorboard=True", tensorboard, "the directory the event files are written to")):
        if wanted and run.out is None:
            raise ValueError(f"{name} needs out= ({what})")
    if tensorboard:
        _tensorboard_class()  # a missing package is said now, before any work
    context = update_context(device, precision, amp)  # raises here, not at the first update, if bf16 is missing
    if capture:
        check_capture(device)
    if capture and update is not None:
        raise ValueError("capture=True records agent.update(); a custom update= cannot be captured")
    if run.group and update is not None:
        raise ValueError("a custom update= trains one agent: pass one agent, not a list")
    for one in run.agents:
        if declares(one):  # its declarations must be whole: what is left out is not checkpointed (minirl.agent)
            check_agent(one)
    return (torch.device(device).type == "cpu" if sync_every_step is None else sync_every_step), context


class Seeds:
    """The agents a run trains: one agent, or ``K`` agents of one algorithm (each built from its own seed, ``seed``
    the list of their seeds, ``out`` a list of ``K`` directories or None) trained together as one stacked agent
    (:mod:`minirl.seeds`): one update per step on ``K`` batches, each drawn by its seed's own sampler, so each seed
    sees the batches its own run would. Each directory gets what a single run writes (its evaluations, made with its
    seed, checkpoints and ``agent.pt`` of its seed alone), so a seed of a stacked run resumes, loads and evaluates
    like any run; the agents in the list end trained (:meth:`results`). For an algorithm whose update draws random
    numbers (CQL's and BCQ's sampled actions), the ``K`` seeds draw them from one stream (seeded with the first
    seed), so they are statistically, not exactly, the ``K`` separate runs; IQL and BC draw none."""

    def __init__(self, agent, seed, out):
        self.group = isinstance(agent, (list, tuple))
        agents, seeds, outs = _members(agent, seed, out) if self.group else ([agent], [seed], [out])
        self.agents, self.seeds = agents, seeds
        self.outs = [Path(o) if o is not None else None for o in outs]
        self.out = self.outs[0]
        self.learner, self.samplers = agents[0], []

    def __len__(self) -> int:
        return len(self.agents)

    @contextlib.contextmanager
    def holding_folders(self):
        """One run per folder: each out directory held for the block's life (:func:`hold_run_folder`)."""
        with contextlib.ExitStack() as held:
            for o in self.outs:
                if o is not None:
                    held.enter_context(hold_run_folder(o))
            yield

    def write_configs(self, dataset: OfflineDataset, resume: bool, steps, batch_size, eval_env, task) -> None:
        """Each out directory's ``config.json`` (:func:`_write_run_config`); a resumed run keeps the one it has."""
        for one, s, o in zip(self.agents, self.seeds, self.outs):
            if o is not None and not (resume and (o / "checkpoint.pt").exists()):
                _write_run_config(o, one, dataset, steps=steps, seed=s, batch_size=batch_size, eval_env=eval_env,
                                  task=task)

    def seed_generators(self, device: str) -> None:
        """torch's global generator from the first seed; each seed's batches from a generator of its own."""
        torch.manual_seed(self.seeds[0])
        self.samplers = [torch.Generator(device=device).manual_seed(s) for s in self.seeds]

    def stack(self) -> None:
        """The agent the updates train: the ``K`` agents stacked (after a resume loaded them), or the one agent."""
        self.learner = stack(self.agents) if self.group else self.agents[0]

    def sample(self, dataset: OfflineDataset, batch_size: int, device: str, generators) -> dict:
        """One batch for each seed, drawn by ``generators`` (None: the default generator), stacked for ``K``."""
        if not self.group:
            return dataset.sample(batch_size, device, generators[0])
        return stack_batches([dataset.sample(batch_size, device, g) for g in generators])

    def member(self, k: int):
        """Seed ``k``'s agent as a plain agent (to evaluate or save)."""
        return member(self.learner, k) if self.group else self.learner

    def label(self) -> str:
        name = getattr(self.agents[0], "name", type(self.agents[0]).__name__)
        return f"{name} x {len(self)} seeds" if self.group else name

    def results(self, histories: list[dict], segments: list) -> dict | list[dict]:
        """What :func:`train` returns; the caller's agents end trained, as after ``K`` separate runs."""
        if not self.group:
            return {**histories[0], "segments_s": segments}
        for k, one in enumerate(self.agents):
            one.load_state_dict(member(self.learner, k).state_dict())
        return [{**h, "segments_s": segments} for h in histories]


class Step:
    """One training step, ``logs = step()``: a batch for each seed from its own sampler and one update of the
    learner, inside ``context`` (the run's precision), by ``update(agent, batch)`` when given. With ``graph`` (a
    context factory, :func:`minirl.devices.graph_context`) the whole step, sampling included, is recorded once as a
    CUDA graph and replayed (:class:`minirl.devices.CapturedStep`): the same updates as eager ones from the same seed,
    4-9x faster on an H100 (benchmarks/README.md); its batches come from the default CUDA generator instead of the
    samplers, so a captured run and an eager one with the same seed draw different batches."""

    def __init__(self, run: Seeds, dataset: OfflineDataset, batch_size: int, device: str, context, update=None,
                 graph=None):
        self.run, self.dataset, self.batch_size, self.device = run, dataset, batch_size, device
        self.context, self.update = context, update
        self.captured = None if graph is None else CapturedStep(self.recorded, run.learner, context=graph)

    def recorded(self) -> dict:
        """What the graph records: batches from the default CUDA generator (seeded, or restored from a checkpoint)."""
        return self.run.learner.update(self.run.sample(self.dataset, self.batch_size, self.device,
                                                       [None] * len(self.run)))

    def __call__(self) -> dict:
        if self.captured is not None:
            return self.captured()  # sampling and update, replayed as one CUDA graph
        with self.context:
            batch = self.run.sample(self.dataset, self.batch_size, self.device, self.run.samplers)
            logs = self.run.learner.update(batch) if self.update is None else self.update(self.run.learner, batch)
        if not isinstance(logs, dict):
            raise TypeError(f"the update returned a {type(logs).__name__}, expected a dict of logs (name -> number)")
        return logs


class LogWindow:
    """The update logs since the last ``"train"`` entry: their sums and how many updates they hold. A checkpoint
    keeps them, so a run resumed between two log steps writes the same averages as one that never stopped.
    ``sync``: every update's logs are read on the host and checked at their step; off (the default on a GPU), they
    are summed on the device and read once per entry, which removes one host-device synchronisation per update, and
    a NaN is reported with its window of steps."""

    def __init__(self, sync: bool, sums: dict | None = None, n: int = 0):
        self.sync, self.sums, self.n = sync, dict(sums or {}), n

    def add(self, logs: dict, step: int) -> None:
        if self.sync:
            logs = {k: float(v) for k, v in logs.items()}
            _check_finite(logs, step)
        for k, v in logs.items():
            self.sums[k] = self.sums.get(k, 0.0) + (v.detach() if torch.is_tensor(v) else float(v))
        self.n += 1

    def means(self, step: int) -> dict[str, float]:
        """The window's averages (its one read of the logs), checked; the window starts again."""
        sums = {k: float(v) for k, v in self.sums.items()}
        if not self.sync:
            _check_finite(sums, step, first=step - self.n + 1)
        means = {k: v / self.n for k, v in sums.items()}
        self.sums, self.n = {}, 0
        return means

    def state(self) -> tuple[dict, int]:
        return {k: float(v) for k, v in self.sums.items()}, self.n


class Clock:
    """The seconds of a run. Each ``train`` entry has ``updates_per_s``, the mean rate since this part of the run
    started (evaluations excluded), and ``update_s``, the seconds of updates since step 0 over every part
    (evaluations excluded; the updates an interrupted part made after its checkpoint are not counted, as they are
    made again); ``update_s`` is absent after a resume from a checkpoint that did not record it. ``update_cpu_s``
    counts the same updates in this process's CPU seconds (``time.process_time``, all its threads) instead of the
    clock's: a process that is stopped (``kill -STOP``) or waits for a busy core adds to ``update_s`` but not to
    ``update_cpu_s``, so for a one-thread run the two differ by exactly such pauses; it too is absent after a resume
    from a checkpoint that did not record it. ``segments_s``: the wall-clock seconds of each part of the run (one
    unless resumed: each earlier part up to its checkpoint, ``None`` if that checkpoint did not record it; then
    this part's). ``earlier``: the segments, ``update_s`` and ``update_cpu_s`` of the earlier parts."""

    def __init__(self, segments: list | None = None, update_s: float | None = 0.0, update_cpu_s: float | None = 0.0):
        self.earlier, self.earlier_update_s, self.earlier_update_cpu_s = list(segments or []), update_s, update_cpu_s
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        self.paused_s = self.paused_cpu_s = 0.0

    @contextlib.contextmanager
    def paused(self):
        """The block's seconds are not update time (evaluations)."""
        t, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.paused_s += time.perf_counter() - t
            self.paused_cpu_s += time.process_time() - c

    def update_seconds(self) -> tuple[float, dict[str, float]]:
        """This part's seconds of updates, and ``update_s``, ``update_cpu_s`` since step 0 (a clock the earlier parts
        did not record left out)."""
        part_s = time.perf_counter() - self.t0 - self.paused_s
        part_cpu_s = time.process_time() - self.c0 - self.paused_cpu_s
        return part_s, {k: earlier + part for k, earlier, part in (("update_s", self.earlier_update_s, part_s),
                                                                  ("update_cpu_s", self.earlier_update_cpu_s,
                                                                   part_cpu_s)) if earlier is not None}

    def rates(self, updates: int) -> dict[str, float]:
        """A ``train`` entry's clocks, after this part's ``updates``."""
        part_s, seconds = self.update_seconds()
        return {"updates_per_s": updates / part_s, **seconds}

    def segments(self) -> list:
        return self.earlier + [time.perf_counter() - self.t0]

    def state(self) -> dict:
        """What a checkpoint keeps (``None``: still unknown when resumed from it)."""
        seconds = self.update_seconds()[1]
        return {"segments_s": self.segments(), "update_s": seconds.get("update_s"),
                "update_cpu_s": seconds.get("update_cpu_s")}


class RunLog:
    """What a run records as it goes, for each seed: its history (what :func:`train` returns), ``out/log.jsonl``
    (one JSON line per entry, ``"kind"`` ``"train"`` or ``"eval"``) and ``out/eval.csv`` (the evaluations). For a
    stack of ``members`` seeds the training entries are the stack's: losses summed over the seeds, other statistics
    averaged over them, with ``"members": K``. ``tensorboard=True`` (needs the ``tensorboard`` package, extra
    ``minirl-book[tensorboard]``) also writes the first seed's entries as TensorBoard scalars (``train/<name>``,
    ``eval/<name>``) to event files in its ``out``: ``tensorboard --logdir runs/`` then shows the runs side by side.
    A resumed run adds an event file; the steps an interrupted run made after its last checkpoint then appear
    twice."""

    def __init__(self, outs: list, tensorboard: bool = False, members: int | None = None):
        self.outs, self.members = outs, members
        self.histories: list[dict[str, list]] = [{"train": [], "eval": []} for _ in outs]
        self.writer = _tensorboard_class()(log_dir=str(outs[0])) if tensorboard else None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc) -> None:
        if self.writer is not None:
            self.writer.close()

    def restart(self, k: int, history: dict) -> None:
        """Seed ``k``'s history and files as of ``history`` (a checkpoint's, or empty): the logs end where the
        checkpoint was taken, even if the interrupted run got further."""
        self.histories[k], o = history, self.outs[k]
        entries = sorted(({"kind": kind, **e} for kind in history for e in history[kind]),
                         key=lambda e: (e["step"], e["kind"] == "eval"))  # the order the run wrote them in
        with atomic_write(o / "log.jsonl") as tmp:
            tmp.write_text("".join(json.dumps(e) + "\n" for e in entries))
        (o / "eval.csv").unlink(missing_ok=True)
        if history["eval"]:
            _write_csv(o / "eval.csv", history["eval"])

    def write(self, kind: str, entry: dict, k: int | None = None) -> None:
        """Log ``entry`` for seed ``k``, or for every seed."""
        for i in range(len(self.outs)) if k is None else [k]:
            self.histories[i][kind].append(entry)
            if self.outs[i] is not None:
                with open(self.outs[i] / "log.jsonl", "a") as f:
                    f.write(json.dumps({"kind": kind, **entry}) + "\n")
        if self.writer is not None and (k or 0) == 0:
            for name, value in entry.items():
                if name != "step":
                    self.writer.add_scalar(f"{kind}/{name}", value, entry["step"])
            if kind == "eval":
                self.writer.flush()  # an interrupted run keeps its curves up to the last evaluation

    def train(self, step: int, means: dict, clocks: dict) -> None:
        self.write("train", {"step": step, **means, **clocks, **({"members": self.members} if self.members else {})})

    def eval(self, k: int, entry: dict) -> None:
        self.write("eval", entry, k)
        if self.outs[k] is not None:
            _write_csv(self.outs[k] / "eval.csv", self.histories[k]["eval"])

    def mean_return(self) -> float:
        return sum(h["eval"][-1]["return_mean"] for h in self.histories) / len(self.histories)


class Checkpoints:
    """Each seed's ``out/checkpoint.pt`` and, at the end, ``out/agent.pt``, written atomically with ``meta``, the
    step, :func:`minirl.versions` and both transforms; a checkpoint also holds what an exact resume needs: the
    generators, the history, the running logs and the clocks. :meth:`restore` resumes from them: the networks, the
    optimiser states and the generators come from the checkpoint, the optimisers' settings (learning rates) from the
    agent as built."""

    def __init__(self, run: Seeds, log: RunLog, meta, state_normalizer, reward_transform, device: str):
        self.run, self.log, self.device = run, log, device
        self.metas = list(meta) if run.group and isinstance(meta, (list, tuple)) else [meta] * len(run)
        self.transforms = _transforms(state_normalizer, reward_transform)

    def restore(self, resume: bool, steps: int) -> tuple[int, tuple, tuple]:
        """Where the run starts: ``(step, running logs, earlier clocks)``, from each seed's checkpoint with
        ``resume`` (step 0 without one). Each out directory's logs are rewritten to end at that step; a new run
        removes a checkpoint an earlier run left (it must never be resumed into this one)."""
        run, start, running, clocks = self.run, 0, ({}, 0), ([], 0.0, 0.0)
        resumed = [resume and o is not None and (o / "checkpoint.pt").exists() for o in run.outs]
        if run.group and any(resumed) and not all(resumed):
            raise UserError(f"--resume: of a batch of seeds, only {sum(resumed)} of {len(run)} have a checkpoint.pt; "
                            f"resume them one at a time, or start the batch again")
        for k, o in enumerate(run.outs):
            if o is None:
                continue
            o.mkdir(parents=True, exist_ok=True)
            ck = self.load(k, steps, start) if resumed[k] else None
            if ck is not None:
                start = ck["step"]
                if k == 0:  # what the seeds share: the running logs and the clocks (None: a part not recorded)
                    running = ck.get("running", ({}, 0))
                    clocks = (ck.get("segments_s", [None]), ck.get("update_s"), ck.get("update_cpu_s"))
            elif resume:
                print(f"resume: no checkpoint in {o}, starting from step 0")
            self.log.restart(k, ck["history"] if ck is not None else {"train": [], "eval": []})
            if start == 0:
                (o / "checkpoint.pt").unlink(missing_ok=True)  # another run's: it must never be resumed into this one
        return start, running, clocks

    def load(self, k: int, steps: int, start: int) -> dict:
        """Seed ``k``'s checkpoint, loaded into its agent and its sampler (the first seed's also into torch's
        generators, which the seeds share); ``start``: the step the seeds before it resume from."""
        path = self.run.outs[k] / "checkpoint.pt"
        ck = read_checkpoint(path)
        if ck["step"] > steps:
            raise UserError(f"--resume: {path} is at step {ck['step']}, beyond --steps {steps}; ask for at least "
                            f"{ck['step']} steps")
        if k and ck["step"] != start:
            raise UserError(f"--resume: {path} is at step {ck['step']}, {self.run.outs[0] / 'checkpoint.pt'} at "
                            f"{start}: a batch of seeds resumes from one step")
        load_agent_state(self.run.agents[k], ck["agent"], path, keep_optimizer_settings=True)
        # on the CPU: generator states must stay CPU byte tensors; load_state_dict copied onto the agent's device
        self.run.samplers[k].set_state(ck["sampler"])
        if k == 0:
            torch.set_rng_state(ck["torch_rng"])
            if ck.get("cuda_rng") is not None:
                torch.cuda.set_rng_state(ck["cuda_rng"], torch.device(self.device))
        return ck

    def save(self, name: str, step: int, k: int, **extra) -> None:
        with atomic_write(self.run.outs[k] / name) as tmp:
            torch.save({"agent": self.run.member(k).state_dict(), "step": step, "meta": self.metas[k],
                        "versions": versions(), **self.transforms, **extra}, tmp)

    def checkpoint(self, step: int, window: LogWindow, clock: Clock) -> None:
        device = torch.device(self.device)
        cuda_rng = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        clocks = clock.state()
        for k, o in enumerate(self.run.outs):
            if o is not None:
                self.save("checkpoint.pt", step, k, sampler=self.run.samplers[k].get_state(),
                          torch_rng=torch.get_rng_state(), cuda_rng=cuda_rng, history=self.log.histories[k],
                          running=window.state(), **clocks)

    def final(self, steps: int) -> None:
        for k, o in enumerate(self.run.outs):
            if o is not None:
                self.save("agent.pt", steps, k)


@dataclass
class Evaluation:
    """One evaluation's log entry, ``evaluate(agent, seed, step)``: the returns over ``episodes`` seeded episodes
    in ``env`` (reset with seeds from ``10_000 * (seed + 1)``), the normalised score with ``task``, the success rate
    on a goal task (OGBench's mazes), and the critic's value check where the agent declares a critic."""
    env: str | None
    episodes: int
    task: str | None
    state_normalizer: StateNormalizer | None
    reward_transform: RewardTransform | None

    def __call__(self, agent, seed: int, step: int) -> dict:
        if has_value_estimate(agent):  # the returns and, from the same episodes, the critic's value check
            episodes = value_check(agent, self.env, self.episodes, seed=10_000 * (seed + 1),
                                   state_normalizer=self.state_normalizer, reward_transform=self.reward_transform)
            values = {"q_start": episodes["q_start"], "mc_discounted": episodes["mc_discounted"]}
        else:
            episodes = run_episodes(agent, self.env, self.episodes, seed=10_000 * (seed + 1),
                                    state_normalizer=self.state_normalizer)
            values = {}
        returns = episodes["returns"]
        entry = {"step": step, "return_mean": float(returns.mean()), "return_std": float(returns.std())}
        if "successes" in episodes:  # a goal task (OGBench's mazes): the share of episodes that reached it
            entry["success_rate"] = float(episodes["successes"].mean())
        if self.task is not None:
            from .datasets import normalized_score
            scores = normalized_score(self.task, returns)
            entry |= {"score_mean": float(scores.mean()), "score_std": float(scores.std())}
        return entry | values


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


def _tensorboard_class():
    """torch's ``SummaryWriter``; a :class:`UserError` saying what to install when tensorboard is missing (torch's
    writer needs the ``tensorboard`` package)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UserError("--tensorboard needs the tensorboard package: pip install -e '.[tensorboard]' "
                        "(or pip install tensorboard)") from None
    return SummaryWriter


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
