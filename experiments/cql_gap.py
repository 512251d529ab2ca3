"""Why CQL-Lagrange's multiplier runs to its clamp on the stitch maze: the importance-sampled gap's floor, and the
dual step's pace (book/lab/stitching.md, "CQL's divergence").

    python experiments/cql_gap.py RUN_DIR [--log LOG.jsonl] [--out results/stitching-diagnostics/cql-gap.json]

RUN_DIR holds a CQL run's ``config.json`` and its ``agent.pt`` or ``checkpoint.pt`` (the 75,000-step checkpoint of
the stitch task 1 rerun was kept outside git, in /work/runs/cql-second-ckpt/, beside a copy of its config.json).

On 4,096 of the dataset's transitions (a fixed draw) it recomputes the penalty's gap exactly as training does
(``CQL.sampled_q``: N uniform actions, N from pi(.|s) and N from pi(.|s'), each weighted by 1 / its proposal's
density; then :func:`minirl.cql.cql_penalty`) and splits it:

* the **floor**: the gap if Q(s, .) were flat, ``logsumexp_i(-log p_i)``. Only the importance weights make it; to
  bring the gap down to its target the data's action must stand that much above the sampled actions, less the target;
* each group's ``Q - Q(s, a_data)`` and its share ``logsumexp_group(Q - log p) - Q(s, a_data)``;
* the policy's log-density and its pre-tanh standard deviation (wide: its entropy is held at SAC's target).

It does so twice on the same states and the same sampled actions: in float32, and, for a run trained in bfloat16,
under bfloat16 autocast as training computed it (hidden layers in bfloat16, the output layer in float32,
:mod:`minirl.nets`). The difference is the rounding's share of the gap: a soft maximum over 3N rounded values sits
above the soft maximum of the exact ones, and the critic cannot train the rounding away.

From the run's log (``--log``) it reads the multiplier's climb: Adam scales each step of log alpha' to about its
learning rate whatever the gradient's size, so while the gap stays above the target log alpha' rises by about
``alpha_prime_lr`` per step and reaches the clamp (1e6) after about ``ln(1e6) / alpha_prime_lr`` steps (46,000 at
3e-4), however near the target the gap is.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

STATES = 4096
CLAMP = 1e6  # minirl.cql.alpha_prime_value's upper bound


def flat_floor(log_density):
    """The gap of a Q flat in the action: ``logsumexp_i(-log p_i)`` over the sampled actions' proposal densities."""
    import torch
    return torch.logsumexp(-log_density, dim=-1)


def decompose(agent, norm, data, states: int = STATES, seed: int = 0) -> dict:
    import torch

    from minirl.cql import cql_penalty
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    pick = rng.choice(len(data.observations), states, replace=False)

    def tensor(x):
        return torch.as_tensor(x if norm is None else norm.transform(x), dtype=torch.float32)

    obs, next_obs = tensor(data.observations[pick]), tensor(data.next_observations[pick])
    act = torch.as_tensor(data.actions[pick], dtype=torch.float32)
    n = agent.cfg.n_actions
    with torch.no_grad():
        mean, std = agent.actor.mean_std(obs)
        next_mean, next_std = agent.actor.mean_std(next_obs)
        q, log_density = agent.sampled_q(obs, act, mean, std, next_mean, next_std)   # as training draws them
        q_data, q_sampled = q[..., 0], q[..., 1:]
        gap = cql_penalty(q_data, q_sampled, log_density.unsqueeze(-3), agent.cfg.temperature)
        floor = flat_floor(log_density)
        groups = {}
        for k, name in enumerate(("uniform", "pi(s)", "pi(s')")):
            part = slice(k * n, (k + 1) * n)
            groups[name] = {
                "q_minus_q_data": float((q_sampled[..., part] - q_data.unsqueeze(-1)).mean()),
                "share": float((torch.logsumexp(q_sampled[..., part] - log_density[..., part], -1) - q_data).mean()),
                "log_density": float(log_density[..., part].mean())}
    return {"states": states, "n_actions": n, "target_action_gap": agent.cfg.target_action_gap,
            "gap_per_critic": [round(float(g), 4) for g in gap.mean(-1)],
            "floor_mean": float(floor.mean()), "floor_median": float(floor.median()),
            "needed_margin": float(floor.mean()) - agent.cfg.target_action_gap,
            "policy_pre_tanh_std": [round(float(s), 3) for s in std.mean(0)],
            "q_data_mean": float(q_data.mean()), "groups": groups}


def climb(log_path: Path, lr: float) -> dict:
    """log alpha' per step over the run's log while it is under the clamp, against the learning rate."""
    rows = [r for r in map(json.loads, log_path.read_text().splitlines()) if r.get("kind") == "train"]
    under = [(r["step"], math.log(r["alpha_prime"])) for r in rows if r["alpha_prime"] < CLAMP]
    at_clamp = next((r["step"] for r in rows if r["alpha_prime"] >= CLAMP), None)
    (s0, l0), (s1, l1) = under[0], under[-1]
    return {"log_alpha_prime_per_step": (l1 - l0) / (s1 - s0), "alpha_prime_lr": lr, "first_step_at_clamp": at_clamp,
            "steps_to_clamp_at_lr": math.log(CLAMP) / lr,
            "gap_logged": {r["step"]: round(r["cql_gap"], 3) for r in rows if r["step"] % 5000 == 0}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="a CQL run's folder (config.json and agent.pt or checkpoint.pt)")
    p.add_argument("--log", type=Path, help="the run's log.jsonl, for the multiplier's climb")
    p.add_argument("--out", type=Path, default=REPO / "results" / "stitching-diagnostics" / "cql-gap.json")
    a = p.parse_args(argv)
    from minirl import datasets, runs
    loaded = runs.load_agent(a.run)
    if loaded.settings["algo"] != "cql":
        p.error(f"run: {a.run} is a {loaded.settings['algo']} run; a CQL run is needed")
    if a.log is not None and not a.log.is_file():
        p.error(f"--log: {a.log} is not a file")
    import torch
    data = datasets.load_dataset(loaded.settings["dataset"], progress=False)
    precision = loaded.settings.get("precision", "float32")
    out = {"dataset": loaded.settings["dataset"], "seed": loaded.settings["seed"], "step": loaded.step,
           "trained_in": precision, "float32": decompose(loaded.agent, loaded.state_normalizer, data)}
    if precision == "bf16":   # the same states and draws (decompose seeds both), as training computed them
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out["bf16"] = decompose(loaded.agent, loaded.state_normalizer, data)
    if a.log is not None:
        out["climb"] = climb(a.log, loaded.config.alpha_prime_lr)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    for k in ("float32", "bf16"):
        if k in out:
            r = out[k]
            print(f"{k}: gap per critic {r['gap_per_critic']} (target {r['target_action_gap']}); floor "
                  f"{r['floor_mean']:.3f}; Q - Q(data): " + ", ".join(f"{g} {v['q_minus_q_data']:+.3f}"
                                                                    for g, v in r["groups"].items()))
    if "climb" in out:
        c = out["climb"]
        print(f"log alpha' rose {c['log_alpha_prime_per_step']:.2e} per step (lr {c['alpha_prime_lr']:.0e}); "
              f"clamp first at {c['first_step_at_clamp']}; ln(1e6)/lr = {c['steps_to_clamp_at_lr']:,.0f} steps")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
