"""Named offline datasets, made on this machine the D4RL way.

D4RL's MuJoCo datasets cannot be downloaded here, so minirl makes its own from SAC behaviour policies that it
trained (:mod:`minirl.behavior`) and ships in ``minirl/assets/<task>/``. A dataset is named ``<task>-<tier>``:

* ``random``        uniform random actions;
* ``medium``        a SAC snapshot stopped at roughly a third of the expert's return, actions sampled from it;
* ``expert``        the best SAC snapshot, actions sampled from it;
* ``medium-replay`` what SAC's replay buffer held up to the medium snapshot. Where the task ships it
                    (``hopper``: ``assets/hopper/medium_replay.npz``, checked against its SHA-256 on load) it is that
                    buffer itself, every transition in the order it happened, as D4RL defines the tier; otherwise
                    (``pendulum``) it is *re-rolled* from the run's snapshots: the random warm-up, then every
                    snapshot on the way, each contributing transitions in proportion to the training steps it acted;
* ``medium-expert`` ``medium`` followed by ``expert`` (twice the transitions);
* ``full-replay``   D4RL v2's tier: the SAC run's whole replay buffer, from its first step to the expert snapshot, in
                    order (``hopper``: ``assets/hopper/full_replay.npz``, checked against its SHA-256 on load); only
                    where the task ships it.

Every dataset is a deterministic function of its name, its size and the committed snapshots on a given kind of CPU
(across CPU types, floating-point differences in MuJoCo and torch make long rollouts drift apart); a shipped replay
buffer is the same everywhere. It is made on first
use (with a progress bar) and cached as ``.npz`` under ``$MINIRL_DATA`` (default ``~/.cache/minirl``).
``normalized_score(task, returns)`` is D4RL's ``100 * (R - R_random) / (R_expert - R_random)`` with the reference
returns recorded in each task's ``manifest.json``.

The stitching benchmark, OGBench's PointMaze datasets in their single-task form, is made by :mod:`minirl.maze`
(OGBench's recipe, OGBench's environment): ``pointmaze-{medium,large}-{stitch,navigate}-singletask-task{1..5}``. Its
task is ``pointmaze-<maze>-singletask-task<k>`` (OGBench's environment ``...-v0``); the five tasks of a maze and type
share one set of trajectories, cached once; its reference returns are -1000 (never reaching the goal) and the
noise-free waypoint controller's, but OGBench's measure is the success rate (:func:`minirl.evaluation.success_rate`).
Reaching the goal is terminal, so D4RL's episodes split there: 10%BC's data is :func:`minirl.maze.best_trajectories`.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import maze
from .data import OfflineDataset

ASSETS = Path(__file__).parent / "assets"
TIERS = ("random", "medium", "expert", "medium-replay", "medium-expert", "full-replay")
TASKS = {"pendulum": "Pendulum-v1", "hopper": "Hopper-v5"}
_TIER_SEEDS = {"random": 1, "medium": 2, "expert": 3, "medium-replay": 4}
RECIPE_VERSION = 2  # bump when the code of a recipe changes (asset changes are hashed by recipe_key)


@dataclass(frozen=True)
class Task:
    """A task's environment, reference returns and dataset sizes, read from ``assets/<task>/manifest.json``."""
    name: str
    env_id: str
    ref_random: float | None        # mean return of uniform random actions (None: a Minari dataset without)
    ref_expert: float | None        # mean return of the expert snapshot, acting stochastically as in its dataset
    sizes: dict                     # transitions per tier at full size
    medium: str                     # snapshot file names
    expert: str | None              # None while the task's SAC run has not reached expert level

    replay: tuple                   # ((snapshot file or None for random warm-up, transitions), ...) up to medium
    info: dict                      # training provenance: steps, seed, evaluation returns of each snapshot
    replay_file: dict | None = None  # {"file", "sha256", "transitions"}: a shipped replay buffer (replaces replay)
    full_replay_file: dict | None = None  # the same for the whole buffer up to the expert (the full-replay tier)


def data_dir() -> Path:
    """Where datasets are cached: ``$MINIRL_DATA`` or ``~/.cache/minirl``."""
    return Path(os.environ.get("MINIRL_DATA") or Path.home() / ".cache" / "minirl")


MINARI = "minari:"  # prefix of a dataset name that is a locally stored Minari dataset: "minari:mujoco/hopper/medium-v0"


@lru_cache(maxsize=None)
def get_task(name: str) -> Task:
    """The :class:`Task` called ``name`` (``"pendulum"``, ``"hopper"``), or of a dataset name."""
    if name.startswith(MINARI):
        return _minari_task(name)
    if maze.is_maze_name(name):
        return _maze_task(maze.parse(name, kind_required=False))
    task = name.split("-", 1)[0]
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {sorted(TASKS)}")
    manifest = ASSETS / task / "manifest.json"
    if not manifest.exists():
        raise FileNotFoundError(f"task {task!r} has no behaviour policies yet ({manifest} is missing); train them "
                                f"with `python -m minirl.behavior` and export them with `export_assets`")
    m = json.loads(manifest.read_text())
    shipped = isinstance(m["replay"], dict)
    return Task(task, TASKS[task], m["ref_random"], m["ref_expert"], m["sizes"], m["medium"], m["expert"],
                () if shipped else tuple((s, n) for s, n in m["replay"]), m.get("info", {}),
                m["replay"] if shipped else None, m.get("full_replay"))


