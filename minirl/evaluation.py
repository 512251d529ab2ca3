"""A policy in its environment: seeded evaluation episodes, the value check, and a video of one episode.

:func:`evaluate` runs an agent's deterministic policy over seeded episodes, all stepped side by side so that the
policy acts on one batch per step; :func:`value_check` compares the critic's estimate at the start states with the
Monte-Carlo return of the agent's own policy (extrapolation error shows as an estimate far above the return);
:func:`record_video` films one episode of a trained agent (``python -m minirl evaluate RUN --video FILE.gif``).
The training loop (:mod:`minirl.train`) calls the first two at every evaluation step.
"""
from __future__ import annotations
import importlib
import math
import os
from pathlib import Path

import numpy as np
import torch

from .config import UserError, check_writable
from .data import RewardTransform, StateNormalizer
from .utils import make_env, single_thread
# --------------------------------------------------------------------------------------------------------------
# Episodes and the value check
# --------------------------------------------------------------------------------------------------------------

@single_thread()
def evaluate(agent, env_id: str, episodes: int = 10, seed: int = 0,
             state_normalizer: StateNormalizer | None = None) -> np.ndarray:
    """Undiscounted returns of ``agent.act(obs, deterministic=True)`` over ``episodes`` seeded episodes.

    All episodes run side by side (one environment each, reset with seeds ``seed, seed + 1, ...``) so that the agent
    acts on a batch of observations per step. :func:`run_episodes` also gives the success of each episode in a goal
    task (OGBench's mazes).
    """
    return run_episodes(agent, env_id, episodes, seed, state_normalizer)["returns"]


def _is_ogbench(env_id: str) -> bool:
    """Whether ``env_id`` is one of OGBench's environments (minirl evaluates its PointMaze single tasks)."""
    from .maze import is_maze_name  # the same prefix names the datasets and OGBench's environments
    return is_maze_name(env_id)


def make_task_env(env_id: str):
    """The environment a run named ``env_id`` is evaluated in: OGBench's single-task maze for a maze, else
    :func:`minirl.utils.make_env`."""
    if _is_ogbench(env_id):
        from .maze import task_env
        return task_env(env_id)
    return make_env(env_id)


def _reset(env, env_id: str, seed: int) -> np.ndarray:
    """``env.reset(seed=seed)``'s observation. OGBench's mazes draw the start's noise from numpy's global generator,
    not from the environment's: it is seeded with ``seed`` for the reset and restored after, as OGBench's own
    evaluation seeds it (:func:`minirl.maze.success_rate` does the same)."""
    if not _is_ogbench(env_id):
        return env.reset(seed=seed)[0]
    from .maze import global_numpy_seed
    with global_numpy_seed(seed):
        return env.reset(seed=seed)[0]


@single_thread()
def run_episodes(agent, env_id: str, episodes: int, seed: int, state_normalizer: StateNormalizer | None = None,
                 gamma: float = 1.0, keep_states: bool = False) -> dict:
    """Run the deterministic policy for ``episodes`` seeded episodes side by side: the undiscounted ``returns``, the
    ``discounted`` returns (``sum_t gamma^t r_t``), the ``lengths`` in steps, and the (normalised) start observations
    and first actions; in an
    environment that reports success (OGBench's ``info["success"]``), ``successes``: whether each episode's last step
    reported it; with ``keep_states``, also ``states``: each episode's observations before normalisation (float32),
    ``(T_i, obs_dim)``. In OGBench's environments the actions are clipped to the action space, as OGBench's
    evaluation clips them."""
    envs = [make_task_env(env_id) for _ in range(episodes)]
    obs = np.stack([_reset(env, env_id, seed + i) for i, env in enumerate(envs)]).astype(np.float32)
    clip = (envs[0].action_space.low, envs[0].action_space.high) if _is_ogbench(env_id) else None
    returns, discounted = np.zeros(episodes), np.zeros(episodes)
    lengths = np.zeros(episodes, np.int64)
    successes = np.zeros(episodes, bool)
    reports_success = False
    active = np.ones(episodes, bool)
    visited = [[] for _ in range(episodes)]
    first = None
    t = 0
    while active.any():
        idx = np.flatnonzero(active)
        if keep_states:
            for i in idx:
                visited[i].append(obs[i].copy())
        o = obs[idx] if state_normalizer is None else state_normalizer.transform(obs[idx])
        actions = np.asarray(agent.act(o, deterministic=True))
        if first is None:
            first = (np.asarray(o, np.float32), actions.astype(np.float32))
        if clip is not None:
            actions = np.clip(actions, *clip)
        for j, i in enumerate(idx):
            obs[i], r, term, trunc, info = envs[i].step(actions[j])
            returns[i] += r
            discounted[i] += gamma ** t * r
            lengths[i] += 1
            active[i] = not (term or trunc)
            if not active[i] and "success" in info:
                reports_success = True
                successes[i] = bool(info["success"])
        t += 1
    for env in envs:
        env.close()
    out = {"returns": returns, "discounted": discounted, "lengths": lengths, "start_obs": first[0],
           "start_actions": first[1]}
    if reports_success:
        out["successes"] = successes
    if keep_states:
        out["states"] = [np.stack(v) for v in visited]
    return out


