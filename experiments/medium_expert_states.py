"""Which behaviour does IQL's actor follow on hopper-medium-expert? AWR weights by group of episode, visited states.

On ``hopper-medium-expert`` IQL's 1M-step runs reach the expert's level early and then, at most later evaluations, score
about 40, about the mean score of the medium half's episodes (41.6) and of the expert's episodes that fall (43.2),
while 10%BC, which clones only the best tenth of the episodes (all of them the expert's full-length ones), stays near
118. This script reads agents saved during such a
run (checkpoints, or ``agent.pt``) and measures, for each:

1. **The advantage weights by group.** ``hopper-medium-expert`` is the medium dataset followed by the expert dataset,
   so a transition's source is which half it is in; the expert's episodes are split into those that ran to the
   1,000-step limit and those that fell. At the ``t``-th step of every episode (``--times``) and on a random sample
   of all transitions, per group: the mean advantage ``A = min_i Qtarget_i(s, a) - V(s)``, the mean AWR weight
   ``min(exp(beta A), max_weight)`` (what ``IQL.update`` computes), and the group's share of the summed weight beside
   its share of the count. Where the weights favour a group's actions, the first share exceeds the second.
2. **Where its episodes go.** It runs the deterministic policy for ``--episodes`` episodes with the seeds of the run's
   own evaluations (``10,000 * (seed + 1) + i``), and for every ``--stride``-th visited state finds the nearest
   dataset state (Euclidean distance after the run's state normalisation) among ``--sample`` states drawn from each
   half, and keeps that state's group (medium, an expert episode that ran 1,000 steps, an expert episode that fell):
   the share of visited states whose nearest neighbour is an expert state says which behaviour's states the episode
   is in (``data.json`` holds the same share for some of the dataset's own episodes: a check that it separates them).

One JSON file per agent goes to ``--out`` (``step<k>.json``), and ``data.json`` with every episode of the dataset (its
group, length and score), so that notebook 4 reads them without the 2M-transition roll-out. Usage::

    OMP_NUM_THREADS=1 python experiments/medium_expert_states.py SNAPSHOT.pt [...] --config RUN/config.json \\
        --out results/record-1m-states/iql-s1

A snapshot is a ``checkpoint.pt`` copied while the run trained (the run deletes its checkpoint when it finishes);
``--config`` is that run's ``config.json``. A finished run's directory with its ``agent.pt`` works too.

It wrote ``results/record-1m-states/iql-s1`` (25 agents of seed 1 of ``results/record-1m/iql/hopper-medium-expert``,
375,000 to 975,000 steps) and ``results/record-1m-states/iql-s2`` (39 agents of seed 2, 25,000 to 975,000 steps).

Book section: book/iql.md, "Results of record", the paragraph "Why IQL leaves the expert's level on
``hopper-medium-expert``"; notebook 4 (``notebooks/04_iql.ipynb``), "Why IQL leaves the expert's level on
``hopper-medium-expert``".
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from minirl import datasets
from minirl.iql import awr_weights, value_target
from minirl.evaluation import run_episodes
from minirl.runs import load_agent

DATASET = "hopper-medium-expert"


def load(path: Path, config: Path | None):
    """The agent of a run directory, or of a checkpoint file with the run's ``config.json``."""
    if path.is_dir():
        return load_agent(path)
    if config is None:
        raise SystemExit(f"{path}: a checkpoint file needs --config (the run's config.json)")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(config, Path(tmp) / "config.json")
        (Path(tmp) / "checkpoint.pt").symlink_to(path.resolve())
        return load_agent(tmp)


GROUPS = ("medium", "expert, ran 1,000 steps", "expert, fell")


def episode_groups(ds, half: int) -> np.ndarray:
    """Each transition's group (an index into GROUPS): the medium half's episodes, and the expert half's episodes
    that ran to the 1,000-step limit or fell before it (about 4 in 10 of the expert's episodes fall, at ~300 steps)."""
    group = np.zeros(len(ds), dtype=int)
    for start, stop in ds.episode_bounds():
        if start >= half:
            group[start:stop] = 1 if stop - start == 1000 else 2
    return group


