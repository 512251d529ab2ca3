"""Speed of the shared core: batch sampling, BC updates and dataset rollouts. Prints a table.

    python benchmarks/core_speed.py [--device cpu] [--threads N]

Numbers depend on the machine and on what else runs on it; the table says which torch, threads and device.
"""
import argparse
import platform
import time

import numpy as np
import torch

from minirl.bc import BC
from minirl.behavior import load_actor, rollout
from minirl.data import OfflineDataset
from minirl.datasets import ASSETS


def rate(fn, seconds=3.0, warmup=20):
    for _ in range(warmup):
        fn()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - t0)


def synthetic(n=1_000_000, obs_dim=11, act_dim=3):
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(n, obs_dim)).astype(np.float32)
    return OfflineDataset(observations=obs, actions=rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
                          rewards=rng.normal(size=n).astype(np.float32), next_observations=obs,
                          terminals=np.zeros(n, bool), timeouts=np.zeros(n, bool))


def main():
    p = argparse.ArgumentParser(allow_abbrev=False, )
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    rows = []
    ds = synthetic()
    ds.to_tensors(a.device)
    gen = torch.Generator(device=a.device).manual_seed(0)
    rows.append(("sample batch 256 from 1M transitions", "batches/s", rate(lambda: ds.sample(256, a.device, gen))))
    bc = BC(11, 3, -1, 1, device=a.device)
    batch = ds.sample(256, a.device, gen)
    rows.append(("BC update (256x256 MLP, batch 256)", "updates/s", rate(lambda: bc.update(batch))))
    for env_id, task in (("Pendulum-v1", "pendulum"), ("Hopper-v5", "hopper")):
        actor = load_actor(ASSETS / task / "medium.pt")
        for n_envs in (1, 8):
            t0 = time.perf_counter()
            rollout(env_id, 20_000, 0, actor, progress=False, n_envs=n_envs)
            rows.append((f"rollout {env_id}, medium policy, {n_envs} env(s)", "steps/s",
                         20_000 / (time.perf_counter() - t0)))
    print(f"minirl core speed | {platform.processor() or platform.machine()} | torch {torch.__version__} | "
          f"device {a.device} | torch threads {a.threads}")
    print(f"| {'what':52s} | {'unit':9s} | {'rate':>10s} |")
    print(f"| {'-' * 52} | {'-' * 9} | {'-' * 10}:|")
    for what, unit, r in rows:
        print(f"| {what:52s} | {unit:9s} | {r:10,.0f} |")


if __name__ == "__main__":
    main()