def success_rate(policy, name: str, episodes: int = 50, seed: int = 0,
                 state_normalizer: StateNormalizer | None = None) -> dict:
    """OGBench's evaluation of a single task: ``policy`` in the singletask environment of maze dataset (or task)
    ``name`` (``pointmaze-medium-stitch-singletask-task1``), ``episodes`` seeded episodes side by side (OGBench reports
    50). ``policy`` is an agent (its ``act(obs, deterministic=True)``) or a function from a batch of observations
    ``(B, 2)`` to actions. An episode ends at the goal or after 1,000 steps and succeeded if the goal was reached.
    Returns ``success_rate`` (0-1), ``successes``, ``returns`` (-1 per step before the goal), ``lengths``, ``env_id``,
    ``episodes`` and ``seed``."""
    from .maze import parse
    env_id = parse(name, kind_required=False).env_id
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be a positive integer, got {episodes!r}")
    agent = policy if hasattr(policy, "act") else _FunctionPolicy(policy)
    ep = run_episodes(agent, env_id, episodes, seed, state_normalizer)
    return {"success_rate": float(ep["successes"].mean()), "successes": ep["successes"], "returns": ep["returns"],
            "lengths": ep["lengths"], "env_id": env_id, "episodes": episodes, "seed": seed}


class _FunctionPolicy:
    """A function from observations to actions, as an agent's ``act``."""

    def __init__(self, fn):
        self.fn = fn

    def act(self, obs, deterministic=True):
        return self.fn(obs)


def has_value_estimate(agent) -> bool:
    """Whether ``agent`` declares a continuous-action critic ensemble ``critic(obs, act) -> (n, B)`` among its modules
    (:mod:`minirl.agent`) and has a discount, ``cfg.gamma``."""
    return "critic" in getattr(agent, "modules", ()) and hasattr(getattr(agent, "cfg", None), "gamma")


