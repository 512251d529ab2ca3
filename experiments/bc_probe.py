"""How much room does a dataset leave above behaviour cloning? BC on all of it vs BC on its best 10% of episodes.

    python experiments/bc_probe.py hopper-medium-replay hopper-medium [--steps 5000] [--seeds 3]

Prints, per dataset, the normalised score of each clone (mean and per seed); it writes no ``results/`` folder. Notebook
1 runs the same probe on the pendulum datasets. Book section: book/offline_rl.md, "The datasets of this book" (the
probe of the room above behaviour cloning); notebook 1 (``notebooks/01_offline_rl.ipynb``), "Is there room above
behaviour cloning?"; and the README's "Datasets" section.
"""
import argparse

import numpy as np
import torch

from minirl import datasets
from minirl.runs import make_agent
from minirl.train import prepare_dataset, train


def bc_score(ds, env_id, task, steps, seed, episodes):
    torch.manual_seed(seed)
    agent, config = make_agent("bc", ds)
    data, state_norm, _ = prepare_dataset(ds, normalize_states=config.normalize_states)
    history = train(agent, data, steps, eval_env=env_id, eval_every=steps, eval_episodes=episodes, task=task,
                    seed=seed, state_normalizer=state_norm, progress=False)
    return history["eval"][-1]["score_mean"]


def main():
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="+")
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--episodes", type=int, default=10)
    a = p.parse_args()
    print(f"BC for {a.steps} steps, {a.episodes} evaluation episodes, seeds 0-{a.seeds - 1} (normalised score)")
    for name in a.names:
        task, _ = datasets.parse_name(name)
        ds = datasets.load_dataset(name)
        best = ds.best_episodes(0.1)  # what `--algo 10%bc` trains on
        for label, d in (("BC", ds), ("10%BC", best)):
            scores = [bc_score(d, task.env_id, task.name, a.steps, s, a.episodes) for s in range(a.seeds)]
            print(f"{name:24s} {label:6s} {len(d):>9,d} transitions  mean {np.mean(scores):6.1f}  "
                  f"seeds {np.round(scores, 1)}", flush=True)


if __name__ == "__main__":
    main()
