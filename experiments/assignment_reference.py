"""The end-to-end assignment's reference distribution and its broken updates (book: instructors.md, "The end-to-end
assignment"; results: results/assignment/).

At the grading setting of ``minirl.classroom.project_checks.GRADING`` (CQL on pendulum-expert, alpha 5, 4,000
updates, 2 x 64 networks, float32, one thread per run):

* the reference: minirl's own ``CQL.update`` at seeds 0-19 and at the grading seed; the grader passes a student's
  update whose run scores at least the lowest of seeds 0-19 minus ``TOLERANCE``;
* broken updates, each at five seeds from the grading seed on: no penalty (alpha 0: offline SAC), the penalty with
  the wrong sign (it pushes the sampled actions' Q up and the data's down), and an actor that never learns (its
  learning rate 0). A tolerance is only useful if these fall below it.

    python experiments/assignment_reference.py [--workers 2]

writes ``results/assignment/reference.json`` (read by the grader) and ``results/assignment/broken.json``.
"""
from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "results" / "assignment"
REFERENCE_SEEDS = tuple(range(20))


def no_penalty(agent, batch):
    """Broken: the conservative penalty left out (alpha 0 for this update: offline SAC)."""
    alpha, agent.cfg.cql_alpha = agent.cfg.cql_alpha, 0.0
    try:
        return agent.update(batch)
    finally:
        agent.cfg.cql_alpha = alpha


def wrong_sign(agent, batch):
    """Broken: the penalty's sign flipped (``- alpha * gap``: the sampled actions' Q pushed up, the data's down)."""
    from minirl import cql
    penalty = cql.cql_penalty
    cql.cql_penalty = lambda *args, **kw: -penalty(*args, **kw)
    try:
        return agent.update(batch)
    finally:
        cql.cql_penalty = penalty


def frozen_actor(agent, batch):
    """Broken: the actor's step is never taken (its learning rate 0)."""
    for group in agent.actor_opt.param_groups:
        group["lr"] = 0.0
    return agent.update(batch)


BROKEN = {"no_penalty": no_penalty, "wrong_sign": wrong_sign, "frozen_actor": frozen_actor}


def _one(job: tuple[str, int]) -> tuple[str, int, float, float]:
    from minirl.classroom import project_checks as pc
    name, seed = job
    t = time.perf_counter()
    score = pc.train_and_score(BROKEN.get(name), pc.GRADING["cql_alpha"], seed, pc.GRADING["steps"])
    return name, seed, score, time.perf_counter() - t


def main() -> None:
    from minirl.classroom import project_checks as pc
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2, help="runs at a time, one thread each (default 2)")
    args = p.parse_args()
    g = pc.GRADING["seed"]
    jobs = [("reference", s) for s in REFERENCE_SEEDS + (g,)]
    jobs += [(name, s) for name in BROKEN for s in range(g, g + 5)]
    pc.project_data()  # make the dataset once before the workers start
    results: list[tuple] = []
    with ProcessPoolExecutor(args.workers) as pool:
        for r in pool.map(_one, jobs):
            results.append(r)
            print(f"{r[0]:>13} seed {r[1]:>3}: score {r[2]:7.1f}  ({r[3]:.0f} s)", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    ref = {s: sc for n, s, sc, _ in results if n == "reference"}
    from run_suite import hardware  # the machine and software, as every suite run records them
    common = {**pc.GRADING, "dataset": pc.DATASET, "hidden": list(pc.HIDDEN), "n_actions": pc.N_ACTIONS,
              "eval_episodes": pc.EVAL_EPISODES, **hardware(), "precision": "float32", "threads_per_run": 1,
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "seconds_per_run": round(sum(r[3] for r in results) / len(results), 1)}
    reference = {**common, "seeds": list(REFERENCE_SEEDS), "scores": [ref[s] for s in REFERENCE_SEEDS],
                 "grading_seed_score": ref[g], "tolerance": pc.TOLERANCE}
    (OUT / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    floor = pc.passing_score(reference)
    broken = {**common, "passing_score": floor,
              "updates": {name: {"doc": BROKEN[name].__doc__, "seeds": list(range(g, g + 5)),
                                 "scores": [sc for n, s, sc, _ in results if n == name]} for name in BROKEN}}
    (OUT / "broken.json").write_text(json.dumps(broken, indent=1) + "\n")
    print(f"reference seeds 0-19: {min(reference['scores']):.1f} to {max(reference['scores']):.1f}; "
          f"passing score {floor:.1f}; grading seed {ref[g]:.1f}")
    for name, b in broken["updates"].items():
        print(f"{name}: {', '.join(f'{x:.1f}' for x in b['scores'])}; passes {sum(x >= floor for x in b['scores'])}/5")


if __name__ == "__main__":
    main()
