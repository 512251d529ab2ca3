"""Is our hopper-medium-replay too poor a buffer for offline RL to beat 10%BC? Replay buffers of several lengths.

Claim (b) of the results of record (IQL, CQL, BCQ above BC and 10%BC on mixed data) fails on our
``hopper-medium-replay``: at 50,000 and at 1M steps IQL scores about what 10%BC scores (about 31), far below the
published 94.7, while cloning the best tenth of D4RL's buffer already scores 75.9. The explanation the chapters test
here is the data: our buffer holds 745 episodes (D4RL's ``hopper-medium-replay-v2`` 2,041, per the TFDS catalogue),
its best tenth scores 41.1 and its best episode 83.9. This script retrains SAC with the shipped recipe (``minirl/assets/hopper/sac_config.json``, seed 1) for
longer, cuts its replay buffer at several lengths (``--prefixes``), prints each buffer's episodes beside the shipped
one, writes each as a local Minari dataset (``minari:minirl/hopper/replay-<k>k-v0``, scored with the Hopper task's
references), and trains ``--algos`` on each at the ``cpu`` scale with ``experiments/run_suite.py``. If IQL clears 10%BC
on a longer buffer whose best tenth is as good as D4RL's, the data explains our replay tier; if it does not, it does
not. Every phase resumes: SAC from its checkpoints, the suite from its runs, so the command can be stopped and run
again::

    OMP_NUM_THREADS=1 taskset -c 1 python experiments/replay_size.py --sac-steps 200000 --data-only   # SAC, buffers
    OMP_NUM_THREADS=1 taskset -c 1 python experiments/replay_size.py --sac-steps 200000 \\
        --prefixes 115000 150000 200000                                                     # and the runs

The SAC run and the Minari datasets live outside git (``$MINIRL_DATA/sac/hopper-s1``, ``$MINARI_DATASETS_PATH``);
the runs' results go to ``results/replay-size`` (with ``buffers.json``: each buffer's episodes and both SAC runs'
evaluations). ``results/replay-size-200k-steps`` is the same script with longer runs on one buffer::

    python experiments/replay_size.py --sac-steps 200000 --prefixes 150000 --algos bc 10%bc iql --steps 200000 \\
        --tag replay-size-200k-steps

(the runs' ``result.json`` record the suite's command as it was run, when both scripts were in ``benchmarks/``).

Book section: book/iql.md, "Results of record", the paragraph "Is it the data? Buffers of a second SAC run";
notebook 4 (``notebooks/04_iql.ipynb``), "Is it the data? Longer replay buffers of a second SAC run".
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np

from minirl import behavior, datasets, plots
from minirl.data import OfflineDataset
from minirl.sac import SACConfig
from minirl.utils import make_env

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "minirl" / "assets" / "hopper" / "sac_config.json"
SHIPPED = "hopper-medium-replay"


def minari_id(prefix: int) -> str:
    """The Minari id of the buffer's first ``prefix`` transitions, e.g. ``minirl/hopper/replay-150k-v0`` (minirl's
    dataset name: ``minari:`` and the id)."""
    k = f"{prefix // 1000}k" if prefix % 1000 == 0 else str(prefix)
    return f"minirl/hopper/replay-{k}-v0"


def run_sac(out: Path, steps: int) -> list[dict]:
    """The shipped Hopper SAC recipe (every setting of ``sac_config.json``), trained or resumed in ``out``."""
    recipe = json.loads(CONFIG.read_text())
    cfg = SACConfig(**{f.name: recipe[f.name] for f in fields(SACConfig)} | {"hidden": tuple(recipe["hidden"])})
    return behavior.train_sac(recipe["env_id"], steps, out, seed=recipe["seed"], config=cfg,
                              snapshot_every=recipe["snapshot_every"], eval_every=recipe["eval_every"],
                              eval_episodes=recipe["eval_episodes"], precision=recipe["precision"],
                              stop_return=recipe["stop_return"], stop_after=recipe["stop_after"])


def export(out: Path, prefix: int) -> str:
    """The first ``prefix`` transitions of the run in ``out`` as a local Minari dataset (made once); its name."""
    def build():
        env = make_env(datasets.get_task("hopper").env_id)
        ds = OfflineDataset(**behavior.replay_dataset(out, prefix), action_low=env.action_space.low,
                            action_high=env.action_space.high)
        env.close()
        return ds, f"steps 0 to {prefix} of a SAC run of minirl's Hopper recipe (seed 1), in order"

    return datasets.to_local_minari(minari_id(prefix), "hopper", prefix, build)


def same_as_shipped(out: Path, n: int) -> bool:
    """Whether this run's first ``n`` transitions are the shipped buffer (the same run again, bit for bit)."""
    shipped = datasets.load_dataset(SHIPPED, progress=False)
    ours = behavior.replay_dataset(out, n)
    return all(np.array_equal(ours[k], getattr(shipped, k)) for k in ours)


