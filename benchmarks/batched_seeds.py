"""Several seeds of IQL in one batched update: how many seed-updates per second would it give on one core?

Issue 20 asks for IQL at >= 3x CORL's float32 rate per core *per seed-update*, and suggests training several seeds
in one process as one batched update (the way JAX-CORL vmaps seeds). minirl does not train that way: a reader of
``minirl/iql.py`` must see the paper's update one seed at a time, and IQL's ``update()`` (optimisers stepping in
place) cannot be vmapped as it stands. This benchmark answers the question the library left open, whether the lever
would reach the target here, by measurement: it stacks K IQL agents' parameters (``torch.func.stack_module_state``),
runs ``iql.py``'s own pure losses under ``torch.func.vmap`` in ``IQL.update()``'s order (V, then the actor and the
critics with the updated V, then the target critics), steps one fused Adam per network over the stacked parameters
and times it. It is a measuring instrument, not a training path: nothing in ``minirl`` uses it.

Before timing it checks that the batched update is the plain one: K agents updated one by one and the same K agents
stacked and updated together, from the same batches, give the same losses and parameters (float32, a few steps).

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/batched_seeds.py --seeds 1 3 5 --corl <CORL checkout>
"""
from __future__ import annotations

import argparse
import copy
import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from minirl import devices, iql, nets, runs

sys.path.insert(0, str(Path(__file__).parent))
from speed import _timed_loop, synthetic_dataset  # noqa: E402  (beside this file)


class _LogProb(nn.Module):
    """``forward = actor.log_prob``: functional_call calls ``forward``, the actor's likelihood is another method."""

    def __init__(self, actor: nn.Module):
        super().__init__()
        self.actor = actor

    def forward(self, obs, act):
        return self.actor.log_prob(obs, act)


class _Stacked:
    """One network of K agents: stacked parameters (leading dim K), a stateless copy to call them with, an optimiser."""

    def __init__(self, modules: list[nn.Module], lr: float | None):
        params, buffers = stack_module_state(modules)
        self.params = {k: v.detach().clone().requires_grad_(lr is not None) for k, v in params.items()}
        self.buffers = buffers
        self.base = copy.deepcopy(modules[0]).to("meta")
        self.opt = None if lr is None else nets.adam(list(self.params.values()), lr)

    def __call__(self, *args):
        """The network of every seed at once: each input has a leading dim K."""
        call = lambda p, b, *a: functional_call(self.base, (p, b), a)  # noqa: E731
        return vmap(call)(self.params, self.buffers, *args)

    def step(self, loss: torch.Tensor) -> None:
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


class BatchedIQL:
    """K IQL agents (same config, their own initial weights) updated as one: batches have a leading dim K."""

    def __init__(self, agents: list[iql.IQL]):
        cfg = self.cfg = agents[0].cfg
        if cfg.target_update_period != 1:
            raise ValueError(f"BatchedIQL updates the target critics every step; target_update_period is "
                             f"{cfg.target_update_period}")
        self.value = _Stacked([a.value for a in agents], cfg.value_lr)
        self.log_prob = _Stacked([_LogProb(a.actor) for a in agents], cfg.actor_lr)
        self.critic = _Stacked([a.critic for a in agents], cfg.critic_lr)
        self.critic_target = _Stacked([a.critic_target for a in agents], None)
        # the step count and the actor's learning rate live on the device, and the cosine schedule is computed there,
        # so that a CUDA graph of this update (minirl.devices.CapturedStep) follows the schedule when replayed
        device = next(iter(self.critic.params.values())).device
        self.t = torch.full((), float(agents[0].step), device=device)
        self.actor_lr = torch.tensor(cfg.actor_lr, device=device)
        for group in self.log_prob.opt.param_groups:
            group["lr"] = self.actor_lr

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        obs, act = batch["obs"], batch["act"]
        per_seed = lambda fn, *args: vmap(fn)(*args).sum()  # noqa: E731  (sum of K independent losses)
        with torch.no_grad():
            q_min = vmap(iql.value_target)(self.critic_target(obs, act))
        loss_v = per_seed(lambda v, q: iql.value_loss(v, q, cfg.expectile), self.value(obs).squeeze(-1), q_min)
        self.value.step(loss_v)
        with torch.no_grad():
            v = self.value(obs).squeeze(-1)
            y = iql.q_target(batch["rew"], batch["done"], self.value(batch["next_obs"]).squeeze(-1), cfg.gamma)
        weights = iql.awr_weights(q_min - v, cfg.beta, cfg.max_exp_adv)
        loss_pi = per_seed(iql.awr_actor_loss, weights, -self.log_prob(obs, act))
        if cfg.cosine_actor_lr:  # iql.cosine_lr, as tensor arithmetic
            progress = self.t.clamp(max=cfg.max_steps) / cfg.max_steps
            self.actor_lr.copy_(cfg.actor_lr * 0.5 * (1.0 + torch.cos(math.pi * progress)))
        self.log_prob.step(loss_pi)
        loss_q = per_seed(iql.critic_loss, self.critic(obs, act), y)
        self.critic.step(loss_q)
        self.t += 1
        with torch.no_grad():  # target_update_period = 1 (the paper's; checked in __init__)
            torch._foreach_lerp_(list(self.critic_target.params.values()), list(self.critic.params.values()),
                                 cfg.tau)
        return {"value_loss": loss_v.detach(), "actor_loss": loss_pi.detach(), "critic_loss": loss_q.detach()}