def _maze_task(m: maze.MazeName) -> Task:
    """A PointMaze singletask task (:mod:`minirl.maze`), from a parsed dataset name or the task's own name
    (``pointmaze-medium-singletask-task1``): OGBench's environment, and the returns of never reaching the goal
    (-1000) and of the noise-free waypoint controller as the random and expert references."""
    never, oracle = maze.reference_returns(m)
    return Task(m.task_name, m.env_id, never, oracle, {k: maze.full_size(k) for k in maze.KINDS}, "", None, (),
                {"maze": m.maze, "task": m.task})


def _minari_task(name: str) -> Task:
    """A Minari dataset as a task of its own: its environment, and its reference scores as the random and expert
    returns (Minari's 0-1 score times 100 is then minirl's score); ``None`` for both when it records none (then it
    has no normalised score, and trains with raw returns when told so: ``--raw-returns``)."""
    from .minari_io import minari_info
    info = minari_info(name[len(MINARI):])
    if info["env_id"] is None:
        raise ValueError(f"the Minari dataset {info['dataset_id']!r} records no environment; minirl needs one to "
                         "evaluate policies")
    if info["ref_min_score"] is None or info["ref_max_score"] is None:
        refs = (None, None)
    else:
        refs = (float(info["ref_min_score"]), float(info["ref_max_score"]))
    return Task(name, info["env_id"], *refs, {"minari": int(info["total_steps"])}, "", None, (), info)


def to_local_minari(dataset_id: str, task: str, steps: int, build) -> str:
    """The local Minari dataset ``dataset_id`` (e.g. ``"minirl/hopper/replay-150k-v0"``) made by ``build()``, which
    returns an :class:`OfflineDataset` of ``steps`` transitions on the environment of ``task`` (e.g. ``"hopper"``)
    and the dataset's description; the task's random and expert returns become its reference scores. Returns its
    minirl name, ``minari:<dataset_id>``.

    Made once: a local dataset of that id with ``steps`` steps is kept and ``build`` is not called; one of another
    size is a ``ValueError`` (Minari does not overwrite a dataset: ``minari delete <id>`` removes it), and so is a
    ``build()`` of the wrong size."""
    from .minari_io import minari_info
    try:
        have = minari_info(dataset_id)["total_steps"]
    except ValueError:  # no local dataset of that id
        have = None
    if have == steps:
        return MINARI + dataset_id
    if have is not None:
        raise ValueError(f"{dataset_id}: a local Minari dataset of {have} steps exists, expected {steps}; remove it "
                         f"(minari delete {dataset_id}) to make it again")
    ds, description = build()
    if len(ds) != steps:
        raise ValueError(f"build: expected a dataset of {steps} transitions for {dataset_id!r}, got {len(ds)}")
    from .minari_io import to_minari
    t = get_task(task)
    to_minari(ds, dataset_id, t.env_id, ref_min_score=t.ref_random, ref_max_score=t.ref_expert, description=description)
    return MINARI + dataset_id


def available_tasks() -> list[str]:
    return [t for t in TASKS if (ASSETS / t / "manifest.json").exists()]


def task_tiers(task: Task) -> tuple[str, ...]:
    """The tiers a task can make: all of :data:`TIERS`, less those needing an expert it does not have yet and
    ``full-replay`` where the task ships no whole buffer."""
    return tuple(t for t in TIERS if (task.expert or "expert" not in t)
                 and (t != "full-replay" or task.full_replay_file))


def dataset_names() -> list[str]:
    """Every dataset name that can be made here, e.g. ``"pendulum-medium-replay"``, then the maze datasets
    (``"pointmaze-medium-stitch-singletask-task1"``, ...)."""
    return [f"{t}-{tier}" for t in available_tasks() for tier in task_tiers(get_task(t))] + maze.dataset_names()


@dataclass(frozen=True)
class DatasetName:
    """A dataset's name parsed once (:func:`parse`): what :func:`minirl.runs.run` passes on to the data
    (:func:`load_dataset`), to the algorithms' settings for its kind of task and to the evaluation, instead of the
    name string read again at each of them. Every function here that takes a dataset name takes one."""
    name: str                       # as written: "hopper-medium-replay", "pointmaze-medium-stitch-singletask-task1"
    task: Task                      # its environment, reference returns and sizes
    tier: str                       # "medium-replay", ...; a maze's dataset type ("stitch", "navigate"); "minari"
    domain: str                     # the kind of task: "pendulum", "hopper", "maze" or "minari"
    maze: maze.MazeName | None = None  # a maze dataset's maze, type and task

    @property
    def env_id(self) -> str:
        return self.task.env_id

    def __str__(self) -> str:
        return self.name


