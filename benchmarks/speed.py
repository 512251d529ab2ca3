"""Updates per second of minirl's algorithms at the reference network and batch sizes, next to d3rlpy's.

    python benchmarks/speed.py --threads 1                 # every algorithm, Hopper-sized data, on the CPU
    python benchmarks/speed.py --algos iql cql --seconds 20 --device cuda
    python benchmarks/speed.py --unfused                   # also the unfused variant, for insight
    python benchmarks/speed.py --amp                       # also minirl under bfloat16 autocast (train --amp)
    python benchmarks/speed.py --no-d3rlpy                 # minirl only
    python benchmarks/speed.py --profile 30 --algos cql    # torch.profiler over 30 updates instead of timing
    python benchmarks/speed.py --profile 100 --amp --algos iql   # the same for the bfloat16 update
    python benchmarks/speed.py --targets --threads 1 --corl ~/CORL   # the speed targets' table, CORL as a peer

Each algorithm is built with its default config (the paper's sizes) on a synthetic Hopper-sized dataset
(obs 11, action 3, 100k transitions), warmed up, then timed over ``--seconds`` of updates; the printed rate counts
whole updates (critic, value and actor steps as the algorithm does them), with the loop's per-step host work: the
batch sampling included, evaluation excluded.

``--unfused`` adds, per algorithm, the same update with the critic ensemble evaluated one replica at a time in a
Python loop and every logged value turned into a Python float (``.item()``) at every step, which is how many
reference implementations are written; the ratio says what the batched ensemble and the absence of host syncs buy.

``--amp`` adds minirl's update under bfloat16 autocast (``minirl.devices.autocast``, what ``train --amp`` runs:
hidden layers in bfloat16, output layers, losses and parameters in float32) and its ratio to d3rlpy's float32
update. The target column judges the float32 update only: equal sizes *and* equal precision.

d3rlpy (optional: ``pip install --no-deps d3rlpy==2.8.1`` and its needs, see benchmarks/README.md) is measured in
the same run when it imports: the same algorithm built with minirl's default sizes (:func:`d3rlpy_config`: hidden
layers, critics, batch, sampled actions, VAE) on the same synthetic arrays (a ``d3rlpy.dataset.MDPDataset``), each
step being what ``d3rlpy``'s ``fit`` loop does per step minus its logger and progress bar:
``batch = dataset.sample_transition_batch(batch_size); algo.update(batch)`` (d3rlpy's update converts the numpy
batch to tensors, runs the gradient steps and returns the losses as Python floats). Beneath the rates the script
prints, per algorithm, the parameter counts of both sides' online networks and the matmul FLOPs of one update
(``torch.utils.flop_counter``), so a reader can check that the sizes, and the work, match.

``--targets`` prints instead one table per algorithm for the speed targets, all in one run: minirl in float32, in
bfloat16 and in bfloat16 with every network compiled (``train --compile``), d3rlpy and CORL in float32 (CORL's
single-file ``iql.py``/``cql.py`` from a checkout named by ``--corl DIR``, see ``benchmarks/corl_peer.py``; a peer
that is not available is a line saying so), the best minirl rate over each peer's, the matmul work per update, and
the achieved GFLOP/s as a fraction of this core's measured matmul peak (:func:`matmul_peak`, 2048x2048 products)
in the precision that rate ran in.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import platform
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from minirl import devices, nets, runs
from minirl.data import OfflineDataset

sys.path.insert(0, str(Path(__file__).parent))  # corl_peer.py beside this file

TARGET = 2.0                          # the target: minirl >= 2x d3rlpy's updates/s ...
TARGET_ALGOS = ("bcq", "cql", "iql")  # ... for these algorithms


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


def _sync(device: str):
    return torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)


def _timed_loop(step, seconds: float, device: str, warmup: int = 5) -> tuple[float, int]:
    """Run ``step`` ``warmup`` times, then as often as fits in ``seconds``; returns (updates/s, updates)."""
    for _ in range(warmup):  # allocator, lazy init
        step()
    sync = _sync(device)
    sync()
    n, start = 0, time.perf_counter()
    last = None
    while time.perf_counter() - start < seconds:
        last = step()
        n += 1
    if isinstance(last, dict) and last:
        float(next(iter(last.values())))  # wait for the last update
    sync()
    return n / (time.perf_counter() - start), n


SIZES = "full"  # whose network sizes minirl's agents take: a scale name (--scale); "full" is every paper's


def make_minirl(algo: str, data: OfflineDataset, device: str, overrides: dict | None = None):
    """minirl's agent ``algo`` at the sizes of scale :data:`SIZES` (a long cosine schedule where the config has one)."""
    overrides = {**runs.get_scale(SIZES).config_for(algo), **runs.algorithm(algo).for_steps(1_000_000),
                 **(overrides or {})}
    return runs.make_agent(algo, data, device, **overrides)


