"""The offline dataset: D4RL's dict of transitions, checked once, then sampled on the device.

Offline RL learns from a fixed set of transitions ``(s, a, r, s')``. D4RL (Fu et al. 2020, arXiv:2004.07219) stores
them as a dict of equally long arrays; most offline RL code bases read this format, and so does
:class:`OfflineDataset` (``OfflineDataset(**d4rl_dict)`` works). Minari, D4RL's successor, stores episodes instead
(T + 1 observations, ``terminations``, ``truncations``); :func:`minirl.minari_io.from_minari` and
:func:`minirl.minari_io.to_minari` convert exactly (that module depends on this one, never the other way)::

    observations       float32 (N, obs_dim)   s_i, the state the action was taken in
    actions            float32 (N, act_dim)   a_i
    rewards            float32 (N,)           r_i
    next_observations  float32 (N, obs_dim)   s'_i, the state the environment moved to
    terminals          bool    (N,)           s'_i is terminal (the agent fell over): no bootstrapping from it
    timeouts           bool    (N,)           the episode was cut by a time limit after this step: s'_i is NOT
                                              terminal, the value of s'_i still counts
    infos/<key>        any     (N, ...)       optional extras (D4RL: qpos, qvel, action_log_probs)

Row ``i`` is one transition. Episodes are stored one after another: an episode ends at a transition whose
``terminals`` or ``timeouts`` is True, and the dataset's last transition ends the last (possibly cut) episode.
The difference between the two flags matters: the TD target is ``r + gamma * (1 - terminal) * V(s')``, so a
timeout must not be treated as a terminal, or the agent learns that time limits are cliffs.

The dataset is validated on construction (shapes, dtypes, NaN/inf, 0/1 flags, action bounds) and every error says
which field is wrong, how many entries are bad and where the first one is. The arrays are private read-only
copies: a dataset never changes after construction. Normalisation is therefore never hidden inside the dataset;
it is an explicit, reversible object (:class:`StateNormalizer`, :class:`RewardTransform`) that the caller applies
with :meth:`OfflineDataset.transformed` and keeps next to the agent, so evaluation can normalise the environment's
observations the same way.

Sampling keeps the whole dataset on the device (:meth:`OfflineDataset.to_tensors`, cached per device) and only
draws indices and gathers rows per batch, so a training step never copies data from the host.
"""
from __future__ import annotations

import contextlib
import hashlib
import numbers
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .config import UserError

# The six D4RL fields, in the order D4RL lists them, and the shape each must have.
FIELDS = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")
_EXPECTED_SHAPE = {"observations": "(N, obs_dim)", "actions": "(N, act_dim)", "rewards": "(N,)",
                   "next_observations": "(N, obs_dim)", "terminals": "(N,)", "timeouts": "(N,)"}
_ACTION_TOLERANCE = 1e-6  # actions may exceed their bounds by this much (float rounding of tanh * scale)


# ----------------------------------------------------------------------------------------------------------------
# Validation helpers: each returns a clean read-only numpy array or raises a ValueError that explains the problem.
# ----------------------------------------------------------------------------------------------------------------

def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _where(mask: np.ndarray) -> str:
    """'index 17' (1-D) or 'index 17, column 2' (2-D) for the first True entry of ``mask``."""
    flat = int(np.argmax(mask.reshape(-1)))
    if mask.ndim == 1:
        return f"index {flat}"
    row, col = divmod(flat, int(np.prod(mask.shape[1:])))
    return f"index {row}, column {col}"


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _check_ndim(name: str, a: np.ndarray, ndim: int) -> None:
    if a.ndim == ndim:
        return
    hint = ""
    if ndim == 1 and a.ndim == 2 and a.shape[1] == 1:  # a (N, 1) column is not silently squeezed
        hint = f" (a column: pass {name}.reshape(-1))"
    elif ndim == 2 and a.ndim == 1:
        hint = f" (for a 1-D space pass {name}.reshape(-1, 1))"
    raise ValueError(f"{name} must be {ndim}-D with shape {_EXPECTED_SHAPE[name]}, got shape {a.shape}{hint}")


def _as_float(name: str, x, ndim: int) -> np.ndarray:
    """observations, next_observations, actions: a floating-point array of ``ndim`` dimensions -> float32."""
    a = np.asarray(x)
    if a.dtype.kind != "f":
        raise ValueError(f"{name} must be floating point, got {a.dtype}")
    _check_ndim(name, a, ndim)
    return np.array(a, dtype=np.float32)  # always a private copy