def parse(name: str | DatasetName) -> DatasetName:
    """Dataset ``name`` parsed and checked (a ``ValueError`` or ``FileNotFoundError`` saying what is wrong, an
    ``ImportError`` for ``minari:`` without the package); a :class:`DatasetName` is returned as it is."""
    if isinstance(name, DatasetName):
        return name
    if name.startswith(MINARI):
        return DatasetName(name, get_task(name), "minari", "minari")
    if maze.is_maze_name(name):  # pointmaze-<maze>-<kind>-singletask-task<k>: the tier is the kind
        m = maze.parse(name)
        return DatasetName(name, _maze_task(m), m.kind, "maze", m)
    task, _, tier = name.partition("-")
    if tier not in TIERS:
        raise ValueError(f"unknown dataset {name!r}: the tier must be one of {TIERS}, e.g. 'pendulum-medium'")
    t = get_task(task)
    if tier == "full-replay" and not t.full_replay_file:
        raise ValueError(f"dataset {name!r} is not available: task {task!r} ships no whole replay buffer (only "
                         f"hopper does; datasets.export_full_replay makes one from the SAC run)")
    if tier not in task_tiers(t):
        raise ValueError(f"dataset {name!r} is not available yet: task {task!r} has no expert behaviour policy "
                         f"(its SAC run stopped at {t.info.get('sac_run_steps')} steps); available: "
                         f"{[f'{task}-{x}' for x in task_tiers(t)]}")
    return DatasetName(name, t, tier, t.name)


def parse_name(name: str | DatasetName) -> tuple[Task, str]:
    """``(task, tier)`` of dataset ``name`` (:func:`parse`)."""
    d = parse(name)
    return d.task, d.tier


def normalized_score(task: str | Task, returns):
    """D4RL's normalised score ``100 * (R - R_random) / (R_expert - R_random)`` (array in, array out)."""
    t = task if isinstance(task, Task) else get_task(task)
    if t.ref_random is None or t.ref_expert is None:
        raise ValueError(f"{t.name} records no reference returns (ref_min_score / ref_max_score): it has no "
                         f"normalised score")
    return 100.0 * (np.asarray(returns, dtype=float) - t.ref_random) / (t.ref_expert - t.ref_random)


def full_size(name: str | DatasetName) -> int:
    task, tier = parse_name(name)
    if tier == "medium-expert":
        return task.sizes["medium"] + task.sizes["expert"]
    if tier == "medium-replay":
        return task.replay_file["transitions"] if task.replay_file else sum(n for _, n in task.replay)
    if tier == "full-replay":
        return task.full_replay_file["transitions"]
    return task.sizes[tier]  # (a Minari dataset: sizes["minari"], its total steps)


def recipe_key(name: str | DatasetName) -> str:
    """A short hash of everything dataset ``name`` is made from: the recipe version, the environment, and the bytes
    of the snapshots it rolls out (with their shares, for medium-replay), and the versions of gymnasium, MuJoCo and
    torch (they step the environment and run the policy). Re-exported behaviour policies and upgraded packages
    therefore never reuse a stale cache. A Minari dataset's key covers the bytes of its files
    (:func:`minirl.minari_io.content_sha256`), so a dataset made again under the same id is converted again."""
    from . import versions
    d = parse(name)
    task, tier = d.task, d.tier
    if d.maze is not None:  # the trajectories' recipe and versions, the relabelling; the task is in the name
        return maze.dataset_key(d.maze.maze, tier)
    made_with = "|".join(f"{p}={(v or '').split('+')[0]}" for p, v in versions().items()
                         if p in ("gymnasium", "mujoco", "torch"))
    h = hashlib.sha1(f"{RECIPE_VERSION}|{task.env_id}|{tier}|{made_with}".encode())
    if tier == "minari":  # what it records and what it holds: the same id made again is another dataset
        from .minari_io import content_sha256, minari_info
        dataset_id = d.name[len(MINARI):]
        h.update(json.dumps(minari_info(dataset_id), sort_keys=True).encode())
        h.update(content_sha256(dataset_id).encode())
    elif tier == "medium-expert":
        h.update((recipe_key(f"{task.name}-medium") + recipe_key(f"{task.name}-expert")).encode())
    elif tier in ("medium", "expert"):
        h.update((ASSETS / task.name / getattr(task, tier)).read_bytes())
    elif tier == "medium-replay" and task.replay_file:
        h.update(task.replay_file["sha256"].encode())
    elif tier == "full-replay":
        h.update(task.full_replay_file["sha256"].encode())
    elif tier == "medium-replay":
        for snapshot, count in task.replay:
            h.update(f"|{snapshot}|{count}".encode())
            if snapshot is not None:
                h.update((ASSETS / task.name / snapshot).read_bytes())
    return h.hexdigest()[:10]