def weights_by_group(agent, obs: torch.Tensor, act: torch.Tensor, group: np.ndarray) -> dict:
    """Per group of the transitions given: their number, mean advantage and mean AWR weight, and the group's share
    of the summed weight beside its share of the count."""
    with torch.no_grad():  # as IQL.update computes them
        adv = value_target(agent.critic_target(obs, act).float()) - agent.V(obs).float()
    w = awr_weights(adv, agent.cfg.beta, agent.cfg.max_exp_adv).numpy()
    adv = adv.numpy()
    out = {}
    for g, name in enumerate(GROUPS):
        m = group == g
        if m.any():
            out[name] = {"n": int(m.sum()), "adv": float(adv[m].mean()), "weight": float(w[m].mean()),
                         "share_of_count": float(m.mean()), "share_of_weight": float(w[m].sum() / w.sum())}
    return out


def nearest_group(states: np.ndarray, reference: torch.Tensor, ref_group: torch.Tensor, chunk: int = 50_000):
    """For each state, the group (an index into GROUPS) of its nearest reference state (Euclidean distance)."""
    q = torch.as_tensor(states, dtype=torch.float32)
    best = torch.full((len(q),), float("inf"))
    which = torch.zeros(len(q), dtype=torch.long)
    for lo in range(0, len(reference), chunk):
        d = torch.cdist(q, reference[lo:lo + chunk])
        m, i = d.min(1)
        closer = m < best
        best = torch.where(closer, m, best)
        which = torch.where(closer, ref_group[lo:lo + chunk][i], which)
    return which.numpy()


