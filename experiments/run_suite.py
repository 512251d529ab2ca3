"""Run a grid of offline-RL trainings (algorithms x datasets x seeds) and record their results.

    python experiments/run_suite.py --algos bc iql --datasets pendulum-medium hopper-medium-replay \\
        --seeds 0 1 2 --scale cpu
    python experiments/run_suite.py --algos iql --datasets pendulum-medium-replay --seeds 0 1 2 --scale cpu \\
        --tag cpu-iql-tau --set expectile=0.9
    python experiments/run_suite.py --algos bc bcq cql iql --datasets hopper-medium hopper-medium-replay \\
        --scale full --device cuda --capture --precision float32 --executor slurm --slurm-partition gpu

It made every training run under ``results/`` (into ``results/<tag>/``: e.g. ``results/record``, the results of
record, whose commands are ``experiments/record.sh``, and ``results/cpu``, the first edition's grid); the other
scripts of ``experiments/`` call it for their runs. Each ``result.json`` records the command as it was run, so runs
made before this script moved from ``benchmarks/`` to ``experiments/`` name ``benchmarks/run_suite.py``.
Book section: book/comparison.md, "Making the grid" (and each chapter's "Results of record", which reads its runs).

Each run goes to ``<root>/<tag>/<label>/<dataset>/s<seed>/`` (the tag defaults to ``<scale>-<precision>``, e.g. ``cpu-bf16``; the label is the
algorithm followed by any ``--set`` overrides, e.g. ``iql-expectile=0.9``) and holds the training logs
(``eval.csv``, ``log.jsonl``, ``config.json``) and ``result.json``: the final normalised score, wall time,
updates/s, and the hardware and software that made it.  Runs whose ``result.json`` exists are skipped, and an
interrupted run resumes from its checkpoint, so the same command can be repeated until the grid is complete.
After every run, ``<root>/<tag>/summary.csv`` is rewritten from all the ``result.json`` files under the tag, and the
script prints the table of mean and standard deviation over seeds.

The ``full`` scale on a CUDA device takes the fast path by itself: with ``--executor inline`` the seeds of each
algorithm and dataset train as one batch (as ``--batch-seeds``) and each step is replayed as one CUDA graph where the
update allows it (as ``--capture``; :func:`minirl.runs.default_capture`); ``--no-batch-seeds`` and ``--no-capture``
turn them off. On a CPU, and at the ``smoke`` and ``cpu`` scales, runs are made one seed at a time, eagerly.

Where the runs are made (``--executor``): ``inline`` (the default) makes them one after the other in this process.
``local`` and ``slurm`` hand each run to submitit (``pip install -e ".[cluster]"``) as a job: ``local`` starts the
jobs as processes on this machine, at most ``--max-parallel`` at a time (default: this process's cores divided by
``--threads``); ``slurm`` submits the whole grid as one SLURM job array (``--max-parallel`` array tasks at a time,
``--slurm-partition``, ``--slurm-gpus-per-task`` (default 1 with ``--device cuda``), ``--timeout-min`` per run,
default 24 hours, ``--threads`` CPUs per run; anything else sbatch reads from its environment variables, e.g.
``SBATCH_ACCOUNT``, ``SBATCH_QOS``, ``SBATCH_MEM_PER_NODE``).  With ``slurm`` the device is checked on the nodes, and
``--precision`` must be float32 or bf16 unless ``--tag`` is given (``auto``, the default, is for each node to
resolve, and the default tag depends on it).  The grid's settings are checked before anything is submitted, and
finished runs and runs that another process holds are not submitted.  The command waits for the
jobs, reports each as it ends (a failed run with the last line of its exception and its log, under ``--jobs-dir``,
default ``<root>/<tag>/.submitit/``), prints the table and exits with status 1 if any run failed; with ``slurm``,
``--no-wait`` returns as soon as the array is queued.  A job that reaches its time limit or is preempted ends its
current step, saves ``checkpoint.pt`` and is requeued by submitit (up to 3 times), resuming there.  The local
executor is tested; the SLURM path has not been tried on a SLURM cluster (its tests use a fake ``sbatch``).

The lock: a run being made holds ``running.pid`` in its directory, a line of JSON naming the host, the process, the
submitit job id (if any) and the start time; the process touches the file every minute while it runs.  Another
suite (on any machine sharing the results folder) treats the run as taken, and skips it, unless
- the lock names this very job (a requeued job resuming its own run, or its queued placeholder, below),
- or it was written on this host by a process that no longer exists (older suites wrote the bare process id: read
  as a process on this host),
- or it names a SLURM job and ``squeue`` says that job is no longer queued or running,
- or it comes from another host (or is unreadable) and has not been touched for 15 minutes: its process died with
  its machine.
When the slurm executor has queued the array it writes a placeholder lock naming each run's array task, so that
repeating the command while the array waits in the queue submits nothing twice.  ``--redo`` deletes a run's
directory, its lock included, and makes the run again.

The book's notebooks load these files with :func:`minirl.plots.load_results`; nothing in a chapter's comparison is
typed by hand.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from minirl import cli, config, datasets, devices, runs, seeds, train
from minirl.plots import load_results, score_table

EXECUTORS = ("inline", "local", "slurm")
CHECKPOINT_EVERY_MAX = 25_000  # a run checkpoints 4 times, and at least every 25,000 steps (a 1M-step run: 40 times)


def checkpoint_every(n_steps: int) -> int:
    """Steps between a run's checkpoints: a quarter of the run, at most ``CHECKPOINT_EVERY_MAX`` (a long run killed
    without warning, e.g. at the end of a machine's session, then loses at most that many steps)."""
    return min(max(n_steps // 4, 1), CHECKPOINT_EVERY_MAX)
LOCK = "running.pid"
HOST = socket.gethostname()
HEARTBEAT_S = 60.0  # a run touches its lock this often
STALE_S = 15 * 60.0  # a lock from another host untouched for this long belongs to a process that is gone
SLURM_TIMEOUT_MIN = 24 * 60  # --timeout-min's default on SLURM (submitit's own default is 5 minutes)
CLUSTER_EXTRA = 'pip install -e ".[cluster]"'


def cpuinfo() -> dict:
    """The first processor's fields in ``/proc/cpuinfo`` (``{}`` where there is none, e.g. macOS)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the end of the first processor's block
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def hardware() -> dict:
    """What machine and software a run used, written into every ``result.json``. Two CPUs with the same model name
    can differ twice over in bfloat16 speed and round differently (this project's "AMD EPYC" came back as another
    model), so the CPU's family, model and stepping and its bfloat16 flags are recorded, and the versions of the
    simulator, which decide a roll-out's episodes."""
    fields = cpuinfo()
    info = {"cpu": fields.get("model name") or platform.processor() or platform.machine()}
    if "cpu family" in fields:
        info["cpu_id"] = f"family {fields['cpu family']} model {fields.get('model', '?')} " \
                         f"stepping {fields.get('stepping', '?')}"
        info["cpu_bf16"] = sorted(set(fields.get("flags", "").split()) & {"avx512_bf16", "amx_bf16"})
    info.update({"cpu_count": os.cpu_count(), "machine": platform.machine(), "torch": torch.__version__,
                 "torch_threads": torch.get_num_threads(), "python": platform.python_version()})
    for package in ("gymnasium", "mujoco", "numpy"):
        try:
            info[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            info[package] = None
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def default_tag(scale: str, precision: str) -> str:
    """``cpu-bf16``, ``full-float32``, ...: the results folder of a grid made without ``--tag``. (The first edition's
    folders, ``results/cpu`` and ``results/cpu-amp``, were made at the earlier ``cpu`` scale; naming the precision
    keeps new runs out of them.)"""
    return f"{scale}-{precision}"


def run_label(algo: str, overrides: dict) -> str:
    """``iql`` or, with overrides, ``iql-expectile=0.9-beta=10.0`` (the directory name of a configuration)."""
    def text(v):
        return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
    return "-".join([algo, *(f"{k}={text(overrides[k])}" for k in sorted(overrides))])


def run_dir(root: Path, algo: str, dataset: str, seed: int, overrides: dict) -> Path:
    return Path(root) / run_label(algo, overrides) / datasets.file_stem(dataset) / f"s{seed}"


def run_one(root: Path, algo: str, dataset: str, seed: int, scale: str, overrides: dict, steps: int | None,
            device: str, precision: str = "float32", threads: int | None = None,
            eval_every: int | None = None, job: str | None = None, command: str | None = None,
            eval_episodes: int | None = None, capture: bool | None = None) -> dict | None:
    """Make one run of the grid and return its result; ``None`` (and a line saying why) when it is finished already
    or another process holds it. ``job`` is the submitit job id of the caller, if any (see the module's lock)."""
    out, result, reason = _make_run(root, algo, dataset, seed, scale, overrides, steps, device, precision, threads,
                                    eval_every, job, command, eval_episodes, capture)
    if reason:
        print(f"skip {out} ({reason})")
    return result


def _make_run(root, algo, dataset, seed, scale, overrides, steps, device, precision="float32", threads=None,
              eval_every=None, job=None, command=None, eval_episodes=None,
              capture=None) -> tuple[Path, dict | None, str | None]:
    out = run_dir(root, algo, dataset, seed, overrides)
    reason = skip_reason(out, job)
    if reason:
        return out, None, reason
    out.mkdir(parents=True, exist_ok=True)
    lock = _take_lock(out, job)  # several suites may share a grid: each run is made by one process only
    if lock is None:
        return out, None, "another process took it first"
    try:
        return out, _train_and_record(out, algo, dataset, seed, scale, overrides, steps, device, precision, threads,
                                      eval_every, command, eval_episodes, capture), None
    finally:
        lock.release()


def run_batch(root: Path, algo: str, dataset: str, seeds: list[int], scale: str, overrides: dict,
              steps: int | None, device: str, precision: str = "float32", threads: int | None = None,
              eval_every: int | None = None, eval_episodes: int | None = None,
              capture: bool | None = None) -> list[dict]:
    """Make the unfinished runs of ``seeds`` as one batch of seeds (``--batch-seeds``: one process, one update for
    all of them); the seeds interrupted together resume together, those not started start together. Returns their
    results; a seed finished already or held by another process is skipped with a line saying why."""
    todo = []
    try:
        for seed in seeds:
            out = run_dir(root, algo, dataset, seed, overrides)
            reason = skip_reason(out)
            if not reason:
                out.mkdir(parents=True, exist_ok=True)
                lock = _take_lock(out, None)
                reason = "another process took it first" if lock is None else None
            if reason:
                print(f"skip {out} ({reason})")
                continue
            todo.append((seed, out, lock))
        results = []
        # which seeds resume is decided once, before any training: a finished run deletes its checkpoint, and asking
        # again after the resumed part had the resumed seeds trained a second time, from step 0 (2026-11-27)
        resumes = {seed: (out / "checkpoint.pt").exists() for seed, out, _ in todo}
        for resumed in (True, False):
            part = [(seed, out) for seed, out, _ in todo if resumes[seed] == resumed]
            if part:
                results += _train_and_record([o for _, o in part], algo, dataset, [s for s, _ in part], scale,
                                             overrides, steps, device, precision, threads, eval_every, None,
                                             eval_episodes, capture)
        return results
    finally:
        for _, _, lock in todo:
            lock.release()


def skip_reason(out: Path, job: str | None = None) -> str | None:
    """Why the run in ``out`` is not to be made now ("done", "being made by process 123 on gpu7, job 4567_2"), or
    None."""
    if (out / "result.json").exists():
        return "done"
    return lock_holder(out, job)


# --------------------------------------------------------------------------------------------------------------
# The lock: running.pid
# --------------------------------------------------------------------------------------------------------------

def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (OSError, ValueError, OverflowError):
        return False
    return pid > 0


def _read_lock(path: Path) -> dict | None:
    """The lock's record plus its age in seconds (``age_s``), None when there is no lock. A bare integer is the
    format of earlier suites: a process on this host. An unreadable record (being written) is ``{}``."""
    try:
        text = path.read_text().strip()
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    if isinstance(record, int) and not isinstance(record, bool):
        record = {"host": HOST, "pid": record}
    if not isinstance(record, dict):
        record = {}
    return record | {"age_s": age}


def _slurm_active(job: str | None) -> bool | None:
    """Whether SLURM still has ``job`` queued or running; None when that cannot be asked here."""
    if not job or shutil.which("squeue") is None:
        return None
    try:
        r = subprocess.run(["squeue", "-h", "-j", str(job), "-o", "%T"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode == 0:
        return bool(r.stdout.strip())
    return False if "invalid job id" in r.stderr.lower() else None


def _describe(record: dict) -> str:
    if record.get("queued"):
        return f"queued as SLURM job {record.get('job')}"
    if "pid" not in record:
        return f"being made: its lock is being written or unreadable, touched {record['age_s'] / 60:.0f} min ago"
    who = f"process {record['pid']}"
    if record.get("host") != HOST:
        who += f" on {record.get('host')}"
    if record.get("job"):
        who += f", job {record['job']}"
    return f"being made by {who}"


def lock_holder(out: Path, job: str | None = None) -> str | None:
    """Who holds the run in ``out``, in words, or None when nobody does (the rules are in the module's docstring)."""
    record = _read_lock(out / LOCK)
    if record is None:
        return None
    if job is not None and record.get("job") == job:
        return None  # this very job: an attempt before its requeue, or the placeholder written when it was queued
    if record.get("host") == HOST and isinstance(record.get("pid"), int):
        return _describe(record) if _alive(record["pid"]) else None
    if record.get("slurm"):
        active = _slurm_active(record.get("job"))
        if active is not None:
            return _describe(record) if active else None
    return _describe(record) if record["age_s"] < STALE_S else None


class _Lock:
    """A lock this process holds: touched every :data:`HEARTBEAT_S` seconds by a thread until :meth:`release`."""

    def __init__(self, path: Path, text: str):
        self.path, self.text, self._stop = path, text, threading.Event()
        threading.Thread(target=self._beat, name=f"heartbeat {path}", daemon=True).start()

    def _beat(self):
        while not self._stop.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def release(self):
        self._stop.set()
        with contextlib.suppress(OSError):
            if self.path.read_text() == self.text:  # not a lock another process wrote after judging ours stale
                self.path.unlink()


def _lock_record(job: str | None, **extra) -> str:
    return json.dumps({"host": HOST, "pid": os.getpid(), "job": job,
                       "slurm": os.environ.get("SUBMITIT_EXECUTOR") == "slurm",
                       "since": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), **extra})


def _create(path: Path, text: str) -> bool:
    """Write ``text`` into ``path`` if no file is there (atomically: of two processes, one succeeds)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return True


def _take_lock(out: Path, job: str | None) -> _Lock | None:
    """Hold the run in ``out``; None if another process holds it. A lock nobody holds any more is replaced."""
    path, text = out / LOCK, _lock_record(job)
    if _create(path, text):
        return _Lock(path, text)
    if lock_holder(out, job) is not None:
        return None
    path.unlink(missing_ok=True)
    return _Lock(path, text) if _create(path, text) else None


def _mark_queued(out: Path, job: str) -> None:
    """The placeholder lock of a run queued as SLURM job ``job``: it replaces a lock nobody holds (an earlier
    placeholder whose job has left the queue), not the lock of the job itself if it has started already."""
    out.mkdir(parents=True, exist_ok=True)
    path, text = out / LOCK, _lock_record(job, slurm=True, queued=True, pid=None)
    if _create(path, text):
        return
    record = _read_lock(path)
    if record is not None and record.get("job") != job and lock_holder(out) is None:
        tmp = out / f".{LOCK}.{HOST}.{os.getpid()}.tmp"
        tmp.write_text(text)
        os.replace(tmp, path)


# --------------------------------------------------------------------------------------------------------------
# One run, and the summary
# --------------------------------------------------------------------------------------------------------------

def _train_and_record(out: Path | list[Path], algo: str, dataset: str, seed: int | list[int], scale: str,
                      overrides: dict, steps: int | None, device: str, precision: str = "float32",
                      threads: int | None = None, eval_every: int | None = None, command: str | None = None,
                      eval_episodes: int | None = None, capture: bool | None = None) -> dict | list[dict]:
    """Train and write ``result.json``; ``seed`` a list (``out`` then one directory each): the seeds trained together
    as one batch (``runs.run`` with a list of seeds), one result each."""
    sc = runs.get_scale(scale)
    n_steps = steps if steps is not None else sc.steps_for(algo)
    outs, seeds = (list(out), list(seed)) if isinstance(seed, list) else ([out], [seed])
    interrupted = (outs[0] / "checkpoint.pt").exists()  # resumed; anything else left is a run that saved nothing
    histories = runs.run(algo, dataset, scale=scale, steps=n_steps, seed=seed, device=device, out=out,
                         overrides=overrides, checkpoint_every=checkpoint_every(n_steps), resume=interrupted,
                         overwrite=not interrupted, precision=precision, threads=threads, eval_every=eval_every,
                         eval_episodes=eval_episodes, capture=capture)
    results = [_record(o, algo, dataset, s, sc, n_steps, overrides, h, command)
               for o, s, h in zip(outs, seeds, histories if isinstance(seed, list) else [histories])]
    return results if isinstance(seed, list) else results[0]


def _record(out: Path, algo: str, dataset: str, seed: int, sc, n_steps: int, overrides: dict, history: dict,
            command: str | None) -> dict:
    last_train = history["train"][-1] if history["train"] else {}
    last_eval = history["eval"][-1] if history["eval"] else {}
    resolved = history["config"]["precision"]
    result = {"algo": algo, "label": run_label(algo, overrides), "overrides": overrides, "dataset": dataset,
              "seed": seed, "scale": sc.name, "steps": n_steps, "precision": resolved, "amp": resolved == "bf16",
              "adam": history["config"].get("adam"), "data": history["config"].get("data"),
              "score": last_eval.get("score_mean"), "return": last_eval.get("return_mean"),
              "q_start": last_eval.get("q_start"), "mc_discounted": last_eval.get("mc_discounted"),
              "success_rate": last_eval.get("success_rate"),
              "wall_time_s": None if history["wall_time"] is None else round(history["wall_time"], 1),
              "segments_s": [None if t is None else round(t, 1) for t in history["segments_s"]],
              "updates_per_s": last_train.get("updates_per_s"), "update_s": last_train.get("update_s"),
              "update_cpu_s": last_train.get("update_cpu_s"),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "hardware": hardware(), "command": command or " ".join(sys.argv),
              **({"batch_of_seeds": history["config"]["batch_of_seeds"]} if "batch_of_seeds" in history["config"]
                 else {})}
    (out / "result.json").write_text(json.dumps(result, indent=1))
    # the checkpoint (optimiser state included) is only for resuming; the final agent stays, git-ignored like the
    # checkpoint (.gitignore), so that `minirl.runs.load_agent(out)` can roll it out later (e.g. the maze figures)
    (out / "checkpoint.pt").unlink(missing_ok=True)
    return result


def write_summary(root: Path) -> Path | None:
    """``root/summary.csv`` from every finished run under ``root`` (None while there is none). The file is replaced
    in one step, so jobs that finish at the same time never leave a mixed file."""
    if not any(root.glob("*/*/s*/result.json")):
        return None
    finished = load_results(root)
    path = root / "summary.csv"
    tmp = root / f".summary.csv.{HOST}.{os.getpid()}.tmp"
    keys = ["label", "algo", "dataset", "seed", "scale", "steps", "score", "return", "wall_time_s",
            "updates_per_s", "date"]
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in sorted(finished, key=lambda r: (r["label"], r["dataset"], r["seed"])):
            w.writerow(r)
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------------------------------------------
# Runs as submitit jobs
# --------------------------------------------------------------------------------------------------------------

class SuiteJob:
    """One run of the grid as a submitit job: submitit pickles it, calls it on the machine that runs it, and calls
    :meth:`checkpoint` when the job reaches its time limit or is preempted, to requeue it."""

    def __init__(self, root: Path, algo: str, dataset: str, seed: int, scale: str, overrides: dict,
                 steps: int | None, device: str, precision: str, threads: int, eval_every: int | None,
                 command: str, env: dict | None = None, eval_episodes: int | None = None, capture: bool | None = None):
        root = Path(root).absolute()  # the same folder whatever directory the job starts in
        self.run = dict(root=root, algo=algo, dataset=dataset, seed=seed, scale=scale, overrides=overrides,
                        steps=steps, device=device, precision=precision, threads=threads, eval_every=eval_every,
                        command=command, eval_episodes=eval_episodes, capture=capture)
        self.env = env or {}  # variables to set before the run (None: unset), e.g. the GPUs this command saw
        self.name = f"{run_label(algo, overrides)}/{dataset}/s{seed}"
        self.out = run_dir(root, algo, dataset, seed, overrides)

    def __call__(self) -> dict:
        for key, value in self.env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        try:
            with _step_end_on_preemption():
                out, result, reason = _make_run(**self.run, job=_job_id())
        except train.Interrupted as e:  # stopped by SIGINT (Ctrl-C, or a local job cancelled)
            raise RuntimeError(f"interrupted at step {e.step}: checkpoint.pt saved, the same command resumes the run")\
                from None
        if result is not None:
            write_summary(self.run["root"])
        return {"run": self.name, "out": str(out), "result": result, "skipped": reason}

    def checkpoint(self):
        """What submitit requeues: the same run, which resumes from its ``checkpoint.pt``."""
        import submitit
        return submitit.helpers.DelayedSubmission(self)


def _job_id() -> str | None:
    """The submitit job id of this process (``4567_2`` for a SLURM array task), None outside a job."""
    try:
        import submitit
        return str(submitit.JobEnvironment().job_id)
    except (ImportError, RuntimeError):
        return None


@contextlib.contextmanager
def _step_end_on_preemption():
    """In a submitit job, submitit's time-limit / preemption signal (USR2) first makes the training end its current
    step and save ``checkpoint.pt`` (as Ctrl-C does, :func:`minirl.train.train`), and only then reaches submitit's
    handler, which calls :meth:`SuiteJob.checkpoint`, requeues the job and exits. Elsewhere: nothing."""
    try:
        import submitit
        sig = getattr(signal, "SIG" + submitit.JobEnvironment.USR_SIG)
    except (ImportError, AttributeError):
        yield
        return
    submitits = signal.getsignal(sig)
    if not callable(submitits) or threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []

    def handler(signum, frame):
        caught.append((signum, frame))
        signal.signal(sig, submitits)
        signal.raise_signal(signal.SIGINT)  # train() ends the step, saves a checkpoint and raises Interrupted

    signal.signal(sig, handler)
    try:
        yield
    except KeyboardInterrupt:
        if caught:
            submitits(*caught[0])  # checkpoint(), requeue, exit
        raise
    finally:
        signal.signal(sig, submitits)


def _failure(job) -> str | None:
    """The last line of a failed job's exception (None if it succeeded)."""
    error = job.exception()
    if error is None:
        return None
    text = str(error)
    parts = text.split("-" * 22)  # submitit frames the job's traceback with dashes
    if type(error).__name__ == "FailedJobError" and len(parts) >= 3:
        lines = [line.strip() for line in parts[1].splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return " ".join(line.strip() for line in text.splitlines()[:2])


@contextlib.contextmanager
def _workers_import_minirl():
    """Jobs unpickle this script's functions by value and import minirl by name: put minirl on their PYTHONPATH
    (local jobs and sbatch inherit this environment) in case it is not installed."""
    import cloudpickle
    if __name__ != "__main__":  # imported (tests): make submitit pickle this module's code, not its name
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    before = os.environ.get("PYTHONPATH")
    package_parent = str(Path(train.__file__).resolve().parent.parent)
    paths = [p for p in (before or "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([package_parent, *[p for p in paths if p != package_parent]])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def _check_executor(a, device: str) -> dict:
    """The executor's settings from the flags, checked; a :class:`minirl.config.UserError` naming the flag."""
    local_or_slurm = {"--max-parallel": a.max_parallel, "--timeout-min": a.timeout_min, "--jobs-dir": a.jobs_dir}
    slurm_only = {"--no-wait": a.no_wait or None, "--slurm-partition": a.slurm_partition,
                  "--slurm-gpus-per-task": a.slurm_gpus_per_task}
    if a.executor == "inline":
        for flag, value in {**local_or_slurm, **slurm_only}.items():
            if value is not None:
                raise config.UserError(f"{flag} needs --executor local or slurm (the default, inline, makes the runs "
                                      f"in this process)" if flag in local_or_slurm else
                                      f"{flag} needs --executor slurm")
        return {}
    if a.executor == "local":
        for flag, value in slurm_only.items():
            if value is not None:
                raise config.UserError(f"{flag} needs --executor slurm" + (
                    " (local jobs run on this machine while this command waits)" if flag == "--no-wait" else ""))
    if a.max_parallel is not None:
        config.at_least("--max-parallel", a.max_parallel, 1)
    if a.timeout_min is not None:
        config.at_least("--timeout-min", a.timeout_min, 1)
    gpus = a.slurm_gpus_per_task
    if gpus is not None:
        config.at_least("--slurm-gpus-per-task", gpus, 0)
    cuda = torch.device(device).type == "cuda"
    if a.executor == "slurm":
        if gpus == 0 and cuda:
            raise config.UserError(f"--slurm-gpus-per-task 0 with --device {device}: the runs would see no GPU")
        if a.slurm_partition is not None and not a.slurm_partition.strip():
            raise config.UserError("--slurm-partition must name a partition, got ''")
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise config.UserError(f"--executor {a.executor} needs submitit: {CLUSTER_EXTRA}") from None
    if a.executor == "slurm" and not (shutil.which("sbatch") and shutil.which("srun")):
        raise config.UserError("--executor slurm needs sbatch and srun on PATH: submit from a SLURM login node")
    if a.executor == "local":
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return {"max_parallel": a.max_parallel or max(1, cores // a.threads), "timeout_min": a.timeout_min,
                "env": {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}}
    return {"max_parallel": a.max_parallel, "timeout_min": a.timeout_min or SLURM_TIMEOUT_MIN,
            "partition": a.slurm_partition, "gpus_per_task": gpus if gpus is not None else (1 if cuda else None),
            "env": {}}


def _make_executor(kind: str, folder: Path, settings: dict, threads: int, tag: str):
    import submitit
    executor = submitit.AutoExecutor(folder=folder, cluster=kind)
    if kind == "local":  # no time limit unless asked (submitit's local default is 2 minutes)
        executor.update_parameters(timeout_min=settings["timeout_min"] or 365 * 24 * 60)
    else:
        executor.update_parameters(name=f"minirl-{tag}", timeout_min=settings["timeout_min"], cpus_per_task=threads,
                                   slurm_partition=settings["partition"],
                                   slurm_gpus_per_task=settings["gpus_per_task"],
                                   slurm_array_parallelism=settings["max_parallel"])
    return executor


def _submit_and_wait(a, kind: str, settings: dict, root: Path, todo: list[SuiteJob]) -> int:
    """Hand the runs in ``todo`` to submitit; unless ``--no-wait``, report each as it ends. The exit status."""
    folder = Path(a.jobs_dir) if a.jobs_dir else root / ".submitit"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not a.jobs_dir and not (folder / ".gitignore").exists():
            (folder / ".gitignore").write_text("# submitit's pickles and logs: not results\n*\n")
    except OSError as e:
        raise config.UserError(f"--jobs-dir {folder}: cannot write there ({e.strerror})") from None
    executor = _make_executor(kind, folder, settings, a.threads, root.name)
    waiting, running, failed = list(todo), [], []
    with _workers_import_minirl():
        if kind == "slurm":
            jobs = executor.submit_array(waiting)
            for spec, job in zip(waiting, jobs):
                _mark_queued(spec.out, job.job_id)
            running, waiting = list(zip(todo, jobs)), []
            limit = f", at most {settings['max_parallel']} at a time" if settings["max_parallel"] else ""
            print(f"submitted {len(jobs)} run(s) as SLURM job {jobs[0].job_id.split('_')[0]}{limit} "
                  f"(logs in {folder})", flush=True)
            if a.no_wait:
                print(f"not waiting: the results land in {root}; the same command again skips the runs that are "
                      f"queued, running or done, and prints the table")
                return 0
        else:
            print(f"{len(waiting)} run(s) for the local executor, at most {settings['max_parallel']} at a time "
                  f"(logs in {folder})", flush=True)
        poll = 0.5 if kind == "local" else 30.0
        try:
            while waiting or running:
                while waiting and len(running) < settings["max_parallel"]:
                    spec = waiting.pop(0)
                    running.append((spec, executor.submit(spec)))
                still = []
                for spec, job in running:
                    if not job.done():
                        still.append((spec, job))
                        continue
                    _report(spec, job, failed)
                    write_summary(root)
                running = still
                if running:
                    time.sleep(poll)
        except KeyboardInterrupt:
            if kind == "slurm":
                raise KeyboardInterrupt("stopped waiting; the SLURM jobs go on: the same command again skips the "
                                        "runs they hold and prints the table") from None
            raise KeyboardInterrupt("interrupted: each local run ends its step and saves checkpoint.pt; the same "
                                    "command resumes them") from None
    return _end(root, failed, len(todo))


def _report(spec: SuiteJob, job, failed: list) -> None:
    reason = _failure(job)
    if reason is not None:
        failed.append(spec.name)
        print(f"FAILED {spec.name}: {reason} (log: {job.paths.stderr})", flush=True)
        return
    outcome = job.result()
    if outcome["result"] is None:
        print(f"skip {outcome['out']} ({outcome['skipped']})", flush=True)
        return
    r = outcome["result"]
    score = "no evaluation" if r["score"] is None else f"score {r['score']:.1f}"
    wall = "wall time not known" if r["wall_time_s"] is None else f"{r['wall_time_s']} s"
    print(f"done {spec.name}: {score}, {wall}", flush=True)


def _end(root: Path, failed: list, submitted: int) -> int:
    if write_summary(root) is None:
        print(f"no run of this grid has finished yet in {root}")
    else:
        print(score_table(load_results(root)))
    if failed:
        print(f"{len(failed)} of {submitted} run(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", nargs="+", required=True, choices=sorted(runs.ALGORITHMS))
    p.add_argument("--datasets", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--scale", default=None, help="smoke | cpu | full (default: $MINIRL_SCALE or cpu)")
    p.add_argument("--steps", type=int, default=None, help="override the scale's steps")
    p.add_argument("--eval-every", type=int, default=None, help="steps between evaluations (default: the scale's)")
    p.add_argument("--eval-episodes", type=int, default=None,
                   help="episodes per evaluation (default: the scale's; OGBench's mazes are evaluated on 50)")
    p.add_argument("--capture", action=argparse.BooleanOptionalAction, default=None,
                   help="replay each training step as a CUDA graph (minirl train --capture; needs --device cuda); "
                        "default: on at --scale full on a CUDA device where the update allows it; --no-capture: eager")
    p.add_argument("--tag", default=None, help="results subdirectory (default: the scale's name)")
    p.add_argument("--root", default="results")
    p.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                   help="config fields for every run, parsed by their type (see python -m minirl train --help)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=devices.PRECISIONS, default=None,
                   help="auto (default): bf16 where the hardware computes it natively, float32 elsewhere; bf16 "
                        "(bfloat16 autocast in the updates); float32. The tag defaults to <scale>-<precision ran>, "
                        "e.g. cpu-bf16")
    p.add_argument("--amp", action="store_true", help="the same as --precision bf16")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (1: one run per core)")
    p.add_argument("--redo", action="store_true", help="delete and rerun runs that already have a result")
    p.add_argument("--batch-seeds", action=argparse.BooleanOptionalAction, default=None,
                   help="train the seeds of each algorithm and dataset together, as one batch (minirl.seeds; "
                        "--executor inline): each seed's files as its own run's; default: on at --scale full on a "
                        "CUDA device with --executor inline; --no-batch-seeds: one seed at a time")
    c = p.add_argument_group("executors", f"where the runs are made; local and slurm need submitit ({CLUSTER_EXTRA})")
    c.add_argument("--executor", choices=EXECUTORS, default="inline",
                   help="inline: one after the other in this process (default); local: submitit jobs on this "
                        "machine; slurm: one SLURM job array for the grid")
    c.add_argument("--max-parallel", type=int, default=None, metavar="N",
                   help="runs at a time (local: default this process's cores // --threads; slurm: the array's "
                        "limit, default submitit's 256)")
    c.add_argument("--timeout-min", type=int, default=None, metavar="MIN",
                   help=f"time limit of each run's job in minutes (slurm: default {SLURM_TIMEOUT_MIN}; local: none); "
                        "a run that reaches it saves a checkpoint and is requeued, up to 3 times")
    c.add_argument("--jobs-dir", default=None, help="submitit's pickles and logs (default: <root>/<tag>/.submitit)")
    c.add_argument("--no-wait", action="store_true", help="slurm: return once the job array is queued")
    c.add_argument("--slurm-partition", default=None, metavar="NAME")
    c.add_argument("--slurm-gpus-per-task", type=int, default=None, metavar="N",
                   help="GPUs per run (default: 1 with --device cuda, else none)")
    a = p.parse_args(argv)
    with cli.user_errors(p.prog):
        return _suite(a)


def default_batch_seeds(scale, device: str, executor: str, algos) -> bool:
    """Whether the grid's seeds train as one batch when ``--batch-seeds`` is not given: on the fast path
    (:func:`minirl.runs.fast_path`, the ``full`` scale on a CUDA device), in one process (``--executor inline``), and
    for algorithms whose update takes a seed axis; one seed at a time otherwise."""
    return (runs.fast_path(scale, device) and executor == "inline"
            and all(getattr(runs.agent_class(algo), "seed_axis", False) for algo in algos))


def _check_remote_device(device: str) -> str:
    """``device`` if it names a device minirl runs on: on a cluster, whether it exists is for the node to say."""
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        kind = None
    if kind not in ("cpu", "cuda", "mps"):
        devices.check_device(device)  # its one-line error
    return device


def _suite(a) -> int:
    """Check every setting of the grid before the first run, then run (or submit) what is missing."""
    scale = runs.get_scale(a.scale)
    precision = devices.requested_precision(a.precision, a.amp)
    if a.executor == "slurm":  # the runs' nodes, not this login node, have the GPUs
        device = _check_remote_device(a.device)
        if precision == "auto" and not a.tag:  # the default tag says whether bf16 was used
            raise config.UserError(f"--precision auto{' (the default)' if a.precision is None else ''} is decided by "
                                  "the machine that runs: with --executor slurm choose --precision float32 or bf16, "
                                  "or give --tag")
        resolved = precision  # auto (with a tag): each node decides, and result.json records what it chose
    else:
        device = devices.check_device(a.device)
        resolved = devices.resolve_precision(precision, device)
    config.at_least("--threads", a.threads, 1)
    for seed in a.seeds:
        config.at_least("--seeds", seed, 0)
    if a.steps is not None:
        config.at_least("--steps", a.steps, 1)
    if a.eval_every is not None:
        config.at_least("--eval-every", a.eval_every, 1)
    if a.eval_episodes is not None:
        config.at_least("--eval-episodes", a.eval_episodes, 1)
    if a.capture:
        devices.check_capture(a.device)
    for dataset in a.datasets:
        runs.check_dataset(dataset)
    overrides = {algo: runs.parse_overrides(algo, a.set) for algo in a.algos}
    for algo in a.algos:
        runs.make_config(algo, overrides[algo])
    if a.batch_seeds and a.executor != "inline":  # before the executor's own checks: the conflict is the flags'
        raise config.UserError(f"--batch-seeds makes a batch of seeds in one process: use it with --executor "
                               f"inline, not {a.executor}")
    if a.batch_seeds is None:  # the full scale on a GPU: each algorithm's seeds on each dataset as one batch
        a.batch_seeds = default_batch_seeds(scale, a.device, a.executor, a.algos)
        if a.batch_seeds:
            print(f"the {scale.name} scale on {a.device}: the seeds of each algorithm and dataset train as one batch "
                  f"(--no-batch-seeds: one at a time)")
    settings = _check_executor(a, device)
    torch.set_num_threads(a.threads)
    root = Path(a.root) / (a.tag or default_tag(scale.name, resolved))
    grid = [(dataset, algo, seed) for dataset in a.datasets for algo in a.algos for seed in a.seeds]
    if a.batch_seeds:
        for algo in a.algos:
            seeds.check_seed_axis(runs.agent_class(algo))
        for dataset in a.datasets:
            for algo in a.algos:
                if a.redo:
                    for seed in a.seeds:
                        shutil.rmtree(run_dir(root, algo, dataset, seed, overrides[algo]), ignore_errors=True)
                run_batch(root, algo, dataset, a.seeds, scale.name, overrides[algo], a.steps, a.device, precision,
                          a.threads, a.eval_every, eval_episodes=a.eval_episodes, capture=a.capture)
                write_summary(root)
        return _end(root, [], len(grid))
    if a.executor == "inline":
        for dataset, algo, seed in grid:
            out = run_dir(root, algo, dataset, seed, overrides[algo])
            if a.redo and out.exists():
                shutil.rmtree(out)
            run_one(root, algo, dataset, seed, scale.name, overrides[algo], a.steps, a.device, precision,
                    a.threads, a.eval_every, eval_episodes=a.eval_episodes, capture=a.capture)
            write_summary(root)
        return _end(root, [], len(grid))
    todo = []
    for dataset, algo, seed in grid:
        out = run_dir(root, algo, dataset, seed, overrides[algo])
        if a.redo and out.exists():
            shutil.rmtree(out)
        reason = skip_reason(out)
        if reason:
            print(f"skip {out} ({reason})")
            continue
        todo.append(SuiteJob(root, algo, dataset, seed, scale.name, overrides[algo], a.steps, a.device, precision,
                             a.threads, a.eval_every, " ".join(sys.argv), settings["env"], a.eval_episodes,
                             capture=a.capture))
    if not todo:
        return _end(root, [], 0)
    return _submit_and_wait(a, a.executor, settings, root, todo)


if __name__ == "__main__":
    sys.exit(main())
