"""Where a trained maze policy points, cell by cell, against the way a shortest path goes: why a clone of the pieces
that reach the goal (goal-BC) can solve a stitch task whose start no piece comes from.

    python experiments/maze_policy_field.py RUN_DIR [RUN_DIR ...] [--out FILE]

For each open cell of the maze: the policy's action at the cell's centre (`runs.load_agent`, deterministic), the
unit vector towards the next cell of the shortest path to the task's goal (`Layout.next_cell`), their cosine, and how
many of the run's training transitions lie in the cell (goal-BC's data: `maze.goal_pieces`). Then one greedy episode
from the task's start (evaluation seed 0) and the cells it passes. Cells with no training data where the policy still
points along the path are where the clone generalises: a network fitted to "go toward the goal" near the goal keeps
pointing that way far from it. Writes `results/maze-100k/diagnostics/<label>-<dataset>-s<seed>.json` by default.
Serves book/lab/stitching.md, "Claim (g) under the protocol".
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from minirl import datasets, maze, runs  # noqa: E402
from minirl.evaluation import run_episodes  # noqa: E402


def field(run_dir: Path) -> dict:
    loaded = runs.load_agent(run_dir)
    name = loaded.settings["dataset"]
    m = maze.parse(name)
    lay = maze.layout(m.maze)
    start, goal = (tuple(int(x) for x in c) for c in lay.tasks[m.task - 1])
    raw = datasets.load_dataset(name, progress=False)
    pieces = getattr(loaded.config, "goal_pieces", "off")
    data = maze.goal_pieces(raw, name, pieces == "from_start") if pieces != "off" else raw
    data_cells = lay.cell(data.observations[:, :2])
    cells = []
    for i, j in lay.open_cells:
        xy = lay.center((i, j))
        action = loaded.act(np.array([[*xy, 0.0, 0.0]], dtype=np.float32)[:, :data.obs_dim])[0]
        if (i, j) == goal:
            way = np.zeros(2)
        else:
            nxt = lay.next_cell[goal[0], goal[1], i, j]
            way = lay.center(tuple(int(x) for x in nxt)) - xy
            way = way / np.linalg.norm(way)
        norm = float(np.linalg.norm(action))
        cos = float(action @ way / norm) if norm > 0 and np.any(way) else None
        n = int(((data_cells[:, 0] == i) & (data_cells[:, 1] == j)).sum())
        cells.append({"cell": [i, j], "action": [float(a) for a in action], "way": [float(w) for w in way],
                      "cos": cos, "distance": int(lay.distance[goal[0], goal[1], i, j]), "transitions": n})
    played = run_episodes(loaded, loaded.env_id, 1, 0, None, keep_states=True)
    path = played["states"][0][:, :2]
    visited = [list(map(int, c)) for c in dict.fromkeys(map(tuple, lay.cell(path)))]
    with_data = [c for c in cells if c["transitions"] > 0 and c["cos"] is not None]
    without = [c for c in cells if c["transitions"] == 0 and c["cos"] is not None]
    return {"run": str(run_dir.relative_to(REPO)) if run_dir.is_relative_to(REPO) else str(run_dir),
            "algo": loaded.settings["algo"], "dataset": name, "seed": loaded.settings.get("seed"),
            "steps": loaded.step, "start": list(start), "goal": list(goal), "training_transitions": len(data),
            "cells": cells, "episode": {"success": bool(played["successes"][0]), "length": int(played["lengths"][0]),
                                        "cells_visited": visited,
                                        "cells_visited_without_data": sum(
                                            1 for c in visited if not any(x["cell"] == c and x["transitions"]
                                                                          for x in cells))},
            "mean_cos_cells_with_data": float(np.mean([c["cos"] for c in with_data])) if with_data else None,
            "mean_cos_cells_without_data": float(np.mean([c["cos"] for c in without])) if without else None,
            "cells_without_data": len(without), "cells_without_data_cos_above_0_7": sum(c["cos"] > 0.7 for c in without)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    for run_dir in args.runs:
        r = field(run_dir.resolve())
        out = args.out or (REPO / "results" / "maze-100k" / "diagnostics" /
                           f"{r['algo']}-{r['dataset']}-s{r['seed']}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(r, indent=1) + "\n")
        e = r["episode"]
        def f(x):
            return "n/a" if x is None else f"{x:.2f}"
        print(f"{r['dataset']} {r['algo']} s{r['seed']} at {r['steps']:,} steps: {r['training_transitions']:,} "
              f"training transitions; mean cos(action, path) {f(r['mean_cos_cells_with_data'])} in cells with data, "
              f"{f(r['mean_cos_cells_without_data'])} in the {r['cells_without_data']} without "
              f"({r['cells_without_data_cos_above_0_7']} above 0.7); the greedy episode "
              f"{'reaches' if e['success'] else 'misses'} the goal in {e['length']} steps through "
              f"{len(e['cells_visited'])} cells, {e['cells_visited_without_data']} of them without data -> "
              f"{out.relative_to(REPO) if out.is_relative_to(REPO) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