def _as_rewards(x) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "iuf":  # bool ('b'), complex, strings and objects are not rewards
        raise ValueError(f"rewards must be numeric (integer or floating point), got {a.dtype}")
    _check_ndim("rewards", a, 1)
    return np.array(a, dtype=np.float32)


def _as_flag(name: str, x) -> np.ndarray:
    """terminals, timeouts: bool, or numbers that are all 0 or 1 -> bool."""
    a = np.asarray(x)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be boolean (or numbers 0 and 1), got {a.dtype}")
    _check_ndim(name, a, 1)
    if a.dtype.kind != "b":
        bad = (a != 0) & (a != 1)  # NaN compares unequal to both, so it is caught too
        if bad.any():
            first = int(np.argmax(bad))
            raise ValueError(f"{name} has {_plural(int(bad.sum()), 'value')} that "
                             f"{'is' if bad.sum() == 1 else 'are'} not 0 or 1 "
                             f"(first at index {first}: {a[first].item()!r})")
    return np.array(a, dtype=bool)


def _check_finite(name: str, a: np.ndarray) -> None:
    """NaN and +-inf in a float array: count them and point at the first one (by row)."""
    if np.isfinite(a).all():  # the fast, common path
        return
    nan = np.isnan(a)
    if nan.any():
        raise ValueError(f"{name} has {_plural(int(nan.sum()), 'NaN value')} (first at {_where(nan)})")
    inf = np.isinf(a)
    first = a.reshape(-1)[int(np.argmax(inf.reshape(-1)))]
    raise ValueError(f"{name} has {_plural(int(inf.sum()), 'infinite value')} "
                     f"(first at {_where(inf)}: {first})")


def _fmt_bound(b: np.ndarray) -> str:
    """A bound vector as a scalar when all its entries are equal, else as a list."""
    return f"{float(b[0]):g}" if np.all(b == b[0]) else "[" + ", ".join(f"{float(v):g}" for v in b) + "]"


def _fmt_bounds(ds: OfflineDataset) -> str:
    return "None" if ds.action_low is None else f"[{_fmt_bound(ds.action_low)}, {_fmt_bound(ds.action_high)}]"


def _as_bounds(low, high, act_dim: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """action_low, action_high: both None, or scalars / (act_dim,) arrays with low < high -> float32 (act_dim,)."""
    if low is None and high is None:
        return None, None
    if low is None or high is None:
        given = "action_low" if high is None else "action_high"
        raise ValueError(f"action_low and action_high must be given together (got only {given})")
    out = []
    for name, x in (("action_low", low), ("action_high", high)):
        b = np.asarray(x)
        if b.dtype.kind not in "iuf":
            raise ValueError(f"{name} must be numeric, got {b.dtype}")
        if b.shape not in ((), (act_dim,)):
            raise ValueError(f"{name} must be a scalar or have shape (act_dim,) = ({act_dim},), got shape {b.shape}")
        b = np.array(np.broadcast_to(b, (act_dim,)), dtype=np.float32)
        if not np.isfinite(b).all():
            raise ValueError(f"{name} must be finite, got {b.tolist()} (pass None for unbounded actions)")
        out.append(_readonly(b))
    low, high = out
    bad = low >= high
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"action_low must be < action_high in every dimension; {_plural(int(bad.sum()), 'dimension')}"
                         f" {'is' if bad.sum() == 1 else 'are'} not (first at index {i}: "
                         f"low {low[i]:g} >= high {high[i]:g})")
    return low, high


# ----------------------------------------------------------------------------------------------------------------
# Transforms: explicit, reversible, saved with the agent.
# ----------------------------------------------------------------------------------------------------------------

