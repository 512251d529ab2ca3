"""The stitching chapter's maze figures: the data's trajectories, a task's start and goal, and one greedy rollout of each
method, from the committed `results/stitching-rollouts/<dataset>.json` (written by experiments/maze_rollouts.py from
the stitching grid's trained agents); and the success rate against gradient steps of the 300,000-step runs on stitch
task 1 (`results/stitching-budget`, experiments/stitching.sh); and IQL's advantages along the path with its policy in
the start cell (`results/stitching-diagnostics/advantages.json`, experiments/maze_advantages.py); and the success of
new actors trained on those runs' fixed critics (`results/stitching-extraction`, experiments/maze_extraction.py); and
IQL's policy around the wall of stitch task 3 (`results/stitching-diagnostics/task3/advantages.json`); and the maze
itself, its five tasks and a sample of each dataset's trajectories, with the pieces path-BC and goal-BC clone
(`minirl.maze`, the datasets made on first use). The gridworld figure of the same chapter is saved by notebook 04b."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from minirl import plots  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ROLLOUTS = ROOT / "results" / "stitching-rollouts"
BUDGET = ROOT / "results" / "stitching-budget"
ADVANTAGES = ROOT / "results" / "stitching-diagnostics" / "advantages.json"
EXTRACTION = ROOT / "results" / "stitching-extraction"
EXTRACTIONS = {"awr_beta10": ("AWR, β 10 (the runs' own)", "tab:green"), "awr_beta100": ("AWR, β 100", "tab:olive"),
               "ddpg_bc": ("DDPG+BC, α 0.0015", "tab:blue")}
BUDGET_TASK = "pointmaze-medium-stitch-singletask-task1"
DDPG_BC_RUN = "iql-actor=deterministic-alpha=0.0015-extraction=ddpg_bc-layer_norm=True"
BUDGET_LABELS = {"iql-layer_norm=True": ("IQL with LayerNorm (AWR)", "tab:green"),
                 DDPG_BC_RUN: ("IQL with LayerNorm, DDPG+BC", "tab:purple"), "bc": ("BC", "tab:blue"),
                 "10%bc": ("10%BC", "tab:orange")}
PANELS = (("pointmaze-medium-stitch-singletask-task2", "stitch task 2: short trajectories, none from start to goal"),
          ("pointmaze-medium-navigate-singletask-task1", "navigate task 1 (the control): long goal-reaching runs"))
NAMES = {"bc": "BC", "10%bc": "10%BC", "iql": "IQL", "cql": "CQL", "bcq": "BCQ"}
COLORS = {"bc": "tab:blue", "10%bc": "tab:orange", "iql": "tab:green", "cql": "tab:red", "bcq": "tab:purple"}


def draw(ax, r: dict, title: str) -> None:
    unit, (ox, oy) = r["unit"], r["offset"]
    for i, row in enumerate(r["walls"]):
        for j, wall in enumerate(row):
            if wall:
                ax.add_patch(Rectangle((j * unit - ox - unit / 2, i * unit - oy - unit / 2), unit, unit,
                                       color="0.35", lw=0))
    for path in r["data"]:
        xs, ys = zip(*path)
        ax.plot(xs, ys, color="0.75", lw=0.5, alpha=0.6, zorder=1)
    spare = iter(("tab:cyan", "tab:brown", "tab:pink", "tab:olive"))   # for a second run of one algorithm
    used, ring = set(), 0
    for name, m in r["methods"].items():
        xs, ys = zip(*m["path"])
        color = COLORS[m.get("algo", name)]
        color = next(spare) if color in used else color
        used.add(color)
        rate = "" if m["success_rate"] is None else f"; {100 * m['success_rate']:.0f}% of 50 episodes"
        # a path that never leaves the start's neighbourhood would hide under the start's cross: rings, one per run
        stays = np.max(np.hypot(np.array(xs) - r["start"][0], np.array(ys) - r["start"][1])) < unit / 4
        where = ", stays by the start" if stays else ""
        ax.plot(xs, ys, color=color, lw=2, zorder=3,
                label=f"{NAMES.get(name, name)}: {'reaches' if m['success'] else 'misses'} the goal{where}{rate}")
        if stays:
            ring += 1
            ax.plot(xs[-1], ys[-1], "o", mfc="none", mec=color, mew=2.5, ms=10 + 8 * ring, zorder=6)
        else:
            ax.plot(xs[-1], ys[-1], "o", color=color, ms=5, zorder=4)
    ax.plot(*r["start"], "x", color="crimson", ms=12, mew=3, zorder=5, label="start")
    ax.plot(*r["goal"], "*", color="gold", mec="black", ms=18, zorder=5, label="goal")
    h, w = len(r["walls"]), len(r["walls"][0])
    ax.set_xlim(-ox - unit / 2, (w - 1) * unit - ox + unit / 2)
    ax.set_ylim((h - 1) * unit - oy + unit / 2, -oy - unit / 2)   # row 0 at the top, as the maze is drawn elsewhere
    ax.set_aspect("equal")
    ax.set_xlabel("x (maze units; a cell is 4)")
    ax.set_ylabel("y (maze units)")
    missing = ", ".join(NAMES.get(m, m) for m in r["missing"])
    ax.set_title(title + (f"\n(no trained agent yet: {missing})" if missing else ""), fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8, ncol=1, frameon=False)


def success_curves(label: str, dataset: str = BUDGET_TASK) -> list[dict]:
    """Each seed's evaluations of ``results/stitching-budget/<label>/<dataset>``: steps, success in %, finished or not
    (a run still training is drawn as far as it got, and said to be unfinished)."""
    curves = []
    for run in sorted((BUDGET / label / dataset).glob("s*/eval.csv")):
        rows = list(csv.DictReader(run.open()))
        if rows:
            curves.append({"seed": int(run.parent.name[1:]), "finished": (run.parent / "result.json").is_file(),
                           "step": [int(r["step"]) for r in rows],
                           "success": [100 * float(r["success_rate"]) for r in rows]})
    return curves


def budget_figure(out_dir: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    drawn = 0
    for label, (name, color) in BUDGET_LABELS.items():
        curves = success_curves(label)
        for i, c in enumerate(curves):
            note = "" if c["finished"] else f", unfinished: to {c['step'][-1]:,} steps"
            ax.plot(c["step"], c["success"], marker="o", ls=("-", "--", ":")[i % 3], color=color, lw=1.5, ms=3, alpha=0.85,
                    label=f"{name}, seed {c['seed']}{note}")
            drawn += 1
    if not drawn:
        raise FileNotFoundError(f"no runs under {BUDGET.relative_to(ROOT)}/*/{BUDGET_TASK}: run "
                                f"bash experiments/stitching.sh 0 first")
    ax.set_xlabel("gradient steps (the cosine schedule set for 300,000)")
    ax.set_ylabel("success rate, % of 50 episodes")
    ax.set_ylim(-4, 104)
    ax.set_xlim(0, 305_000)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:.0f}k"))
    ax.axvline(50_000, color="0.5", ls=":", lw=1)
    ax.text(51_000, 60, "the grid's budget,\n50,000 steps", fontsize=8, color="0.4")
    ax.set_title("pointmaze-medium-stitch, task 1: 300,000 steps", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.tight_layout()
    path = out_dir / "stitching_budget.png"
    plots.save_figure(fig, path)
    return path


def advantages_figure(out_dir: Path) -> Path:
    """Left: beta times the spread of IQL's advantages on the data, cell by cell along the path, each seed; right: one
    seed's start cell, its policy's actions, where its 50 evaluation episodes start and where the failures end."""
    if not ADVANTAGES.is_file():
        raise FileNotFoundError(f"no {ADVANTAGES.relative_to(ROOT)}: run python experiments/maze_advantages.py "
                                "--default first")
    runs = json.loads(ADVANTAGES.read_text())
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.6), gridspec_kw={"width_ratios": [1.15, 1]})
    for i, r in enumerate(runs):
        cells = r["cells"]
        left.plot([c["cells_to_goal"] for c in cells], [c["beta_spread"] for c in cells], marker="o",
                  ls=("-", "--", ":")[i % 3], color="tab:green", label=f"seed {r['seed']}")
    left.set_yscale("log")
    left.set_yticks([2, 5, 10, 20, 50])
    left.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    left.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))
    left.invert_xaxis()
    left.set_xlabel("cells from the goal along the shortest path (start: 10)")
    left.set_ylabel(r"$\beta \times$ spread of $A(s, a)$ on the data (5th-95th pct)")
    left.set_title("advantages shrink with the distance to the goal", fontsize=10)
    left.legend(fontsize=8)
    r = runs[0]
    xy, act = np.array(r["field_xy"]), np.array(r["field_actions"])
    right.quiver(xy[:, 0], xy[:, 1], act[:, 0], act[:, 1], color="0.45", angles="xy", scale_units="xy",
                 scale=1 / (0.09 * r["cell_size"]), width=0.004)
    starts, ok = np.array(r["starts"]), np.array(r["successes"])
    right.plot(*starts[ok].T, "o", color="tab:green", ms=5, label="start of an episode that reaches the goal")
    right.plot(*starts[~ok].T, "x", color="tab:red", ms=6, mew=1.5, label="start of an episode that fails")
    if len(r["failure_ends"]):
        right.plot(*np.array(r["failure_ends"]).T, "*", color="black", ms=13, label="where the failures end")
    cx, cy = r["start_centre"]
    half = r["cell_size"] / 2
    right.set_xlim(cx - half, cx + half)
    right.set_ylim(cy - half, cy + half)
    right.set_aspect("equal")
    right.set_xlabel("x")
    right.set_ylabel("y")
    right.set_title(f"the start cell: the policy's actions (seed {r['seed']}), {r['success_rate']:.0%} success",
                    fontsize=10)
    right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    fig.tight_layout()
    path = out_dir / "stitching_advantages.png"
    plots.save_figure(fig, path)
    return path


WALL = ROOT / "results" / "stitching-diagnostics" / "task3" / "advantages.json"


def shortest_paths(lay, start, goal) -> list[list[tuple[int, int]]]:
    """Every shortest path of cells from ``start`` to ``goal`` (each step to a neighbour one cell nearer the goal)."""
    dist = lay.distance[goal[0], goal[1]]
    if tuple(start) == tuple(goal):
        return [[tuple(goal)]]
    out = []
    for di, dj in ((-1, 0), (0, -1), (1, 0), (0, 1)):
        n = (start[0] + di, start[1] + dj)
        if lay.walls[n] == 0 and dist[n] == dist[tuple(start)] - 1:
            out += [[tuple(start)] + rest for rest in shortest_paths(lay, n, goal)]
    return out


def wall_figure(out_dir: Path) -> Path:
    """Stitch task 3, one panel per seed: the policy's action over the cells around the start and the goal, both
    shortest paths, and where the failed evaluation episodes end (experiments/maze_advantages.py's cell fields)."""
    from minirl import maze
    if not WALL.is_file():
        raise FileNotFoundError(f"no {WALL.relative_to(ROOT)}: run python experiments/maze_advantages.py on the "
                                "stitch task 3 runs first")
    runs = json.loads(WALL.read_text())
    lay = maze.layout("medium")
    start, goal = (tuple(c) for c in lay.tasks[2])
    rows, cols = range(2, 7), range(0, 6)   # the cells drawn: the start, the goal and the two ways round
    u = lay.unit
    fig, axes = plt.subplots(1, len(runs), figsize=(4.3 * len(runs), 4.6), squeeze=False)
    for ax, r in zip(axes[0], runs):
        for i in rows:
            for j in cols:
                if lay.walls[i, j]:
                    x, y = lay.center((i, j))
                    ax.add_patch(Rectangle((x - u / 2, y - u / 2), u, u, color="0.35", lw=0))
        for k, path in enumerate(shortest_paths(lay, start, goal)):
            xy = lay.center(np.array(path))
            ax.plot(xy[:, 0], xy[:, 1], color="tab:green", lw=6, alpha=0.25, solid_capstyle="round",
                    label="the shortest paths (6 cells)" if k == 0 else None)
        for f in r["cell_fields"]:
            if f["cell"][0] in rows and f["cell"][1] in cols:
                xy, act = np.array(f["xy"]), np.array(f["actions"])
                ax.quiver(xy[:, 0], xy[:, 1], act[:, 0], act[:, 1], color="0.3", angles="xy", scale_units="xy",
                          scale=1 / (0.15 * u), width=0.005, headwidth=3.5, headlength=4,
                          headaxislength=3.5)
        if r["failure_ends"]:
            ends = np.array(r["failure_ends"])
            ax.plot(*ends.T, "o", color="tab:red", ms=7, mec="black", zorder=5,
                    label="where the failed episodes end")
        ax.plot(*lay.center(start), "x", color="crimson", ms=12, mew=3, zorder=5, label="start")
        ax.plot(*lay.goal_xy(3), "*", color="gold", mec="black", ms=18, zorder=5, label="goal")
        ax.set_xlim(lay.center((0, cols[0]))[0] - u / 2, lay.center((0, cols[-1]))[0] + u / 2)
        ax.set_ylim(lay.center((rows[-1], 0))[1] + u / 2, lay.center((rows[0], 0))[1] - u / 2)  # row 0 at the top
        ax.set_aspect("equal")
        ax.set_xlabel("x (maze units; a cell is 4)")
        ax.set_ylabel("y")
        ax.set_title(f"seed {r['seed']}: {r['success_rate']:.0%} of {r['episodes']} episodes succeed "
                     f"({len(r['failure_ends'])} fail)", fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle(f"IQL on stitch task 3 after {runs[0]['steps']:,} steps: its action (arrows) around a wall "
                 "with the goal behind it", fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path = out_dir / "stitching_wall.png"
    plots.save_figure(fig, path)
    return path


OVER_TIME = {  # seed 0 of stitch task 1: the runs (actors trained beside the critics) and new actors on their critics
    "iql-layer_norm=True": ("AWR, β 10, beside the critics (cosine learning rate)", "tab:green", "-"),
    "iql-cosine_actor_lr=False-layer_norm=True": ("AWR, β 10, beside the critics (constant rate)", "tab:green", ":"),
    DDPG_BC_RUN: ("DDPG+BC, beside the critics", "tab:blue", "-"),
}


def extraction_figure(out_dir: Path) -> Path:
    """Left: success against actor steps of new actors trained on the 300,000-step runs' final critics, held fixed
    (experiments/maze_extraction.py), each seed thin, the mean over seeds thick, and dashed the final success of the
    actors trained beside those critics. Right, seed 0: success of the runs against their steps, and of new actors
    trained for 10,000 steps on the critics of a given step (squares)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 5.0))
    drawn = 0
    for setting, (name, color) in EXTRACTIONS.items():
        runs = [json.loads(f.read_text()) for f in sorted((EXTRACTION / setting).glob("s*.json"))]
        if not runs:
            continue
        steps = [e["step"] for e in runs[0]["evals"]]
        success = np.array([[100 * e["success_rate"] for e in r["evals"]] for r in runs])
        offset = (drawn - 1) * 300  # keep lines that sit on top of each other at 100% apart
        for row in success:
            left.plot(np.array(steps) + offset, row, color=color, lw=0.8, alpha=0.45)
        left.plot(np.array(steps) + offset, success.mean(0), marker="o", color=color, lw=2.2, ms=4,
                  label=f"{name}: mean of {len(runs)} seeds (thin: each)")
        drawn += 1
    if not drawn:
        raise FileNotFoundError(f"no results under {EXTRACTION.relative_to(ROOT)}: run "
                                "python experiments/maze_extraction.py --default first")
    for label, name, color in (("iql-layer_norm=True", "AWR, β 10, trained beside them", "tab:green"),
                               (DDPG_BC_RUN, "DDPG+BC, trained beside its own critics", "tab:blue")):
        beside = [c["success"][-1] for c in success_curves(label) if c["finished"]]
        if beside:
            left.axhline(np.mean(beside), color=color, ls="--", lw=1.5,
                         label=f"{name}: {np.mean(beside):.0f}% (mean of {len(beside)} seeds)")
    left.set_xlabel("steps of the new actor")
    left.set_ylabel("success rate, % of 50 episodes")
    left.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:.0f}k"))
    left.set_title("new actors on the critics after 300,000 steps", fontsize=10)
    for label, (name, color, ls) in OVER_TIME.items():
        curve = next((c for c in success_curves(label) if c["seed"] == 0), None)
        if curve:
            note = "" if curve["finished"] else f" (to {curve['step'][-1]:,} steps)"
            right.plot(curve["step"], curve["success"], color=color, ls=ls, lw=1.6, marker="o", ms=3,
                       label=name + note)
    for setting, (name, color) in EXTRACTIONS.items():
        points = sorted((r["critic_steps"], 100 * r["evals"][-1]["success_rate"]) for r in
                        (json.loads(f.read_text()) for f in EXTRACTION.glob(f"over-time/*/{setting}/s0.json")))
        if points:
            x, y = zip(*points)
            right.plot(np.array(x) + (2500 if setting == "ddpg_bc" else 0), y, "s", color=color, ms=8, mfc="none",
                       mew=2, label=f"{name}: a new actor on the AWR runs' critics of that step")
    right.set_xlabel("gradient steps of the run (its critics)")
    right.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:.0f}k"))
    right.set_title("seed 0: beside the critics, and new actors on them", fontsize=10)
    for ax in (left, right):
        ax.set_ylim(-4, 104)
        ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    fig.suptitle("pointmaze-medium-stitch, task 1: IQL's critics and its policy extraction", fontsize=11)
    fig.tight_layout()
    path = out_dir / "stitching_extraction.png"
    plots.save_figure(fig, path)
    return path


def maze_figure(out_dir: Path) -> Path:
    """pointmaze-medium: its walls, the five tasks' starts and goals, a sample of the stitch and the navigate data, and
    for task 1 the pieces the imitation controls clone (``maze.goal_pieces``)."""
    from minirl import datasets, maze
    lay = maze.layout("medium")
    u = lay.unit
    fig, axes = plt.subplots(1, 2, figsize=(12.4, 6.6))
    for ax, kind, sample in ((axes[0], "stitch", 120), (axes[1], "navigate", 12)):
        for i, j in zip(*np.nonzero(lay.walls)):
            x, y = lay.center((i, j))
            ax.add_patch(Rectangle((x - u / 2, y - u / 2), u, u, color="0.35", lw=0))
        traj = maze.load_trajectories("medium", kind, sample, datasets.data_dir(), progress=False)
        for k, path in enumerate(traj["observations"]):
            ax.plot(path[:, 0], path[:, 1], color="0.7", lw=0.6, alpha=0.7, zorder=1,
                    label=f"{sample} of the data's trajectories" if k == 0 else None)
        name = f"pointmaze-medium-{kind}-singletask-task1"
        ds = datasets.load_dataset(name, progress=False)
        pieces = maze.goal_pieces(ds, name, from_start_cell=kind == "navigate")
        ends = np.flatnonzero(pieces.terminals)
        starts = np.r_[0, ends[:-1] + 1]
        long = [(a, b) for a, b in zip(starts, ends) if b > a]
        for k, (a, b) in enumerate(long[:: max(len(long) // 12, 1)][:12]):
            xy = pieces.observations[a:b + 1, :2]
            what = ("path-BC's data: pieces from task 1's start cell to its goal" if kind == "navigate"
                    else "goal-BC's data: pieces that end at task 1's goal (none from its start)")
            ax.plot(xy[:, 0], xy[:, 1], color="tab:blue", lw=1.2, alpha=0.8, zorder=2, label=what if k == 0 else None)
        for t, (start, goal) in enumerate(lay.tasks, 1):
            sx, sy = lay.center(start)
            gx, gy = lay.goal_xy(t)
            ax.plot(sx, sy, "x", color="crimson", ms=10, mew=2.5, zorder=5, label="a task's start" if t == 1 else None)
            ax.plot(gx, gy, "*", color="gold", mec="black", ms=15, zorder=5, label="its goal" if t == 1 else None)
            ax.annotate(str(t), (sx, sy), xytext=(5, 5), textcoords="offset points", color="crimson", fontsize=10,
                        fontweight="bold", zorder=6)
            ax.annotate(str(t), (gx, gy), xytext=(6, -12), textcoords="offset points", color="black", fontsize=10,
                        fontweight="bold", zorder=6)
        h, w = lay.walls.shape
        ax.set_xlim(lay.center((0, 0))[0] - u / 2, lay.center((0, w - 1))[0] + u / 2)
        ax.set_ylim(lay.center((h - 1, 0))[1] + u / 2, lay.center((0, 0))[1] - u / 2)   # row 0 at the top
        ax.set_aspect("equal")
        ax.set_xlabel("x (maze units; a cell is 4)")
        ax.set_ylabel("y (maze units)")
        length = maze.LENGTH[kind]
        ax.set_title(f"pointmaze-medium-{kind}: {maze.TRAJECTORIES[kind]:,} trajectories of {length:,} steps",
                     fontsize=11)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=9, ncol=2, frameon=False)
    fig.tight_layout()
    path = out_dir / "stitching_maze.png"
    plots.save_figure(fig, path)
    return path


def main(out_dir: Path) -> list[Path]:
    panels = [(json.loads((ROLLOUTS / f"{name}.json").read_text()), title) for name, title in PANELS
              if (ROLLOUTS / f"{name}.json").is_file()]
    if not panels:
        raise FileNotFoundError(f"no rollouts under {ROLLOUTS.relative_to(ROOT)}: run "
                                f"python experiments/maze_rollouts.py first")
    with plt.rc_context({"font.size": 10}):
        fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 8.2), squeeze=False)
        for ax, (r, title) in zip(axes[0], panels):
            draw(ax, r, title)
        seeds = sorted({r["seed"] for r, _ in panels})
        steps = sorted({m["steps"] for r, _ in panels for m in r["methods"].values()})
        fig.suptitle(f"One greedy rollout of each method (training seed {', '.join(map(str, seeds))}, "
                     f"{' and '.join(f'{s:,}' for s in steps)} steps); grey: 150 of the data's trajectories",
                     fontsize=11)
        fig.tight_layout()
        path = out_dir / "stitching_rollouts.png"
        plots.save_figure(fig, path)
        return [path, budget_figure(out_dir), advantages_figure(out_dir), extraction_figure(out_dir),
                wall_figure(out_dir), maze_figure(out_dir)]