def time_updates(algo: str, data: OfflineDataset, batch_size: int, seconds: float, device: str,
                 unfused: bool = False, overrides: dict | None = None, amp: bool = False,
                 compile: bool = False) -> float:
    """Updates per second of ``algo`` over ``seconds`` after a warm-up (under bfloat16 autocast if ``amp``; with
    every network compiled by ``devices.compile_agent`` if ``compile``, the warm-up then includes the compilation)."""
    torch.manual_seed(0)
    agent, _ = make_minirl(algo, data, device, overrides)
    if compile:
        devices.compile_agent(agent)
    gen = torch.Generator(device=device).manual_seed(0)
    ctx = unfused_critics() if unfused else contextlib.nullcontext()
    precision = devices.autocast(device, amp)
    with ctx:
        def step():
            with precision:
                logs = agent.update(data.sample(batch_size, device, gen))
            if unfused:
                {k: float(v) for k, v in logs.items()}
            return logs

        return _timed_loop(step, seconds, device)[0]


# --------------------------------------------------------------------------------------------------------------
# d3rlpy, the same algorithms at the same sizes
# --------------------------------------------------------------------------------------------------------------

def import_d3rlpy():
    """The ``d3rlpy`` module, or None when it (or one of its dependencies) is not installed."""
    try:
        import d3rlpy
    except ImportError:
        return None
    return d3rlpy


def _quiet_d3rlpy() -> None:
    """d3rlpy logs every dataset and model build through structlog at INFO level: keep warnings only."""
    import logging

    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def d3rlpy_dataset(data: OfflineDataset, d3rlpy):
    """The same arrays as a d3rlpy ``MDPDataset`` (episodes end at the terminals; the last one is closed by a
    timeout). d3rlpy takes the next observation from the following row of an episode, not from
    ``data.next_observations``: the numbers differ, the shapes and the work do not."""
    terminals = np.asarray(data.terminals, dtype=np.float32)
    timeouts = np.asarray(data.timeouts, dtype=np.float32).copy()
    if not terminals[-1]:
        timeouts[-1] = 1.0
    return d3rlpy.dataset.MDPDataset(np.asarray(data.observations), np.asarray(data.actions),
                                     np.asarray(data.rewards), terminals, timeouts)


def d3rlpy_config(algo: str, config, act_dim: int, batch_size: int, d3rlpy):
    """d3rlpy's config of the algorithm ``algo`` with the sizes of minirl's ``config``, or None when d3rlpy has no
    counterpart (``sac-offline``, the deterministic IQL actor, a BCQ latent size other than ``2 * act_dim``)."""
    A, V = d3rlpy.algos, d3rlpy.models.VectorEncoderFactory
    c = config
    if algo == "bc":
        return A.BCConfig(batch_size=batch_size, learning_rate=c.lr, encoder_factory=V(list(c.hidden)),
                          policy_type="deterministic" if c.actor == "deterministic" else "stochastic")
    if algo == "iql" and c.actor == "gaussian":
        h = V(list(c.hidden))
        return A.IQLConfig(batch_size=batch_size, actor_learning_rate=c.actor_lr, critic_learning_rate=c.critic_lr,
                           actor_encoder_factory=h, critic_encoder_factory=h, value_encoder_factory=h,
                           n_critics=c.n_critics, gamma=c.gamma, tau=c.tau, expectile=c.expectile,
                           weight_temp=c.beta, max_weight=c.max_exp_adv)
    if algo in ("cql", "cql-lagrange"):
        # d3rlpy's critic penalty is exp(log_alpha) * conservative_weight * (gap - alpha_threshold); a zero alpha
        # learning rate keeps alpha at 1 (no dual step), which is minirl's fixed-weight CQL(H)
        return A.CQLConfig(batch_size=batch_size, actor_learning_rate=c.actor_lr, critic_learning_rate=c.critic_lr,
                           temp_learning_rate=c.alpha_lr, alpha_learning_rate=c.alpha_prime_lr if c.lagrange else 0.0,
                           actor_encoder_factory=V(list(c.actor_hidden)),
                           critic_encoder_factory=V(list(c.critic_hidden)), n_critics=c.n_critics, gamma=c.gamma,
                           tau=c.tau, conservative_weight=c.cql_alpha,
                           alpha_threshold=c.target_action_gap if c.lagrange else 0.0,
                           n_action_samples=c.n_actions, soft_q_backup=not c.deterministic_backup,
                           max_q_backup=c.max_target_backup)
    if algo == "bcq" and c.latent_dim in (None, 2 * act_dim):  # d3rlpy's latent size is fixed at 2 * act_dim
        # d3rlpy's n_action_samples is the number of VAE actions per next state in the critic target (minirl's
        # n_target_samples); minirl's n_action_samples only matters when acting
        return A.BCQConfig(batch_size=batch_size, actor_learning_rate=c.actor_lr, critic_learning_rate=c.critic_lr,
                           imitator_learning_rate=c.vae_lr, actor_encoder_factory=V(list(c.actor_hidden)),
                           critic_encoder_factory=V(list(c.critic_hidden)),
                           imitator_encoder_factory=V(list(c.vae_hidden)), n_critics=2, gamma=c.gamma, tau=c.tau,
                           lam=c.lmbda, n_action_samples=c.n_target_samples, action_flexibility=c.phi,
                           beta=c.kl_weight)
    return None


