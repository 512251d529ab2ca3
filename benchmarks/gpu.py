"""The `full` scale on one GPU: correctness first, then the speed table, then a real full-scale IQL run of K seeds.

    bash benchmarks/gpu.sh                              # on a bare GPU machine: installs, then runs the line below
    python benchmarks/gpu.py --out DIR --budget 420     # on a GPU: everything, within --budget seconds
    python benchmarks/gpu.py --dry-run                  # on a CPU: the same steps at small sizes (no CUDA graphs)
    python benchmarks/gpu.py --evaluate DIR             # on a machine with MuJoCo: score the run's saved actors

What it does, in order, each step skipped with a line saying so when the budget is spent:

0. **The `full` scale's default path**: for every ``--algo``, what ``runs.run`` and ``experiments/run_suite.py`` do
   at ``--scale full`` on a CUDA device when not told (``runs.default_capture``, ``run_suite.default_batch_seeds``:
   the seeds as one batch, each step one CUDA graph where the update allows it), decided from the settings alone, and
   what ``runs.plan_run`` plans on this device (a CPU: eager, as before; a GPU: the same as the decision).
1. **Checks** (float32): K = 3 seeds of each of IQL, BC, CQL and BCQ stacked as one update (:mod:`minirl.seeds`, the path
   ``train`` takes with a list of agents) equal 3 plain updates from the same batches
   (``batched_seeds.check_same_as_plain``, with the updates' noise made the same, ``batched_seeds.same_noise``); for
   BC, BCQ, CQL and IQL, one seed and K = 3 stacked, the update replayed as
   a CUDA graph (:class:`minirl.devices.CapturedStep`) equals the eager update, losses and parameters, over 20 steps
   from the same seed (IQL with its cosine schedule, which both IQLs hold on the device as a tensor learning rate).
2. **The speed table**: updates/s and seed-updates/s of each algorithm at its paper's sizes (``runs`` scale
   ``full``) on Hopper-sized synthetic data (obs 11, action 3, batch 256), eager float32, eager bfloat16 (autocast),
   captured float32, captured bfloat16; and each algorithm's K seeds stacked at K = 1, 5, 10. A step is what ``train`` does per
   step: sample a batch on the device, update. Each rate is timed over ``--seconds`` after a warm-up; the projected
   time is that of 1M steps for all K seeds, updates only (no evaluation).
3. **A real run**: K = ``--train-seeds`` IQL seeds (the paper's MuJoCo settings, a cosine schedule over 1M steps)
   on the shipped ``hopper-medium-replay`` as one batched update, captured (eager if the capture check failed), for
   as many steps as the budget leaves. Every ``--snapshot-every`` steps each seed's actor is kept; the actors are
   written to ``DIR/curve_s<seed>.pt`` and scored later on a machine with MuJoCo (``--evaluate DIR``), since the GPU
   machine lacks it. No evaluation runs on the GPU, so the run's rate is the update rate.

Options for a later session: ``--run maze`` makes the real run IQL on ``--maze-dataset`` at OGBench's maze settings
(``--maze-settings ogbench``: 3 x 512 LayerNorm, batch 1024) or at those of the `cpu` scale's maze runs
(``--maze-settings cpu``: 2 x 256 LayerNorm, batch 256, the schedule over ``--max-train-steps``), with ``--set`` for
IQL's fields (``expectile=0.5``). ``--algo`` makes it another of the maze grid's methods at the `cpu` scale's
settings (``bc``, ``10%bc`` on the best tenth of the trajectories, ``goal-bc`` and ``path-bc`` on the pieces that
reach the goal (``maze.goal_pieces``), ``td3+bc``, ``cql`` and ``bcq`` with the maze's settings of
``runs.DOMAIN_CONFIG``), ``--set`` then taking that algorithm's fields; each snapshot keeps what the method acts
with (:data:`ACTING_PARTS`: the actor, and for BCQ its VAE and critic too). The maze comes from ``$MINIRL_DATA``
when carried there, or is made on the GPU machine (which then needs MuJoCo and ogbench carried as wheels: see
benchmarks/README.md); ``--evaluate DIR
--results-root ROOT`` then writes each seed as a run under ROOT for ``experiments/stitching_table.py``.
``--skip-table`` goes straight to the run; ``--compiled`` adds, after the run, BC and IQL with
their networks compiled (``torch.compile``) inside the captured step, to see whether fewer, fused kernels shorten it.

Everything printed and written names the GPU, torch's version and the precision.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import platform
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from minirl import devices, runs, seeds

sys.path.insert(0, str(Path(__file__).parent))
import batched_seeds  # noqa: E402  (beside this file)
from speed import _timed_loop, synthetic_dataset  # noqa: E402

ALGOS = ("bc", "bcq", "cql", "iql")
TRAIN_DATASET = "hopper-medium-replay"


class Budget:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def first_line(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {text}"[:160]


def floats(logs: dict) -> dict[str, float]:
    return {k: float(v) for k, v in logs.items()}


def module_tensors(agent) -> list[torch.Tensor]:
    """The parameters and buffers of every network ``agent`` holds, in a fixed order (for comparing two copies)."""
    out = []
    for name in sorted(vars(agent)):
        value = getattr(agent, name)
        if isinstance(value, torch.nn.Module):
            out += [t for t in value.state_dict().values()]
    return out


def make_single(algo: str, data, device: str, sizes: str, **overrides):
    """``algo`` at scale ``sizes``' network sizes, with a long schedule where the config has one."""
    cfg = {**runs.get_scale(sizes).config_for(algo), **runs.algorithm(algo).for_steps(1_000_000), **overrides}
    return runs.make_agent(algo, data, device, **cfg)[0]


