"""What BC and 10%BC copy on a maze: the data's actions cell by cell along a task's shortest path.

    python experiments/maze_imitation.py                          # navigate task 1 and stitch task 1
    python experiments/maze_imitation.py DATASET [DATASET ...] [--out FILE]

BC fits the mean of the data's actions at each state; 10%BC the same on the best tenth of the generator's
trajectories by return (`maze.best_trajectories`). On a maze neither sees the goal, so at a cell of the path their
policy is only as good as the data's actions there agree on the way to the goal. For each cell of the shortest path
from the task's start to its goal, on all the data and on the best tenth, this measures: the number of transitions
in the cell, the length of their mean action (the data's actions have length about 1, so a short mean means they
disagree), the cosine of that mean with the direction to the path's next cell, and the share of the actions within
45 degrees of that direction. Also each dataset's share of steps at the goal (reward 0). Writes
results/stitching-diagnostics/imitation.json; serves book/lab/stitching.md (why imitation fails on the navigate
control too).
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

OUT = REPO / "results" / "stitching-diagnostics" / "imitation.json"
DEFAULT = ["pointmaze-medium-navigate-singletask-task1", "pointmaze-medium-stitch-singletask-task1"]
COS_45 = float(np.cos(np.pi / 4))


def path_cells(ds, lay, route):
    """For each cell of ``route`` but the goal: ``(cell, indices of ds's transitions in it, unit vector of the way to
    the next cell)``. Shared with experiments/maze_action_values.py."""
    cells = np.asarray(lay.cell(ds.observations[:, :2]))
    for here, there in zip(route[:-1], route[1:]):
        way = lay.center(np.array([there]))[0] - lay.center(np.array([here]))[0]
        yield here, np.flatnonzero((cells[:, 0] == here[0]) & (cells[:, 1] == here[1])), way / np.linalg.norm(way)


def cosine(actions: np.ndarray, way: np.ndarray) -> np.ndarray:
    """Each action's cosine with the unit vector ``way``."""
    return (actions @ way) / np.maximum(np.linalg.norm(actions, axis=1), 1e-9)


def along_path(ds, lay, route) -> list[dict]:
    """Per cell of ``route``: transitions there, their mean action's length and cosine with the way to the next
    cell, and the share of actions within 45 degrees of that way (the goal cell, which has no next cell, is left
    out)."""
    rows = []
    for here, at, way in path_cells(ds, lay, route):
        a = ds.actions[at]
        mean = a.mean(0) if len(a) else np.zeros(2)
        length = float(np.linalg.norm(mean))
        cos = cosine(a, way)
        rows.append({"cell": list(here), "transitions": int(len(at)), "mean_action_length": length,
                     "mean_action_cos": float(mean @ way / length) if length > 0 else 0.0,
                     "share_within_45deg": float((cos > COS_45).mean()) if len(a) else 0.0})
    return rows


def analyse(name: str) -> dict:
    from minirl import datasets
    m = maze.parse(name, kind_required=False)
    lay = maze.layout(m.maze)
    start, goal = lay.tasks[m.task - 1]
    route = lay.path(start, goal)
    raw = datasets.load_dataset(name, progress=False)
    out = {"dataset": name, "start": list(start), "goal": list(goal), "path": [list(c) for c in route]}
    for label, ds in (("all", raw), ("best_tenth", maze.best_trajectories(raw, 0.1))):
        out[label] = {"transitions": int(len(ds.observations)), "share_at_goal": float((ds.rewards == 0).mean()),
                      "cells": along_path(ds, lay, route)}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("datasets", nargs="*", default=DEFAULT, help=f"maze datasets (default: {' '.join(DEFAULT)})")
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args(argv)
    for name in a.datasets:
        if not maze.is_maze_name(name):
            p.error(f"datasets: {name!r} is not a maze dataset (e.g. pointmaze-medium-navigate-singletask-task1)")
    results = [analyse(name) for name in a.datasets]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(results, indent=1) + "\n")
    for r in results:
        print(f"{r['dataset']} (start {tuple(r['start'])}, goal {tuple(r['goal'])})")
        for label in ("all", "best_tenth"):
            d = r[label]
            print(f"  {label:>10}: {d['transitions']:,} transitions, {d['share_at_goal']:.2%} of steps at the goal")
            print("     cell     n   |mean a|  cos  within 45 deg")
            for c in d["cells"]:
                print(f"    {tuple(c['cell'])!s:>7} {c['transitions']:6d}  {c['mean_action_length']:6.2f} "
                      f"{c['mean_action_cos']:+5.2f}  {c['share_within_45deg']:6.1%}")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