@dataclass(eq=False)
class StateNormalizer:
    """``x -> (x - mean) / std``, per observation dimension. Works on numpy arrays and torch tensors alike."""

    mean: np.ndarray
    std: np.ndarray

    def __post_init__(self):
        self.mean = np.array(self.mean, dtype=np.float32)
        self.std = np.array(self.std, dtype=np.float32)
        if self.mean.ndim != 1 or self.mean.shape != self.std.shape:
            raise ValueError(f"mean and std must be 1-D of the same shape (obs_dim,), "
                             f"got {self.mean.shape} and {self.std.shape}")
        _check_finite("mean", self.mean)
        _check_finite("std", self.std)
        bad = self.std <= 0
        if bad.any():
            raise ValueError(f"std must be positive; {_plural(int(bad.sum()), 'entry')} "
                             f"{'is' if bad.sum() == 1 else 'are'} not (first at {_where(bad)})")

    def _params(self, x):
        """x as float32 plus mean and std of the same kind (torch tensors on x's device)."""
        if x.shape[-1:] != self.mean.shape:
            raise ValueError(f"expected observations whose last dimension is {self.mean.shape[0]}, got shape "
                             f"{tuple(x.shape)}")
        if isinstance(x, torch.Tensor):
            return (x.to(torch.float32), torch.as_tensor(self.mean, device=x.device),
                    torch.as_tensor(self.std, device=x.device))
        return np.asarray(x, dtype=np.float32), self.mean, self.std

    def transform(self, obs):
        """Normalise: ``(obs - mean) / std``. numpy in, float32 numpy out; torch in, float32 torch out (same device)."""
        obs = obs if isinstance(obs, torch.Tensor) else np.asarray(obs)
        x, mean, std = self._params(obs)
        return (x - mean) / std

    def inverse(self, obs):
        """Undo :meth:`transform`: ``obs * std + mean``."""
        obs = obs if isinstance(obs, torch.Tensor) else np.asarray(obs)
        x, mean, std = self._params(obs)
        return x * std + mean

    def state_dict(self) -> dict:
        # Plain lists of floats: safe for torch.save(..., weights_only=True) and for JSON; float32 round-trips exactly.
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_state_dict(cls, d: Mapping) -> StateNormalizer:
        return cls(mean=np.asarray(d["mean"]), std=np.asarray(d["std"]))

    def __eq__(self, other):
        if not isinstance(other, StateNormalizer):
            return NotImplemented
        return np.array_equal(self.mean, other.mean) and np.array_equal(self.std, other.std)

    __hash__ = None  # mutable arrays inside: not hashable


@dataclass
class RewardTransform:
    """``r -> scale * r + bias``. Works on Python numbers, numpy arrays and torch tensors."""

    scale: float
    bias: float = 0.0

    def __post_init__(self):
        self.scale, self.bias = float(self.scale), float(self.bias)
        if not np.isfinite(self.scale) or self.scale == 0:
            raise ValueError(f"scale must be finite and non-zero (else the transform cannot be undone), "
                             f"got {self.scale}")
        if not np.isfinite(self.bias):
            raise ValueError(f"bias must be finite, got {self.bias}")

    @staticmethod
    def _as_float32(r):
        if isinstance(r, torch.Tensor):
            return r.to(torch.float32)
        if isinstance(r, numbers.Real):
            return float(r)
        return np.asarray(r, dtype=np.float32)

    def transform(self, r):
        """``scale * r + bias``; float32 for arrays and tensors, a float for a number."""
        return self.scale * self._as_float32(r) + self.bias

    def inverse(self, r):
        """Undo :meth:`transform`: ``(r - bias) / scale``."""
        return (self._as_float32(r) - self.bias) / self.scale

    def state_dict(self) -> dict:
        return {"scale": self.scale, "bias": self.bias}

    @classmethod
    def from_state_dict(cls, d: Mapping) -> RewardTransform:
        return cls(scale=d["scale"], bias=d["bias"])


# ----------------------------------------------------------------------------------------------------------------
# The dataset
# ----------------------------------------------------------------------------------------------------------------

