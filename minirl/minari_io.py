"""Minari datasets in and out (optional: ``pip install "minari>=0.5,<0.6"``, or ``pip install -e ".[minari]"``).

Minari (Farama), D4RL's successor, does not store D4RL's dict of transitions. A Minari dataset is a list of
episodes (``EpisodeData``), each with ``T + 1`` observations (the reset observation, then one after every step),
``T`` actions and rewards, and two flags per step: ``terminations`` (the task ended: no bootstrapping) and
``truncations`` (cut by a time limit). The conversion to and from :class:`minirl.data.OfflineDataset` is exact:

    observations[t]        = episode.observations[t]          t = 0 .. T-1
    next_observations[t]   = episode.observations[t + 1]
    terminals[t]           = episode.terminations[t]
    timeouts[t]            = episode.truncations[t] and not episode.terminations[t]

An episode whose last step has neither flag (a collection that stopped mid-episode) gets ``timeouts`` at its last
step, as D4RL marks a cut episode. Going back, each episode's observations are its rows' observations plus the last
row's next observation, which requires ``next_observations[t] == observations[t + 1]`` inside every episode (true of
every dataset minirl makes; a one-line error otherwise).

Scores: Minari records ``ref_min_score`` and ``ref_max_score`` and normalises to 0-1
(``minari.get_normalized_score``); D4RL and this book normalise to 0-100 with the same two references.
"""
from __future__ import annotations

import warnings

import numpy as np

from .data import OfflineDataset


def _minari():
    try:
        import minari
    except ImportError:
        raise ImportError('Minari datasets need the minari package: pip install "minari>=0.5,<0.6" '
                          '(or pip install -e ".[minari]")') from None
    return minari


def _open(dataset_or_id):
    """A ``MinariDataset`` from itself or from the id of a dataset stored locally (no download here)."""
    minari = _minari()
    if isinstance(dataset_or_id, str):
        local = minari.list_local_datasets()
        if dataset_or_id not in local:
            raise ValueError(f"no local Minari dataset {dataset_or_id!r}; local datasets: {sorted(local) or 'none'} "
                             f"(download one with: minari download {dataset_or_id})")
        return minari.load_dataset(dataset_or_id)
    return dataset_or_id


def _box_bounds(space, name: str):
    import gymnasium as gym
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise ValueError(f"the Minari dataset's {name} space is {space}; minirl reads flat Box spaces only")
    return space.low, space.high


def from_minari(dataset_or_id) -> OfflineDataset:
    """The transitions of a Minari dataset (or the id of a locally stored one) as an :class:`OfflineDataset`, with
    the action space's bounds. Its reference scores are in :func:`minari_info`."""
    ds = _open(dataset_or_id)
    _box_bounds(ds.observation_space, "observation")
    low, high = _box_bounds(ds.action_space, "action")
    parts = {k: [] for k in ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")}
    for ep in ds.iterate_episodes():
        obs, term, trunc = np.asarray(ep.observations), np.asarray(ep.terminations, bool), np.asarray(ep.truncations,
                                                                                                          bool)
        if len(obs) != len(ep.rewards) + 1:
            raise ValueError(f"episode {ep.id} has {len(obs)} observations for {len(ep.rewards)} steps; "
                             "Minari stores T + 1")
        timeouts = trunc & ~term
        timeouts[-1] |= not term[-1]  # a cut episode is closed like a time limit
        for key, value in (("observations", obs[:-1]), ("actions", ep.actions), ("rewards", ep.rewards),
                           ("next_observations", obs[1:]), ("terminals", term), ("timeouts", timeouts)):
            parts[key].append(np.asarray(value))
    if not parts["rewards"]:
        raise ValueError(f"the Minari dataset {ds.spec.dataset_id!r} has no episodes")
    return OfflineDataset(**{k: np.concatenate(v) for k, v in parts.items()}, action_low=low, action_high=high)


def minari_info(dataset_or_id) -> dict:
    """What a Minari dataset records beside its episodes: id, environment id, reference scores (``None`` when
    absent), episodes and steps."""
    ds = _open(dataset_or_id)
    meta = ds.storage.metadata
    env_spec = ds.env_spec
    return {"dataset_id": ds.spec.dataset_id, "env_id": None if env_spec is None else env_spec.id,
            "ref_min_score": meta.get("ref_min_score"), "ref_max_score": meta.get("ref_max_score"),
            "total_episodes": ds.total_episodes, "total_steps": ds.total_steps}


def content_sha256(dataset_or_id) -> str:
    """SHA-256 of the files a local Minari dataset keeps its episodes and metadata in (its ``data/`` folder, file by
    file in name order): a dataset made again under the same id with other contents (other rewards, say) has
    another, so minirl's cache of it (:func:`minirl.datasets.cache_path`) is never reused for the new one."""
    import hashlib
    folder = _open(dataset_or_id).storage.data_path
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def to_minari(ds: OfflineDataset, dataset_id: str, env_id: str, ref_min_score: float | None = None,
              ref_max_score: float | None = None, description: str | None = None, author: str = "minirl",
              author_email: str | None = None, code_permalink: str | None = None,
              algorithm_name: str = "minirl behaviour policy"):
    """Write ``ds`` as a local Minari dataset ``dataset_id`` (e.g. ``"minirl/hopper/medium-v0"``) for the Gymnasium
    environment ``env_id``; returns the ``MinariDataset``. With ``ref_min_score``/``ref_max_score`` (e.g. a minirl
    task's random and expert returns) Minari users get the same normalised scores as minirl's (divided by 100)."""
    minari = _minari()
    from minari.data_collector.episode_buffer import EpisodeBuffer
    buffers = []
    for k, (a, b) in enumerate(ds.episode_bounds()):
        inside = slice(a, b - 1)
        if not np.array_equal(ds.next_observations[inside], ds.observations[a + 1:b]):
            bad = a + int(np.argmax(np.any(ds.next_observations[inside] != ds.observations[a + 1:b], axis=1)))
            raise ValueError(f"next_observations[{bad}] differs from observations[{bad + 1}] inside episode {k}; "
                             "Minari's episodes store one observation sequence and cannot hold it")
        buffers.append(EpisodeBuffer(
            id=k, observations=np.concatenate([ds.observations[a:b], ds.next_observations[b - 1:b]]),
            actions=ds.actions[a:b], rewards=ds.rewards[a:b].tolist(), terminations=ds.terminals[a:b].tolist(),
            truncations=(ds.timeouts[a:b] & ~ds.terminals[a:b]).tolist()))
    if description is None:
        description = (f"{len(ds)} transitions in {len(buffers)} episodes, exported from a minirl OfflineDataset "
                       "(minirl.minari_io.to_minari)")
    with warnings.catch_warnings():  # Minari advises, field by field, to fill in optional metadata left as None
        warnings.filterwarnings("ignore", message=r"`(code_permalink|author_email)` is set to None")
        return minari.create_dataset_from_buffers(
            dataset_id, buffers, env=env_id, eval_env=env_id, algorithm_name=algorithm_name, author=author,
            author_email=author_email, code_permalink=code_permalink, ref_min_score=ref_min_score,
            ref_max_score=ref_max_score, description=description)
