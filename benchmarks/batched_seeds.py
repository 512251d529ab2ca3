"""Seeds as a batch axis on one CPU core: how many seed-updates per second do K seeds in one update give?

minirl trains K seeds of one algorithm as one update (:mod:`minirl.seeds`: the K agents' parameters stacked along a
leading axis, the algorithm's own ``update()`` run on K batches at once; ``train`` with a list of agents,
``minirl train --seeds``, ``run_suite.py --batch-seeds``). This benchmark times that path on the CPU, per seed-update,
against the single-seed path in bfloat16 (what the grid's runs use on this machine), at K = 1, 3, 5, 10, float32 and
bfloat16, for IQL, BC, CQL and BCQ at the papers' sizes: the question is whether K = 5 reaches 1.5x the single-seed
rate per seed-update, and if not, what stops it. It also prints the rate of the update's matrix products alone (the floor a perfect implementation would
approach) for the single seed.

Before timing it checks that the batched update is the plain one: K agents updated one by one and the same K agents
stacked and updated together, from the same batches, give the same losses and parameters (float32, a few steps).
An earlier version of this file measured a ``torch.func.vmap`` over IQL's pure losses instead (benchmarks/README.md
keeps its numbers); the stacked path replaced it, so that the update timed is the one that trains.

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/batched_seeds.py --seeds 1 3 5 10 --corl <CORL checkout>
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import torch

from minirl import devices, runs, seeds

sys.path.insert(0, str(Path(__file__).parent))
from speed import _timed_loop, synthetic_dataset  # noqa: E402  (beside this file)

ALGOS = ("iql", "bc", "cql", "bcq")  # the algorithms with a seed axis (minirl.seeds.check_seed_axis)


def make_agents(data, k: int, device: str = "cpu", algo: str = "iql", **overrides) -> list:
    """K agents of ``algo`` with the paper's settings (and ``overrides``), seeded 0..K-1."""
    overrides = {**runs.algorithm(algo).for_steps(1_000_000), **overrides}
    agents = []
    for seed in range(k):
        torch.manual_seed(seed)
        agents.append(runs.make_agent(algo, data, device, **overrides)[0])
    return agents


def stacked_batch(data, k: int, batch_size: int, gens, device: str = "cpu") -> dict[str, torch.Tensor]:
    """One batch per seed, each from that seed's generator, stacked: ``(K, B, ...)``."""
    return seeds.stack_batches([data.sample(batch_size, device, g) for g in gens[:k]])


@contextlib.contextmanager
def same_noise():
    """Inside the block, the random draws an update makes without a generator (``torch.rand``, ``torch.randn``,
    ``torch.randn_like``, a ``Normal``'s ``rsample``) are a fixed pattern of the draw's last two indices, the same for
    every seed: a stack's draw ``(K, ...)`` then holds, for each seed, the numbers that seed's own agent draws. It is
    for checking a stack against separate agents (CQL's and BCQ's updates sample actions and latents), never for
    training. Draws with an explicit ``generator=`` (batches) are left alone. The tests use it too (test_seeds.py,
    test_td3bc.py)."""
    from torch.distributions import normal

    def pattern(shape, scale=1.0, shift=0.0):
        shape = tuple(shape)
        i = torch.arange(shape[-2] if len(shape) > 1 else 1, dtype=torch.float32).unsqueeze(-1)
        j = torch.arange(shape[-1], dtype=torch.float32)
        values = torch.sin(12.9898 * i + 78.233 * j + 0.5) * scale + shift
        return (values if len(shape) > 1 else values[0]).expand(shape).clone()

    def sizes(shape):
        return shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape

    def on(device):
        return lambda x: x.to(device) if device is not None else x

    saved = torch.rand, torch.randn, torch.randn_like, normal._standard_normal
    rand, randn = saved[0], saved[1]
    torch.rand = lambda *shape, **kw: rand(*shape, **kw) if "generator" in kw else on(kw.get("device"))(
        pattern(sizes(shape), 0.5, 0.5))
    torch.randn = lambda *shape, **kw: randn(*shape, **kw) if "generator" in kw else on(kw.get("device"))(
        pattern(sizes(shape)))
    torch.randn_like = lambda x, **kw: pattern(x.shape).to(x.device, x.dtype)
    normal._standard_normal = lambda shape, dtype=None, device=None: pattern(shape).to(device, dtype)
    try:
        yield
    finally:
        torch.rand, torch.randn, torch.randn_like, normal._standard_normal = saved


def check_same_as_plain(data, k: int = 3, steps: int = 3, batch_size: int = 64, device: str = "cpu",
                        algo: str = "iql", **overrides) -> float:
    """Largest difference between K plain updates and one stacked update (the losses' sums, then each seed's
    parameters and optimiser moments); float32, the updates' random draws made the same (:func:`same_noise`)."""
    plain = make_agents(data, k, device, algo, **overrides)
    batched = seeds.stack(plain)
    gens = [torch.Generator(device=device).manual_seed(100 + i) for i in range(k)]
    worst = 0.0
    for _ in range(steps):
        batch = stacked_batch(data, k, batch_size, gens, device)
        with same_noise():  # CQL's and BCQ's sampled actions: the same noise for the stack and the agents
            logs = [a.update({key: v[i] for key, v in batch.items()}) for i, a in enumerate(plain)]
            together = batched.update(batch)
        for name in (n for n in together if n.endswith("loss")):
            worst = max(worst, abs(float(together[name]) - sum(float(log[name]) for log in logs)))
    for i, a in enumerate(plain):
        for x, y in zip(_tensors(a.state_dict()), _tensors(seeds.member(batched, i).state_dict())):
            if x.is_floating_point():
                worst = max(worst, float((x - y).abs().max()))
    return worst


