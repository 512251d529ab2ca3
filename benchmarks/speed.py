"""Updates per second of minirl's algorithms at the reference network and batch sizes.

    python benchmarks/speed.py --threads 1                 # every algorithm, Hopper-sized data, on the CPU
    python benchmarks/speed.py --algos iql cql --seconds 20 --device cuda
    python benchmarks/speed.py --unfused                   # also the unfused variant, for insight

Each algorithm is built with its default config (the paper's sizes) on a synthetic Hopper-sized dataset
(obs 11, action 3, 100k transitions), warmed up, then timed over ``--seconds`` of updates; the printed rate counts
whole updates (critic, value and actor steps as the algorithm does them), with the loop's per-step host work: the
batch sampling included, evaluation excluded.

``--unfused`` adds, per algorithm, the same update with the critic ensemble evaluated one replica at a time in a
Python loop and every logged value turned into a Python float (``.item()``) at every step, which is how many
reference implementations are written; the ratio says what the batched ensemble and the absence of host syncs buy.
"""
from __future__ import annotations

import argparse
import contextlib
import platform
import sys
import time

import numpy as np
import torch

from minirl import nets, train
from minirl.data import OfflineDataset


def synthetic_dataset(n: int = 100_000, obs_dim: int = 11, act_dim: int = 3, seed: int = 0) -> OfflineDataset:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((n, obs_dim)).astype(np.float32)
    return OfflineDataset(observations=obs, actions=rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
                          rewards=rng.standard_normal(n).astype(np.float32),
                          next_observations=obs + 0.1 * rng.standard_normal((n, obs_dim)).astype(np.float32),
                          terminals=rng.random(n) < 0.01, timeouts=np.zeros(n, dtype=bool))


@contextlib.contextmanager
def unfused_critics():
    """Evaluate ``nets.VectorizedLinear`` (the critic ensemble's layers) one replica at a time."""
    fused = nets.VectorizedLinear.forward

    def looped(self, x):
        return torch.stack([x[i] @ self.weight[i] + self.bias[i] for i in range(x.shape[0])])

    nets.VectorizedLinear.forward = looped
    try:
        yield
    finally:
        nets.VectorizedLinear.forward = fused


def time_updates(algo: str, data: OfflineDataset, batch_size: int, seconds: float, device: str,
                 unfused: bool = False, overrides: dict | None = None) -> float:
    """Updates per second of ``algo`` over ``seconds`` after a warm-up."""
    torch.manual_seed(0)
    overrides = dict(overrides or {})
    if "max_steps" in train._config_fields(algo):
        overrides.setdefault("max_steps", 1_000_000)
    agent, _ = train.make_agent(algo, data, device, **overrides)
    gen = torch.Generator(device=device).manual_seed(0)
    ctx = unfused_critics() if unfused else contextlib.nullcontext()
    with ctx:
        def step():
            logs = agent.update(data.sample(batch_size, device, gen))
            if unfused:
                {k: float(v) for k, v in logs.items()}
            return logs

        for _ in range(5):  # warm-up: allocator, lazy init
            step()
        sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
        sync()
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            logs = step()
            n += 1
        float(next(iter(logs.values())))  # wait for the last update
        sync()
        return n / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", nargs="+", default=["bc", "bcq", "cql", "iql"], choices=sorted(train.ALGORITHMS))
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--seconds", type=float, default=15.0, help="timing window per measurement")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--unfused", action="store_true", help="also time the unfused variant")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    data = synthetic_dataset()
    data.to_tensors(a.device)
    print(f"# {platform.machine()} CPU x{torch.get_num_threads()} torch threads, device {a.device}, torch "
          f"{torch.__version__}, batch {a.batch_size}, {a.seconds:.0f} s per measurement\n")
    header = "| algorithm | updates/s |" + (" unfused updates/s | fused / unfused |" if a.unfused else "")
    print(header)
    print("| --- | ---: |" + (" ---: | ---: |" if a.unfused else ""))
    for algo in a.algos:
        rate = time_updates(algo, data, a.batch_size, a.seconds, a.device)
        row = f"| {algo} | {rate:,.1f} |"
        if a.unfused:
            slow = time_updates(algo, data, a.batch_size, a.seconds, a.device, unfused=True)
            row += f" {slow:,.1f} | {rate / slow:.2f} |"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
