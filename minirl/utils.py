"""Small helpers the training loop, evaluation and data making share: a Gymnasium environment by id, torch on one
thread for an environment loop, a progress bar fit for a terminal, a notebook or a log file, and the state of a
running environment for a checkpoint."""
from __future__ import annotations

import contextlib
import copy
import sys

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm


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
LOG_INTERVAL = 10.0  # seconds between two lines of a bar written to a log file (or a pipe), unless told otherwise


class _Lines:
    """A log file as tqdm's stream: each redraw a plain line of its own, without the carriage return that puts a
    terminal's cursor back (in a log, every redraw of a run piled up on one line), the padding, or empty lines."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, s: str) -> None:
        text = s.replace("\r", "").rstrip()
        if text:
            self.stream.write(text + "\n")

    def flush(self) -> None:
        getattr(self.stream, "flush", lambda: None)()


def _in_notebook(stream) -> bool:
    """Whether ``stream`` is a Jupyter kernel's output, which draws a carriage return in place as a terminal does."""
    return type(stream).__module__.startswith("ipykernel")


def progress_bar(iterable=None, *, total: int, initial: int = 0, desc: str | None = None, enabled: bool = True,
                 mininterval: float | None = None, file=None) -> tqdm:
    """A tqdm bar over ``total`` items that redraws at most once per ``mininterval`` seconds (default 1 s; in a log
    file :data:`LOG_INTERVAL`). When its stream is not a terminal it also waits for 1/REDRAWS_OFF_TERMINAL of the
    remaining items between redraws (tqdm's ``miniters``), so it writes about a hundred redraws whatever the run's
    length or speed; in a log file or a pipe (neither a terminal nor a notebook) each redraw is a plain ASCII line."""
    stream = file if file is not None else sys.stderr
    terminal = bool(getattr(stream, "isatty", lambda: False)())
    log = not terminal and not _in_notebook(stream)
    if mininterval is None:
        mininterval = LOG_INTERVAL if log else 1.0
    miniters = None if terminal else max(1, (total - initial) // REDRAWS_OFF_TERMINAL)
    # off a terminal, no maxinterval: tqdm's monitor thread sets miniters back to 1 once a bar has not redrawn for
    # maxinterval seconds (10 by default), which a 1M-step run's 1% (minutes apart) always triggers
    return tqdm(iterable, total=total, initial=initial, desc=desc, disable=not enabled, mininterval=mininterval,
                miniters=miniters, maxinterval=10.0 if terminal else float("inf"), file=_Lines(stream) if log else file,
                ascii=True if log else None)


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