class OfflineDataset:
    """A validated, immutable set of transitions in the D4RL format (see the module docstring).

    ``OfflineDataset(**d4rl_dict)`` takes the six D4RL arrays, an optional ``infos`` dict of arrays with one entry
    per transition, and optional action bounds (scalars or ``(act_dim,)`` arrays; when given, every action must lie
    within them; without them every action must lie in [-1, 1], where an agent's actor acts by default, so data
    with larger actions must say its bounds: they are never guessed). The arrays are copied, converted
    (observations, actions, rewards to float32; terminals, timeouts to bool) and made read-only. Invalid input
    raises a ``ValueError`` naming the field, the number of bad entries and the first bad index.
    """

    def __init__(self, observations, actions, rewards, next_observations, terminals, timeouts,
                 infos: dict | None = None, action_low=None, action_high=None):
        given = dict(observations=observations, actions=actions, rewards=rewards,
                     next_observations=next_observations, terminals=terminals, timeouts=timeouts)
        for name, value in given.items():
            if value is None:
                raise ValueError(f"{name} is missing (expected an array of shape {_EXPECTED_SHAPE[name]})")

        # 1. dtypes and dimensions, field by field (this also makes private float32 / bool copies)
        self.observations = _as_float("observations", observations, 2)
        self.actions = _as_float("actions", actions, 2)
        self.rewards = _as_rewards(rewards)
        self.next_observations = _as_float("next_observations", next_observations, 2)
        self.terminals = _as_flag("terminals", terminals)
        self.timeouts = _as_flag("timeouts", timeouts)

        # 2. lengths: everything has the N of observations, and N >= 1
        n = len(self.observations)
        if n == 0:
            raise ValueError("observations is empty (N = 0): a dataset needs at least one transition")
        for name in FIELDS[1:]:
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries, expected N = {n} "
                                 f"(the length of observations)")
        if self.next_observations.shape[1] != self.observations.shape[1]:
            raise ValueError(f"next_observations has {self.next_observations.shape[1]} columns, expected "
                             f"obs_dim = {self.observations.shape[1]} (the columns of observations)")

        # 3. values: no NaN or inf anywhere in the float fields
        for name in ("observations", "actions", "rewards", "next_observations"):
            _check_finite(name, getattr(self, name))

        # 4. infos: a dict of arrays, one entry per transition (any dtype; not checked for NaN)
        if infos is None:
            infos = {}
        if not isinstance(infos, Mapping):
            raise ValueError(f"infos must be a dict of arrays, got {type(infos).__name__}")
        self.infos: dict[str, np.ndarray] = {}
        for key, value in infos.items():
            a = np.array(value)
            if a.ndim == 0:
                raise ValueError(f"infos[{key!r}] must be an array with one entry per transition, got a scalar")
            if len(a) != n:
                raise ValueError(f"infos[{key!r}] has {len(a)} entries, expected N = {n} (the length of observations)")
            self.infos[str(key)] = _readonly(a)

        # 5. action bounds, and every action within them. Without bounds an agent's actor acts in [-1, 1], so
        #    actions beyond it need their bounds said (never guessed, never silently clipped)
        self.action_low, self.action_high = _as_bounds(action_low, action_high, self.act_dim)
        if self.action_low is None:
            out = np.abs(self.actions) > 1 + _ACTION_TOLERANCE
            if out.any():
                first = self.actions.reshape(-1)[int(np.argmax(out.reshape(-1)))]
                raise ValueError(f"actions has {_plural(int(out.sum()), 'value')} outside [-1, 1] (first at "
                                 f"{_where(out)}: {first:g}) and no action bounds were given, so an agent would act "
                                 f"in [-1, 1] only: pass action_low= and action_high= (scalars or (act_dim,) arrays, "
                                 f"e.g. env.action_space.low and env.action_space.high)")
        else:
            out = ((self.actions < self.action_low - _ACTION_TOLERANCE)
                   | (self.actions > self.action_high + _ACTION_TOLERANCE))
            if out.any():
                first = self.actions.reshape(-1)[int(np.argmax(out.reshape(-1)))]
                raise ValueError(f"actions has {_plural(int(out.sum()), 'value')} outside the bounds "
                                 f"[{_fmt_bound(self.action_low)}, {_fmt_bound(self.action_high)}] "
                                 f"(first at {_where(out)}: {first:g})")

        for name in FIELDS:
            _readonly(getattr(self, name))
        self._tensors: dict[torch.device, dict[str, torch.Tensor]] = {}  # to_tensors() cache, one entry per device

    # -- sizes ----------------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.observations)

    @property
    def size(self) -> int:
        """The number of transitions N (same as ``len(ds)``)."""
        return len(self.observations)

    @property
    def obs_dim(self) -> int:
        return self.observations.shape[1]

    @property
    def act_dim(self) -> int:
        return self.actions.shape[1]

    def __repr__(self) -> str:
        return (f"OfflineDataset(transitions={len(self)}, episodes={len(self.episode_bounds())}, "
                f"obs_dim={self.obs_dim}, act_dim={self.act_dim}"
                + (f", infos={sorted(self.infos)}" if self.infos else "") + ")")

    def as_dict(self) -> dict:
        """The D4RL dict (read-only arrays) plus ``infos`` and the action bounds: ``OfflineDataset(**ds.as_dict())``
        rebuilds the dataset."""
        return {**{name: getattr(self, name) for name in FIELDS}, "infos": dict(self.infos),
                "action_low": self.action_low, "action_high": self.action_high}

    def _replace(self, **changes) -> OfflineDataset:
        """A new dataset with some fields replaced (validated again by the constructor)."""
        return OfflineDataset(**{**self.as_dict(), **changes})

    # -- transforms -----------------------------------------------------------------------------------------------

    def state_normalizer(self, eps: float = 1e-3) -> StateNormalizer:
        """Mean and standard deviation of the observations, ``std + eps`` as in the D4RL / IQL code (``eps`` keeps
        constant dimensions from dividing by zero)."""
        obs = self.observations.astype(np.float64)  # accumulate in float64 for large datasets
        return StateNormalizer(mean=obs.mean(axis=0), std=obs.std(axis=0) + eps)

    def return_range_scaler(self, scale: float = 1000.0) -> RewardTransform:
        """IQL's MuJoCo reward scaling: ``r -> r * scale / (max episode return - min episode return)``.

        Episodes are those of :meth:`episode_bounds`, including an unfinished last one, as the official IQL code
        does (CORL's copy drops it).
        """
        returns = self.episode_returns()
        lo, hi = float(returns.min()), float(returns.max())
        if hi == lo:
            what = "there is only one episode" if len(returns) == 1 else f"all {len(returns)} episode returns are equal"
            raise ValueError(f"cannot scale rewards by the episode return range: {what} (max = min = {hi:g}), so "
                             f"{scale:g} / (max - min) would divide by zero")
        return RewardTransform(scale=scale / (hi - lo), bias=0.0)

    def transformed(self, state: StateNormalizer | None = None, reward: RewardTransform | None = None
                    ) -> OfflineDataset:
        """A new dataset with observations and next_observations through ``state.transform`` and rewards through
        ``reward.transform`` (either may be None). This dataset is left untouched."""
        changes = {}
        if state is not None:
            changes["observations"] = state.transform(self.observations)
            changes["next_observations"] = state.transform(self.next_observations)
        if reward is not None:
            changes["rewards"] = reward.transform(self.rewards)
        return self._replace(**changes)

    # -- episodes -------------------------------------------------------------------------------------------------

    def episode_bounds(self) -> list[tuple[int, int]]:
        """``(start, stop)`` of every episode, half-open. An episode ends at a terminal or a timeout; the dataset's
        last transition ends the last episode, which may therefore be incomplete."""
        ends = np.flatnonzero(self.terminals | self.timeouts) + 1  # stop = index after the episode's last step
        if len(ends) == 0 or ends[-1] != len(self):
            ends = np.append(ends, len(self))
        starts = np.concatenate([[0], ends[:-1]])
        return [(int(a), int(b)) for a, b in zip(starts, ends)]

    def episodes(self) -> Iterator[dict]:
        """One dict per episode: the six D4RL fields and ``infos``, as read-only slices (views, no copies).
        ``OfflineDataset(**episode)`` turns one into a dataset."""
        for a, b in self.episode_bounds():
            yield {**{name: getattr(self, name)[a:b] for name in FIELDS},
                   "infos": {k: v[a:b] for k, v in self.infos.items()}}

    def episode_returns(self) -> np.ndarray:
        """The undiscounted return of every episode (float64, summed in float64)."""
        starts = [a for a, _ in self.episode_bounds()]
        return np.add.reduceat(self.rewards.astype(np.float64), starts)

    def flag_problem(self) -> str | None:
        """What is wrong with the episode flags, when they make the TD targets meaningless (:func:`minirl.train.train`
        warns with it): every transition terminal (no value is ever bootstrapped) or no episode end at all (the
        whole dataset one episode); ``None`` otherwise."""
        n = len(self)
        if n > 1 and self.terminals.all():
            return (f"all {n:,d} transitions are terminal: every TD target is the reward alone (no value is "
                    f"bootstrapped); check the terminals field")
        if n > 1 and not (self.terminals | self.timeouts).any():
            return (f"no transition of {n:,d} ends an episode (no terminal, no timeout): the whole dataset is one "
                    f"episode; mark the episodes' last steps in terminals or timeouts")
        return None

    def fingerprint(self) -> str:
        """SHA-256 of the six fields' bytes, in order: equal for two datasets with the same transitions. A dataset
        rolled out again on another CPU can differ (its policy's matrix products round differently, and a Hopper
        episode amplifies the difference), so runs record it (``config.json``'s ``data``)."""
        h = hashlib.sha256()
        for name in FIELDS:
            h.update(np.ascontiguousarray(getattr(self, name)).tobytes())
        return h.hexdigest()

    def return_stats(self) -> dict:
        """Episode count, transition count and min / mean / max / std (population, ddof=0) of the episode returns."""
        r = self.episode_returns()
        return {"episodes": len(r), "transitions": len(self), "return_min": float(r.min()),
                "return_mean": float(r.mean()), "return_max": float(r.max()), "return_std": float(r.std())}

    # -- combining and subsetting ---------------------------------------------------------------------------------

    @classmethod
    def concatenate(cls, datasets: list) -> OfflineDataset:
        """One dataset made of ``datasets`` one after another (e.g. medium + expert = medium-expert).

        The last transition of each part is marked as a timeout (unless it is terminal) so that episodes never
        run from one part into the next. ``infos`` are kept when every part has the same keys (else an error);
        the action bounds must be equal in every part (or None in all).
        """
        datasets = list(datasets)
        if not datasets:
            raise ValueError("concatenate needs at least one dataset, got an empty list")
        for i, d in enumerate(datasets):
            if not isinstance(d, OfflineDataset):
                raise ValueError(f"part {i} is a {type(d).__name__}, expected an OfflineDataset")
        first = datasets[0]
        for i, d in enumerate(datasets[1:], start=1):
            if (d.obs_dim, d.act_dim) != (first.obs_dim, first.act_dim):
                raise ValueError(f"part {i} has obs_dim={d.obs_dim}, act_dim={d.act_dim}; part 0 has "
                                 f"obs_dim={first.obs_dim}, act_dim={first.act_dim}")
            if set(d.infos) != set(first.infos):
                raise ValueError(f"parts have different infos keys: part 0 has {sorted(first.infos)}, part {i} has "
                                 f"{sorted(d.infos)} (differing: {sorted(set(d.infos) ^ set(first.infos))}); "
                                 f"drop the extra infos before concatenating")
            same = ((d.action_low is None and first.action_low is None)
                    or (d.action_low is not None and first.action_low is not None
                        and np.array_equal(d.action_low, first.action_low)
                        and np.array_equal(d.action_high, first.action_high)))
            if not same:
                raise ValueError(f"parts have different action bounds: part 0 has {_fmt_bounds(first)}, "
                                 f"part {i} has {_fmt_bounds(d)}")

        timeouts = []
        for d in datasets:
            t = d.timeouts.copy()
            t[-1] |= not d.terminals[-1]  # close the part's last episode
            timeouts.append(t)
        joined = {name: np.concatenate([getattr(d, name) for d in datasets]) for name in FIELDS if name != "timeouts"}
        return cls(**joined, timeouts=np.concatenate(timeouts),
                   infos={k: np.concatenate([d.infos[k] for d in datasets]) for k in first.infos},
                   action_low=first.action_low, action_high=first.action_high)

    def take(self, n: int) -> OfflineDataset:
        """The first ``n`` transitions (1 <= n <= len), the last one marked as a timeout unless it already ends an
        episode (so the cut episode is closed, like a time limit)."""
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or not 1 <= n <= len(self):
            raise ValueError(f"take(n) needs an integer 1 <= n <= {len(self)} (the dataset's length), got {n!r}")
        n = int(n)
        timeouts = self.timeouts[:n].copy()
        timeouts[-1] |= not self.terminals[n - 1]
        return OfflineDataset(**{name: getattr(self, name)[:n] for name in FIELDS if name != "timeouts"},
                              timeouts=timeouts, infos={k: v[:n] for k, v in self.infos.items()},
                              action_low=self.action_low, action_high=self.action_high)

    def select_episodes(self, indices) -> OfflineDataset:
        """A dataset of the episodes at ``indices`` (positions in :meth:`episode_bounds`), in the given order.

        E.g. the best 10% of episodes, for filtered behaviour cloning:
        ``ds.select_episodes(np.argsort(ds.episode_returns())[-len(ds.episode_bounds()) // 10:])``.
        """
        bounds = self.episode_bounds()
        idx = np.asarray(indices)
        if idx.ndim != 1 or len(idx) == 0 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"indices must be a non-empty 1-D array of episode numbers, got {indices!r}")
        bad = (idx < 0) | (idx >= len(bounds))
        if bad.any():
            raise ValueError(f"indices has {int(bad.sum())} out-of-range episode numbers (first: {int(idx[bad][0])}); "
                             f"the dataset has {len(bounds)} episodes")
        rows = np.concatenate([np.arange(*bounds[i]) for i in idx])
        timeouts = self.timeouts[rows].copy()
        ends = np.cumsum([bounds[i][1] - bounds[i][0] for i in idx]) - 1
        timeouts[ends] |= ~self.terminals[rows[ends]]  # close every episode, even a cut last one
        return OfflineDataset(**{name: getattr(self, name)[rows] for name in FIELDS if name != "timeouts"},
                              timeouts=timeouts, infos={k: v[rows] for k, v in self.infos.items()},
                              action_low=self.action_low, action_high=self.action_high)

    def best_episodes(self, fraction: float) -> OfflineDataset:
        """The ``fraction`` of episodes with the highest returns (``floor(fraction * episodes)``, at least one), in
        their order in this dataset: the data of filtered behaviour cloning ("10%BC" is ``fraction=0.1``,
        Chen et al. 2021). Ties at the cut are broken by the later episode."""
        if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 < fraction <= 1:
            raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}")
        returns = self.episode_returns()
        k = max(int(fraction * len(returns)), 1)
        return self.select_episodes(np.sort(np.argsort(returns, kind="stable")[len(returns) - k:]))

    # -- files ----------------------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write a compressed ``.npz``: the six fields, ``infos/<key>`` entries and, when set, ``action_low`` and
        ``action_high``. (numpy adds ``.npz`` to a path that lacks it.)"""
        arrays = {name: getattr(self, name) for name in FIELDS}
        for key, value in self.infos.items():
            if value.dtype.hasobject:
                raise ValueError(f"infos[{key!r}] has dtype object, which .npz cannot store without pickle")
            arrays[f"infos/{key}"] = value
        if self.action_low is not None:
            arrays["action_low"], arrays["action_high"] = self.action_low, self.action_high
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike, *, action_low=None, action_high=None) -> OfflineDataset:
        """Read a file written by :meth:`save` (exactly: same arrays, dtypes, infos and bounds), or any ``.npz`` of
        the six D4RL arrays (``np.savez``). ``action_low``/``action_high`` give the bounds of a file that stores
        none (e.g. the environment's; a file's own bounds must then agree with them).

        Every key must be one minirl reads: the six fields, ``infos/<key>``, ``action_low`` and ``action_high``.
        Any other key is an error naming it (rename an extra array ``infos/<name>`` to keep it), never dropped;
        a file that is not an ``.npz`` (or holds pickled objects) is an error naming the file."""
        expected = (f"an .npz with the arrays {', '.join(FIELDS)} (optionally infos/<key>, action_low, action_high), "
                    "as OfflineDataset.save or np.savez writes it")
        try:
            loaded = np.load(path, allow_pickle=False)
            if not hasattr(loaded, "files"):  # a .npy: one array
                raise ValueError(f"it holds one array of shape {loaded.shape}, not named arrays")
            with loaded as f:
                known = {*FIELDS, "action_low", "action_high"}
                unknown = [k for k in f.files if k not in known and not k.startswith("infos/")]
                if unknown:
                    raise UserError(f"{os.fspath(path)} has {_plural(len(unknown), 'key')} minirl does not read: "
                                    f"{', '.join(unknown)}; expected {', '.join(FIELDS)}, infos/<key> and optionally "
                                    f"action_low, action_high (rename an extra array infos/<name> to keep it)")
                missing = [k for k in FIELDS if k not in f.files]
                if missing:
                    raise UserError(f"{os.fspath(path)} has no {', '.join(missing)}; expected {expected}")
                fields = {k: f[k] for k in f.files if not k.startswith("infos/")}
                infos = {k[len("infos/"):]: f[k] for k in f.files if k.startswith("infos/")}
        except UserError:
            raise
        except FileNotFoundError:
            raise UserError(f"{os.fspath(path)}: no such file") from None
        except Exception as e:  # not a zip, pickled objects, a damaged zip: numpy fails in many ways
            first = (str(e).strip().splitlines() or [""])[0]
            raise UserError(f"{os.fspath(path)} is not a dataset file ({type(e).__name__}: {first}); expected "
                            f"{expected}") from None
        if action_low is not None or action_high is not None:
            if "action_low" in fields and not (np.allclose(fields["action_low"], action_low)
                                               and np.allclose(fields["action_high"], action_high)):
                def show(low, high):
                    return f"[{_fmt_bound(np.atleast_1d(low))}, {_fmt_bound(np.atleast_1d(high))}]"
                stored = show(fields["action_low"], fields["action_high"])
                raise UserError(f"{os.fspath(path)} stores action bounds {stored}, the environment's are "
                                f"{show(action_low, action_high)}")
            fields.setdefault("action_low", action_low)
            fields.setdefault("action_high", action_high)
        return cls(**fields, infos=infos)

    @classmethod
    def from_hdf5(cls, path: str | os.PathLike, *, action_low=None, action_high=None) -> OfflineDataset:
        """Read a D4RL ``.hdf5`` file (needs h5py).

        Reads ``observations, actions, rewards, terminals, timeouts`` and ``next_observations``; every dataset
        under ``infos/`` goes to ``infos`` (nested names joined by ``/``). ``metadata/*`` (D4RL's algorithm and
        policy notes) is ignored; any other key is ignored with a warning naming it.

        D4RL's raw MuJoCo files have no ``next_observations``. Then they are built the way D4RL's
        ``qlearning_dataset`` builds them: ``next_observations[i] = observations[i + 1]``, which is wrong for the
        last step of a timed-out episode (``observations[i + 1]`` starts the next episode) and unknown for the
        file's last transition, so **those transitions are dropped**: every transition with ``timeouts[i]`` True
        and the last one. So that episodes stay apart, the step before a dropped timeout becomes the timeout.
        """
        try:
            import h5py
        except ImportError:
            raise ImportError("reading .hdf5 needs h5py: pip install h5py") from None

        with h5py.File(path, "r") as f:
            missing = [k for k in FIELDS if k != "next_observations" and k not in f]
            if missing:
                raise ValueError(f"{os.fspath(path)} has no {', '.join(missing)} (a D4RL file has "
                                 f"{', '.join(FIELDS)} and optionally infos/* and metadata/*)")
            data = {k: f[k][()] for k in FIELDS if k in f}
            unknown = [k for k in f.keys() if k not in (*FIELDS, "infos", "metadata")]
            if unknown:
                import warnings
                warnings.warn(f"{os.fspath(path)}: {_plural(len(unknown), 'key')} not read ({', '.join(unknown)}); "
                              f"minirl reads {', '.join(FIELDS)} and infos/*", stacklevel=2)
            infos = {}
            if "infos" in f:
                def collect(name, node):
                    if isinstance(node, h5py.Dataset):
                        infos[name] = node[()]
                f["infos"].visititems(collect)

        if "next_observations" in data:
            return cls(**data, infos=infos, action_low=action_low, action_high=action_high)

        # D4RL's qlearning_dataset. First validate the file's arrays as they are (observations standing in for the
        # missing next_observations), so that shapes, lengths and flags are known to be right before slicing.
        raw = cls(**data, next_observations=data["observations"], infos=infos,
                  action_low=action_low, action_high=action_high)
        keep = ~raw.timeouts[:-1]  # transitions 0 .. N-2 that did not time out
        # The step before a dropped timeout now ends its episode (a terminal step needs no timeout).
        timeouts = raw.timeouts[1:] & ~raw.terminals[:-1]
        return cls(observations=raw.observations[:-1][keep], actions=raw.actions[:-1][keep],
                   rewards=raw.rewards[:-1][keep], next_observations=raw.observations[1:][keep],
                   terminals=raw.terminals[:-1][keep], timeouts=timeouts[keep],
                   infos={k: v[:-1][keep] for k, v in raw.infos.items()},
                   action_low=action_low, action_high=action_high)

    # -- sampling -------------------------------------------------------------------------------------------------

    def to_tensors(self, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """The whole dataset as float32 tensors on ``device``: ``obs, act, rew, next_obs, done, timeout`` (done is
        terminals as 0/1). Copied to the device once and cached: later calls return the very same tensors."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:  # "cuda" and "cuda:0" share one cache entry
            device = torch.device("cuda", torch.cuda.current_device())
        if device not in self._tensors:
            def put(a):
                return torch.tensor(a, dtype=torch.float32, device=device)  # one copy, host -> device
            self._tensors[device] = {"obs": put(self.observations), "act": put(self.actions),
                                     "rew": put(self.rewards), "next_obs": put(self.next_observations),
                                     "done": put(self.terminals), "timeout": put(self.timeouts)}
        return dict(self._tensors[device])  # a new dict, the same tensors

    def sample(self, batch_size: int, device: str | torch.device = "cpu",
               generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """A batch of ``batch_size`` transitions drawn uniformly with replacement, on ``device``:
        ``obs (B, obs_dim), act (B, act_dim), rew (B,), next_obs (B, obs_dim), done (B,)``, float32.

        Indices come from ``torch.randint(..., generator=generator)`` on ``device`` (so a generator must live on the
        same device), and rows are gathered from the cached device tensors: no host copy per batch. The same
        generator state gives the same batch.
        """
        if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        t = self.to_tensors(device)
        idx = torch.randint(len(self), (int(batch_size),), device=t["obs"].device, generator=generator)
        return {k: t[k][idx] for k in ("obs", "act", "rew", "next_obs", "done")}


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[Path]:
    """Write ``path`` all at once: the block writes the temporary file this yields (beside ``path``, same suffix);
    when the block ends without an error, the file is flushed to disk and renamed to ``path`` (``os.replace`` is
    atomic). A process killed while writing therefore leaves the previous file, or none, never half of one (plus,
    at worst, a hidden ``.<name>.<pid>.tmp<suffix>`` file)."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
