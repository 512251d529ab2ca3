"""Run a grid of offline-RL trainings (algorithms x datasets x seeds) and record their results.

    python benchmarks/run_suite.py --algos bc iql --datasets pendulum-medium hopper-medium-replay \\
        --seeds 0 1 2 --scale cpu
    python benchmarks/run_suite.py --algos iql --datasets pendulum-medium-replay --seeds 0 1 2 --scale cpu \\
        --tag cpu-iql-tau --set expectile=0.9

Each run goes to ``<root>/<tag>/<label>/<dataset>/s<seed>/`` (the tag defaults to the scale's name, the label is the
algorithm followed by any ``--set`` overrides, e.g. ``iql-expectile=0.9``) and holds the training logs
(``eval.csv``, ``log.jsonl``, ``config.json``) and ``result.json``: the final normalised score, wall time,
updates/s, and the hardware and software that made it.  Runs whose ``result.json`` exists are skipped, and an
interrupted run resumes from its checkpoint, so the same command can be repeated until the grid is complete.
After every run, ``<root>/<tag>/summary.csv`` is rewritten from all the ``result.json`` files under the tag, and the
script prints the table of mean and standard deviation over seeds.

The book's notebooks load these files with :func:`minirl.plots.load_results`; nothing in a chapter's comparison is
typed by hand.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import shutil
import sys
from pathlib import Path

import torch

from minirl import train
from minirl.plots import load_results, score_table


def hardware() -> dict:
    """What machine and software a run used, written into every ``result.json``."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    info = {"cpu": cpu, "cpu_count": os.cpu_count(), "machine": platform.machine(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "python": platform.python_version()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def run_label(algo: str, overrides: dict) -> str:
    """``iql`` or, with overrides, ``iql-expectile=0.9-beta=10.0`` (the directory name of a configuration)."""
    def text(v):
        return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
    return "-".join([algo, *(f"{k}={text(overrides[k])}" for k in sorted(overrides))])


def run_one(root: Path, algo: str, dataset: str, seed: int, scale: str, overrides: dict, steps: int | None,
            device: str, precision: str = "float32", threads: int | None = None,
            eval_every: int | None = None) -> dict | None:
    out = root / run_label(algo, overrides) / dataset / f"s{seed}"
    if (out / "result.json").exists():
        print(f"skip {out} (done)")
        return None
    lock = out / "running.pid"  # several suites may share a grid: each run is made by one process only
    if lock.exists() and _alive(int(lock.read_text() or 0)):
        print(f"skip {out} (being made by process {lock.read_text()})")
        return None
    out.mkdir(parents=True, exist_ok=True)
    lock.write_text(str(os.getpid()))
    try:
        return _train_and_record(out, algo, dataset, seed, scale, overrides, steps, device, precision, threads,
                                 eval_every)
    finally:
        lock.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return pid > 0


def _train_and_record(out: Path, algo: str, dataset: str, seed: int, scale: str, overrides: dict,
                      steps: int | None, device: str, precision: str = "float32", threads: int | None = None,
                      eval_every: int | None = None) -> dict:
    sc = train.get_scale(scale)
    n_steps = steps if steps is not None else sc.steps_for(algo)
    interrupted = (out / "checkpoint.pt").exists()  # resumed; anything else left in out is a run that saved nothing
    history = train.run(algo, dataset, scale=scale, steps=n_steps, seed=seed, device=device, out=out,
                        overrides=overrides, checkpoint_every=max(n_steps // 4, 1), resume=interrupted,
                        overwrite=not interrupted, precision=precision, threads=threads, eval_every=eval_every)
    last_train = history["train"][-1] if history["train"] else {}
    last_eval = history["eval"][-1] if history["eval"] else {}
    resolved = history["config"]["precision"]
    result = {"algo": algo, "label": run_label(algo, overrides), "overrides": overrides, "dataset": dataset,
              "seed": seed, "scale": sc.name, "steps": n_steps, "precision": resolved, "amp": resolved == "bf16",
              "score": last_eval.get("score_mean"), "return": last_eval.get("return_mean"),
              "q_start": last_eval.get("q_start"), "mc_discounted": last_eval.get("mc_discounted"),
              "wall_time_s": round(history["wall_time"], 1),
              "updates_per_s": last_train.get("updates_per_s"),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "hardware": hardware(), "command": " ".join(sys.argv)}
    (out / "result.json").write_text(json.dumps(result, indent=1))
    for name in ("checkpoint.pt", "agent.pt"):  # big and reproducible: not part of the committed results
        (out / name).unlink(missing_ok=True)
    return result


def write_summary(root: Path) -> Path | None:
    """``root/summary.csv`` from every finished run under ``root`` (None while there is none)."""
    if not any(root.glob("*/*/s*/result.json")):
        return None
    runs = load_results(root)
    path = root / "summary.csv"
    keys = ["label", "algo", "dataset", "seed", "scale", "steps", "score", "return", "wall_time_s",
            "updates_per_s", "date"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in sorted(runs, key=lambda r: (r["label"], r["dataset"], r["seed"])):
            w.writerow(r)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", nargs="+", required=True, choices=sorted(train.ALGORITHMS))
    p.add_argument("--datasets", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--scale", default=None, help="smoke | cpu | full (default: $MINIRL_SCALE or cpu)")
    p.add_argument("--steps", type=int, default=None, help="override the scale's steps")
    p.add_argument("--eval-every", type=int, default=None, help="steps between evaluations (default: the scale's)")
    p.add_argument("--tag", default=None, help="results subdirectory (default: the scale's name)")
    p.add_argument("--root", default="results")
    p.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                   help="config fields for every run, parsed by their type (see python -m minirl train --help)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=train.PRECISIONS, default=None,
                   help="float32 (default), bf16 (bfloat16 autocast in the updates) or auto (bf16 where the hardware "
                        "computes it natively); with bf16 the tag defaults to <scale>-amp")
    p.add_argument("--amp", action="store_true", help="the same as --precision bf16")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (1: one run per core)")
    p.add_argument("--redo", action="store_true", help="delete and rerun runs that already have a result")
    a = p.parse_args(argv)
    with train.user_errors(p.prog):
        return _suite(a)


def _suite(a) -> int:
    """Check every setting of the grid before the first run, then run what is missing."""
    scale = train.get_scale(a.scale)
    precision = train.requested_precision(a.precision, a.amp)
    resolved = train.resolve_precision(precision, train.check_device(a.device))
    train.at_least("--threads", a.threads, 1)
    for seed in a.seeds:
        train.at_least("--seeds", seed, 0)
    if a.steps is not None:
        train.at_least("--steps", a.steps, 1)
    if a.eval_every is not None:
        train.at_least("--eval-every", a.eval_every, 1)
    for dataset in a.datasets:
        train.check_dataset(dataset)
    overrides = {algo: train.parse_overrides(algo, a.set) for algo in a.algos}
    for algo in a.algos:
        train.make_config(algo, overrides[algo])
    torch.set_num_threads(a.threads)
    root = Path(a.root) / (a.tag or scale.name + ("-amp" if resolved == "bf16" else ""))
    for dataset in a.datasets:
        for algo in a.algos:
            for seed in a.seeds:
                out = root / run_label(algo, overrides[algo]) / dataset / f"s{seed}"
                if a.redo and out.exists():
                    shutil.rmtree(out)
                run_one(root, algo, dataset, seed, scale.name, overrides[algo], a.steps, a.device, precision,
                        a.threads, a.eval_every)
                write_summary(root)
    if write_summary(root) is None:
        print(f"no run of this grid has finished yet in {root}")
    else:
        print(score_table(load_results(root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