def write_buffers(path: Path, out: Path, history: list[dict], same: bool | None, names: list[str]) -> Path:
    """What the notebooks read without the SAC run or the Minari datasets (both outside git): each buffer's episodes
    (:func:`minirl.datasets.dataset_info`) and the SAC run's evaluations, beside the shipped run's."""
    from run_suite import hardware
    shipped = [json.loads(line) for line in (CONFIG.parent / "sac_history.jsonl").read_text().splitlines() if line]
    record = {"sac_run": {"config": json.loads((out / "config.json").read_text()), "first_buffer_is_shipped": same,
                          "history": [{k: h[k] for k in ("step", "return_mean", "return_std")} for h in history]},
              "shipped_run": {"history": [{k: h[k] for k in ("step", "return_mean", "return_std")} for h in shipped]},
              "buffers": [datasets.dataset_info(n, progress=False) for n in names],
              "written_on": hardware()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--sac-dir", type=Path, default=None, help="the SAC run (default: $MINIRL_DATA/sac/hopper-s1)")
    p.add_argument("--sac-steps", type=int, required=True, help="environment steps of the SAC run")
    p.add_argument("--prefixes", type=int, nargs="+", default=None,
                   help="buffer lengths to make datasets of (default: 115000 and every 50,000 up to --sac-steps)")
    p.add_argument("--data-only", action="store_true", help="stop after SAC and the datasets (no offline runs)")
    p.add_argument("--algos", nargs="+", default=["bc", "10%bc", "iql"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--root", default="results")
    p.add_argument("--tag", default="replay-size")
    p.add_argument("--scale", default="cpu", help="the runs' scale (smoke: a quick check of the whole path)")
    p.add_argument("--steps", type=int, default=None, help="override the scale's gradient steps")
    a = p.parse_args(argv)
    prefixes = a.prefixes or [115_000] + list(range(150_000, a.sac_steps + 1, 50_000))
    bad = [n for n in prefixes if not 1 <= n <= a.sac_steps]
    if bad:
        p.error(f"--prefixes: each must be between 1 and --sac-steps ({a.sac_steps}), got {bad}")
    out = a.sac_dir or datasets.data_dir() / "sac" / "hopper-s1"
    history = run_sac(out, a.sac_steps)
    last = history[-1]
    print(f"SAC ({out}): {a.sac_steps:,} steps; evaluation return {last['return_mean']:.1f} at step {last['step']:,}")
    shipped = datasets.full_size(SHIPPED)
    same = same_as_shipped(out, shipped) if a.sac_steps >= shipped else None
    if same is not None:
        print(f"its first {shipped:,} transitions {'are' if same else 'are not'} the shipped {SHIPPED} buffer")
    names = [export(out, n) for n in prefixes]
    print(datasets.episode_summary([SHIPPED] + names))
    record = write_buffers(Path(a.root) / a.tag / "buffers.json", out, history, same, [SHIPPED] + names)
    print(f"buffers and the SAC run's evaluations written to {record}")
    if a.data_only:
        return 0
    cmd = [sys.executable, str(REPO / "experiments" / "run_suite.py"), "--scale", a.scale, "--precision", "auto",
           "--threads", "1", "--root", a.root, "--tag", a.tag, "--algos", *a.algos, "--datasets", *names,
           "--seeds", *map(str, a.seeds)] + (["--steps", str(a.steps)] if a.steps else [])
    done = subprocess.run(cmd, cwd=REPO)
    if done.returncode:
        return done.returncode
    runs = plots.load_results(Path(a.root) / a.tag)
    labels = [x for x in a.algos if x not in ("bc", "10%bc")]
    print(plots.baseline_table(runs, labels, [b for b in ("bc", "10%bc") if b in a.algos], names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
