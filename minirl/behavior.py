"""Behaviour policies and the datasets made from them: SAC trained online, its snapshots, rollouts and its replay.

D4RL made its MuJoCo datasets by training SAC online and rolling out snapshots of it. minirl does the same on this
machine: :func:`train_sac` trains SAC (:mod:`minirl.sac`) on a Gymnasium task, keeps a snapshot of the actor every
few thousand steps (with its evaluation return), writes every transition of its replay buffer in order, and can
stop and resume from a full checkpoint (networks, optimisers, temperature, replay buffer, random states, the
running episode). A handful of those small actor snapshots are committed in ``minirl/assets/``; :func:`rollout`
turns any of them into transitions in the D4RL format and :func:`replay_dataset` reads a run's buffer back.
:mod:`minirl.datasets` makes the named datasets with these. ``python -m minirl.behavior ENV --steps N --out DIR``
trains a behaviour policy.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from .nets import TanhGaussianActor
from .sac import SAC, ReplayBuffer, SACConfig
from .utils import env_state, make_env, progress_bar, set_env_state, single_thread


@torch.no_grad()
@single_thread()
def evaluate_policy(policy: TanhGaussianActor | None, env_id: str, episodes: int, seed: int,
                    deterministic: bool = True) -> list[float]:
    """Undiscounted returns of a :class:`TanhGaussianActor` (uniform random actions if ``policy`` is None) over
    ``episodes`` episodes reset with seeds ``seed, seed + 1, ...``."""
    env = make_env(env_id)
    env.action_space.seed(seed)
    returns = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        done, ret = False, 0.0
        while not done:
            if policy is None:
                a = env.action_space.sample()
            else:
                o = torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0)
                a = policy.action(o, None if deterministic else torch.randn((1, policy.act_dim)))
                a = a.squeeze(0).cpu().numpy()
            obs, r, term, trunc, _ = env.step(a)
            ret += float(r)
            done = term or trunc
        returns.append(ret)
    env.close()
    return returns


@torch.no_grad()
@single_thread()
def rollout(env_id: str, n_transitions: int, seed: int, actor: TanhGaussianActor | None = None,
            deterministic: bool = False, progress: bool = True, desc: str | None = None,
            n_envs: int = 8) -> dict[str, np.ndarray]:
    """Collect ``n_transitions`` steps in the D4RL dict format from ``actor`` (uniform random actions if None).

    Episode ``k`` is reset with seed ``seed + k`` and draws its action noise from its own generator seeded with
    ``(seed, k)``, and episodes are stored in the order of ``k``; the result therefore depends only on the arguments.
    ``n_envs`` environments run episodes side by side so that the actor sees one batch per step (the speed of
    a rollout is then the simulator's). The last episode is cut at ``n_transitions`` and its last step marked as a
    timeout, like an environment time limit.
    """
    keys = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")
    envs = [make_env(env_id) for _ in range(n_envs)]
    low, high = envs[0].action_space.low, envs[0].action_space.high
    act_dim = low.shape[0]
    finished: dict[int, dict[str, list]] = {}   # episode index -> its transitions
    next_episode = 0
    done_prefix, stored = 0, 0                   # episodes 0 .. done_prefix - 1 are complete: stored transitions
    bar = progress_bar(total=n_transitions, desc=desc or f"rollout {env_id}", enabled=progress)

    def start(env) -> dict:
        nonlocal next_episode
        k, next_episode = next_episode, next_episode + 1
        return {"k": k, "env": env, "obs": env.reset(seed=seed + k)[0], "rng": np.random.default_rng([seed, k]),
                "data": {key: [] for key in keys}}

    lanes = [start(env) for env in envs]         # the episode each environment is running
    while stored < n_transitions:
        if actor is None:
            actions = np.stack([lane["rng"].uniform(low, high).astype(np.float32) for lane in lanes])
        else:
            obs = torch.as_tensor(np.stack([lane["obs"] for lane in lanes]), dtype=torch.float32)
            noise = None if deterministic else torch.as_tensor(
                np.stack([lane["rng"].standard_normal(act_dim) for lane in lanes]), dtype=torch.float32)
            actions = actor.action(obs, noise).numpy()
        for i, lane in enumerate(lanes):
            next_obs, r, term, trunc, _ = lane["env"].step(actions[i])
            for key, v in zip(keys, (lane["obs"], actions[i], r, next_obs, term, trunc and not term)):
                lane["data"][key].append(v)
            lane["obs"] = next_obs
            if term or trunc:
                finished[lane["k"]] = lane["data"]
                lanes[i] = start(lane["env"])
        # an episode counts once all episodes before it are complete, so the order never depends on timing
        while done_prefix in finished:
            stored += len(finished[done_prefix]["rewards"])
            done_prefix += 1
            bar.update(min(stored, n_transitions) - bar.n)
    bar.close()
    for env in envs:
        env.close()
    episodes = [finished[k] for k in range(done_prefix)]
    out = {key: np.concatenate([np.asarray(ep[key]) for ep in episodes])[:n_transitions] for key in keys}
    out["timeouts"][-1] = not out["terminals"][-1]  # close the cut episode (or keep a true terminal)
    dtypes = {"observations": np.float32, "actions": np.float32, "rewards": np.float32,
              "next_observations": np.float32, "terminals": bool, "timeouts": bool}
    return {key: out[key].astype(dtypes[key]) for key in keys}


def load_actor(path: str | os.PathLike, device: str = "cpu") -> TanhGaussianActor:
    """Load a committed behaviour-policy snapshot (``{"config": ..., "state_dict": ...}``)."""
    blob = torch.load(path, map_location=device, weights_only=True)
    c = blob["config"]
    actor = TanhGaussianActor(c["obs_dim"], c["act_dim"], tuple(c["hidden"]), c["action_low"], c["action_high"])
    actor.load_state_dict(blob["state_dict"])
    return actor.to(device).eval()


def save_actor(actor: TanhGaussianActor, path: str | os.PathLike, obs_dim: int, act_dim: int, hidden, low, high,
               **meta) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    config = {"obs_dim": obs_dim, "act_dim": act_dim, "hidden": list(hidden),
              "action_low": [float(x) for x in np.broadcast_to(low, act_dim)],
              "action_high": [float(x) for x in np.broadcast_to(high, act_dim)]} | meta
    torch.save({"config": config, "state_dict": {k: v.clone() for k, v in actor.state_dict().items()}}, path)


def _goal_reached(history: list[dict], stop_return: float | None, stop_after: int) -> bool:
    last = history[-stop_after:]
    return stop_return is not None and len(last) == stop_after and all(h["return_mean"] >= stop_return for h in last)


def train_sac(env_id: str, steps: int, out_dir: str | os.PathLike, seed: int = 0, config: SACConfig | None = None,
              snapshot_every: int = 5000, eval_every: int = 5000, eval_episodes: int = 10,
              checkpoint_every: int = 25_000, device: str = "cpu", progress: bool = True,
              precision: str = "float32", stop_return: float | None = None, stop_after: int = 3) -> list[dict]:
    """Train SAC online for up to ``steps`` environment steps (one update per step), resuming from ``out_dir``.

    Writes ``out_dir/snapshots/step_XXXXXXX.pt`` (actor only, every ``snapshot_every`` steps),
    ``out_dir/history.jsonl`` (one line per evaluation: deterministic actions, ``eval_episodes`` episodes),
    ``out_dir/replay/XXXXXXX-YYYYYYY.npz`` (every transition of steps X..Y-1 in the order they happened, with exact
    terminals and timeouts; :func:`replay_dataset` reads them back) and ``out_dir/checkpoint.pt`` (networks,
    optimisers, buffer, random states and the running episode's simulator state, so a resumed run continues exactly
    where it stopped). ``precision="bf16"`` runs every update under bfloat16 autocast (see :mod:`minirl.nets`).
    Training stops early once ``stop_after`` evaluations in a row average at least ``stop_return``.
    Returns the evaluation history.
    """
    if precision not in ("float32", "bf16"):
        raise ValueError(f"precision must be 'float32' or 'bf16', got {precision!r}")
    if eval_every % snapshot_every:
        raise ValueError(f"eval_every ({eval_every}) must be a multiple of snapshot_every ({snapshot_every}) so "
                         "that every evaluated policy has its snapshot")
    cfg = config or SACConfig()
    out = Path(out_dir)
    (out / "snapshots").mkdir(parents=True, exist_ok=True)
    (out / "replay").mkdir(exist_ok=True)
    env = make_env(env_id)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    low, high = env.action_space.low, env.action_space.high
    torch.manual_seed(seed)
    agent = SAC(obs_dim, act_dim, low, high, cfg, device)
    buf = ReplayBuffer(obs_dim, act_dim, cfg.buffer_size)
    rng = np.random.default_rng(seed)
    env.action_space.seed(seed)
    settings = asdict(cfg) | {"env_id": env_id, "seed": seed, "precision": precision, "eval_every": eval_every,
                              "eval_episodes": eval_episodes, "snapshot_every": snapshot_every,
                              "stop_return": stop_return, "stop_after": stop_after}
    start, episode = 0, 0
    obs = env.reset(seed=seed * 100_000 + episode)[0]
    ep_ret = 0.0
    ckpt = out / "checkpoint.pt"
    if ckpt.exists():
        state = torch.load(ckpt, map_location=device, weights_only=False)
        before = {k: v for k, v in state["settings"].items() if k != "stop_return"}
        changed = {k: (v, settings[k]) for k, v in before.items() if settings.get(k) != v}
        if changed:
            raise ValueError(f"{out} holds a run with other settings: " +
                             ", ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in changed.items()))
        agent.load_state_dict(state["agent"])
        buf.load(state["buffer"])
        rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        start, episode, obs, ep_ret = state["step"], state["episode"], state["obs"], state["ep_ret"]
        set_env_state(env, state["env"])
    (out / "config.json").write_text(json.dumps(settings, indent=1))
    history_path = out / "history.jsonl"
    history = [json.loads(x) for x in history_path.read_text().splitlines()] if history_path.exists() else []
    history = [h for h in history if h["step"] <= start]
    precision_ctx = torch.autocast(agent.device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
    last_saved, logs = start, {}
    bar = progress_bar(range(start, steps), initial=start, total=steps, desc=f"SAC {env_id}", enabled=progress,
                       mininterval=2.0)
    for t in bar:
        if _goal_reached(history, stop_return, stop_after):
            break
        if t < cfg.start_steps:
            a = env.action_space.sample()
        else:
            with torch.no_grad():
                o = torch.as_tensor(obs, dtype=torch.float32, device=agent.device)[None]
                a = agent.actor.action(o, torch.randn((1, act_dim), device=agent.device))[0].cpu().numpy()
        next_obs, r, term, trunc, _ = env.step(a)
        buf.add(obs, a, r, next_obs, float(term), trunc and not term)
        obs, ep_ret = next_obs, ep_ret + float(r)
        if term or trunc:
            episode += 1
            obs, ep_ret = env.reset(seed=seed * 100_000 + episode)[0], 0.0
        if t + 1 >= cfg.update_after:
            with precision_ctx:
                logs = agent.update(buf.sample(rng, cfg.batch_size, agent.device))
        step = t + 1
        if step % snapshot_every == 0:
            save_actor(agent.actor, out / "snapshots" / f"step_{step:07d}.pt", obs_dim, act_dim, cfg.hidden, low,
                       high, env_id=env_id, step=step, seed=seed)
        if step % eval_every == 0:
            rets = evaluate_policy(agent.actor, env_id, eval_episodes, seed=10_000 + step)
            entry = {"step": step, "return_mean": float(np.mean(rets)), "return_std": float(np.std(rets)),
                     "alpha": float(logs.get("alpha", 1.0)), "critic_loss": float(logs.get("critic_loss", 0.0))}
            history.append(entry)
            with open(history_path, "a") as f:
                f.write(json.dumps(entry) + "\n")
            bar.set_postfix(ret=f"{entry['return_mean']:.0f}")
        if step % checkpoint_every == 0 or step == steps or _goal_reached(history, stop_return, stop_after):
            np.savez(out / "replay" / f"{last_saved:07d}-{step:07d}.npz", **buf.since(last_saved))
            last_saved = step
            tmp = out / "checkpoint.pt.tmp"
            torch.save({"agent": agent.state_dict(), "buffer": buf.state(), "rng": rng.bit_generator.state,
                        "torch_rng": torch.get_rng_state(), "step": step, "episode": episode, "obs": obs,
                        "ep_ret": ep_ret, "env": env_state(env), "settings": settings}, tmp)
            os.replace(tmp, ckpt)
            # rewrite the history so that it matches the checkpoint exactly
            history_path.write_text("".join(json.dumps(h) + "\n" for h in history))
    env.close()
    return history


def replay_dataset(out_dir: str | os.PathLike, upto: int) -> dict[str, np.ndarray]:
    """The replay buffer of a :func:`train_sac` run from its first step up to step ``upto`` (exclusive), in the D4RL
    dict format, read from ``out_dir/replay/``: every transition in the order it happened, ``terminals`` where the
    task ended, ``timeouts`` where the time limit cut the episode. The episode running at ``upto`` is cut there and
    its last step marked as a timeout, as :func:`rollout` does."""
    chunks = []
    for f in sorted(Path(out_dir, "replay").glob("*.npz")):
        a, b = (int(x) for x in f.stem.split("-"))
        if a < upto:
            with np.load(f) as z:
                chunks.append({k: z[k][: min(b, upto) - a] for k in ReplayBuffer.KEYS})
    n = sum(len(c["rew"]) for c in chunks)
    if n != upto:
        raise ValueError(f"{out_dir}/replay holds {n} transitions before step {upto}, expected {upto} "
                         "(the run has not reached that step, or a chunk is missing)")
    cat = {k: np.concatenate([c[k] for c in chunks]) for k in ReplayBuffer.KEYS}
    data = {"observations": cat["obs"], "actions": cat["act"], "rewards": cat["rew"],
            "next_observations": cat["next_obs"], "terminals": cat["done"].astype(bool),
            "timeouts": cat["timeout"].astype(bool)}
    data["timeouts"][-1] = not data["terminals"][-1]
    return data


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(allow_abbrev=False, description="Train a SAC behaviour policy (resumes from --out).")
    p.add_argument("env_id")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--snapshot-every", type=int, default=5000)
    p.add_argument("--eval-every", type=int, default=5000)
    p.add_argument("--checkpoint-every", type=int, default=25_000)
    p.add_argument("--start-steps", type=int, default=5000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--precision", choices=("float32", "bf16"), default="float32",
                   help="bf16: updates under bfloat16 autocast (1.8x faster SAC updates on a CPU with AVX-512 BF16)")
    p.add_argument("--stop-return", type=float, default=None,
                   help="stop once --stop-after evaluations in a row average at least this return")
    p.add_argument("--stop-after", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: one run per core)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    history = train_sac(a.env_id, a.steps, a.out, a.seed, SACConfig(start_steps=a.start_steps), a.snapshot_every,
                        a.eval_every, a.eval_episodes, checkpoint_every=a.checkpoint_every, precision=a.precision,
                        stop_return=a.stop_return, stop_after=a.stop_after)
    if history:
        print(f"step {history[-1]['step']}: evaluation return {history[-1]['return_mean']:.1f}")


if __name__ == "__main__":
    main()