def cache_path(name: str | DatasetName, n_transitions: int | None = None) -> Path:
    """Where dataset ``name`` with ``n_transitions`` (default: full size) is cached."""
    d = parse(name)
    n = full_size(d) if n_transitions is None else n_transitions
    return data_dir() / f"{file_stem(d.name)}-n{n}-{recipe_key(d)}.npz"


def file_stem(name: str | DatasetName) -> str:
    """Dataset ``name`` as one file or folder name: a Minari id's ``:`` and ``/`` become ``-``
    (``minari:minirl/hopper/replay-150k-v0`` -> ``minari-minirl-hopper-replay-150k-v0``); minirl's own names are kept."""
    return str(name).replace(":", "-").replace("/", "-")


def make_dataset(name: str | DatasetName, n_transitions: int | None = None, progress: bool = True) -> OfflineDataset:
    """Generate dataset ``name`` with ``n_transitions`` (default: its full size); only ``medium-expert`` reads and
    fills the cache, for its two parts.

    A smaller dataset follows the same recipe: ``random``/``medium``/``expert`` are prefixes of the full one;
    ``medium-replay`` shrinks every snapshot's share in proportion; ``medium-expert`` takes half from each.
    """
    from .behavior import load_actor, rollout
    from .utils import make_env  # gymnasium and torch only when data is made

    d = parse(name)
    task, tier, name = d.task, d.tier, d.name
    total = full_size(d)
    n = total if n_transitions is None else int(n_transitions)
    if not 1 <= n <= total:
        raise ValueError(f"n_transitions must be between 1 and {total} for {name!r}, got {n_transitions}")
    if d.maze is not None:  # the first ceil(n / T) trajectories (cached once for all five tasks), relabelled
        return OfflineDataset(**maze.make(d.maze, n, cache_dir=data_dir(), progress=progress),
                              action_low=-1.0, action_high=1.0)
    if tier == "minari":  # converted from Minari's local storage; a smaller dataset is its first n transitions
        from .minari_io import from_minari
        ds = from_minari(name[len(MINARI):])
        return ds if n == len(ds) else ds.take(n)
    env = make_env(task.env_id)
    bounds = {"action_low": env.action_space.low, "action_high": env.action_space.high}
    env.close()
    seed = 1000 * _TIER_SEEDS.get(tier, 0)
    if tier == "medium-expert":
        if n < 2:
            raise ValueError(f"n_transitions must be at least 2 for {name!r} (half medium, half expert), got {n}")
        half = n // 2
        parts = [load_dataset(f"{task.name}-medium", half, progress),  # cached parts are reused
                 load_dataset(f"{task.name}-expert", n - half, progress)]
        return OfflineDataset.concatenate(parts)
    if tier == "random":
        return OfflineDataset(**rollout(task.env_id, n, seed, None, progress=progress, desc=name), **bounds)
    if tier in ("medium", "expert"):
        actor = load_actor(ASSETS / task.name / getattr(task, tier))
        return OfflineDataset(**rollout(task.env_id, n, seed, actor, progress=progress, desc=name), **bounds)
    if tier == "full-replay":  # the shipped whole buffer: a smaller dataset is its first n transitions, in order
        return load_replay_file(task, task.full_replay_file).take(n)
    if task.replay_file:  # the shipped buffer: a smaller dataset is its first n transitions, in order
        return load_replay_file(task).take(n)
    # medium-replay: one segment per snapshot, sized like the steps it acted during training
    counts = _proportional(np.array([c for _, c in task.replay]), n)
    parts = []
    for i, ((snapshot, _), count) in enumerate(zip(task.replay, counts)):
        if count == 0:
            continue
        actor = None if snapshot is None else load_actor(ASSETS / task.name / snapshot)
        parts.append(OfflineDataset(**rollout(task.env_id, int(count), seed + i, actor, progress=progress,
                                              desc=f"{name} [{i + 1}/{len(counts)}]"), **bounds))
    return OfflineDataset.concatenate(parts)


