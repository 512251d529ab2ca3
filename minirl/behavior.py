"""Behaviour policies: a compact online SAC that trains them, and the rollouts that turn them into datasets.

D4RL made its MuJoCo datasets by training SAC online and rolling out snapshots of it. minirl does the same on this
machine: :func:`train_sac` trains SAC on a Gymnasium task, keeps a snapshot of the actor every few thousand steps
(with its evaluation return) and can stop and resume from a full checkpoint (networks, optimisers, temperature,
replay buffer, random states). A handful of those small actor snapshots are committed in ``minirl/assets/`` and
:func:`rollout` turns any of them into transitions in the D4RL format.

SAC (Haarnoja et al. 2018, arXiv:1812.05905), with automatic entropy tuning:
    critic:  Q_i(s, a) -> r + gamma (1 - d) [min_j Q'_j(s', a') - alpha log pi(a'|s')],  a' ~ pi(.|s')
    actor:   minimise E[alpha log pi(a|s) - min_j Q_j(s, a)],  a ~ pi(.|s) (reparameterised)
    alpha:   minimise E[-log alpha (log pi(a|s) + target_entropy)],  target_entropy = -|A|
"""
from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from .nets import CriticEnsemble, TanhGaussianActor, soft_update


@dataclass
class SACConfig:
    hidden: tuple = (256, 256)     # actor and critic layer sizes
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4
    gamma: float = 0.99           # discount
    tau: float = 0.005            # Polyak rate of the target critics
    batch_size: int = 256
    n_critics: int = 2
    init_alpha: float = 1.0
    start_steps: int = 5000       # uniform random actions before the policy acts
    update_after: int = 1000      # gradient updates start once the buffer holds this many transitions
    buffer_size: int = 1_000_000


class SAC:
    """Soft actor-critic; ``update(batch)`` takes a dict of tensors ``obs, act, rew, next_obs, done``."""

    def __init__(self, obs_dim: int, act_dim: int, action_low, action_high, config: SACConfig | None = None,
                 device: str = "cpu"):
        self.cfg = cfg = config or SACConfig()
        self.device = torch.device(device)
        self.actor = TanhGaussianActor(obs_dim, act_dim, cfg.hidden, action_low, action_high).to(self.device)
        self.critic = CriticEnsemble(obs_dim, act_dim, cfg.hidden, cfg.n_critics).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(np.log(cfg.init_alpha), dtype=torch.float32, device=self.device,
                                      requires_grad=True)
        self.target_entropy = -float(act_dim)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.alpha_lr)

    def update(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            next_a, next_logp = self.actor.sample(b["next_obs"])
            next_q = self.critic_target(b["next_obs"], next_a).min(0).values - alpha * next_logp
            target = b["rew"] + self.cfg.gamma * (1.0 - b["done"]) * next_q
        critic_loss = ((self.critic(b["obs"], b["act"]) - target) ** 2).mean(1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        a, logp = self.actor.sample(b["obs"])
        self.critic.requires_grad_(False)  # the actor's gradient flows through Q, the critic's weights stay put
        actor_loss = (alpha * logp - self.critic(b["obs"], a).min(0).values).mean()
        self.critic.requires_grad_(True)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()

        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()
        soft_update(self.critic_target, self.critic, self.cfg.tau)
        return {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "alpha": alpha}

    def state_dict(self) -> dict:
        return {k: getattr(self, k).state_dict() for k in
                ("actor", "critic", "critic_target", "actor_opt", "critic_opt", "alpha_opt")} | {
            "log_alpha": self.log_alpha.detach().clone()}

    def load_state_dict(self, state: dict) -> None:
        for k in ("actor", "critic", "critic_target", "actor_opt", "critic_opt", "alpha_opt"):
            getattr(self, k).load_state_dict(state[k])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])


class _Buffer:
    """The online replay buffer SAC needs (offline algorithms sample from :class:`minirl.data.OfflineDataset`).

    ``done`` is the true terminal (the target's ``1 - d``); ``timeout`` marks an episode cut by the time limit, which
    SAC must bootstrap through but a dataset made from the buffer must record (D4RL's ``timeouts``).
    """

    KEYS = ("obs", "act", "rew", "next_obs", "done", "timeout")

    def __init__(self, obs_dim: int, act_dim: int, size: int):
        self.obs = np.zeros((size, obs_dim), np.float32)
        self.next_obs = np.zeros((size, obs_dim), np.float32)
        self.act = np.zeros((size, act_dim), np.float32)
        self.rew = np.zeros(size, np.float32)
        self.done = np.zeros(size, np.float32)
        self.timeout = np.zeros(size, bool)
        self.n, self.size = 0, size

    def add(self, o, a, r, o2, d, timeout=False):
        i = self.n % self.size
        self.obs[i], self.act[i], self.rew[i], self.next_obs[i], self.done[i] = o, a, r, o2, d
        self.timeout[i] = timeout
        self.n += 1

    def sample(self, rng: np.random.Generator, batch_size: int, device) -> dict[str, torch.Tensor]:
        idx = rng.integers(0, min(self.n, self.size), batch_size)
        return {k: torch.as_tensor(getattr(self, k)[idx], device=device)
                for k in ("obs", "act", "rew", "next_obs", "done")}

    def since(self, first: int) -> dict[str, np.ndarray]:
        """The transitions added from the ``first``-th on, in the order they were added (still held by the ring)."""
        if first < self.n - self.size:
            raise ValueError(f"transitions before {self.n - self.size} were overwritten (buffer size {self.size})")
        idx = np.arange(first, self.n) % self.size
        return {k: getattr(self, k)[idx] for k in self.KEYS}

    def state(self) -> dict:
        m = min(self.n, self.size)
        return {"n": self.n} | {k: getattr(self, k)[:m] for k in self.KEYS}

    def load(self, s: dict) -> None:
        self.n = int(s["n"])
        m = min(self.n, self.size)
        for k in self.KEYS:
            getattr(self, k)[:m] = s[k]