@single_thread()
def value_check(agent, env_id: str, episodes: int = 10, seed: int = 0,
                state_normalizer: StateNormalizer | None = None,
                reward_transform: RewardTransform | None = None) -> dict:
    """The critic's estimate at the start states against the Monte-Carlo return of the agent's own policy.

    Runs ``episodes`` deterministic episodes (as :func:`evaluate`, the same seeds) and returns
    ``return_mean`` (undiscounted), ``mc_discounted`` (the mean discounted return ``sum_t gamma^t r_t`` from the start
    states, the true value of the policy there up to the 1,000-step time limit) and ``q_start``: the mean over
    the start states of ``min_k Q_k(s_0, pi(s_0))`` (the smallest of the critic ensemble, in raw reward units:
    ``reward_transform``, e.g. IQL's reward scaling, is undone as ``(q - bias / (1 - gamma)) / scale``, exact for
    ``bias = 0``, the only case minirl makes). Extrapolation error shows as ``q_start`` far above ``mc_discounted``,
    a conservative critic (CQL) as ``q_start`` below it.
    """
    if not has_value_estimate(agent):
        raise TypeError(f"{type(agent).__name__} has no critic to check: value_check needs agent.critic(obs, act), "
                        f"declared in its modules, and agent.cfg.gamma")
    gamma = float(agent.cfg.gamma)
    ep = run_episodes(agent, env_id, episodes, seed, state_normalizer, gamma)
    dev = next(agent.critic.parameters()).device
    with torch.no_grad():
        q = agent.critic(torch.as_tensor(ep["start_obs"], device=dev),
                         torch.as_tensor(ep["start_actions"], device=dev)).float().min(0).values.mean().item()
    if reward_transform is not None:
        q = (q - reward_transform.bias / (1.0 - gamma)) / reward_transform.scale
    return {"return_mean": float(ep["returns"].mean()), "return_std": float(ep["returns"].std()),
            "returns": ep["returns"], "mc_discounted": float(ep["discounted"].mean()), "q_start": q,
            **({"successes": ep["successes"]} if "successes" in ep else {})}


# --------------------------------------------------------------------------------------------------------------
# Video
# --------------------------------------------------------------------------------------------------------------

VIDEO_FORMATS = {".gif": ("PIL", "pillow"), ".mp4": ("imageio_ffmpeg", "imageio-ffmpeg")}


def check_video(path: str | os.PathLike) -> Path:
    """``path`` if minirl can write a video there with what is installed; a :class:`UserError` naming what is
    missing otherwise (``.gif`` needs pillow, ``.mp4`` imageio-ffmpeg, which requirements.txt does not install)."""
    path = Path(path)
    if path.suffix.lower() not in VIDEO_FORMATS:
        raise UserError(f"--video {path}: the file must end in .gif or .mp4")
    module, package = VIDEO_FORMATS[path.suffix.lower()]
    try:
        importlib.import_module("imageio")
        importlib.import_module(module)
    except ImportError:
        other = "; or write a .gif" if path.suffix.lower() != ".gif" else ""
        raise UserError(f"--video {path}: writing {path.suffix} needs the {package} package "
                        f"(pip install imageio {package}){other}") from None
    check_writable(path.parent, f"--video {path}")
    return path


def record_video(loaded, path: str | os.PathLike, seed: int = 0, size: int = 240) -> int:
    """One deterministic episode of ``loaded`` (a :class:`minirl.runs.LoadedAgent`, or anything with ``env_id`` and
    ``act(obs)`` on raw observations) from seed ``seed``, written to ``path`` (.gif or .mp4); returns the number of
    frames. MuJoCo renders off-screen through EGL unless ``MUJOCO_GL`` says otherwise."""
    import imageio
    path = check_video(path)
    if "DISPLAY" not in os.environ:
        os.environ.setdefault("MUJOCO_GL", "egl")
    import gymnasium
    mujoco = "mujoco" in str(gymnasium.spec(loaded.env_id).entry_point)  # MuJoCo's renderer takes a frame size
    kwargs = {"width": size, "height": size} if mujoco else {}
    try:
        env = make_env(loaded.env_id, render_mode="rgb_array", **kwargs)
        obs, _ = env.reset(seed=seed)
        frames, done = [env.render()], False
    except Exception as e:  # a missing package (pygame) or no OpenGL: the ways vary with the machine
        raise UserError(f"--video: rendering {loaded.env_id} failed: {' '.join(str(e).split())}") from None
    while not done:
        obs, _, term, trunc, _ = env.step(loaded.act(obs[None])[0])
        frames.append(env.render())
        done = term or trunc
    fps = env.metadata.get("render_fps") or 30
    env.close()
    if path.suffix.lower() == ".gif":  # browsers slow down GIF frames shorter than 20 ms: keep every k-th frame
        k = max(1, math.ceil(fps / 50))
        frames, fps = frames[::k], fps / k
        imageio.mimsave(path, frames, duration=1000 / fps, loop=0)
    else:
        imageio.mimsave(path, frames, fps=fps)
    return len(frames)