def make_agents(data, k: int, device: str = "cpu", **overrides) -> list[iql.IQL]:
    """K IQL agents with the paper's settings (and ``overrides``), seeded 0..K-1."""
    agents = []
    for seed in range(k):
        torch.manual_seed(seed)
        agents.append(runs.make_agent("iql", data, device, **{"max_steps": 1_000_000, **overrides})[0])
    return agents


def stacked_batch(data, k: int, batch_size: int, gens, device: str = "cpu") -> dict[str, torch.Tensor]:
    """One batch per seed, each from that seed's generator, stacked: ``(K, B, ...)``."""
    batches = [data.sample(batch_size, device, g) for g in gens[:k]]
    return {key: torch.stack([b[key] for b in batches]) for key in batches[0]}


def check_same_as_plain(data, k: int = 3, steps: int = 3, batch_size: int = 64, device: str = "cpu",
                        **overrides) -> float:
    """Largest difference between K plain updates and one batched update (losses, then parameters); float32."""
    plain = make_agents(data, k, device, **overrides)
    batched = BatchedIQL(copy.deepcopy(plain))
    gens = [torch.Generator(device=device).manual_seed(100 + i) for i in range(k)]
    worst = 0.0
    for _ in range(steps):
        batch = stacked_batch(data, k, batch_size, gens, device)
        logs = [a.update({key: v[i] for key, v in batch.items()}) for i, a in enumerate(plain)]
        together = batched.update(batch)
        for name in ("value_loss", "actor_loss", "critic_loss"):
            worst = max(worst, abs(float(together[name]) - sum(float(log[name]) for log in logs)))
    for stacked, module in ((batched.value, lambda a: a.value), (batched.critic, lambda a: a.critic),
                            (batched.critic_target, lambda a: a.critic_target),
                            (batched.log_prob, lambda a: _LogProb(a.actor))):
        for name, p in stacked.params.items():
            for i, a in enumerate(plain):
                mine = dict(module(a).named_parameters())[name]
                worst = max(worst, float((p[i] - mine).detach().abs().max()))
    return worst


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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 3, 5], help="K values: seeds per batched update")
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
    worst = check_same_as_plain(data)
    print(f"batched = plain: largest difference over 3 seeds x 3 updates (losses, parameters), float32: {worst:.1e}")
    if worst > 1e-4:
        print("the batched update differs from the plain one: not timed", file=sys.stderr)
        return 1
    gens = [torch.Generator().manual_seed(i) for i in range(max(args.seeds))]
    rows = []
    agent = make_agents(data, 1)[0]
    for precision in ("float32", "bf16"):
        ctx = devices.autocast("cpu", precision == "bf16")

        def plain():
            with ctx:
                return agent.update(data.sample(args.batch_size, "cpu", gens[0]))
        rows.append((f"minirl iql.py, one seed, {precision}", 1, _timed_loop(plain, args.seconds, "cpu")[0]))
    ctx = devices.autocast("cpu", True)

    def one_bf16_update():
        with ctx:
            return agent.update(data.sample(args.batch_size, "cpu", gens[0]))
    gemms = update_gemms(one_bf16_update)
    for dtype, name in ((torch.float32, "float32"), (torch.bfloat16, "bf16")):
        rows.append((f"its {len(gemms)} matrix products alone, all {name}", 1, gemm_floor(gemms, dtype, args.seconds)))
    for k in args.seeds:
        batched = BatchedIQL(make_agents(data, k))

        def together():
            with ctx:
                return batched.update(stacked_batch(data, k, args.batch_size, gens))
        rows.append((f"batched, {k} seed{'s' * (k > 1)}, bf16", k, _timed_loop(together, args.seconds, "cpu")[0]))
    corl = None
    if args.corl is None:
        print("CORL not measured: no --corl DIR (a checkout of github.com/tinkoff-ai/CORL)")
    else:
        from corl_peer import make_peer
        peer = make_peer(args.corl, "iql", data, args.batch_size, "cpu")
        corl = _timed_loop(peer[0], args.seconds, "cpu")[0]
        rows.append(("CORL iql.py, float32", 1, corl))
    print(f"\nIQL, obs 17, act 6, batch {args.batch_size} per seed, {args.threads} thread(s), {args.seconds:g} s each\n")
    print("| update | seeds | updates/s | seed-updates/s | / CORL |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, k, rate in rows:
        ratio = "-" if corl is None else f"{k * rate / corl:.2f}"
        print(f"| {name} | {k} | {rate:,.1f} | {k * rate:,.1f} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