def joint_batch(tensors: dict, n: int, k: int, batch_size: int) -> dict[str, torch.Tensor]:
    """K batches at once, ``(K, B, ...)``, from the default generator on the data's device (capturable)."""
    idx = torch.randint(n, (k, batch_size), device=tensors["obs"].device)
    return {key: tensors[key][idx] for key in ("obs", "act", "rew", "next_obs", "done")}


def capture_context(bf16: bool):
    """bfloat16 autocast without its weight cache (a CUDA graph needs ``cache_enabled=False``), or nothing."""
    if not bf16:
        return contextlib.nullcontext
    return lambda: torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)


def compare(eager_logs, captured_logs, a, b) -> float:
    """Largest relative difference of the logged losses, and absolute difference of the parameters."""
    worst = 0.0
    for e, c in zip(eager_logs, captured_logs):
        for k in e:
            if k in c:
                worst = max(worst, abs(e[k] - c[k]) / max(1.0, abs(e[k])))
    for x, y in zip(module_tensors(a), module_tensors(b)):
        if x.is_floating_point():
            worst = max(worst, float((x - y).abs().max()))
    return worst


def captured_vs_eager(agent, batch, steps: int = 20) -> float:
    """``steps`` eager updates of ``agent`` against the same updates of a copy replayed as a CUDA graph, from the same
    seed, ``batch()`` drawing each batch (:func:`compare`)."""
    twin = copy.deepcopy(agent)
    torch.cuda.manual_seed(1)
    eager = [floats(agent.update(batch())) for _ in range(steps)]
    torch.cuda.manual_seed(1)
    captured = devices.CapturedStep(lambda: twin.update(batch()), twin)
    replays = [floats(captured()) for _ in range(steps)]
    return compare(eager, replays, agent, twin)


def check_captured_single(algo: str, data, device: str, sizes: str, batch_size: int = 256) -> float:
    return captured_vs_eager(make_single(algo, data, device, sizes), lambda: data.sample(batch_size, device))


def check_captured_batched(data, device: str, k: int = 3, batch_size: int = 256, algo: str = "iql") -> float:
    tensors, n = data.to_tensors(device), len(data)
    return captured_vs_eager(seeds.stack(batched_seeds.make_agents(data, k, device, algo)),
                             lambda: joint_batch(tensors, n, k, batch_size))


def timed(step, seconds: float, device: str) -> float:
    return _timed_loop(step, seconds, device)[0]


