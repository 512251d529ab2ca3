"""IQL on hopper-medium-replay in one plain loop: the dataset, the agent, sample and update, evaluation.

    python examples/iql_hopper.py                  # 50,000 steps (the book's `cpu` budget), about 10 minutes on a CPU
    python examples/iql_hopper.py --steps 2000     # a quick look

Everything else minirl does (checkpoints, exact resume, stacked seeds, the command line) wraps this loop;
`minirl/iql.py` holds the update itself, the paper's equations in its docstring.
"""
import argparse

import torch

from minirl import datasets
from minirl.evaluation import evaluate
from minirl.iql import IQL, IQLConfig

p = argparse.ArgumentParser(allow_abbrev=False)
p.add_argument("--dataset", default="hopper-medium-replay")
p.add_argument("--steps", type=int, default=50_000)
p.add_argument("--eval-every", type=int, default=5_000)
p.add_argument("--seed", type=int, default=0)
args = p.parse_args()
torch.manual_seed(args.seed)

data = datasets.load_dataset(args.dataset)                  # D4RL's dict format, made here on first use and cached
task = datasets.get_task(args.dataset)                       # its environment and reference returns
states = data.state_normalizer()                             # the paper's preprocessing: (s - mean) / std ...
rewards = data.return_range_scaler()                         # ... and r * 1000 / (max return - min return)
train_data = data.transformed(state=states, reward=rewards)

config = IQLConfig(max_steps=args.steps)                     # the paper's MuJoCo settings: expectile 0.7, beta 3
agent = IQL(data.obs_dim, data.act_dim, data.action_low, data.action_high, config)
batches = torch.Generator().manual_seed(args.seed)

for step in range(1, args.steps + 1):
    logs = agent.update(train_data.sample(256, generator=batches))   # V, then the actor, then the critics
    if step % args.eval_every == 0 or step == args.steps:
        returns = evaluate(agent, task.env_id, episodes=10, seed=args.seed, state_normalizer=states)
        score = datasets.normalized_score(task, returns).mean()
        print(f"step {step:6d}  critic loss {float(logs['critic_loss']):8.3f}  score {score:6.1f}")