def calibrate(ds, half: int, normed, ref_idx, reference, ref_group, stride: int, rng, episodes: int = 40) -> dict:
    """The measure on the dataset's own episodes: for ``episodes`` random episodes of each half, the share of their
    states (every ``stride``-th, leaving out those in the reference sample) whose nearest reference state is an
    expert one. Near 0 for the medium half and near 1 for the expert half if the measure tells them apart."""
    bounds = ds.episode_bounds()
    in_reference = np.zeros(len(ds), dtype=bool)
    in_reference[ref_idx] = True
    out = {}
    for name, pick in (("medium", lambda b: b[0] < half), ("expert", lambda b: b[0] >= half)):
        mine = [b for b in bounds if pick(b)]
        shares = []
        for k in rng.choice(len(mine), episodes, replace=False):
            idx = np.arange(*mine[k])[::stride]
            idx = idx[~in_reference[idx]]
            shares.append(float((nearest_group(normed(ds.observations[idx]).numpy(), reference, ref_group) > 0).mean()))
        out[name] = {"episodes": episodes, "mean": float(np.mean(shares)), "min": float(np.min(shares)),
                     "max": float(np.max(shares))}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("agents", type=Path, nargs="+", help="checkpoint files (with --config) or finished run directories")
    p.add_argument("--config", type=Path, default=None, help="the run's config.json, for checkpoint files")
    p.add_argument("--out", type=Path, required=True, help="folder for one step<k>.json per agent")
    p.add_argument("--times", type=int, nargs="+", default=[0, 10, 50, 100, 200, 280], help="episode steps to compare at")
    p.add_argument("--all-sample", type=int, default=200_000, help="random transitions for the all-steps row")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--stride", type=int, default=4, help="every stride-th visited state is matched")
    p.add_argument("--sample", type=int, default=200_000, help="dataset states drawn from each half for matching")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    ds = datasets.load_dataset(DATASET, progress=False)
    half = len(ds) // 2  # medium, then expert (minirl.datasets: medium-expert is the two tiers one after the other)
    starts = np.array([b[0] for b in ds.episode_bounds()])
    lengths = np.array([b[1] - b[0] for b in ds.episode_bounds()])
    rng = np.random.default_rng(0)
    ref_idx = np.concatenate([rng.choice(half, a.sample, replace=False),
                              half + rng.choice(len(ds) - half, a.sample, replace=False)])
    all_idx = rng.choice(len(ds), a.all_sample, replace=False)
    group = episode_groups(ds, half)
    a.out.mkdir(parents=True, exist_ok=True)
    data = {"dataset": DATASET, "transitions": len(ds), "sha256": ds.fingerprint(), "groups": list(GROUPS),
            "episodes": {"group": group[starts].tolist(), "length": lengths.tolist(),
                         "score": np.round(datasets.normalized_score("hopper", ds.episode_returns()), 2).tolist()}}
    for path in a.agents:
        loaded = load(path, a.config)
        agent, norm = loaded.agent, loaded.state_normalizer
        settings = loaded.settings
        if settings.get("data", {}).get("sha256") not in (None, data["sha256"]):
            raise SystemExit(f"{path}: its run trained on another roll-out of {DATASET} (sha256 "
                             f"{settings['data']['sha256'][:12]}...) than this machine's ({data['sha256'][:12]}...)")

        def normed(x):
            return torch.as_tensor(norm.transform(x) if norm is not None else x, dtype=torch.float32)

        rows = {}
        for t in a.times:
            idx = starts[lengths > t] + t
            rows[f"t={t}"] = weights_by_group(agent, normed(ds.observations[idx]), torch.as_tensor(ds.actions[idx]),
                                              group[idx])
        rows["all"] = weights_by_group(agent, normed(ds.observations[all_idx]), torch.as_tensor(ds.actions[all_idx]),
                                       group[all_idx])
        seed = 10_000 * (settings["seed"] + 1)  # the seeds of the run's own evaluations (minirl.train.train)
        ep = run_episodes(agent, loaded.env_id, a.episodes, seed, norm, keep_states=True)
        reference = normed(ds.observations[ref_idx])
        ref_group = torch.as_tensor(group[ref_idx])
        if "calibration" not in data:  # once per run (one state normalisation): does the measure tell the halves apart?
            data["calibration"] = calibrate(ds, half, normed, ref_idx, reference, ref_group, a.stride, rng)
            (a.out / "data.json").write_text(json.dumps(data) + "\n")
            print("calibration on the dataset's own episodes:", {k: round(v["mean"], 3) for k, v in data["calibration"].items()})
        episodes = []
        for ret, states in zip(ep["returns"], ep["states"]):
            near = nearest_group(normed(states[::a.stride]).numpy(), reference, ref_group)
            episodes.append({"return": float(ret), "score": float(datasets.normalized_score("hopper", ret)),
                             "length": len(states), "expert_neighbour_share": float((near > 0).mean()),
                             "nearest_group": near.tolist()})
        record = {"step": loaded.step, "run": {k: settings[k] for k in ("algo", "dataset", "seed", "steps")},
                  "source": path.name, "eval_seeds": [seed, seed + a.episodes - 1], "stride": a.stride,
                  "sample_per_half": a.sample, "weights": rows, "episodes": episodes}
        out = a.out / f"step{loaded.step}.json"
        out.write_text(json.dumps(record) + "\n")
        print(f"step {loaded.step:>9,}: scores " + " ".join(f"{e['score']:.0f}" for e in episodes)
              + " | lengths " + " ".join(str(e["length"]) for e in episodes)
              + " | expert-neighbour share " + " ".join(f"{e['expert_neighbour_share']:.2f}" for e in episodes)
              + f" -> {out}")
        for k, row in rows.items():
            print(f"  {k:>6}: " + "; ".join(f"{g} weight {r['weight']:.2f} (share {r['share_of_weight']:.2f} of "
                                            f"{r['share_of_count']:.2f})" for g, r in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
