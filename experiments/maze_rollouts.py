"""One greedy rollout of each method over the maze, drawn over the dataset's trajectories: the stitching chapter's
maze figure (book/stitching.md, `fig-stitching-rollouts`; drawn by scripts/figures/stitching.py).

    python experiments/maze_rollouts.py                       # stitch task 1 and navigate task 1, seed 0, 50k grid
    python experiments/maze_rollouts.py --root results/stitching-budget --seed 1 \
        --datasets pointmaze-medium-stitch-singletask-task2 \
        --run BC=bc --run 10%BC=10%bc \
        --run "IQL, DDPG+BC α 0.0015=iql-actor=deterministic-alpha=0.0015-extraction=ddpg_bc-layer_norm=True"

Without `--run`, it takes for each method (BC, 10%BC, IQL, CQL, BCQ) the agent that the 50,000-step stitching grid
trained with this seed on the dataset: `results/stitching/<label>/<dataset>/s<seed>/agent.pt` (a finished run keeps
it since 2026-11-27; it is git-ignored), or else the same run made again under `results/stitching-rollouts/`
(experiments/stitching.sh makes those for the runs that finished before agents were kept). `--root DIR` looks in DIR
only, and each `--run NAME=LABEL` names one run to draw: NAME is its legend entry, LABEL its folder under the root
(`<root>/<LABEL>/<dataset>/s<seed>`); a LABEL may itself hold `=`, the first `=` splits the two.

It runs one deterministic episode of the task (evaluation seed 0, as the first episode of every evaluation) and keeps
the point's positions. It writes `results/stitching-rollouts/<dataset>.json` (committed): each drawn run's path
(every 5th position and the last), whether it reached the goal, its return, its algorithm, the run it came from, its
steps and its final success rate over 50 episodes; a sample of the data's trajectories (the first 150, every 5th
position); the walls, the start and the goal. A run without a trained agent is listed under "missing". One rollout
shows where a policy goes, not how often it succeeds: the success rates with their intervals are the grid's.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from minirl import maze  # noqa: E402

OUT = REPO / "results" / "stitching-rollouts"
SOURCES = (REPO / "results" / "stitching", OUT)
METHODS = ("bc", "10%bc", "iql", "cql", "bcq")
DATASETS = ("pointmaze-medium-stitch-singletask-task1", "pointmaze-medium-navigate-singletask-task1")
EVERY = 5          # keep every 5th position of a path (a step moves the point by at most 0.1 of a 4-unit cell)
N_DATA = 150       # the data trajectories drawn


def agent_dir(label: str, dataset: str, seed: int, roots=SOURCES) -> Path | None:
    for root in roots:
        run = root / label / dataset / f"s{seed}"
        if (run / "agent.pt").is_file() and (run / "result.json").is_file():
            return run
    return None


def thin(path: np.ndarray) -> list:
    keep = np.r_[np.arange(0, len(path), EVERY), len(path) - 1]
    return np.round(path[np.unique(keep), :2].astype(float), 3).tolist()


def parse_runs(pairs: list[str]) -> dict[str, str]:
    """``["NAME=LABEL", ...]`` -> {NAME: LABEL}, split at the first ``=``; a one-line error for a bad or repeated one."""
    out = {}
    for pair in pairs:
        name, sep, label = pair.partition("=")
        if not sep or not name.strip() or not label.strip():
            raise ValueError(f"--run: {pair!r} is not NAME=LABEL (e.g. BC=bc)")
        if name in out:
            raise ValueError(f"--run: the name {name!r} is given twice")
        out[name] = label
    return out


def rollouts(dataset: str, seed: int, runs_to_draw: dict[str, str] | None = None, roots=SOURCES) -> dict:
    """Roll out each run in ``runs_to_draw`` ({legend name: run label}; default: each method of METHODS under its
    own label) found under ``roots``."""
    from minirl import runs
    from minirl.datasets import data_dir
    from minirl.evaluation import run_episodes
    m = maze.parse(dataset)
    lay = maze.layout(m.maze)
    start, goal = lay.tasks[m.task - 1]
    traj = maze.load_trajectories(m.maze, m.kind, N_DATA, data_dir())
    out = {"dataset": dataset, "seed": seed, "walls": lay.walls.tolist(), "unit": lay.unit,
           "offset": list(lay.offset), "start": lay.center(start).tolist(), "goal": lay.goal_xy(m.task).tolist(),
           "goal_tol": lay.goal_tol, "data": [thin(t) for t in traj["observations"]], "methods": {}, "missing": []}
    for name, label in (runs_to_draw or {m: m for m in METHODS}).items():
        run = agent_dir(label, dataset, seed, roots)
        if run is None:
            out["missing"].append(name)
            continue
        loaded = runs.load_agent(run)
        ep = run_episodes(loaded, loaded.env_id, 1, seed=0, keep_states=True)
        result = json.loads((run / "result.json").read_text())
        out["methods"][name] = {"path": thin(ep["states"][0]), "success": bool(ep["successes"][0]),
                                "return": float(ep["returns"][0]), "run": str(run.relative_to(REPO)),
                                "algo": result["algo"],
                                "steps": loaded.step, "success_rate": result.get("success_rate")}
        print(f"{dataset} {name}: {'reached the goal' if ep['successes'][0] else 'did not reach the goal'} "
              f"({len(ep['states'][0])} steps; {run.relative_to(REPO)})")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS))
    p.add_argument("--seed", type=int, default=0, help="the training seed whose agents are rolled out")
    p.add_argument("--root", type=Path, help="look for the runs under this folder only (default: the 50k grid's)")
    p.add_argument("--run", action="append", default=[], metavar="NAME=LABEL",
                   help="a run to draw: its legend name and its folder under the root (repeat; default: each method)")
    a = p.parse_args(argv)
    try:
        chosen = parse_runs(a.run) or None
    except ValueError as e:
        p.error(str(e))
    roots = SOURCES
    if a.root is not None:
        root = a.root if a.root.is_absolute() else REPO / a.root
        if not root.is_dir():
            p.error(f"--root: {a.root} is not a folder")
        roots = (root,)
    for name in a.datasets:
        if not maze.is_maze_name(name) or maze.parse(name, kind_required=False).task is None:
            p.error(f"--datasets: {name!r} is not a single-task maze dataset (expected e.g. {DATASETS[0]})")
    OUT.mkdir(parents=True, exist_ok=True)
    for name in a.datasets:
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(rollouts(name, a.seed, chosen, roots)) + "\n")
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