def speed_rows(data, device: str, sizes: str, seconds: float, ks: list[int], budget: Budget, capture_ok: dict,
               compiled: bool = False, batched_algos=batched_seeds.ALGOS):
    """The table's rows; ``compiled``: only BC's and IQL's update with compiled networks inside the captured step
    (run last, after the real run: a capture that fails can leave the GPU's state upset for what follows)."""
    cuda = device == "cuda"
    tensors, n = data.to_tensors(device), len(data)
    rows = []

    def add(algo, k, precision, mode, fn):
        if budget.left() < seconds + 20:
            rows.append({"algo": algo, "K": k, "precision": precision, "mode": mode, "error": "budget spent"})
            return
        try:
            rate = fn()
            rows.append({"algo": algo, "K": k, "precision": precision, "mode": mode, "updates_per_s": rate,
                         "seed_updates_per_s": k * rate, "projected_1m_min": 1e6 / rate / 60})
        except Exception as e:  # one row's failure must not stop the table
            rows.append({"algo": algo, "K": k, "precision": precision, "mode": mode, "error": first_line(e)})
        finally:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
        r = rows[-1]
        print(f"  {algo:>4} K={k:<2} {precision:<7} {mode:<8} " +
              (f"{r['updates_per_s']:10,.1f} updates/s" if "updates_per_s" in r else r["error"]), flush=True)

    if compiled:  # fewer, fused kernels inside the graph: does torch.compile shorten a captured step?
        for algo in ("bc", "iql"):
            def compiled_captured(algo=algo):
                if not cuda:
                    raise RuntimeError("CUDA graphs need a GPU")
                if not capture_ok.get(algo, False):
                    raise RuntimeError("skipped: the capture check failed")
                agent = make_single(algo, data, device, sizes)
                devices.compile_agent(agent)  # compiled during CapturedStep's warm-up, before the capture
                step = devices.CapturedStep(lambda: agent.update(data.sample(256, device)), agent)
                return timed(step, seconds, device)
            add(algo, 1, "float32", "compiled+captured", compiled_captured)
        return rows
    for algo in ALGOS:
        for precision in ("float32", "bf16"):
            bf16 = precision == "bf16"

            def eager(algo=algo, bf16=bf16):
                agent = make_single(algo, data, device, sizes)
                ctx = devices.autocast(device, bf16)

                def step():
                    with ctx:
                        return agent.update(data.sample(256, device))
                return timed(step, seconds, device)
            add(algo, 1, precision, "eager", eager)
        for precision in ("float32", "bf16"):
            def captured(algo=algo, bf16=precision == "bf16"):
                if not cuda:
                    raise RuntimeError("CUDA graphs need a GPU")
                if not capture_ok.get(algo, False):
                    raise RuntimeError("skipped: the capture check failed")
                agent = make_single(algo, data, device, sizes)
                step = devices.CapturedStep(lambda: agent.update(data.sample(256, device)), agent,
                                            context=capture_context(bf16))
                return timed(step, seconds, device)
            add(algo, 1, precision, "captured", captured)
    for algo, k in ((algo, k) for algo in batched_algos for k in ks):
        def batched_eager(k=k, algo=algo):
            batched = seeds.stack(batched_seeds.make_agents(data, k, device, algo))
            return timed(lambda: batched.update(joint_batch(tensors, n, k, 256)), seconds, device)
        add(f"{algo} batched", k, "float32", "eager", batched_eager)
        for precision in ("float32", "bf16"):
            def batched_captured(k=k, algo=algo, bf16=precision == "bf16"):
                if not cuda:
                    raise RuntimeError("CUDA graphs need a GPU")
                if not capture_ok.get(f"{algo} batched", False):
                    raise RuntimeError("skipped: the capture check failed")
                batched = seeds.stack(batched_seeds.make_agents(data, k, device, algo))
                step = devices.CapturedStep(lambda: batched.update(joint_batch(tensors, n, k, 256)), batched,
                                            context=capture_context(bf16))
                return timed(step, seconds, device)
            add(f"{algo} batched", k, precision, "captured", batched_captured)
    return rows


# What each algorithm needs to act (``act``), kept per seed at every snapshot: the actor, and for BCQ also the VAE
# that proposes the candidate actions and the critic that picks among them
ACTING_PARTS = {"iql": ("actor",), "bc": ("actor",), "10%bc": ("actor",), "goal-bc": ("actor",),
                "path-bc": ("actor",), "cql": ("actor",), "bcq": ("vae", "actor", "critic"), "td3+bc": ("actor",)}
CLONES = ("10%bc", "goal-bc", "path-bc")  # BC's update on a filtered dataset
RUN_ALGOS = tuple(ACTING_PARTS)


def acting_states(batched, algo: str = "iql") -> list[dict]:
    """Each seed's acting parts (:data:`ACTING_PARTS`) of a stack of ``algo`` seeds, ``{part: state dict}``, on the
    CPU."""
    out = []
    for i in range(seeds.members(batched)):
        agent = seeds.member(batched, i)
        out.append({part: {name: t.detach().cpu().clone() for name, t in getattr(agent, part).state_dict().items()}
                    for part in ACTING_PARTS[algo]})
    return out


HOPPER_ACTION_BOX = (-1.0, 1.0)  # Hopper-v5's action space, [-1, 1]^3 (--evaluate checks it against gymnasium)


def shipped_replay(name: str):
    """The replay buffer ``name`` ships (``minirl/assets``), checked against its manifest's SHA-256, with Hopper's
    action box: ``datasets.load_dataset`` would ask MuJoCo for the box, and the GPU machine has no MuJoCo (its wheel
    does not fit in what a device call carries)."""
    from minirl import datasets
    from minirl.data import OfflineDataset
    task, tier = datasets.parse_name(name)
    if task.name != "hopper" or tier != "medium-replay":
        raise ValueError(f"shipped_replay knows hopper-medium-replay's action box only, not {name!r}'s")
    path = datasets.ASSETS / task.name / task.replay_file["file"]
    if datasets.sha256(path) != task.replay_file["sha256"]:
        raise ValueError(f"{path} does not match the manifest's SHA-256: restore it from git")
    with np.load(path, allow_pickle=False) as f:
        arrays = datasets.unpack_replay(f)
    low, high = HOPPER_ACTION_BOX
    return OfflineDataset(**arrays, action_low=low, action_high=high)