def pack_replay(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A replay buffer in about half the bytes: ``next_observations`` is the next row's observation inside an
    episode, so only the episodes' last next-observations are kept (``end_next_observations`` at ``ends``).
    :func:`unpack_replay` gives back exactly the same arrays (checked here before anything is written)."""
    ends = np.flatnonzero(data["terminals"] | data["timeouts"])
    if len(ends) == 0 or ends[-1] != len(data["rewards"]) - 1:
        raise ValueError("the last transition of a replay buffer must end an episode (terminal or timeout)")
    packed = {k: data[k] for k in ("observations", "actions", "rewards", "terminals", "timeouts")}
    packed |= {"ends": ends, "end_next_observations": data["next_observations"][ends]}
    back = unpack_replay(packed)
    if not all(np.array_equal(back[k], data[k]) for k in data):
        raise ValueError("this replay buffer's next_observations are not the next rows' observations within "
                         "episodes; it cannot be packed")
    return packed


def unpack_replay(packed) -> dict[str, np.ndarray]:
    next_obs = np.empty_like(packed["observations"])
    next_obs[:-1] = packed["observations"][1:]
    next_obs[packed["ends"]] = packed["end_next_observations"]
    return {k: packed[k] for k in ("observations", "actions", "rewards", "terminals", "timeouts")} | {
        "next_observations": next_obs}


def save_npz_reproducibly(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez_compressed`` without the write time in the zip entries: the same arrays give the same bytes (and
    the same SHA-256), so exporting a task again does not change a committed file that did not change."""
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, a in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with z.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.ascontiguousarray(a), allow_pickle=False)


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_replay_file(task: Task, entry: dict | None = None) -> OfflineDataset:
    """A replay buffer the task ships (``assets/<task>/<file>``; ``entry``: its manifest entry, by default the
    medium-replay buffer's), after checking its SHA-256 against the manifest."""
    from .utils import make_env

    entry = entry or task.replay_file
    path = ASSETS / task.name / entry["file"]
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the {task.name} replay buffer ships with minirl; "
                                "reinstall the package or restore the file from git")
    digest = sha256(path)
    if digest != entry["sha256"]:
        raise ValueError(f"{path} is damaged: its SHA-256 is {digest[:12]}..., the manifest expects "
                         f"{entry['sha256'][:12]}...; restore the file from git")
    with np.load(path, allow_pickle=False) as f:
        data = unpack_replay(f)
    env = make_env(task.env_id)
    ds = OfflineDataset(**data, action_low=env.action_space.low, action_high=env.action_space.high)
    env.close()
    return ds


def _proportional(weights: np.ndarray, n: int) -> np.ndarray:
    """Integer counts summing to ``n``, proportional to ``weights`` (largest remainders)."""
    raw = weights / weights.sum() * n
    counts = np.floor(raw).astype(int)
    counts[np.argsort(-(raw - counts), kind="stable")[: n - counts.sum()]] += 1
    return counts


# --------------------------------------------------------------------------------------------------------------
# Checksums: a dataset made here is compared with the one recorded in assets/datasets/checksums.json
# --------------------------------------------------------------------------------------------------------------

CHECKSUMS = ASSETS / "datasets" / "checksums.json"  # "<name>|n<transitions>" -> checksum(), with where it was made


class DatasetDriftWarning(UserWarning):
    """A dataset made here differs from the one recorded in ``assets/datasets/checksums.json`` (another kind of CPU
    rolls a policy out differently, and long episodes amplify the difference)."""


def checksum(ds: OfflineDataset) -> dict:
    """A dataset's arrays in a few numbers: the SHA-256 of its six fields (:meth:`OfflineDataset.fingerprint`), its
    transitions, episodes and mean episode return, and per field the mean and the largest absolute value of every
    column (float64). Two datasets with equal SHA-256 are the same bit for bit; when they differ, the statistics
    say by how much (:func:`checksum_difference`)."""
    fields = {}
    for name in ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts"):
        a = getattr(ds, name).astype(np.float64).reshape(len(ds), -1)
        fields[name] = {"mean": a.mean(axis=0).tolist(), "absmax": np.abs(a).max(axis=0).tolist()}
    returns = ds.episode_returns()
    return {"sha256": ds.fingerprint(), "transitions": len(ds), "episodes": len(returns),
            "return_mean": float(returns.mean()), "fields": fields}


def checksum_difference(new: dict, ref: dict) -> str | None:
    """``None`` when the two :func:`checksum` records have the same SHA-256; else what differs and the largest
    difference among their statistics, in words."""
    if new["sha256"] == ref["sha256"]:
        return None
    parts = [f"sha256 {new['sha256'][:12]} here, {ref['sha256'][:12]} recorded"]
    if new["episodes"] != ref["episodes"]:
        parts.append(f"{new['episodes']:,d} episodes here, {ref['episodes']:,d} recorded")
    if new["return_mean"] != ref["return_mean"]:
        parts.append(f"mean episode return {new['return_mean']:.6g} here, {ref['return_mean']:.6g} recorded")
    worst = (0.0, "")
    for field, stats in ref["fields"].items():
        for stat, values in stats.items():
            for col, (a, b) in enumerate(zip(new["fields"][field][stat], values)):
                if abs(a - b) > worst[0]:
                    worst = (abs(a - b), f"{field} {stat}[{col}] {a:.6g} here, {b:.6g} recorded")
    parts.append(f"largest difference: {worst[1]} (by {worst[0]:.3g})" if worst[0] else
                 "the statistics agree to float64, the bytes differ")
    return "; ".join(parts)


def _checksum_key(name: str, n: int) -> str:
    return f"{name}|n{n}"


@lru_cache(maxsize=1)
def _reference_checksums() -> dict:
    return json.loads(CHECKSUMS.read_text()) if CHECKSUMS.exists() else {}


