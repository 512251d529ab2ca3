"""Which policy extraction stitches from IQL's trained critics on pointmaze-medium-stitch task 1?

    python experiments/maze_extraction.py --default                  # the three 300,000-step IQL (LayerNorm) seeds
    python experiments/maze_extraction.py RUN_DIR ... --steps 100000 --eval-every 10000 --settings ddpg_bc
    python experiments/maze_extraction.py --summary                  # print the table of what was written
    python experiments/maze_extraction.py RUN_DIR --out DIR          # a run still training: its latest checkpoint

IQL's value functions never see its policy: V regresses to an expectile of the target critics at the data's actions
and Q to r + gamma V(s'). So the critics of a finished run are the same whatever actor was trained beside them (the
300,000-step runs with beta 10 and beta 100 ended with identical critic weights), and the policy can be extracted
again from them afterwards (the IQL paper's Algorithm 1 writes the extraction as a loop after the value learning).
This takes each finished run's V and target critics, keeps them fixed, and trains fresh actors against them
(``IQL.extract``) with three extractions fixed before the runs:

* ``awr_beta10``  -- the runs' own AWR, beta 10 (the control: extraction after the critics instead of beside them);
* ``awr_beta100`` -- AWR with beta 100 (the test of the advantage diagnosis, experiments/maze_advantages.py);
* ``ddpg_bc``     -- DDPG+BC, OGBench's extraction for its goal-conditioned IQL on these mazes (alpha 0.003 with a
  unit-std Gaussian there, 0.0015 with minirl's deterministic actor: ``minirl/iql.py``).

Prediction, written before any run (2026-11-28 00:25): AWR beta 10 reproduces the runs' third and its sink in the
start cell; DDPG+BC follows the direction of Q's gradient in the action, whose size the advantages' spread does not
set (the loss is normalised by the batch's mean |Q| and the BC weight is small), so it leaves the start cell in every
seed; whether it then reaches the goal depends on Q's argmax near the goal, which no extraction can mend. (A 2,000-step
smoke test of ddpg_bc on seed 0, run next, reached the goal in all 50 episodes at 1,000 steps.)

Second prediction, written before those runs (2026-11-28 07:15, committed 07:17), for stitch task 2's three
300,000-step runs with DDPG+BC (``--out results/stitching-extraction-task2``): at the start cell's centre, where the
stitch data hovers
(``experiments/maze_advantages.py``: over half of each path cell's transitions lie within 0.5 of its centre, and their
mean action is about 0), the critics' push on the action and the data's pull ``2 alpha (a - pi(s))`` measured equal
(about 0.0015 each), so the action there settles near ``push / (2 alpha)``: about 0.5 long at alpha 0.0015, the
full 1 at a third of it. ``ddpg_bc_low_alpha`` (alpha 0.0005) therefore ends above ``ddpg_bc`` (0.0015) in at least 2
of the 3 seeds, and fewer of its failures end in the start cell; ``ddpg_bc`` on these fixed critics ends at or below
25% in at least 2 of 3 seeds, as the runs did.

Each (run, extraction) trains ``--steps`` actor steps (the actor's cosine schedule over them, batch 256, the run's
seed for the actor's initialisation and the batches, the run's precision) and is evaluated OGBench's way, success
over 50 episodes of the task, every ``--eval-every`` steps, the seeds of the run's own evaluations. The last
evaluation also records where each failed episode ends. Writes one JSON per (extraction, seed) under
results/stitching-extraction/ (read by ``--summary`` and the figures); serves book/stitching.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

OUT = REPO / "results" / "stitching-extraction"
DEFAULT = [REPO / "results" / "stitching-budget" / "iql-layer_norm=True" / "pointmaze-medium-stitch-singletask-task1"
           / f"s{s}" for s in range(3)]
SETTINGS = {  # fixed before the runs: the IQLConfig fields each extraction changes
    "awr_beta10": {"extraction": "awr", "beta": 10.0},
    "awr_beta100": {"extraction": "awr", "beta": 100.0},
    "ddpg_bc": {"extraction": "ddpg_bc", "actor": "deterministic", "alpha": 0.0015},
    "ddpg_bc_low_alpha": {"extraction": "ddpg_bc", "actor": "deterministic", "alpha": 0.0005},
}
EPISODES = 50


def extract(run_dir: Path, setting: str, steps: int, eval_every: int, precision: str,
            episodes: int = EPISODES) -> dict:
    """Load a finished run, then :func:`extract_loaded`."""
    from maze_values import dataset
    from minirl import runs
    loaded = runs.load_agent(run_dir)
    result = extract_loaded(loaded, dataset(loaded.settings["dataset"]), setting, steps, eval_every, precision,
                            episodes)
    return {"run": str(run_dir.relative_to(REPO)) if run_dir.is_relative_to(REPO) else str(run_dir), **result}


def extract_loaded(loaded, data, setting: str, steps: int, eval_every: int, precision: str,
                   episodes: int = EPISODES) -> dict:
    """A fresh actor with the extraction ``setting``, trained ``steps`` steps against ``loaded``'s V and target
    critics (copied, never updated) on ``data`` (the run's dataset, raw), evaluated every ``eval_every`` steps."""
    import torch

    from minirl import maze, runs
    from minirl.devices import resolve_precision
    from minirl.evaluation import run_episodes
    from minirl.train import train
    cfg, name, seed = loaded.settings["config"], loaded.settings["dataset"], loaded.settings["seed"]
    if loaded.settings["algo"] != "iql" or cfg.get("reward_scale") is not None:
        raise SystemExit(f"{name}: an IQL run on the maze's own rewards (reward_scale None) is needed")
    norm = loaded.state_normalizer
    data = data if norm is None else data.transformed(state=norm)
    torch.manual_seed(seed)  # the fresh actor's initialisation
    fields = cfg | SETTINGS[setting] | {"max_steps": steps}
    scale, bias = loaded.agent.actor.action_scale.numpy(), loaded.agent.actor.action_bias.numpy()
    agent = runs.build_agent("iql", data.observations.shape[1], data.actions.shape[1], bias - scale, bias + scale,
                             runs.make_config("iql", fields))
    for part in ("critic", "critic_target", "value"):  # the trained value functions, kept as they are
        getattr(agent, part).load_state_dict(getattr(loaded.agent, part).state_dict())
    t0 = time.perf_counter()
    log = train(agent, data, steps, eval_env=loaded.env_id, eval_every=eval_every, eval_episodes=episodes, seed=seed,
                state_normalizer=norm, precision=precision, update=lambda a, batch: a.extract(batch),
                log_every=max(steps // 10, 1))
    seconds = time.perf_counter() - t0
    lay = maze.layout(maze.parse(name, kind_required=False).maze)
    ep = run_episodes(agent, loaded.env_id, episodes, seed=10_000 * (seed + 1), state_normalizer=norm,
                      keep_states=True)
    ends = np.stack([s[-1, :2] for s in ep["states"]])[~ep["successes"]]
    return {"dataset": name, "seed": seed, "critic_steps": loaded.step, "setting": setting,
            "fields": SETTINGS[setting], "actor_steps": steps, "precision": resolve_precision(precision, "cpu"),
            "episodes": episodes,
            "evals": [{"step": e["step"], "success_rate": e["success_rate"]} for e in log["eval"]],
            "final_success_rate": float(ep["successes"].mean()),
            "failure_end_cells": sorted({tuple(int(x) for x in lay.cell(e)) for e in ends}),
            "failure_ends": ends.round(3).tolist(), "seconds": round(seconds, 1),
            "cpu": _cpu_name(), "torch": torch.__version__, "agent": agent}


def _cpu_name() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


def summary(out: Path) -> str:
    """Success at the last evaluation and over the last five, mean over seeds with a 95% bootstrap interval."""
    from minirl import plots
    rows = {}
    for f in sorted(out.glob("*/s*.json")):
        r = json.loads(f.read_text())
        rows.setdefault(r["setting"], []).append(r)
    lines = ["| extraction | seeds | actor steps | final success, % [95% CI] | last 5 evaluations | failures end in |",
             "| --- | ---: | ---: | --- | --- | --- |"]
    for setting in [s for s in SETTINGS if s in rows] + sorted(set(rows) - set(SETTINGS)):
        rs = rows[setting]
        final = [100 * r["evals"][-1]["success_rate"] for r in rs]
        last5 = [100 * np.mean([e["success_rate"] for e in r["evals"][-5:]]) for r in rs]
        cells = sorted({tuple(c) for r in rs for c in r["failure_end_cells"]})

        def ci(v):
            if len(v) < 2:
                return f"{v[0]:.0f} (one seed)"
            lo, hi = plots.bootstrap_ci(v)
            return f"{np.mean(v):.1f} [{lo:.1f}, {hi:.1f}]"
        lines.append(f"| {setting} | {len(rs)} | {rs[0]['actor_steps']:,} | {ci(final)} | {ci(last5)} | "
                     f"{', '.join(map(str, cells)) or 'none'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path,
                   help="IQL runs on a maze: finished (agent.pt) or training (their latest checkpoint.pt)")
    p.add_argument("--default", action="store_true", help="the 300,000-step IQL (LayerNorm) runs of stitch task 1")
    p.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS), metavar="SETTING",
                   help=f"extractions to train (default: all of {', '.join(SETTINGS)})")
    p.add_argument("--steps", type=int, default=100_000, help="actor steps per extraction (default 100,000)")
    p.add_argument("--eval-every", type=int, default=10_000, help="steps between evaluations (default 10,000)")
    p.add_argument("--episodes", type=int, default=EPISODES, help=f"episodes per evaluation (default {EPISODES})")
    p.add_argument("--precision", default="auto", choices=["auto", "bf16", "float32"],
                   help="as `minirl train --precision` (default auto)")
    p.add_argument("--out", type=Path, default=OUT, help=f"results folder (default {OUT.relative_to(REPO)})")
    p.add_argument("--summary", action="store_true", help="print the table of the results in --out and stop")
    a = p.parse_args(argv)
    if a.summary:
        print(summary(a.out))
        return 0
    for flag, value in (("--steps", a.steps), ("--eval-every", a.eval_every), ("--episodes", a.episodes)):
        if value < 1:
            p.error(f"{flag} must be at least 1, got {value}")
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
    for setting in a.settings:
        for r in found:
            res = extract(r, setting, a.steps, a.eval_every, a.precision, a.episodes)
            res.pop("agent")
            path = a.out / setting / f"s{res['seed']}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(res, indent=1) + "\n")
            shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
            print(f"{setting} seed {res['seed']}: success by step "
                  f"{[round(100 * e['success_rate']) for e in res['evals']]} ({res['seconds']:.0f} s); failures end "
                  f"in {res['failure_end_cells']}; wrote {shown}", flush=True)
    print(summary(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
