"""Are minirl's PointMaze datasets OGBench's, and do they force stitching? Timing, statistics, coverage, references.

``minirl.maze`` re-makes OGBench's ``pointmaze-*-stitch`` and ``-navigate`` datasets by OGBench's recipe (its
published files cannot be downloaded here). This script makes the trajectories at full size (or reads them from the
cache, ``$MINIRL_DATA``), and prints, per maze and type:

1. the generation time on one core and the machine's CPU, and the trajectories' SHA-256 (``maze.CHECKSUMS``);
2. the statistics of the data beside those of OGBench's published file: position mean and standard deviation, action
   mean and standard deviation, over every stored row as OGBench's compact loader gives them (each trajectory's
   ``T + 1`` observations). The published numbers are those a third-party loader of the files printed in its
   docstring (class ``OGMaze2dOfflineRLDataset``, a public GitHub repository found by code search; its first two
   observation columns are the position). The published actions include each trajectory's last row, whose action
   OGBench's loader drops; ours are the ``T`` actions of the transitions. A different random draw moves a mean by
   about 0.1 (stitch) to 0.3 (navigate, fewer and longer trajectories);
3. the coverage fact behind stitching, per singletask task: the start-to-goal distance in cells, how many
   trajectories reach the goal, the farthest start (and the farthest state before first reaching the goal) among
   them, and how many go from the task's start cell to its goal (``maze.coverage``);
4. with ``--oracle``: the noise-free waypoint controller's success rate and mean return over the 50 evaluation
   episodes of seed 0 in OGBench's singletask environment (``minirl.evaluation.success_rate``), the ``ORACLE_RETURNS`` that
   normalised scores use as their 100.

Run from the repository root, one core::

    OMP_NUM_THREADS=1 taskset -c 1 python experiments/maze_data.py                      # medium stitch + navigate
    OMP_NUM_THREADS=1 taskset -c 1 python experiments/maze_data.py --mazes medium large --oracle

``--fresh`` generates the trajectories again even when cached (to time them) and checks them against the cache.
Book section: the stitching benchmark (issue 41's comparison chapter stratum); no results folder: it prints its table.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from minirl import datasets, maze
from minirl.evaluation import success_rate

# Position (x, y) and action statistics of OGBench's published training files, compact form (see the docstring).
PUBLISHED = {
    ("medium", "navigate"): {"rows": 1_001_000, "obs_mean": (10.233182, 9.5702305), "obs_std": (5.8341284, 5.1942716),
                             "act_mean": (0.00319824, -0.00255336), "act_std": (0.705255, 0.7001879)},
    ("medium", "stitch"): {"rows": 1_005_000, "obs_mean": (9.5560627, 10.342426), "obs_std": (5.79129, 5.055657),
                           "act_mean": (-0.01176269, 0.00561046), "act_std": (0.7088544, 0.7083117)},
    ("large", "navigate"): {"rows": 1_001_000, "obs_mean": (16.903608, 11.005926), "obs_std": (10.277822, 7.008117),
                            "act_mean": (-0.01136365, -0.00160795), "act_std": (0.70731187, 0.6887115)},
    ("large", "stitch"): {"rows": 1_005_000, "obs_mean": (18.22728, 10.928875), "obs_std": (11.593134, 7.2386537),
                          "act_mean": (0.00297679, -0.02221723), "act_std": (0.70413345, 0.70931256)},
}


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except Exception:  # noqa: BLE001 - only a label
        return platform.processor() or "unknown CPU"


def pair(v) -> str:
    return f"({v[0]:8.4f}, {v[1]:8.4f})"


def statistics(traj: dict) -> dict:
    obs = traj["observations"].reshape(-1, 2).astype(np.float64)
    act = traj["actions"].reshape(-1, 2).astype(np.float64)
    return {"rows": len(obs), "obs_mean": obs.mean(0), "obs_std": obs.std(0),
            "act_mean": act.mean(0), "act_std": act.std(0)}


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--mazes", nargs="+", default=["medium"], choices=maze.MAZES)
    p.add_argument("--kinds", nargs="+", default=list(maze.KINDS), choices=maze.KINDS)
    p.add_argument("--fresh", action="store_true", help="generate again even when cached (to time it)")
    p.add_argument("--oracle", action="store_true", help="measure the oracle's reference returns")
    a = p.parse_args()
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass
    cache = datasets.data_dir()
    print(f"CPU: {cpu_model()}; one thread (OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
          f"affinity {sorted(os.sched_getaffinity(0))}); cache {cache}")
    for m in a.mazes:
        for kind in a.kinds:
            name = f"pointmaze-{m}-{kind}"
            path = cache / f"{name}-trajectories-e{maze.TRAJECTORIES[kind]}-{maze.recipe_key(m, kind)}.npz"
            cached = path.exists()
            t0 = time.perf_counter()
            if a.fresh or not cached:
                traj = maze.trajectories(m, kind, progress=True) if cached else \
                    maze.load_trajectories(m, kind, cache_dir=cache, progress=True)
                made = f"generated in {time.perf_counter() - t0:.0f} s"
            else:
                traj = maze.load_trajectories(m, kind, cache_dir=cache)
                made = "read from the cache (--fresh to time the generation)"
            digest = maze.fingerprint(traj)
            if a.fresh and cached:
                same = digest == maze.fingerprint(maze.load_trajectories(m, kind, cache_dir=cache))
                made += f"; {'identical to' if same else 'DIFFERENT from'} the cached trajectories"
            e, t1, _ = traj["observations"].shape
            print(f"\n== {name}: {e:,} trajectories x {t1 - 1} transitions = {e * (t1 - 1):,} transitions, {made}")
            recorded = maze.CHECKSUMS.get((m, kind))
            print(f"   trajectories SHA-256 {digest}"
                  + ("" if recorded is None else f" ({'matches' if recorded == digest else 'DIFFERS from'} "
                                                  "maze.CHECKSUMS)"))
            ours, theirs = statistics(traj), PUBLISHED[(m, kind)]
            print(f"   {'statistic':<18} {'minirl':>20} {'OGBench file':>20}")
            print(f"   {'rows':<18} {ours['rows']:>20,} {theirs['rows']:>20,}")
            for key in ("obs_mean", "obs_std", "act_mean", "act_std"):
                print(f"   {key:<18} {pair(ours[key]):>20} {pair(theirs[key]):>20}")
            print(f"   {'task':<5} {'start':>8} {'goal':>8} {'cells':>6} {'reaching':>9} {'max start':>10} "
                  f"{'max approach':>13} {'start->goal':>12}")
            for row in maze.coverage(traj):
                fmt = (lambda v: "-" if v is None else str(v))
                print(f"   {row['task']:<5} {row['start']!s:>8} {row['goal']!s:>8} {row['task_cells']:>6} "
                      f"{row['reaching']:>9} {fmt(row['max_start_cells']):>10} {fmt(row['max_approach_cells']):>13} "
                      f"{row['start_to_goal']:>12}")
        if a.oracle:
            print(f"\n== oracle (noise-free waypoint controller) in pointmaze-{m}-singletask-task<k>-v0, "
                  f"{maze.EVAL_EPISODES} episodes, seed 0")
            for k in maze.TASK_IDS:
                task = f"pointmaze-{m}-singletask-task{k}"
                r = success_rate(maze.oracle(task), task, maze.EVAL_EPISODES, seed=0)
                print(f"   task{k}: success {r['success_rate']:.2f}, mean return {r['returns'].mean():.2f}, "
                      f"steps {r['lengths'].min()}-{r['lengths'].max()}")


if __name__ == "__main__":
    main()