def reference_checksum(name: str | DatasetName, n_transitions: int | None = None) -> dict | None:
    """The :func:`checksum` recorded for dataset ``name`` at ``n_transitions`` (default: full size) in
    ``assets/datasets/checksums.json``, or ``None`` when none is recorded."""
    n = full_size(name) if n_transitions is None else int(n_transitions)
    return _reference_checksums().get(_checksum_key(str(name), n))


def check_against_reference(name: str | DatasetName, record: dict) -> str | None:
    """Compare a dataset's :func:`checksum` with the recorded one: a :class:`DatasetDriftWarning` (one line naming
    the dataset and the largest difference) when they differ. Returns ``"same"``, ``"differs"`` or ``None`` (none
    recorded)."""
    ref = _reference_checksums().get(_checksum_key(str(name), record["transitions"]))
    if ref is None:
        return None
    diff = checksum_difference(record, ref)
    if diff is None:
        return "same"
    import warnings
    warnings.warn(DatasetDriftWarning(
        f"dataset {name} ({record['transitions']:,d} transitions) as made here differs from the one recorded in "
        f"minirl/assets/datasets/checksums.json (made on {ref.get('made_on', 'an unnamed machine')}): {diff}"),
        stacklevel=3)
    return "differs"


def _machine() -> str:
    """The CPU model and the versions a dataset was made with, for the record."""
    import platform

    from . import versions
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    made_with = ", ".join(f"{p} {(v or '').split('+')[0]}" for p, v in versions().items()
                          if p in ("numpy", "gymnasium", "mujoco", "torch"))
    return f"{model}; {made_with}"


def record_checksums(names, n_transitions: int | None = None, progress: bool = True) -> dict:
    """Maintainers: make (or load) each dataset of ``names`` at ``n_transitions`` and record its :func:`checksum`,
    with this machine's CPU and versions, in ``assets/datasets/checksums.json`` (committed). Returns the new entries."""
    entries = {}
    for name in names:
        ds = load_dataset(name, n_transitions, progress)
        entries[_checksum_key(name, len(ds))] = {**checksum(ds), "made_on": _machine()}
    table = {**_reference_checksums(), **entries}
    CHECKSUMS.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")
    _reference_checksums.cache_clear()
    return entries


def load_dataset(name: str | DatasetName, n_transitions: int | None = None, progress: bool = True) -> OfflineDataset:
    """Dataset ``name`` from the cache, making (and caching) it on first use.

    ``n_transitions`` picks a smaller version (what the ``smoke`` scale uses); ``None`` is the full dataset.
    A dataset made here is compared with the checksum recorded for it in ``minirl/assets/datasets/checksums.json``
    (:func:`check_against_reference`): the same bit for bit, or a :class:`DatasetDriftWarning` that names it and
    the largest difference. Its own checksum is kept beside the cache (``<cache>.json``) and compared again,
    without hashing, whenever the cache is read.
    """
    from .config import UserError
    from .data import atomic_write
    name = parse(name)  # once: what follows takes the parsed name
    path = cache_path(name, n_transitions)
    record_path = path.with_suffix(".json")
    if path.exists():
        try:
            ds = OfflineDataset.load(path)
        except Exception as e:  # a damaged file fails in many ways (zip, npz, the dataset's own checks)
            raise UserError(f"{path} is damaged ({type(e).__name__}: {e}); delete it and minirl makes {name} "
                            f"again") from None
        if record_path.exists():  # a cache made before checksums were kept has none
            check_against_reference(name, json.loads(record_path.read_text()))
        return ds
    ds = make_dataset(name, n_transitions, progress)
    record = checksum(ds)
    check_against_reference(name, record)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as tmp:  # a process killed while writing leaves no cache, never half of one
        ds.save(tmp)
    with atomic_write(record_path) as tmp:
        tmp.write_text(json.dumps({**record, "made_on": _machine()}, indent=1) + "\n")
    return ds