def _d3rlpy_device(device: str) -> str:
    d = torch.device(device)
    return f"{d.type}:{0 if d.index is None else d.index}"


def minirl_config(algo: str):
    """minirl's config of ``algo`` at the sizes of scale :data:`SIZES` (with presets such as ``cql-lagrange``'s)."""
    return runs.make_config(algo, runs.get_scale(SIZES).config_for(algo))


def make_d3rlpy(algo: str, data: OfflineDataset, d3data, batch_size: int, device: str, d3rlpy):
    """d3rlpy's counterpart of minirl's default ``algo``, built for ``d3data``; None if there is none."""
    cfg = d3rlpy_config(algo, minirl_config(algo), data.act_dim, batch_size, d3rlpy)
    if cfg is None:
        return None
    model = cfg.create(device=_d3rlpy_device(device))
    model.build_with_dataset(d3data)
    return model


def time_d3rlpy(model, d3data, batch_size: int, seconds: float, device: str) -> tuple[float, float]:
    """Updates per second of the d3rlpy ``model`` (sampling included, as in its ``fit`` loop) and the fraction of
    the time spent sampling batches."""
    np.random.seed(0)  # d3rlpy's transition sampler draws from numpy's global generator
    torch.manual_seed(0)
    sampling = [0.0]

    def step():
        t = time.perf_counter()
        batch = d3data.sample_transition_batch(batch_size)
        sampling[0] += time.perf_counter() - t
        return model.update(batch)  # floats: d3rlpy reads every loss on the host

    _timed_loop(step, 0.0, device)  # warm-up only, so that the sampling share below covers the timed window
    sampling[0] = 0.0
    start = time.perf_counter()
    rate, _ = _timed_loop(step, seconds, device, warmup=0)
    return rate, sampling[0] / (time.perf_counter() - start)


# --------------------------------------------------------------------------------------------------------------
# Sizes and work: parameter counts and matmul FLOPs of one update
# --------------------------------------------------------------------------------------------------------------

def _count(modules) -> int:
    seen = {}
    for m in modules:
        for p in m.parameters():
            seen[id(p)] = p.numel()
    return sum(seen.values())


def minirl_params(agent) -> int:
    """Parameters of the agent's online networks (every ``nn.Module`` attribute but the target copies); learned
    scalars held as bare tensors (CQL's log alpha and log alpha') are not counted."""
    return _count(m for k, m in vars(agent).items() if isinstance(m, torch.nn.Module) and "target" not in k)


def d3rlpy_params(model) -> int:
    """Parameters of a built d3rlpy model's online networks (its ``targ_*`` copies and the learned scalars that d3rlpy
    wraps as ``Parameter`` modules, CQL's log temperature and log alpha, are not counted)."""
    mods = model.impl.modules
    return _count(getattr(mods, f.name) for f in dataclasses.fields(mods)
                  if isinstance(getattr(mods, f.name), torch.nn.Module) and not f.name.startswith("targ_")
                  and type(getattr(mods, f.name)).__name__ != "Parameter")