# OGBench's IQL on its mazes (Park et al. 2024, agents/iql.py and the paper's appendix): 3 x 512 networks with
# LayerNorm, batches of 1,024; with minirl's maze settings (runs.DOMAIN_CONFIG: expectile 0.9, beta 10, raw rewards)
MAZE_SETTINGS = {"hidden": (512, 512, 512), "layer_norm": True}
MAZE_BATCH = 1024
# The `cpu` scale's maze runs (experiments/stitching.sh, results/stitching-budget): IQL's 2 x 256 networks with
# LayerNorm in V and the critics (--set layer_norm=true), batches of 256: the same settings on the GPU, so that its
# seeds are those runs' seeds at float32 instead of bfloat16
CPU_MAZE_SETTINGS = {"layer_norm": True}
CPU_MAZE_BATCH = 256


def run_data(run: str, maze_dataset: str, maze_transitions: int | None, maze_settings: str = "ogbench",
             max_steps: int = 1_000_000, overrides: dict | None = None, algo: str = "iql"):
    """The real run's dataset, ``algo``'s settings, batch size and label settings (the fields set on top of the
    algorithm's and the domain's, as ``experiments/run_suite.py`` names a run's folder): the shipped
    hopper-medium-replay with the paper's MuJoCo settings, or a maze with OGBench's IQL settings (``maze_settings``
    "ogbench", IQL only) or the `cpu` scale's ("cpu": its network sizes, the maze's settings of
    ``runs.DOMAIN_CONFIG``, and for IQL LayerNorm, as ``experiments/stitching.sh`` runs them). A schedule spans
    ``max_steps``; ``overrides`` (``--set``) go last. 10%BC's data is the best tenth of the trajectories, as
    ``runs.run`` gives it. A maze is made here unless ``$MINIRL_DATA`` holds it (making it needs MuJoCo and
    ogbench)."""
    overrides = dict(overrides or {})
    schedule = runs.algorithm(algo).for_steps(max_steps)
    if run == "hopper":
        return TRAIN_DATASET, shipped_replay(TRAIN_DATASET), {**schedule, **overrides}, 256, overrides
    from minirl import datasets, maze
    if not maze.is_maze_name(maze_dataset):
        raise ValueError(f"--maze-dataset {maze_dataset!r} is not a maze dataset (e.g. "
                         "pointmaze-medium-stitch-singletask-task1)")
    if maze_settings == "ogbench" and algo != "iql":
        raise ValueError(f"--maze-settings ogbench are OGBench's IQL settings; {algo} runs with --maze-settings cpu")
    named = datasets.parse(maze_dataset)
    raw = datasets.load_dataset(named, maze_transitions, progress=False)
    entry = runs.algorithm(algo)
    if entry.data is not None:  # 10%BC's best trajectories, goal-BC's pieces: what runs.run trains on
        plan = SimpleNamespace(algo=algo, dataset=maze_dataset, named=named, config=runs.make_config(algo, {}))
        raw = entry.data(raw, plan)
    if maze_settings == "ogbench":
        sizes, chosen, batch = {}, MAZE_SETTINGS, MAZE_BATCH
    else:
        sizes, chosen = runs.get_scale("cpu").config_for(algo), CPU_MAZE_SETTINGS if algo == "iql" else {}
        batch = CPU_MAZE_BATCH
    label = {**chosen, **overrides}
    return (maze_dataset, raw, {**sizes, **runs.domain_config(algo, maze_dataset), **label, **schedule},
            batch, label)