@contextlib.contextmanager
def single_thread():
    """Run torch on one thread inside the block: for batch-1 inference in an environment loop, extra threads only
    add synchronisation (measured here: 4x slower with 2 threads than with 1 on a busy 2-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def make_env(env_id: str, **kwargs) -> gym.Env:
    """A Gymnasium environment by id, with a clear error when its dependency (e.g. MuJoCo) is missing."""
    try:
        return gym.make(env_id, **kwargs)
    except gym.error.DependencyNotInstalled as e:  # pragma: no cover - depends on the machine
        raise RuntimeError(f"environment {env_id!r} needs an extra package: {e}. "
                           "Install it with: pip install 'gymnasium[mujoco]'") from e


# a progress bar that nobody watches redraw (an executed notebook, a log file) keeps every redraw: notebook 4's
# live run, executed at 52 updates/s, stored 928 separate outputs, and a 1M-step run's log grew by a line a second
REDRAWS_OFF_TERMINAL = 100


def progress_bar(iterable=None, *, total: int, initial: int = 0, desc: str | None = None, enabled: bool = True,
                 mininterval: float = 1.0, file=None) -> tqdm:
    """A tqdm bar over ``total`` items that redraws at most once per ``mininterval`` seconds; when its stream is
    not a terminal it also waits for 1/REDRAWS_OFF_TERMINAL of the remaining items between redraws (tqdm's
    ``miniters``), so it writes about a hundred redraws whatever the run's length or speed."""
    stream = file if file is not None else sys.stderr
    terminal = bool(getattr(stream, "isatty", lambda: False)())
    miniters = None if terminal else max(1, (total - initial) // REDRAWS_OFF_TERMINAL)
    # off a terminal, no maxinterval: tqdm's monitor thread sets miniters back to 1 once a bar has not redrawn for
    # maxinterval seconds (10 by default), which a 1M-step run's 1% (minutes apart) always triggers
    return tqdm(iterable, total=total, initial=initial, desc=desc, disable=not enabled, mininterval=mininterval,
                miniters=miniters, maxinterval=10.0 if terminal else float("inf"), file=file)


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


def _time_limit(env: gym.Env) -> gym.wrappers.TimeLimit | None:
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            return env
        env = env.env
    return None


_MJ_FIELDS = ("qpos", "qvel", "act", "qacc_warmstart", "ctrl")


def env_state(env: gym.Env) -> dict:
    """What a checkpoint needs to continue the running episode exactly: the simulator's state (MuJoCo's positions,
    velocities, activations, controls and the solver's warm start; a classic-control env's ``state``), the time
    limit's step count and the action space's generator."""
    u = env.unwrapped
    if hasattr(u, "data") and hasattr(u, "model"):  # MuJoCo
        sim = {k: np.array(getattr(u.data, k)).copy() for k in _MJ_FIELDS} | {"time": float(u.data.time)}
    elif hasattr(u, "state"):
        sim = {"state": copy.deepcopy(u.state)}
    else:
        raise TypeError(f"cannot save the state of {type(u).__name__}: neither MuJoCo data nor a 'state' attribute")
    limit = _time_limit(env)
    return {"sim": sim, "elapsed": None if limit is None else limit._elapsed_steps,
            "action_space_rng": env.action_space.np_random.bit_generator.state}


def set_env_state(env: gym.Env, state: dict) -> None:
    """Restore :func:`env_state` into an environment of the same id (after a ``reset``)."""
    u, sim = env.unwrapped, state["sim"]
    if "qpos" in sim:
        import mujoco
        for k in _MJ_FIELDS:
            getattr(u.data, k)[:] = sim[k]
        u.data.time = sim["time"]
        mujoco.mj_forward(u.model, u.data)
    else:
        u.state = copy.deepcopy(sim["state"])
    limit = _time_limit(env)
    if limit is not None:
        limit._elapsed_steps = state["elapsed"]
    env.action_space.np_random.bit_generator.state = state["action_space_rng"]


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
    buf = _Buffer(obs_dim, act_dim, cfg.buffer_size)
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
                chunks.append({k: z[k][: min(b, upto) - a] for k in _Buffer.KEYS})
    n = sum(len(c["rew"]) for c in chunks)
    if n != upto:
        raise ValueError(f"{out_dir}/replay holds {n} transitions before step {upto}, expected {upto} "
                         "(the run has not reached that step, or a chunk is missing)")
    cat = {k: np.concatenate([c[k] for c in chunks]) for k in _Buffer.KEYS}
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
