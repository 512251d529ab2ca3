"""Does a critic tell the way to the goal from other actions? Q at the data's actions along a maze task's path.

    python experiments/maze_action_values.py RUN_DIR [--out FILE]    # a run with agent.pt (or its checkpoint.pt)

For an agent with critics (CQL, BCQ, IQL): in each cell of the shortest path from the task's start to its goal, on up
to 4,000 of the data's transitions there, min_i Q_i(s, a) at the data's actions, split into those within 45 degrees
of the way to the path's next cell and the rest, beside min_i Q_i(s, pi(s)) at the agent's greedy action and that
action's mean cosine with the way. A critic that has learned the path values the actions along it higher; one flat in
the action leaves the actor nothing to climb. Q is in the agent's training units (CQL on a maze: 10 r + 5 a step).
Writes results/stitching-diagnostics/action-values.json unless --out; serves book/lab/stitching.md.
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

sys.path.insert(0, str(REPO / "experiments"))
from maze_imitation import COS_45, cosine, path_cells  # noqa: E402

OUT = REPO / "results" / "stitching-diagnostics" / "action-values.json"


def along_path(agent, normalize, ds, lay, route, per_cell: int = 4000) -> list[dict]:
    """Per cell of ``route`` but the goal: Q at the data's actions toward the next cell and at the others, Q at the
    agent's greedy action, and that action's mean cosine with the way (``normalize`` maps raw states to the agent's)."""
    import torch
    rows = []
    for here, at, way in path_cells(ds, lay, route):
        at = at[:per_cell]
        row = {"cell": list(here), "transitions": int(len(at))}
        if len(at):
            obs = normalize(ds.observations[at].astype(np.float32))
            act = ds.actions[at].astype(np.float32)
            toward = cosine(act, way) > COS_45
            greedy = np.asarray(agent.act(obs, deterministic=True), dtype=np.float32)
            with torch.no_grad():
                o = torch.as_tensor(obs)
                q_data = agent.critic(o, torch.as_tensor(act)).min(0).values.numpy().astype(float)
                q_pi = agent.critic(o, torch.as_tensor(greedy)).min(0).values.numpy().astype(float)
            pi_cos = cosine(greedy, way)
            row |= {"q_data": float(q_data.mean()), "toward": int(toward.sum()),
                    "q_toward": float(q_data[toward].mean()) if toward.any() else None,
                    "q_other": float(q_data[~toward].mean()) if (~toward).any() else None,
                    "q_pi": float(q_pi.mean()), "pi_cos": float(pi_cos.mean())}
        rows.append(row)
    return rows


def analyse(run: Path) -> dict:
    from minirl import datasets, runs
    loaded = runs.load_agent(run)
    if not hasattr(loaded.agent, "critic"):
        raise SystemExit(f"{run}: {type(loaded.agent).__name__} has no critic to read")
    name = loaded.settings["dataset"]
    m = maze.parse(name, kind_required=False)
    lay = maze.layout(m.maze)
    start, goal = lay.tasks[m.task - 1]
    route = lay.path(start, goal)
    raw = datasets.load_dataset(name, progress=False)
    norm = (lambda x: x) if loaded.state_normalizer is None else loaded.state_normalizer.transform
    return {"run": str(run), "algo": loaded.settings["algo"], "dataset": name, "seed": loaded.settings["seed"],
            "steps": loaded.step, "path": [list(c) for c in route],
            "cells": along_path(loaded.agent, norm, raw, lay, route)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="a run directory on a maze dataset (config.json and agent.pt or checkpoint.pt)")
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args(argv)
    if not (a.run / "config.json").is_file():
        p.error(f"run: {a.run} has no config.json (a run directory of minirl train or run_suite.py)")
    r = analyse(a.run)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(r, indent=1) + "\n")
    print(f"{r['run']} ({r['algo']}, {r['steps']:,} steps)")
    print("     cell      n   Q(data)  Q(toward)  Q(other)   Q(pi)  cos(pi)")
    for c in r["cells"]:
        if c["transitions"]:
            fmt = lambda v: "     -" if v is None else f"{v:7.0f}"  # noqa: E731
            print(f"  {tuple(c['cell'])!s:>7} {c['transitions']:6d} {c['q_data']:8.0f} {fmt(c['q_toward'])}   "
                  f"{fmt(c['q_other'])} {c['q_pi']:7.0f}  {c['pi_cos']:+.2f}")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