def train_run(device: str, k: int, budget: Budget, snapshot_every: int, max_steps: int, capture: bool,
              out: Path | None, meta: dict, run: str = "hopper", maze_dataset: str = "",
              maze_transitions: int | None = None, maze_settings: str = "ogbench",
              overrides: dict | None = None, algo: str = "iql") -> dict:
    from minirl.train import prepare_dataset
    t0 = time.perf_counter()
    name, raw, settings, batch_size, label = run_data(run, maze_dataset, maze_transitions, maze_settings, max_steps,
                                                      overrides, algo)
    print(f"  {name}: {len(raw):,} transitions, ready in {time.perf_counter() - t0:.0f} s", flush=True)
    cfg = runs.make_config(algo, settings)
    data, state_normalizer, _ = prepare_dataset(raw, cfg.normalize_states, cfg.reward_scale)
    tensors, n = data.to_tensors(device), len(data)
    batched = seeds.stack(batched_seeds.make_agents(data, k, device, algo, **settings))
    torch.manual_seed(0)
    if device == "cuda":
        torch.cuda.manual_seed(0)
    mode = "captured" if capture else "eager"
    if capture:
        step = devices.CapturedStep(lambda: batched.update(joint_batch(tensors, n, k, batch_size)), batched)
    else:
        def step():
            return batched.update(joint_batch(tensors, n, k, batch_size))
    snapshots, log, t, start = {0: acting_states(batched, algo)}, [], 0, time.perf_counter()
    sizes = {f: getattr(cfg, f) for f in ("hidden", "layer_norm", "actor_hidden", "critic_hidden", "vae_hidden")
             if hasattr(cfg, f)}
    print(f"  {algo.upper()} x {k} seeds on {name}, batch {batch_size}, {sizes}, {mode}, float32, until the budget "
          f"ends", flush=True)
    while t < max_steps and budget.left() > 25:
        logs = step()
        t += 1
        if t % 5000 == 0:
            entry = {"step": t, "seconds": time.perf_counter() - start, **floats(logs)}
            log.append(entry)
            if not all(np.isfinite(v) for v in entry.values()):
                print(f"  non-finite loss at step {t}: {entry}", flush=True)
                break
        if t % snapshot_every == 0:
            snapshots[t] = acting_states(batched, algo)
            loss = "critic_loss" if "critic_loss" in logs else "actor_loss"
            print(f"  step {t:,}: {t / (time.perf_counter() - start):,.0f} updates/s, "
                  f"{loss.replace('_', ' ')} {float(logs[loss]) / k:.3f} per seed", flush=True)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    snapshots[t] = acting_states(batched, algo)
    result = {"algo": algo, "dataset": name, "seeds": k, "steps": t, "seconds": seconds, "updates_per_s": t / seconds,
              "batch_size": batch_size, "mode": mode, "precision": "float32", "log": log,
              "snapshot_steps": sorted(snapshots), "settings": label}
    if out is not None:
        for i in range(k):
            torch.save({"seed": i, "algo": algo, "acting_parts": ACTING_PARTS[algo], "dataset": name,
                        "config": asdict(cfg), "batch_size": batch_size,
                        "label": label, "seconds": seconds, "updates_per_s": t / seconds, "seeds_in_one_update": k,
                        "transitions": maze_transitions if run == "maze" else None,
                        "state_normalizer": None if state_normalizer is None else state_normalizer.state_dict(),
                        "meta": meta,
                        "steps_done": t, "mode": mode, "precision": "float32",
                        "snapshots": {s: snapshots[s][i] for s in sorted(snapshots)}}, out / f"curve_s{i}.pt")
    return result


def device_meta(device: str) -> dict:
    meta = {"torch": torch.__version__, "device": device, "python": platform.python_version()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        meta |= {"gpu": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
                 "capability": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
                 "memory_gib": round(props.total_memory / 2 ** 30, 1)}
    else:
        meta["cpu"] = platform.processor() or platform.machine()
    return meta


def print_table(rows: list[dict], meta: dict) -> None:
    where = meta.get("gpu", meta.get("cpu"))
    print(f"\nminirl at the papers' sizes, batch 256 per seed, {where}, torch {meta['torch']}"
          + (f", CUDA {meta['cuda']}" if "cuda" in meta else "") + "\n")
    print("| algorithm | seeds K | precision | update | updates/s | seed-updates/s | 1M steps, all K seeds |")
    print("| --- | ---: | --- | --- | ---: | ---: | ---: |")
    for r in rows:
        if "error" in r:
            print(f"| {r['algo']} | {r['K']} | {r['precision']} | {r['mode']} | {r['error']} | | |")
        else:
            print(f"| {r['algo']} | {r['K']} | {r['precision']} | {r['mode']} | {r['updates_per_s']:,.0f} | "
                  f"{r['seed_updates_per_s']:,.0f} | {r['projected_1m_min']:,.1f} min |")


DEFAULT_PATH_DATASETS = {"goal-bc": "pointmaze-medium-navigate-singletask-task1",
                         "path-bc": "pointmaze-medium-navigate-singletask-task1"}  # the others plan on TRAIN_DATASET


def default_path_rows(device: str) -> list[dict]:
    """Step 0: for every ``--algo``, the ``full`` scale's default on a CUDA device (seeds batched by run_suite, each
    step captured) from the settings alone, and ``runs.plan_run``'s ``capture`` here on ``device``."""
    import tempfile
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))
    import run_suite
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for algo in runs.ALGORITHMS:
            dataset = DEFAULT_PATH_DATASETS.get(algo, TRAIN_DATASET)
            plan = runs.plan_run(algo, dataset, scale="full", device=device, out=Path(tmp) / algo, evaluate=False,
                                 precision="float32")
            capture, line = runs.default_capture(algo, plan.config, "full", "cuda")
            problem = runs.algorithm(algo).capture_problem(plan.config)
            rows.append({"algo": algo, "dataset": dataset, "cuda_capture": capture, "cuda_line": line,
                         "cuda_step": "one CUDA graph" if capture else f"eager: {problem}",
                         "cuda_batched": run_suite.default_batch_seeds("full", "cuda", "inline", [algo]),
                         "device": device, "planned_capture": plan.capture})
    return rows