def dataset_info(name: str | DatasetName, n_transitions: int | None = None, progress: bool = True) -> dict:
    """Transitions, episodes, returns and normalised scores of a dataset (made if needed): the mean episode's score,
    the best episode's, and the mean score of the best 10% of episodes, the data of 10%BC
    (:meth:`~minirl.data.OfflineDataset.best_episodes`). A maze dataset's episodes are its generator's whole
    trajectories (:func:`minirl.maze.trajectory_stats`, :func:`minirl.maze.best_trajectories`)."""
    d = parse(name)
    task, m = d.task, d.maze
    ds = load_dataset(d, n_transitions, progress)
    if m is not None:  # D4RL's episodes are cut at the goal's terminals: count whole trajectories
        stats, best10 = maze.trajectory_stats(ds), maze.trajectory_stats(maze.best_trajectories(ds, 0.1))
    else:
        stats, best10 = ds.return_stats(), ds.best_episodes(0.1).return_stats()
    ref = reference_checksum(d, len(ds))
    stats["sha256"] = ds.fingerprint()  # and whether it is the recorded one (assets/datasets/checksums.json)
    stats["recorded_checksum"] = None if ref is None else "same" if ref["sha256"] == stats["sha256"] else "differs"
    stats["normalized_score_mean"] = float(normalized_score(task, stats["return_mean"]))
    stats["normalized_score_max"] = float(normalized_score(task, stats["return_max"]))
    stats["best_10pct_episodes"] = best10["episodes"]
    stats["best_10pct_normalized_score_mean"] = float(normalized_score(task, best10["return_mean"]))
    if m is not None:  # the recipe, and what the data holds towards this task's goal
        traj = maze.load_trajectories(m.maze, m.kind, -(-len(ds) // maze.LENGTH[m.kind]), data_dir())
        stats["maze"] = {"recipe": maze.recipe(m.maze, m.kind), "trajectories": len(traj["observations"]),
                         "trajectories_sha256": maze.fingerprint(traj), "success_transitions": int(ds.terminals.sum()),
                         "coverage": maze.coverage(traj)[m.task - 1], "evaluation": f"{m.env_id}, success rate over "
                         f"{maze.EVAL_EPISODES} episodes (minirl.evaluation.success_rate)"}
    return {"name": d.name, **stats}


def episode_summary(names, n_transitions: int | None = None, progress: bool = True) -> str:
    """One line per dataset: its episodes and the normalised scores of its mean episode, of its best 10% of episodes
    (the data 10%BC clones) and of its best episode: how much room a dataset leaves above its baselines. A dataset
    not cached yet is made first, with a progress bar unless ``progress=False``."""
    lines, width = [], max([22, *map(len, names)])
    for name in names:
        info = dataset_info(name, n_transitions, progress=progress)
        lines.append(f"{name:<{width}} {info['episodes']:6,d} episodes: mean episode {info['normalized_score_mean']:6.1f} | "
                     f"best {info['best_10pct_episodes']:,d} episodes (10%BC's data) "
                     f"{info['best_10pct_normalized_score_mean']:6.1f} | best episode {info['normalized_score_max']:6.1f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------------
# Exporting behaviour policies from a SAC run into the package (maintainers only; the result is committed).
# --------------------------------------------------------------------------------------------------------------

def export_assets(task: str, run_dir: str | os.PathLike, sizes: dict, replay: str = "buffer",
                  replay_every: int | None = None, replay_multiplier: float = 1.0, medium_step: int | None = None,
                  medium_window: tuple[float, float] | None = None,
                  expert_step: int | None = None, ref_expert: float | None = None, ref_expert_source: str = "",
                  episodes: int = 20, seed: int = 123) -> dict:
    """Pick the medium and expert snapshots of a SAC run, measure reference returns, write ``manifest.json``.

    * ``expert``: the snapshot at ``expert_step``, or else the one with the best evaluation return;
    * ``medium``: the snapshot at ``medium_step``, or else the first whose evaluation return lies in
      ``medium_window``;
    * ``medium-replay`` with ``replay="buffer"`` (D4RL's definition): the run's own replay buffer from its first
      step up to ``medium_step`` (:func:`minirl.behavior.replay_dataset`), written to ``medium_replay.npz``
      (:func:`pack_replay`, compressed) with its SHA-256 in the manifest. With ``replay="snapshots"`` (how
      ``pendulum`` was made, when the buffer was not kept): the random warm-up and every ``replay_every``-th step's
      snapshot up to medium, each weighted by the training steps it acted (times ``replay_multiplier``), re-rolled
      when the dataset is made.
    Reference returns: ``ref_random`` over ``5 * episodes`` uniform-random episodes, ``ref_expert`` over
    ``episodes`` stochastic episodes of the expert, so the expert dataset scores about 100. A run that has not
    reached expert level yet exports no expert: pass ``ref_expert`` (and say where it comes from in
    ``ref_expert_source``); the ``expert`` and ``medium-expert`` tiers are then unavailable.
    """
    import shutil

    import torch

    from .behavior import evaluate_policy, load_actor, replay_dataset

    if replay not in ("buffer", "snapshots"):
        raise ValueError(f"replay must be 'buffer' or 'snapshots', got {replay!r}")
    if replay == "snapshots" and not replay_every:
        raise ValueError("replay='snapshots' needs replay_every (the steps between re-rolled snapshots)")
    run = Path(run_dir)
    history = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    ckpt_cfg = json.loads((run / "config.json").read_text()) if (run / "config.json").exists() else {}
    snaps = {int(p.stem.split("_")[1]): p for p in (run / "snapshots").glob("step_*.pt")}
    evals = {h["step"]: h["return_mean"] for h in history if h["step"] in snaps}
    if expert_step is None and ref_expert is None:
        expert_step = max(evals, key=evals.get)
    if medium_step is None:
        if medium_window is None:
            raise ValueError("export_assets needs medium_step or medium_window (the evaluation returns of medium)")
        medium_step = next((s for s in sorted(evals) if medium_window[0] <= evals[s] <= medium_window[1]), None)
    if medium_step is None:
        raise ValueError(f"no snapshot of {run} has an evaluation return in {medium_window}")
    out = ASSETS / task
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    env_id = TASKS[task]
    start_steps = int(ckpt_cfg.get("start_steps", 5000))

    def copy(step: int, dest: str) -> str:
        (out / dest).parent.mkdir(exist_ok=True)
        shutil.copy(snaps[step], out / dest)
        return dest

    for name in ("history.jsonl", "config.json"):  # provenance: the run's evaluations and SAC settings
        if (run / name).exists():
            shutil.copy(run / name, out / f"sac_{name}")
    medium = copy(medium_step, "medium.pt")
    expert = copy(expert_step, "expert.pt") if expert_step is not None else None
    if replay == "buffer":
        save_npz_reproducibly(out / "medium_replay.npz", pack_replay(replay_dataset(run, medium_step)))
        replay_entry = {"file": "medium_replay.npz", "sha256": sha256(out / "medium_replay.npz"),
                        "transitions": medium_step,
                        "source": f"the SAC run's replay buffer, steps 0 to {medium_step} (the medium snapshot)"}
    else:
        replay_steps = [s for s in sorted(snaps) if s % replay_every == 0 and start_steps < s < medium_step]
        replay_entry = [[None, int(start_steps * replay_multiplier)]]
        bounds = [start_steps, *replay_steps, medium_step]
        for a, b in zip(bounds[:-1], bounds[1:]):
            snap = a if a in snaps else max(s for s in snaps if s <= a)
            replay_entry.append([copy(snap, f"replay/step_{snap:07d}.pt"), int((b - a) * replay_multiplier)])
        replay_entry = [r for r in replay_entry if r[1] > 0]

    ref_random = float(np.mean(evaluate_policy(None, env_id, 5 * episodes, seed)))
    torch.manual_seed(seed)
    if expert is not None:
        expert_actor = load_actor(out / expert)
        ref_expert = float(np.mean(evaluate_policy(expert_actor, env_id, episodes, seed, deterministic=False)))
        ref_expert_source = f"mean return of expert.pt over {episodes} stochastic episodes"
    medium_actor = load_actor(out / medium)
    medium_return = float(np.mean(evaluate_policy(medium_actor, env_id, episodes, seed, deterministic=False)))
    manifest = {"env_id": env_id, "ref_random": ref_random, "ref_expert": ref_expert,
                "ref_expert_source": ref_expert_source, "sizes": sizes,
                "medium": medium, "expert": expert, "replay": replay_entry,
                "info": {"sac_run_steps": max(snaps), "medium_step": medium_step, "expert_step": expert_step,
                         "eval_return_medium": evals[medium_step], "stochastic_return_medium": medium_return,
                         "eval_return_expert": evals.get(expert_step),
                         "sac_precision": ckpt_cfg.get("precision", "float32"), "sac_seed": ckpt_cfg.get("seed"),
                         "reference_episodes": {"random": 5 * episodes, "expert": episodes}}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    get_task.cache_clear()
    return manifest


def export_full_replay(task: str, run_dir: str | os.PathLike, upto: int | None = None) -> dict:
    """Ship the ``full-replay`` tier: the SAC run's whole replay buffer, from its first step to step ``upto`` (default:
    the expert snapshot's step in the manifest), written to ``assets/<task>/full_replay.npz`` (:func:`pack_replay`)
    with its SHA-256 in the task's manifest. Returns the manifest entry.

    The run must be the one the task's assets were exported from: its buffer up to the medium snapshot must equal the
    shipped ``medium_replay.npz`` bit for bit (a run trained again on another kind of CPU drifts apart and is refused
    with a one-line error)."""
    from .behavior import replay_dataset

    t = get_task(task)
    if not t.replay_file:
        raise ValueError(f"task {task!r} ships no medium-replay buffer to check the run against")
    upto = int(upto if upto is not None else t.info["expert_step"])
    run = Path(run_dir)
    medium = load_replay_file(t)
    prefix = replay_dataset(run, t.replay_file["transitions"])
    differ = [k for k in prefix if not np.array_equal(prefix[k], getattr(medium, k))]
    if differ:
        raise ValueError(f"{run}: its buffer up to step {len(medium)} is not the shipped {t.replay_file['file']} "
                         f"({', '.join(differ)} differ): it is not the run the {task} assets came from")
    out = ASSETS / task / "full_replay.npz"
    save_npz_reproducibly(out, pack_replay(replay_dataset(run, upto)))
    entry = {"file": out.name, "sha256": sha256(out), "transitions": upto,
             "source": f"the SAC run's replay buffer, steps 0 to {upto} (the expert snapshot); its first "
                       f"{len(medium)} transitions are {t.replay_file['file']} bit for bit"}
    path = ASSETS / task / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["full_replay"] = entry
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    get_task.cache_clear()
    return entry