def _tensors(state) -> list[torch.Tensor]:
    if torch.is_tensor(state):
        return [state]
    if isinstance(state, dict):
        return [t for v in state.values() for t in _tensors(v)]
    if isinstance(state, (list, tuple)):
        return [t for v in state for t in _tensors(v)]
    return []


_GEMMS = {"aten::mm": torch.mm, "aten::addmm": torch.addmm, "aten::bmm": torch.bmm, "aten::baddbmm": torch.baddbmm}


def update_gemms(update) -> list[tuple]:
    """The matrix products one call of ``update()`` makes, forward and backward: ``(op, input shapes)`` in order,
    recorded by torch.profiler."""
    from torch.profiler import ProfilerActivity, profile
    update()  # lazy state first
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        update()
    return [(_GEMMS[e.name], [shape for shape in e.input_shapes if shape]) for e in prof.events() if e.name in _GEMMS]


def gemm_floor(gemms: list[tuple], dtype: torch.dtype, seconds: float) -> float:
    """How many times per second this core runs the update's matrix products alone, back to back in ``dtype``, with
    no other operation: the rate an update could reach if everything else in it took no time."""
    calls = [(op, [torch.randn(*shape).to(dtype) for shape in shapes]) for op, shapes in gemms]

    def products():
        for op, args in calls:
            op(*args)
    return _timed_loop(products, seconds, "cpu")[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 3, 5, 10], help="K values: seeds per update")
    ap.add_argument("--algos", nargs="+", default=list(ALGOS), choices=ALGOS)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=15.0, help="timing window per measurement")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--corl", type=Path, default=None, help="a CORL checkout: time its iql.py in float32 as well")
    args = ap.parse_args(argv)
    if any(k < 1 for k in args.seeds):
        ap.error(f"--seeds: every K must be at least 1, got {args.seeds}")
    if args.corl is not None and not (args.corl / "algorithms" / "offline").is_dir():
        ap.error(f"--corl {args.corl}: not a CORL checkout (no algorithms/offline/ folder)")
    torch.set_num_threads(args.threads)
    data = synthetic_dataset(obs_dim=17, act_dim=6)  # Hopper's sizes
    for algo in args.algos:
        worst = check_same_as_plain(data, algo=algo)
        print(f"{algo}: stacked = plain, largest difference over 3 seeds x 3 updates (losses, parameters, optimiser "
              f"moments), float32: {worst:.1e}")
        if worst > 1e-4:
            print("the stacked update differs from the plain one: not timed", file=sys.stderr)
            return 1
    gens = [torch.Generator().manual_seed(i) for i in range(max(args.seeds))]
    tables = {}
    for algo in args.algos:
        rows = []
        agent = make_agents(data, 1, algo=algo)[0]
        for precision in ("float32", "bf16"):
            ctx = devices.autocast("cpu", precision == "bf16")

            def plain(ctx=ctx):
                with ctx:
                    return agent.update(data.sample(args.batch_size, "cpu", gens[0]))
            rows.append((f"one seed, {precision}", 1, precision, _timed_loop(plain, args.seconds, "cpu")[0]))
        ctx = devices.autocast("cpu", True)

        def one_bf16_update():
            with ctx:
                return agent.update(data.sample(args.batch_size, "cpu", gens[0]))
        gemms = update_gemms(one_bf16_update)
        rows.append((f"its {len(gemms)} matrix products alone, bf16", 1, "bf16",
                     gemm_floor(gemms, torch.bfloat16, args.seconds)))
        for k in args.seeds:
            for precision in ("float32", "bf16"):
                batched = seeds.stack(make_agents(data, k, algo=algo))
                ctx = devices.autocast("cpu", precision == "bf16")

                def together(ctx=ctx, batched=batched, k=k):
                    with ctx:
                        return batched.update(stacked_batch(data, k, args.batch_size, gens))
                rows.append((f"{k} seed{'s' * (k > 1)} stacked, {precision}", k, precision,
                             _timed_loop(together, args.seconds, "cpu")[0]))
        if algo == "iql" and args.corl is not None:
            from corl_peer import make_peer
            peer = make_peer(args.corl, "iql", data, args.batch_size, "cpu")
            rows.append(("CORL iql.py, float32", 1, "float32", _timed_loop(peer[0], args.seconds, "cpu")[0]))
        tables[algo] = rows
    if args.corl is None:
        print("CORL not measured: no --corl DIR (a checkout of github.com/tinkoff-ai/CORL)")
    for algo, rows in tables.items():
        reference = rows[1][3]  # one seed, bf16: the single-seed path the grid's runs take on this machine
        print(f"\n{algo.upper()}, obs 17, act 6, batch {args.batch_size} per seed, {args.threads} thread(s), "
              f"{args.seconds:g} s each\n")
        print("| update | seeds | updates/s | seed-updates/s | / one seed bf16 |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, k, _, rate in rows:
            print(f"| {name} | {k} | {rate:,.1f} | {k * rate:,.1f} | {k * rate / reference:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