def print_default_path(rows: list[dict]) -> None:
    here = rows[0]["device"]
    print("| algorithm | on a CUDA device: run_suite's seeds | each step | plan_run's capture here "
          f"({here}) |\n| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['algo']} | {'one batch' if r['cuda_batched'] else 'one at a time'} | {r['cuda_step']} | "
              f"{r['planned_capture']} |")


def run_all(args) -> int:
    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU here: run with --dry-run on a CPU", file=sys.stderr)
        return 2
    budget = Budget(args.budget)
    sizes = "cpu" if args.dry_run else "full"
    meta = device_meta(device) | {"sizes": sizes, "budget_s": args.budget}
    print("minirl GPU benchmark:", json.dumps(meta), flush=True)
    out = args.out
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    results: dict = {"meta": meta, "checks": {}, "rows": [], "train": None}

    def save():
        if out is not None:
            (out / "gpu_results.json").write_text(json.dumps(results, indent=1))

    print("\n0. the full scale's default path, by algorithm", flush=True)
    try:
        results["default_path"] = default_path_rows(device)
        print_default_path(results["default_path"])
    except Exception as e:
        results["default_path"] = {"error": first_line(e)}
        print(f"  failed: {first_line(e)}", flush=True)
        traceback.print_exc()
    save()
    data = synthetic_dataset(n=100_000 if not args.dry_run else 5_000, obs_dim=11, act_dim=3)
    data.to_tensors(device)
    capture_ok = {}
    update = "bc" if args.algo in CLONES else args.algo  # 10%BC, goal-BC, path-BC: BC's update on part of the data
    if args.skip_table:  # straight to the run: only the run's batched update's capture is checked first
        print("\n1-2. checks and table skipped (--skip-table)", flush=True)
        if device == "cuda":
            name = f"{update} batched"
            try:
                worst = check_captured_batched(data, device, algo=update)
                capture_ok[name] = worst < 1e-3
                results["checks"][f"captured == eager ({name})"] = worst
                print(f"  {name}: captured == eager over 20 steps: largest difference {worst:.1e}", flush=True)
            except Exception as e:
                results["checks"][f"captured == eager ({name})"] = first_line(e)
                print(f"  {name}: capture failed: {first_line(e)}", flush=True)
    else:
        # 1. checks
        print("\n1. checks, float32", flush=True)
        for algo in batched_seeds.ALGOS:
            name = f"batched == plain ({algo.upper()}, K=3)"
            try:
                worst = batched_seeds.check_same_as_plain(data, k=3, steps=3, batch_size=64, device=device, algo=algo)
                results["checks"][name] = worst
                print(f"  {algo} stacked (K=3) == 3 plain {algo} updates: largest difference {worst:.1e}", flush=True)
            except Exception as e:
                results["checks"][name] = first_line(e)
                print(f"  {algo}: batched == plain failed: {first_line(e)}", flush=True)
                traceback.print_exc()
        if device == "cuda":
            # CQL last: a failed capture can upset the RNG
            for name in ("bc", "bcq", "iql", "iql batched", "bc batched", "bcq batched", "cql", "cql batched"):
                try:
                    worst = (check_captured_batched(data, device, algo=name.split()[0]) if "batched" in name
                             else check_captured_single(name, data, device, sizes))
                    capture_ok[name] = worst < 1e-3
                    results["checks"][f"captured == eager ({name})"] = worst
                    print(f"  {name}: captured == eager over 20 steps: largest difference {worst:.1e}", flush=True)
                except Exception as e:
                    capture_ok[name] = False
                    results["checks"][f"captured == eager ({name})"] = first_line(e)
                    print(f"  {name}: capture failed: {first_line(e)}", flush=True)
                    traceback.print_exc()
                torch.cuda.empty_cache()
        else:
            print("  captured == eager: not checked (CUDA graphs need a GPU)")
        save()
        # 2. the speed table
        print(f"\n2. speed, {args.seconds:g} s per row", flush=True)
        results["rows"] = speed_rows(data, device, sizes, args.seconds, args.seeds, budget, capture_ok,
                                     batched_algos=args.batched_algos)
        save()
        print_table(results["rows"], meta)
    # 3. the real run
    print(f"\n3. a run of {args.algo.upper()} ({args.run}"
          + (f", {args.maze_settings} settings" if args.run == "maze" else "") + f"), {budget.left():.0f} s left",
          flush=True)
    if budget.left() > 60:
        try:
            capture = capture_ok.get(f"{update} batched", False)
            results["train"] = train_run(device, args.train_seeds, budget, args.snapshot_every,
                                         args.max_train_steps, capture, out, meta, args.run, args.maze_dataset,
                                         args.maze_transitions, args.maze_settings, args.set, args.algo)
            tr = results["train"]
            print(f"  {tr['steps']:,} steps x {tr['seeds']} seeds in {tr['seconds']:.0f} s "
                  f"({tr['updates_per_s']:,.0f} updates/s, {tr['mode']}); actors kept at {tr['snapshot_steps']}")
        except Exception as e:
            results["train"] = {"error": first_line(e)}
            print(f"  the run failed: {first_line(e)}", flush=True)
            traceback.print_exc()
    else:
        print("  skipped: under 60 s of budget left")
    save()
    if args.compiled and not args.skip_table:
        print("\n4. compiled networks inside the captured step", flush=True)
        results["rows"] += speed_rows(data, device, sizes, args.seconds, args.seeds, budget, capture_ok, compiled=True)
        save()
    print_table(results["rows"], meta)
    return 0