def param_counts(algo: str, data: OfflineDataset, batch_size: int = 256, d3data=None, d3rlpy=None):
    """``(minirl's network parameters, d3rlpy's or None)`` of ``algo`` at minirl's default sizes."""
    agent, _ = make_minirl(algo, data, "cpu")
    theirs = None
    if d3rlpy is not None:
        model = make_d3rlpy(algo, data, d3data if d3data is not None else d3rlpy_dataset(data, d3rlpy),
                            batch_size, "cpu", d3rlpy)
        theirs = None if model is None else d3rlpy_params(model)
    return minirl_params(agent), theirs


def update_flops(update) -> float:
    """Matmul FLOPs of one call of ``update()`` (forward and backward), from ``torch.utils.flop_counter``."""
    from torch.utils.flop_counter import FlopCounterMode
    update()  # lazy state (optimiser moments) first
    with FlopCounterMode(display=False) as counter:
        update()
    return float(counter.get_total_flops())


def matmul_peak(dtype: torch.dtype, device: str = "cpu", n: int = 2048, seconds: float = 3.0) -> float:
    """This core's matmul rate in GFLOP/s: ``n x n`` products in ``dtype`` for ``seconds`` (the best a layer can
    reach here; layers as small as 256 wide reach less)."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    rate, _ = _timed_loop(lambda: torch.mm(a, b), seconds, device, warmup=2)
    return 2 * n ** 3 * rate / 1e9


def targets_table(algos, data: OfflineDataset, batch_size: int, seconds: float, device: str, corl_dir, d3rlpy,
                  d3data) -> Iterator[str]:
    """The speed targets' table (``--targets``), as Markdown lines, each given as soon as it is measured: an
    algorithm's row takes minutes where bfloat16 is emulated and compiling is slow (one machine printed nothing for
    6.5 minutes when the table came out whole at the end)."""
    peak = {"float32": matmul_peak(torch.float32, device), "bf16": matmul_peak(torch.bfloat16, device)}
    yield from [f"Matmul peak of this core (2048x2048): float32 {peak['float32']:.0f} GFLOP/s, bfloat16 "
                f"{peak['bf16']:.0f} GFLOP/s", "",
                "| algorithm | float32 | bf16 | bf16 + compile | d3rlpy | CORL | best / d3rlpy | best / CORL | "
                "GFLOP/update | best GFLOP/s | of the peak |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    gen = torch.Generator(device=device).manual_seed(1)
    for algo in algos:
        rates = {"float32": time_updates(algo, data, batch_size, seconds, device),
                 "bf16": time_updates(algo, data, batch_size, seconds, device, amp=True),
                 "bf16 + compile": time_updates(algo, data, batch_size, seconds, device, amp=True, compile=True)}
        best = max(rates, key=rates.get)
        peers = []
        model = None if d3rlpy is None else make_d3rlpy(algo, data, d3data, batch_size, device, d3rlpy)
        peers.append(None if model is None else time_d3rlpy(model, d3data, batch_size, seconds, device)[0])
        corl = None
        if corl_dir is not None:
            from corl_peer import make_peer
            peer = make_peer(corl_dir, algo, data, batch_size, device)
            corl = None if peer is None else _timed_loop(peer[0], seconds, device)[0]
        peers.append(corl)
        torch.manual_seed(0)
        agent, _ = make_minirl(algo, data, device)
        flops = update_flops(lambda: agent.update(data.sample(batch_size, device, gen))) / 1e9
        cells = [f"{r:,.1f}" for r in rates.values()]
        cells += ["-" if p is None else f"{p:,.1f}" for p in peers]
        cells += ["-" if p is None else f"{rates[best] / p:.2f}" for p in peers]
        achieved = flops * rates[best]
        cells += [f"{flops:.3f}", f"{achieved:.0f}", f"{100 * achieved / peak[best.split()[0]]:.0f} % ({best})"]
        yield f"| {algo} | " + " | ".join(cells) + " |"


# --------------------------------------------------------------------------------------------------------------
# Profile
# --------------------------------------------------------------------------------------------------------------

_GEMM = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def profile_updates(algo: str, data: OfflineDataset, batch_size: int, updates: int, device: str,
                    top: int = 15, amp: bool = False) -> str:
    """torch.profiler over ``updates`` updates of minirl's ``algo`` (each under bfloat16 autocast if ``amp``, entered
    per update as :func:`minirl.train.train` does): the share of the wall time in matmuls, in the other aten ops and
    outside any op (Python, autograd bookkeeping), then the top ops by self time, where ``aten::_to_copy`` counts the
    dtype conversions."""
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    agent, _ = make_minirl(algo, data, device)
    gen = torch.Generator(device=device).manual_seed(0)
    precision = devices.autocast(device, amp)

    def step():
        with precision:
            agent.update(data.sample(batch_size, device, gen))

    for _ in range(5):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(updates):
            step()
        wall = time.perf_counter() - start
    events = prof.key_averages()
    total_us = wall * 1e6
    gemm = sum(e.self_cpu_time_total for e in events if e.key in _GEMM)
    ops = sum(e.self_cpu_time_total for e in events if e.key.startswith("aten::"))
    lines = [f"## {algo} ({'bf16' if amp else 'float32'}): {updates} updates, {wall / updates * 1e3:.1f} ms per update "
             "(profiler on)",
             f"matmuls (mm/addmm/bmm/baddbmm, forward and backward): {100 * gemm / total_us:.1f} % of the wall time; "
             f"other aten ops: {100 * (ops - gemm) / total_us:.1f} %; "
             f"outside aten ops (Python, autograd and profiler bookkeeping): {100 * (1 - ops / total_us):.1f} %",
             "", "| op | self time % | calls per update |", "| --- | ---: | ---: |"]
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:top]:
        lines.append(f"| {e.key} | {100 * e.self_cpu_time_total / total_us:.1f} | {e.count / updates:.0f} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------------------

def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _loadavg() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # not on every platform
        return "n/a"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", nargs="+", default=["bc", "bcq", "cql", "iql"], choices=sorted(runs.ALGORITHMS))
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--seconds", type=float, default=15.0, help="timing window per measurement")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--unfused", action="store_true", help="also time the unfused variant")
    p.add_argument("--amp", action="store_true", help="also time minirl under bfloat16 autocast")
    p.add_argument("--compile", action="store_true",
                   help="also time minirl with every network compiled (torch.compile, default mode)")
    p.add_argument("--d3rlpy", action=argparse.BooleanOptionalAction, default=True,
                   help="also time d3rlpy's algorithms at the same sizes when d3rlpy is installed (default: on)")
    p.add_argument("--dataset-size", type=int, default=100_000, help="synthetic transitions")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="instead of timing, profile N updates of each of minirl's algorithms (torch.profiler)")
    p.add_argument("--targets", action="store_true",
                   help="instead, the speed targets' table: float32, bf16, bf16 + compile, d3rlpy, CORL, peak share")
    p.add_argument("--adam", choices=["fused", "plain"], default="fused",
                   help="minirl's optimiser: fused Adam (nets.adam, the default where torch has it) or torch's plain "
                        "Adam, for an A/B of the two")
    p.add_argument("--scale", default="full", choices=sorted(runs.SCALES),
                   help="network sizes of that scale for minirl and d3rlpy (default full: the papers'; cpu: CQL and "
                        "BCQ smaller, see minirl.runs.SCALES)")
    p.add_argument("--corl", metavar="DIR", default=None,
                   help="a checkout of tinkoff-ai/CORL: time its iql.py and cql.py as peers (with --targets)")
    a = p.parse_args(argv)
    if a.corl is not None and not (Path(a.corl) / "algorithms" / "offline").is_dir():
        p.error(f"--corl {a.corl}: not a CORL checkout (no algorithms/offline/ folder)")
    if a.corl is not None and a.scale != "full":
        p.error(f"--corl runs CORL's scripts at the papers' sizes: it needs --scale full, got --scale {a.scale}")
    global SIZES
    SIZES = a.scale
    if a.adam == "plain":
        nets._FUSED_ADAM = False  # nets.adam then builds torch.optim.Adam without fused=True
    if a.threads:
        torch.set_num_threads(a.threads)
    data = synthetic_dataset(a.dataset_size)
    data.to_tensors(a.device)
    if a.profile:
        for algo in a.algos:
            print(profile_updates(algo, data, a.batch_size, a.profile, a.device, amp=a.amp) + "\n", flush=True)
        return 0

    d3rlpy = import_d3rlpy() if a.d3rlpy else None
    if d3rlpy is not None:
        _quiet_d3rlpy()
        d3data = d3rlpy_dataset(data, d3rlpy)
    d3_label = (f"d3rlpy {d3rlpy.__version__}" if d3rlpy is not None
                else "d3rlpy not installed" if a.d3rlpy else "d3rlpy not measured (--no-d3rlpy)")
    print(f"# {platform.machine()} CPU ({_cpu_name()}) x{torch.get_num_threads()} torch threads, device {a.device}, "
          f"torch {torch.__version__}, {d3_label}, {a.scale} scale's network sizes, "
          f"{'fused' if nets._FUSED_ADAM else 'plain'} Adam, batch {a.batch_size}, "
          f"{a.seconds:g} s per measurement, "
          f"load average {_loadavg()} at the start\n")
    if a.targets:
        if a.corl is None:
            print("CORL not measured: no --corl DIR (a checkout of github.com/tinkoff-ai/CORL)\n")
        for line in targets_table(a.algos, data, a.batch_size, a.seconds, a.device, a.corl, d3rlpy,
                                  d3data if d3rlpy is not None else None):
            print(line, flush=True)
        print(f"\n# load average {_loadavg()} at the end")
        return 0
    header = "| algorithm | updates/s |"
    rule = "| --- | ---: |"
    if a.unfused:
        header += " unfused updates/s | fused / unfused |"
        rule += " ---: | ---: |"
    if a.amp:
        header += " bf16 autocast updates/s |"
        rule += " ---: |"
    if a.compile:
        header += " compiled updates/s | compiled / eager |"
        rule += " ---: | ---: |"
    if a.d3rlpy:
        header += f" d3rlpy updates/s | minirl / d3rlpy | >= {TARGET:g}x d3rlpy |"
        rule += " ---: | ---: | :---: |"
        if a.amp:
            header += " minirl bf16 / d3rlpy |"
            rule += " ---: |"
    print(header)
    print(rule)
    sizes = []
    for algo in a.algos:
        rate = time_updates(algo, data, a.batch_size, a.seconds, a.device)
        row = f"| {algo} | {rate:,.1f} |"
        if a.unfused:
            slow = time_updates(algo, data, a.batch_size, a.seconds, a.device, unfused=True)
            row += f" {slow:,.1f} | {rate / slow:.2f} |"
        if a.amp:
            fast = time_updates(algo, data, a.batch_size, a.seconds, a.device, amp=True)
            row += f" {fast:,.1f} |"
        if a.compile:
            compiled = time_updates(algo, data, a.batch_size, a.seconds, a.device, compile=True)
            row += f" {compiled:,.1f} | {compiled / rate:.2f} |"
        if a.d3rlpy:
            model = (None if d3rlpy is None
                     else make_d3rlpy(algo, data, d3data, a.batch_size, a.device, d3rlpy))
            if d3rlpy is None:
                row += " not installed | - | - |" + (" - |" if a.amp else "")
            elif model is None:
                row += " no counterpart | - | - |" + (" - |" if a.amp else "")
            else:
                theirs, sampling = time_d3rlpy(model, d3data, a.batch_size, a.seconds, a.device)
                target = ("yes" if rate >= TARGET * theirs else "no") if algo in TARGET_ALGOS else "-"
                row += f" {theirs:,.1f} | {rate / theirs:.2f} | {target} |"
                if a.amp:
                    row += f" {fast / theirs:.2f} |"
                sizes.append((algo, rate, model, theirs, sampling))
        print(row, flush=True)

    if sizes:
        print(f"\nSizes and work per update (online networks' parameters, target copies excluded; matmul FLOPs of one "
              f"update, forward and backward, counted by torch.utils.flop_counter; achieved = FLOPs x updates/s):\n")
        print("| algorithm | minirl params | d3rlpy params | equal | minirl GFLOP/update | d3rlpy GFLOP/update | "
              "minirl GFLOP/s | d3rlpy GFLOP/s | d3rlpy time in sampling |")
        print("| --- | ---: | ---: | :---: | ---: | ---: | ---: | ---: | ---: |")
        gen = torch.Generator(device=a.device).manual_seed(1)
        for algo, rate, model, theirs, sampling in sizes:
            torch.manual_seed(0)
            agent, _ = make_minirl(algo, data, a.device)
            mine_p, theirs_p = minirl_params(agent), d3rlpy_params(model)
            mine_f = update_flops(lambda: agent.update(data.sample(a.batch_size, a.device, gen))) / 1e9
            theirs_f = update_flops(lambda: model.update(d3data.sample_transition_batch(a.batch_size))) / 1e9
            print(f"| {algo} | {mine_p:,} | {theirs_p:,} | {'yes' if mine_p == theirs_p else 'NO'} | {mine_f:.3f} | "
                  f"{theirs_f:.3f} | {mine_f * rate:.0f} | {theirs_f * theirs:.0f} | {100 * sampling:.0f} % |",
                  flush=True)
    print(f"\n# load average {_loadavg()} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
