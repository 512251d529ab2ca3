"""One greedy rollout of each method over the maze, drawn over the dataset's trajectories: the stitching chapter's
maze figure (book/stitching.md, `fig-stitching-rollouts`; drawn by scripts/figures/stitching.py).

    python experiments/maze_rollouts.py                       # stitch task 1 and navigate task 1, seed 0
    python experiments/maze_rollouts.py --datasets pointmaze-medium-stitch-singletask-task2 --seed 1

For each method (BC, 10%BC, IQL, CQL, BCQ) it takes the agent that the stitching grid trained with this seed on the
dataset: `results/stitching/<label>/<dataset>/s<seed>/agent.pt` (a finished run keeps it since 2026-11-27; it is
git-ignored), or else the same run made again under `results/stitching-rollouts/` (experiments/stitching.sh makes
those for the runs that finished before agents were kept). It runs one deterministic episode of the task (evaluation
seed 0, as the first episode of every evaluation) and keeps the point's positions. It writes
`results/stitching-rollouts/<dataset>.json` (committed): each method's path (every 5th position and the last), whether
it reached the goal, its return, the run it came from and its final success rate over 50 episodes; a sample of the
data's trajectories (the first 150, every 5th position); the walls, the start and the goal. A method without a
trained agent is listed under "missing". One rollout shows where a policy goes, not how often it succeeds: the
success rates with their intervals are the grid's.
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


def agent_dir(label: str, dataset: str, seed: int) -> Path | None:
    for root in SOURCES:
        run = root / label / dataset / f"s{seed}"
        if (run / "agent.pt").is_file() and (run / "result.json").is_file():
            return run
    return None


def thin(path: np.ndarray) -> list:
    keep = np.r_[np.arange(0, len(path), EVERY), len(path) - 1]
    return np.round(path[np.unique(keep), :2].astype(float), 3).tolist()


def rollouts(dataset: str, seed: int) -> dict:
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
    for label in METHODS:
        run = agent_dir(label, dataset, seed)
        if run is None:
            out["missing"].append(label)
            continue
        loaded = runs.load_agent(run)
        ep = run_episodes(loaded, loaded.env_id, 1, seed=0, keep_states=True)
        result = json.loads((run / "result.json").read_text())
        out["methods"][label] = {"path": thin(ep["states"][0]), "success": bool(ep["successes"][0]),
                                 "return": float(ep["returns"][0]), "run": str(run.relative_to(REPO)),
                                 "steps": loaded.step, "success_rate": result.get("success_rate")}
        print(f"{dataset} {label}: {'reached the goal' if ep['successes'][0] else 'did not reach the goal'} "
              f"({len(ep['states'][0])} steps; {run.relative_to(REPO)})")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS))
    p.add_argument("--seed", type=int, default=0, help="the training seed whose agents are rolled out")
    a = p.parse_args(argv)
    for name in a.datasets:
        if not maze.is_maze_name(name) or maze.parse(name, kind_required=False).task is None:
            p.error(f"--datasets: {name!r} is not a single-task maze dataset (expected e.g. {DATASETS[0]})")
    OUT.mkdir(parents=True, exist_ok=True)
    for name in a.datasets:
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(rollouts(name, a.seed)) + "\n")
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