def evaluate(run_dir: Path, episodes: int | None, out_csv: Path | None, results_root: Path | None = None) -> int:
    """Score every kept actor of ``run_dir/curve_s*.pt`` on the dataset's environment (MuJoCo, on the CPU). With
    ``results_root``, also write each seed as a run of ``experiments/run_suite.py`` would lie there
    (``ROOT/<label>/<dataset>/s<seed>/eval.csv`` and ``result.json``, the label from the run's settings), so that
    ``experiments/stitching_table.py --root ROOT`` reads it; the untrained actor (step 0) is then not evaluated."""
    from minirl import datasets, maze, plots
    from minirl.data import StateNormalizer
    from minirl.evaluation import run_episodes
    files = sorted(run_dir.glob("curve_s*.pt"))
    if not files:
        print(f"--evaluate {run_dir}: no curve_s*.pt files there", file=sys.stderr)
        return 2
    rows = []
    for path in files:
        ck = torch.load(path, map_location="cpu", weights_only=False)
        task = datasets.parse_name(ck["dataset"])[0]
        is_maze = maze.is_maze_name(ck["dataset"])
        raw = datasets.load_dataset(ck["dataset"], ck.get("transitions"), progress=False)
        if not is_maze and not (np.all(raw.action_low == HOPPER_ACTION_BOX[0])
                                and np.all(raw.action_high == HOPPER_ACTION_BOX[1])):
            raise ValueError(f"{ck['dataset']}'s action box is not HOPPER_ACTION_BOX, which the GPU run assumed")
        algo = ck.get("algo", "iql")
        agent = runs.build_agent(algo, raw.obs_dim, raw.act_dim, raw.action_low, raw.action_high,
                                 runs.make_config(algo, ck["config"]))
        normalizer = (None if ck["state_normalizer"] is None
                      else StateNormalizer.from_state_dict(ck["state_normalizer"]))
        n_episodes = episodes if episodes is not None else (50 if is_maze else 10)  # OGBench: 50 per task
        seed_rows = []
        for step, state in sorted(ck["snapshots"].items()):
            if results_root is not None and step == 0:
                continue
            parts = state if "acting_parts" in ck else {"actor": state}  # earlier runs kept the IQL actor alone
            for part, weights in parts.items():
                getattr(agent, part).load_state_dict(weights)
            played = run_episodes(agent, task.env_id, n_episodes, seed=10_000 * (ck["seed"] + 1),
                                  state_normalizer=normalizer)
            returns = played["returns"]
            # a maze's number is its success rate in % (OGBench's), Hopper's the normalised score
            score = 100.0 * played["successes"].astype(float) if is_maze else datasets.normalized_score(task, returns)
            rows.append({"seed": ck["seed"], "step": step, "return_mean": float(returns.mean()),
                         "score_mean": float(np.mean(score))})
            seed_rows.append({"step": step, "return_mean": float(returns.mean()), "return_std": float(returns.std()),
                              **({"success_rate": float(played["successes"].mean())} if is_maze else {}),
                              "score_mean": float(np.mean(score)), "score_std": float(np.std(score))})
            print(f"  seed {ck['seed']} step {step:>8,}: return {returns.mean():8.1f}, "
                  f"{'success %' if is_maze else 'score'} {np.mean(score):6.1f}", flush=True)
        if results_root is not None:
            write_run(results_root, ck, seed_rows, n_episodes)
    if out_csv is not None:
        import csv
        out_csv.parent.mkdir(parents=True, exist_ok=True)
        with open(out_csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print("\n| step | seeds | score (maze: success %), mean [95% CI] |")
    print("| ---: | ---: | --- |")
    for step in sorted({r["step"] for r in rows}):
        scores = np.array([r["score_mean"] for r in rows if r["step"] == step])
        lo, hi = plots.bootstrap_ci(scores) if len(scores) > 1 else (scores[0], scores[0])
        print(f"| {step:,} | {len(scores)} | {scores.mean():.1f} [{lo:.1f}, {hi:.1f}] |")
    return 0


def write_run(root: Path, ck: dict, seed_rows: list[dict], episodes: int) -> Path:
    """One seed of a GPU run as ``run_suite`` lays a run out: ``eval.csv`` (a row per kept actor) and ``result.json``
    (what made it: the GPU, the steps, the rate, the precision; and where it was scored)."""
    import csv
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))
    import run_suite
    run = run_suite.run_dir(root, ck["algo"], ck["dataset"], ck["seed"], ck.get("label", {}))
    run.mkdir(parents=True, exist_ok=True)
    with open(run / "eval.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(seed_rows[0]))
        w.writeheader()
        w.writerows(seed_rows)
    last = seed_rows[-1]
    (run / "result.json").write_text(json.dumps({
        "algo": ck["algo"], "label": ck.get("label", {}), "dataset": ck["dataset"], "seed": ck["seed"],
        "steps": ck["steps_done"], "batch_size": ck["batch_size"], "config": ck["config"],
        "trained_on": ck["meta"], "mode": ck["mode"], "precision": ck["precision"],
        "train_seconds": ck.get("seconds"), "updates_per_s": ck.get("updates_per_s"),
        "seeds_in_one_update": ck.get("seeds_in_one_update"), "eval_episodes": episodes,
        "evaluated_on": {"cpu": platform.processor() or platform.machine(), "torch": torch.__version__},
        "success_rate": last.get("success_rate"), "score": last["score_mean"], "return": last["return_mean"]},
        indent=1))
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="on the CPU, small sizes, no CUDA graphs")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for everything (default 420)")
    ap.add_argument("--seconds", type=float, default=3.0, help="timing window per row (default 3)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 5, 10], help="K values of the batched rows")
    ap.add_argument("--batched-algos", nargs="+", default=list(batched_seeds.ALGOS), choices=batched_seeds.ALGOS,
                    help="the algorithms whose seeds the table stacks (default: all four)")
    ap.add_argument("--train-seeds", type=int, default=5, help="K seeds of the real run (default 5)")
    ap.add_argument("--snapshot-every", type=int, default=25_000, help="keep the actors every this many steps")
    ap.add_argument("--max-train-steps", type=int, default=1_000_000)
    ap.add_argument("--run", choices=("hopper", "maze"), default="hopper",
                    help="the real run: IQL on the shipped hopper-medium-replay (the paper's MuJoCo settings), or on "
                    "--maze-dataset with OGBench's settings (3 x 512 LayerNorm, batch 1024; needs MuJoCo and ogbench "
                    "to make the maze)")
    ap.add_argument("--algo", choices=RUN_ALGOS, default="iql",
                    help="the real run's algorithm (default iql; the others with --maze-settings cpu on a maze)")
    ap.add_argument("--maze-dataset", default="pointmaze-medium-stitch-singletask-task1")
    ap.add_argument("--maze-transitions", type=int, default=None, help="a smaller maze dataset (default: 1M)")
    ap.add_argument("--maze-settings", choices=("ogbench", "cpu"), default="ogbench",
                    help="the maze run's IQL: OGBench's (3 x 512 LayerNorm, batch 1024) or the `cpu` scale's runs' "
                    "(2 x 256 LayerNorm, batch 256; results/stitching-budget)")
    ap.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                    help="config fields of the run's algorithm, after the settings (e.g. expectile=0.5)")
    ap.add_argument("--skip-table", action="store_true", help="skip the checks and the table: straight to the run")
    ap.add_argument("--compiled", action="store_true",
                    help="also time BC and IQL with their networks compiled (torch.compile) inside the captured step")
    ap.add_argument("--out", type=Path, default=None, help="folder for gpu_results.json and curve_s*.pt")
    ap.add_argument("--evaluate", type=Path, default=None, metavar="DIR",
                    help="score the actors a run saved in DIR (needs MuJoCo), instead of benchmarking")
    ap.add_argument("--episodes", type=int, default=None,
                    help="evaluation episodes per kept actor (--evaluate; default 10, 50 on a maze as OGBench)")
    ap.add_argument("--csv", type=Path, default=None, help="write --evaluate's scores to this CSV")
    ap.add_argument("--results-root", type=Path, default=None, metavar="ROOT",
                    help="--evaluate also writes each seed as a run under ROOT (stitching_table.py --root ROOT)")
    args = ap.parse_args(argv)
    for name in ("budget", "seconds"):
        if getattr(args, name) <= 0:
            ap.error(f"--{name} must be positive, got {getattr(args, name)}")
    for name in ("train_seeds", "snapshot_every", "max_train_steps", "episodes", "maze_transitions"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if any(k < 1 for k in args.seeds):
        ap.error(f"--seeds: every K must be at least 1, got {args.seeds}")
    try:
        args.set = runs.parse_overrides(args.algo, args.set)
    except Exception as e:  # UserError: the field and what was expected
        ap.error(f"--set: {e}")
    if args.results_root is not None and args.evaluate is None:
        ap.error("--results-root goes with --evaluate DIR")
    if args.evaluate is not None:
        torch.set_num_threads(1)
        return evaluate(args.evaluate, args.episodes, args.csv, args.results_root)
    return run_all(args)


if __name__ == "__main__":
    raise SystemExit(main())
