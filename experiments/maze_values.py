"""Why IQL does not stitch pointmaze-medium-stitch at the `cpu` scale: its V over the maze's cells, setting by setting.

    python experiments/maze_values.py run SETTING [--task 1] [--seed 0] [--steps 50000]   # train (resumable)
    python experiments/maze_values.py report                                               # values.json + figure
    python experiments/maze_values.py report --with RUN_DIR ...    # also any finished run_suite run that kept agent.pt
    python experiments/maze_values.py report --only --with RUN_DIR ... --out DIR   # just those runs, into DIR

Issue 41 asks to settle the `cpu`-scale setting of IQL on the stitch mazes with evidence (values along the path, not a
search for a lucky seed). Each SETTING trains IQL with `minirl.runs.run` (the code path of every run of the book) on
one single-task dataset, one thread, evaluated every 10,000 steps on 20 episodes, and keeps the final agent; `report`
reads every trained agent and measures, over the maze's open cells, how well V orders them by their breadth-first
distance to the goal (Spearman's rho between V and minus the distance: 1 is a perfect ordering), V along the
shortest path from the start to the goal against the value of walking it at the oracle's speed, the cells where
greedy rollouts end, and the success rate. Settings:

    lane      IQL as the stitching lanes first ran it on the mazes: the paper's MuJoCo settings (expectile 0.7, beta 3,
              rewards scaled by 1000 / return range, here x5), 2 x 256
    paper     the IQL paper's AntMaze settings, which minirl.runs now applies to every maze run (runs.DOMAIN_CONFIG):
              expectile 0.9, beta 10, the maze's own rewards (-1 per step, 0 at the goal), 2 x 256
    paper-ln  the same with LayerNorm in V and the critics (OGBench's IQL has it)
    paper-ln-3x512  the same with OGBench's 3 x 512 networks

Runs go to results/stitching-diagnostics/<setting>/<dataset>/s<seed> (agent.pt is not committed: re-make it with the
same command, the runs are deterministic on one machine). Serves book/stitching.md and results/README.md.

An agent without a V (CQL, BCQ) is read through its critics: V(s) = min_i Q_i(s, pi(s)) at its greedy action, in the
units it was trained on (CQL on a maze: 10 r + 5 a step), and the reference curve is drawn in the same units.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from minirl import maze  # noqa: E402

ROOT = REPO / "results" / "stitching-diagnostics"
PAPER = {"expectile": 0.9, "beta": 10.0, "reward_scale": None}
SETTINGS = {
    "lane": {"expectile": 0.7, "beta": 3.0, "reward_scale": "return_range"},  # IQLConfig's defaults, the MuJoCo ones
    "paper": PAPER,
    "paper-ln": {**PAPER, "layer_norm": True},
    "paper-ln-3x512": {**PAPER, "layer_norm": True, "hidden": (512, 512, 512)},
}


TITLES = {"lane": "MuJoCo settings", "paper": "the paper's maze settings", "paper-ln": "maze settings + LayerNorm",
          "paper-ln-3x512": "maze settings + LayerNorm, 3 x 512"}


def run_dir(setting: str, dataset: str, seed: int) -> Path:
    return ROOT / setting / dataset / f"s{seed}"


def train(setting: str, task: int, seed: int, steps: int) -> None:
    from minirl import runs
    dataset = f"pointmaze-medium-stitch-singletask-task{task}"
    out = run_dir(setting, dataset, seed)
    resume = (out / "checkpoint.pt").exists()
    if (out / "agent.pt").exists():
        print(f"{out}: done")
        return
    runs.run("iql", dataset, scale="cpu", steps=steps, seed=seed, out=out, overrides=dict(SETTINGS[setting]),
             eval_every=10_000, eval_episodes=20, checkpoint_every=5_000, resume=resume, overwrite=not resume,
             precision="auto", threads=1)


def spearman(a, b) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def state_values(agent, obs: np.ndarray) -> np.ndarray:
    """V at each (normalised) state: IQL's own V, or for an actor-critic without one (CQL, BCQ) the smaller critic's
    value of its greedy action, min_i Q_i(s, pi(s))."""
    import torch
    o = torch.as_tensor(obs, dtype=torch.float32)
    with torch.no_grad():
        if hasattr(agent, "V"):
            return agent.V(o).numpy().astype(float)
        if not hasattr(agent, "critic"):
            raise SystemExit(f"{type(agent).__name__} has neither a V nor a critic to read values from")
        a = torch.as_tensor(agent.act(obs, deterministic=True), dtype=torch.float32)
        return agent.critic(o, a).min(0).values.numpy().astype(float)


def reference_value(steps: float, gamma: float, config: dict) -> float:
    """The value of reaching the goal in ``steps`` steps at -1 a step, in the units the agent was trained on (a
    reward r becomes reward_multiplier * r + reward_bias, as CQL's maze settings have it)."""
    mult, bias = config.get("reward_multiplier", 1.0), config.get("reward_bias", 0.0)
    return (bias - mult) * (1 - gamma ** steps) / (1 - gamma)


def reach_share(cells: np.ndarray, trajectory: np.ndarray, terminals: np.ndarray, route) -> list[float]:
    """For each cell of ``route``, the share of the data's states in it (``cells``: each row's cell) from which its
    own trajectory goes on to reach the goal (a terminal row at or after it, in the same trajectory). With rewards
    -1 a step, a state whose trajectory never arrives is worth about -1 / (1 - gamma) to the behaviour, so where this
    share is 0, V^beta, what IQL's expectile 0.5 learns, is about the value of never arriving."""
    rows = np.arange(len(terminals))
    last = np.full(int(trajectory.max()) + 1, -1)
    np.maximum.at(last, trajectory[terminals], rows[terminals])
    reaches = rows <= last[trajectory]
    return [float(reaches[(cells[:, 0] == i) & (cells[:, 1] == j)].mean()) for i, j in route]


@functools.lru_cache(maxsize=None)
def dataset(name: str):
    """The dataset a run trained on, loaded once however many of its runs one report reads."""
    from minirl import datasets
    return datasets.load_dataset(name, progress=False)


def analyse(path: Path) -> dict:
    """V over the open cells of one trained agent, and where its greedy rollouts end."""
    from minirl import runs
    from minirl.evaluation import run_episodes
    loaded = runs.load_agent(path)
    m = maze.parse(loaded.settings["dataset"], kind_required=False)
    lay = maze.layout(m.maze)
    start, goal = lay.tasks[m.task - 1]
    cells = lay.open_cells
    xy = lay.center(np.array(cells)).astype(np.float32)
    obs = xy if loaded.state_normalizer is None else loaded.state_normalizer.transform(xy)
    v = state_values(loaded.agent, obs)
    data = dataset(loaded.settings["dataset"])
    if loaded.settings["config"].get("reward_scale") == "return_range":  # back to the maze's own units (-1 per step)
        v = v / data.return_range_scaler().scale
    dist = np.array([lay.distance[goal[0], goal[1], i, j] for i, j in cells])
    route = lay.path(start, goal)
    index = {cell: k for k, cell in enumerate(cells)}
    gamma = loaded.settings["config"]["gamma"]
    _, oracle_return = maze.reference_returns(loaded.settings["dataset"])
    steps_per_cell = -oracle_return / (len(route) - 1)
    config = loaded.settings["config"]
    reference = [reference_value(steps_per_cell * lay.distance[goal[0], goal[1], i, j], gamma, config)
                 for i, j in route]
    units = ("-1 per step" if "reward_multiplier" not in config
             else f"{config['reward_multiplier']:g} r + {config.get('reward_bias', 0.0):g} per step")
    ep = run_episodes(loaded, loaded.env_id, 5, seed=0, keep_states=True)
    ends = [tuple(int(x) for x in lay.cell(s[-1, :2])) for s in ep["states"]]
    eval_rows = [line.split(",") for line in (path / "eval.csv").read_text().splitlines()]
    header, rows = eval_rows[0], eval_rows[1:]
    success = {int(r[header.index("step")]): float(r[header.index("success_rate")]) for r in rows}
    return {"setting": path.parts[-3], "algo": loaded.settings["algo"], "units": units,
            "dataset": loaded.settings["dataset"], "seed": loaded.settings["seed"],
            "steps": loaded.step, "config": loaded.settings["config"], "hardware": loaded.settings.get("hardware"),
            "cells": cells, "v": v.tolist(), "distance": dist.tolist(), "rho": spearman(v, -dist),
            "path": route, "v_path": [v[index[p]] for p in route], "v_reference": reference,
            "path_increasing": float(np.mean(np.diff([v[index[p]] for p in route]) > 0)),
            "data_reach_path": reach_share(lay.cell(data.observations[:, :2]), data.infos["trajectory"],
                                           data.terminals, route),
            "rollout_ends": ends, "success": success, "start": tuple(start), "goal": tuple(goal)}


def title(r: dict) -> str:
    """A panel's title: the setting's name, or for a run_suite run (the maze settings) whether it has LayerNorm."""
    if r["setting"] in TITLES:
        return TITLES[r["setting"]]
    if r.get("algo", "iql") != "iql":
        return r["algo"].upper()
    name = "maze settings + LayerNorm" if r["config"].get("layer_norm") else "the paper's maze settings"
    if r["config"].get("extraction") == "ddpg_bc":
        name += f", DDPG+BC alpha {r['config']['alpha']:g}"
    return name


def report(extra: list[Path] = (), out: Path = ROOT, only: bool = False) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for d in extra:
        if not ((d / "agent.pt").is_file() or (d / "checkpoint.pt").is_file()):
            raise SystemExit(f"--with {d}: no agent.pt or checkpoint.pt there (a run of run_suite.py keeps one)")
    found = ([] if only else sorted(p.parent for p in ROOT.glob("*/*/s*/agent.pt"))) + list(extra)
    if not found:
        raise SystemExit(f"no trained agent under {ROOT}: run `python experiments/maze_values.py run SETTING` first")
    results = [analyse(p) for p in found]
    out.mkdir(parents=True, exist_ok=True)
    (out / "values.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    lay = maze.layout("medium")
    fig, axes = plt.subplots(2, len(results), figsize=(3.2 * len(results), 6.4), squeeze=False)
    for k, r in enumerate(results):
        ax = axes[0, k]
        grid = np.full(lay.walls.shape, np.nan)
        for (i, j), value in zip(r["cells"], r["v"]):
            grid[i, j] = value
        im = ax.imshow(grid, cmap="viridis")
        ax.imshow(np.where(lay.walls == 1, 1.0, np.nan), cmap="Greys", vmin=0, vmax=1.5)
        p = np.array(r["path"])
        ax.plot(p[:, 1], p[:, 0], "w-", lw=1.5)
        ax.plot(*r["start"][::-1], "ws", ms=7)
        ax.plot(*r["goal"][::-1], "w*", ms=12)
        for e in r["rollout_ends"]:
            ax.plot(e[1], e[0], "rx", ms=8, mew=2)
        last = max(r["success"])
        ax.set_title(f"{title(r)}, {r['steps']:,} steps\nrho {r['rho']:.2f}, success {r['success'][last]:.0%}",
                     fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(im, ax=ax, fraction=0.046, label="V at the cell's centre")
        ax = axes[1, k]
        ax.plot(r["v_path"], "o-", label="V along the path")
        ax.plot(r["v_reference"], "k--", label="the oracle's speed")
        ax.set_xlabel("cells from the start (shortest path)")
        ax.set_ylabel(f"value (reward units: {r['units']})")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "values.png", dpi=110)
    for r in results:
        last = max(r["success"])
        print(f"{r['setting']:>15} {r['dataset']} s{r['seed']}: rho {r['rho']:+.2f}, V increasing along the path at "
              f"{r['path_increasing']:.0%} of steps, success {r['success'][last]:.0%} at {last:,} "
              f"(curve {[f'{s:.0%}' for s in r['success'].values()]}), rollouts end at {r['rollout_ends']}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("setting", choices=sorted(SETTINGS))
    r.add_argument("--task", type=int, default=1, choices=range(1, 6))
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--steps", type=int, default=50_000)
    rep = sub.add_parser("report")
    rep.add_argument("--with", dest="extra", nargs="+", type=Path, default=[], metavar="RUN_DIR",
                     help="finished runs (with agent.pt) to analyse beside the settings' own")
    rep.add_argument("--only", action="store_true", help="analyse only the --with runs, not the settings' own")
    rep.add_argument("--out", type=Path, default=ROOT, help=f"where values.json and values.png go (default {ROOT})")
    a = p.parse_args(argv)
    if a.cmd == "run":
        train(a.setting, a.task, a.seed, a.steps)
    else:
        if a.only and not a.extra:
            p.error("--only needs --with RUN_DIR ...")
        report(a.extra, a.out, a.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
