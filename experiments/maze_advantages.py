"""Why IQL's stitching on pointmaze-medium-stitch fails at the start when it fails: its advantages along the path.

    python experiments/maze_advantages.py RUN_DIR [RUN_DIR ...]    # finished runs that kept agent.pt
    python experiments/maze_advantages.py --default                # the 300,000-step IQL (LayerNorm) seeds of task 1
    python experiments/maze_advantages.py RUN_DIR --out FILE       # elsewhere (a run still training: its checkpoint)

At 300,000 steps IQL with LayerNorm reaches the goal of stitch task 1 in about a third of the episodes; the rest
never leave the start cell (experiments/maze_values.py). IQL's policy is advantage-weighted regression: at a state it
fits the data's actions weighted by exp(beta A(s, a)), A = Q - V (clipped at 100). Where the advantages of the data's
actions differ by little, the weights are nearly equal and the policy is the plain mean of the data's actions there;
in a stitch maze the data crosses every cell in every direction, so that mean is near zero. With the reward -1 per
step and discount gamma, V(s) = -(1 - gamma^T) / (1 - gamma) for T steps to the goal, so a step's difference in T
changes V by about gamma^T ln(1/gamma) / (1 - gamma): the advantages shrink geometrically with the distance to the
goal.

For each run this measures, on the data's transitions in each cell of the shortest path from the task's start to its
goal: the spread of A (the 5th to 95th percentile of min_i Qtarget_i(s, a) - V(s), the critics IQL's actor loss
uses), beta times it, the length of the advantage-weighted mean action (what the actor's loss pulls the mean
towards; the data's actions have length about 1) and its cosine with the direction to the next cell of the path (where
two paths are as short, the one OGBench's breadth-first tie-break takes: `maze.Layout.path`);
the policy's mean action in that cell, its length and cosine. It also keeps the policy's actions on a 9 x 9 grid
over the start cell (with a deterministic actor, also |f(s)| before its tanh or clip there) and on a 5 x 5 grid
over every open cell, and V at every open cell's centre. Then it plays the
run's own 50 evaluation episodes (the seeds training used) and records where each one starts and ends: the failures'
end points, V there and how many of the data's states lie near them. Writes
results/stitching-diagnostics/advantages.json (read by scripts/figures/stitching.py); serves book/stitching.md.
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

OUT = REPO / "results" / "stitching-diagnostics" / "advantages.json"
DEFAULT = [REPO / "results" / "stitching-budget" / "iql-layer_norm=True" / "pointmaze-medium-stitch-singletask-task1"
           / f"s{s}" for s in range(3)]
EPISODES = 50
NEAR = 0.25  # the radius within which the data's states are counted around a point
HOVER = 0.5  # within this of a cell's centre (an eighth of a cell's width): where trajectories hover


def states(norm, x: np.ndarray):
    """The observations ``x`` as the agent takes them: normalised when it was trained so, a float32 tensor."""
    import torch
    return torch.as_tensor(x if norm is None else norm.transform(x), dtype=torch.float32)


def weighted_mean(actions: np.ndarray, adv: np.ndarray, beta: float, max_weight: float) -> np.ndarray:
    """The advantage-weighted mean action: what AWR's maximum-likelihood fit pulls a Gaussian policy's mean towards."""
    w = np.exp(np.minimum(beta * adv, np.log(max_weight)))  # min(exp(beta A), max_weight), without overflow
    return (w[:, None] * actions).sum(0) / w.sum()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def hovering(agent, norm, obs: np.ndarray, act: np.ndarray, offset: np.ndarray, direction: np.ndarray,
             alpha: float | None, scale: float | None) -> dict:
    """The data at a cell's centre, where OGBench's stitch trajectories hover once at their goal cell: the share of the
    cell's transitions within ``HOVER`` of its centre and the length of their mean action. For a DDPG+BC actor
    (``alpha`` given), the two pulls on its action there, as the actor's loss gives them: the critics'
    ``dQ/da / scale`` at ``a = pi(s)`` (``scale`` = the loss's E|Q(s, pi(s))|) and the data's ``2 alpha (a - pi(s))``,
    each averaged over those transitions, with their lengths and their cosines with the path."""
    import torch

    from minirl.iql import value_target
    near = offset < HOVER
    out = {"hover_share": float(near.mean()),
           "hover_mean_action": float(np.linalg.norm(act[near].mean(0))) if near.any() else None}
    if alpha is None or not near.any():
        return out
    o = states(norm, obs[near])
    pi = agent.actor(o, True).detach().requires_grad_(True)
    push = torch.autograd.grad(value_target(agent.critic_target(o, pi)).sum(), pi)[0].numpy().mean(0) / scale
    pull = (2.0 * alpha * (act[near] - pi.detach().numpy())).mean(0)
    return out | {"critic_push": float(np.linalg.norm(push)), "critic_push_cos": cosine(push, direction),
                  "data_pull": float(np.linalg.norm(pull)), "data_pull_cos": cosine(pull, direction),
                  "net_cos": cosine(push + pull, direction)}


def analyse(run_dir: Path) -> dict:
    import torch

    from maze_values import dataset
    from minirl import runs
    from minirl.evaluation import run_episodes
    from minirl.iql import value_target
    loaded = runs.load_agent(run_dir)
    agent, norm, cfg = loaded.agent, loaded.state_normalizer, loaded.settings["config"]
    if loaded.settings["algo"] != "iql" or cfg.get("reward_scale") is not None:
        raise SystemExit(f"{run_dir}: an IQL run on the maze's own rewards (reward_scale None) is needed")
    name = loaded.settings["dataset"]
    data = dataset(name)
    m = maze.parse(name, kind_required=False)
    lay = maze.layout(m.maze)
    start, goal = lay.tasks[m.task - 1]
    path = lay.path(start, goal)
    cells = lay.cell(data.observations[:, :2])
    alpha = scale = None  # DDPG+BC's weight on the data and its normaliser; an AWR run has neither
    if cfg.get("extraction") == "ddpg_bc":  # the normaliser E|Q(s, pi(s))| over a batch of 4,096 of the data's states
        alpha = cfg["alpha"]
        pick = np.random.default_rng(0).choice(len(data.observations), 4096, replace=False)
        sample = data.observations[pick]
        with torch.no_grad():
            s_t = states(norm, sample)
            scale = float(value_target(agent.critic_target(s_t, agent.actor(s_t, True))).abs().mean())
    offset = np.linalg.norm(data.observations[:, :2] - lay.center(cells), axis=1)  # from each row's cell's centre
    rows = []
    for k, c in enumerate(path[:-1]):
        inside = (cells[:, 0] == c[0]) & (cells[:, 1] == c[1])
        obs, act = data.observations[inside], data.actions[inside]
        o = states(norm, obs)
        with torch.no_grad():
            adv = (agent.critic_target(o, torch.as_tensor(act)).min(0).values - agent.value(o).squeeze(-1)).numpy()
            pi = agent.actor(o, True).numpy()
        direction = lay.center(path[k + 1]) - lay.center(c)
        awr = weighted_mean(act, adv.astype(np.float64), cfg["beta"], cfg["max_exp_adv"])
        pi_mean = pi.mean(0)
        lo, hi = np.percentile(adv, [5, 95])
        rows.append({"cell": c, "cells_to_goal": int(lay.distance[goal[0], goal[1], c[0], c[1]]),
                     "transitions": int(inside.sum()), "adv_p5": float(lo), "adv_p95": float(hi),
                     "beta_spread": float(cfg["beta"] * (hi - lo)),
                     "data_action_length": float(np.linalg.norm(act, axis=1).mean()),
                     "awr_length": float(np.linalg.norm(awr)), "awr_cos": cosine(awr, direction),
                     "policy_length": float(np.linalg.norm(pi, axis=1).mean()),
                     "policy_mean_length": float(np.linalg.norm(pi_mean)), "policy_cos": cosine(pi_mean, direction),
                     **hovering(agent, norm, obs, act, offset[inside], direction, alpha, scale)})
    # the policy's action field over the start cell (a 9 x 9 grid), for the figure
    centre = lay.center(tuple(start))
    ticks = np.linspace(-0.45, 0.45, 9) * lay.unit
    grid = np.array([[centre[0] + x, centre[1] + y] for y in ticks for x in ticks], np.float32)
    with torch.no_grad():
        g = states(norm, grid)
        field = agent.actor(g, True).numpy()
        # a deterministic actor's output layer before its bound: with a tanh, |f(s)| >> 1 passes no gradient back
        squash = getattr(agent.actor, "squash", None)
        pre = None if squash is None else (agent.actor.net[:-1](g) if squash == "tanh" else agent.actor.net(g)).abs()
    # and on a 5 x 5 grid over every open cell, to show where the policy heads around walls
    tick = np.linspace(-0.4, 0.4, 5) * lay.unit
    fields = []
    for c in lay.open_cells:
        cx, cy = lay.center(c)
        pts = np.array([[cx + x, cy + y] for y in tick for x in tick], np.float32)
        with torch.no_grad():
            acts = agent.actor(states(norm, pts), True).numpy()
        fields.append({"cell": c, "xy": pts.round(3).tolist(), "actions": acts.round(4).tolist()})
    seed = loaded.settings["seed"]
    ep = run_episodes(agent, loaded.env_id, EPISODES, seed=10_000 * (seed + 1), state_normalizer=norm,
                      keep_states=True)
    ends = np.stack([s[-1, :2] for s in ep["states"]])
    fail = ~ep["successes"]

    def value(xy: np.ndarray) -> np.ndarray:  # IQL's V at positions (the observation is the position)
        xy = np.asarray(xy, np.float32).reshape(-1, 2)
        with torch.no_grad():
            return agent.value(states(norm, xy)).squeeze(-1).numpy()
    return {"run": str(run_dir.relative_to(REPO)), "dataset": name, "seed": seed, "steps": loaded.step,
            "gamma": cfg["gamma"], "beta": cfg["beta"], "path": path, "cells": rows, "start_cell": tuple(start),
            "start_centre": centre.tolist(), "cell_size": lay.unit,
            "field_xy": grid.round(3).tolist(), "field_actions": field.round(4).tolist(), "cell_fields": fields,
            "actor_squash": squash, "field_pre_squash_abs": None if pre is None else
            {"min": float(pre.min()), "median": float(pre.median())},
            "episodes": EPISODES, "success_rate": float(ep["successes"].mean()),
            "starts": [s[0, :2].round(3).tolist() for s in ep["states"]], "successes": ep["successes"].tolist(),
            "failure_end_cells": sorted({tuple(int(x) for x in lay.cell(e)) for e in ends[fail]}),
            "failure_ends": ends[fail].round(3).tolist(),
            "failure_end_spread": float(np.linalg.norm(ends[fail] - ends[fail].mean(0), axis=1).max()) if fail.any()
            else None,
            "value_at_failure_ends": float(value(ends[fail]).mean()) if fail.any() else None,
            # how often the data visits there: its states within NEAR of the failures' mean end, and of the start's centre
            "data_near_failure_ends": int((np.linalg.norm(data.observations[:, :2] - ends[fail].mean(0), axis=1)
                                           < NEAR).sum()) if fail.any() else None,
            "data_near_start_centre": int((np.linalg.norm(data.observations[:, :2] - centre, axis=1) < NEAR).sum()),
            "value_at_cell_centres": [{"cell": c, "cells_to_goal": int(lay.distance[goal[0], goal[1], c[0], c[1]]),
                                       "value": float(value(lay.center(c))[0])} for c in lay.open_cells]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path, help="finished IQL runs on a maze (with agent.pt)")
    p.add_argument("--default", action="store_true", help="the 300,000-step IQL (LayerNorm) runs of stitch task 1")
    p.add_argument("--out", type=Path, default=OUT, help=f"where to write the JSON (default {OUT.relative_to(REPO)})")
    a = p.parse_args(argv)
    found = (DEFAULT if a.default else []) + [r.resolve() for r in a.runs]
    if not found:
        p.error("name RUN_DIRs or --default")
    from minirl import runs
    from minirl.config import UserError
    for r in found:
        try:
            runs.saved_agent(r)
        except UserError as e:
            p.error(str(e))
    results = [analyse(r) for r in found]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(results, indent=1) + "\n")
    for r in results:
        print(f"{r['run']} ({r['steps']:,} steps): success {r['success_rate']:.0%} over {r['episodes']} episodes; "
              f"failures end in cells {r['failure_end_cells']} (all within {r['failure_end_spread'] or 0:.2f} of "
              f"each other)")
        print("  cells to goal | transitions | A p5..p95 | beta x spread | |AWR mean| | cos(AWR, path) | |policy| | "
              "cos(policy, path)")
        for c in r["cells"]:
            print(f"  {c['cells_to_goal']:>13} | {c['transitions']:>11,} | {c['adv_p5']:+.3f}..{c['adv_p95']:+.3f} | "
                  f"{c['beta_spread']:>13.2f} | {c['awr_length']:>9.2f} | {c['awr_cos']:>+14.2f} | "
                  f"{c['policy_mean_length']:>8.2f} | {c['policy_cos']:>+17.2f}")
        if "critic_push" in r["cells"][0]:
            print(f"  DDPG+BC at the cells' centres (within {HOVER}): the critics' push and the data's pull on pi(s)")
            print("  cells to goal | share at centre | |data mean| | critics' push (cos) | data's pull (cos) | net cos")
            for c in r["cells"]:
                print(f"  {c['cells_to_goal']:>13} | {c['hover_share']:>15.2f} | {c['hover_mean_action']:>11.2f} | "
                      f"{c['critic_push']:.4f} ({c['critic_push_cos']:+.2f}) | {c['data_pull']:.4f} "
                      f"({c['data_pull_cos']:+.2f}) | {c['net_cos']:+.2f}")
        near = np.linalg.norm(np.array(r["starts"]) - r["start_centre"], axis=1) < 2 * HOVER
        won = np.array(r["successes"])
        if r["field_pre_squash_abs"] is not None:
            print(f"  the actor's output before its {r['actor_squash']} over the start cell: |f(s)| from "
                  f"{r['field_pre_squash_abs']['min']:.1f} (median {r['field_pre_squash_abs']['median']:.1f})")
        if r["value_at_failure_ends"] is not None:
            by_cell = {tuple(v["cell"]): v["value"] for v in r["value_at_cell_centres"]}
            print(f"  V where the failures end: {r['value_at_failure_ends']:.1f}; at the start cell's centre: "
                  f"{by_cell[tuple(r['start_cell'])]:.1f}; the data's states within {NEAR} of those points: "
                  f"{r['data_near_failure_ends']:,} and {r['data_near_start_centre']:,}")
        print(f"  episodes starting within {2 * HOVER} of the start cell's centre: {won[near].sum()} of {near.sum()} "
              f"succeed; farther: {won[~near].sum()} of {(~near).sum()}")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
