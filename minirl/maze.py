"""OGBench's PointMaze datasets, made here the way OGBench made them, and OGBench's single-task evaluation.

OGBench (Park, Frans, Eysenbach and Levine 2024, "OGBench: Benchmarking Offline Goal-Conditioned RL",
arXiv:2410.20092) made its ``pointmaze-*-stitch`` datasets to require *stitching*: every trajectory is short, so
no single one goes from an evaluation task's start to its goal. Its datasets are downloads, which this machine cannot
fetch; its generator needs no trained policy, so minirl follows the recipe and makes them. The recipe was read from
OGBench's repository (github.com/seohongpark/ogbench, the ``ogbench`` 1.2.2 release): ``data_gen_scripts/
generate_locomaze.py`` and ``data_gen_scripts/commands.sh`` (the generator and its settings), ``ogbench/locomaze/
maze.py`` (layouts, tasks, the breadth-first oracle, success and reward), ``ogbench/locomaze/__init__.py`` (the
singletask settings), ``ogbench/utils.py`` (how a file becomes transitions) and ``ogbench/relabel_utils.py`` (the
singletask rewards). This file is written from that reading, not copied; the environment is OGBench's own.

**The maze and the point.** A grid of 4 x 4 cells (medium 8 x 8, large 9 x 12, walls included), walls as MuJoCo
boxes. The observation is the point's position ``(x, y)``; an action ``a`` in ``[-1, 1]^2`` moves it by ``0.2 a`` and
MuJoCo resolves the contact with the walls. Cell ``(i, j)`` is centred at ``x = 4 j - 4, y = 4 i - 4``.

**The behaviour: a noisy waypoint controller.** From the point's cell, a breadth-first search over the open cells
towards the goal's cell gives the next cell on a shortest path (ties: the first of ``(i-1, j)``, ``(i, j-1)``,
``(i+1, j)``, ``(i, j+1)``, as in OGBench's ``get_oracle_subgoal``); the action is the unit vector towards that
cell's centre plus Gaussian noise of standard deviation 0.5 per dimension, clipped to ``[-1, 1]``. Starts and goals
are cell centres plus uniform noise of +-1 in x and in y.

* ``stitch``: 5,000 trajectories of 200 transitions (1,000,000). Each starts in a uniformly drawn open cell and is
  sent to a cell drawn uniformly among those exactly 4 cells away by breadth-first search (its start cell if there
  is none); it keeps that goal once there, hovering around it until step 200.
* ``navigate``: 1,000 trajectories of 1,000 transitions (1,000,000). The goal is a uniformly drawn *vertex* cell
  (any open cell but a straight corridor's) and a new one is drawn each time the point comes within 1 of it.

(OGBench's files hold 201 or 1,001 observations per trajectory; its loader turns them into 200 or 1,000
transitions. OGBench also ships a validation file, 10% more trajectories, which minirl does not make.)

**The single-task form** (OGBench's ``pointmaze-{maze}-singletask-task{k}-v0``, the offline RL form): five fixed
(start cell, goal cell) tasks per maze; the goal is the goal cell's centre exactly; the task is solved when the point
is within 1 of it, judged on the state *before* the action; the reward is -1 per step and 0 at the goal, and reaching
it ends the episode; the time limit is 1,000 steps; OGBench reports the success rate over 50 episodes
(:func:`minirl.evaluation.success_rate`). A dataset for task ``k`` is the trajectories with OGBench's relabelling (``relabel_dataset``):
``reward_t = success(s_t) - 1`` and ``mask_t = 1 - success(s_t)``. In D4RL's form that is ``rewards = success - 1``,
``terminals = success(s_t)`` (no bootstrapping past a goal state, as in the environment, where reaching the goal ends
the episode with reward 0) and ``timeouts`` on a trajectory's last transition. A trajectory that passes through the
goal therefore splits into several D4RL episodes at its goal states, as OGBench's masks cut its value targets;
``infos["trajectory"]`` keeps each row's trajectory, and 10%BC's data is :func:`best_trajectories`.

**Names.** ``pointmaze-{medium,large}-{stitch,navigate}-singletask-task{1..5}``: OGBench's dataset names without
``-v0``, because these are minirl's re-makes (the same recipe, other random draws), not OGBench's files. The five
tasks share one set of trajectories per maze and type, made once and cached; only the rewards differ.

**Deviations.** OGBench's script draws from numpy's global generator without seeding it (its files cannot be
re-made bit for bit); minirl draws from ``numpy.random.default_rng(seed)``, one fixed seed per maze and type, so a
dataset is a deterministic function of its name and size (on a given kind of CPU: MuJoCo's floating point may differ
across CPU types). The distributions are OGBench's; ``experiments/maze_data.py`` compares the statistics with the
published files'.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import warnings
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

MAZES = ("medium", "large")
KINDS = ("stitch", "navigate")
TASK_IDS = (1, 2, 3, 4, 5)
TRAJECTORIES = {"stitch": 5000, "navigate": 1000}   # OGBench's --num_episodes (training file)
LENGTH = {"stitch": 200, "navigate": 1000}          # transitions per trajectory (--max_episode_steps minus one)
NOISE = 0.5                                         # --noise: std of the Gaussian added to the controller's action
STITCH_CELLS = 4                                    # a stitch trajectory's goal is this many cells from its start
SEEDS = {("medium", "stitch"): 1, ("medium", "navigate"): 2, ("large", "stitch"): 3, ("large", "navigate"): 4}
EVAL_EPISODES = 50                                  # OGBench's num_eval_episodes
TIME_LIMIT = 1000                                   # the singletask environments' max_episode_steps
NEVER_RETURN = -float(TIME_LIMIT)                   # the return of a policy that never reaches the goal
RECIPE_VERSION = 1   # bump when the generator changes (the trajectories' cache key)
RELABEL_VERSION = 1  # bump when the single-task relabelling changes (the datasets' cache key)
FORM = "pointmaze-<maze>-<stitch|navigate>-singletask-task<1-5>"
_STEPS = ((-1, 0), (0, -1), (1, 0), (0, 1))  # OGBench's neighbour order: its tie-break among shortest paths

# SHA-256 of the full trajectories (observations then actions, float32) as made on this project's machines (AMD
# EPYC, ogbench 1.2.2, MuJoCo 4.0.0, numpy 2.4): a full-size make on another machine that differs warns.
CHECKSUMS: dict[tuple[str, str], str] = {
    ("medium", "stitch"): "a699c31df7120a25cdf12f1c4f1f072cb6389ecf48247cb472d2ad74056ab41f",
    ("medium", "navigate"): "1d734c4b960c0fde098ef9a9f876ddacf084a7a2277b8bad13b1f9766ecfa90b",
    ("large", "stitch"): "da887212a3af271aed8a36851b0c0c265bd09d430ed76bebf4c1a4e6edd5106f",
    ("large", "navigate"): "179491fe7809f6ebb96d2ced5a6c28084b11fd8c5b94f0007a27857ba011bb7e",
}

# Mean return of the noise-free waypoint controller (:func:`oracle`) over the 50 evaluation episodes of seed 0 on
# each task, measured by experiments/maze_data.py: the "expert" reference of normalised scores (D4RL's maze2d did
# the same with its planner); a policy that never reaches the goal scores -1000 (see NEVER_RETURN).
ORACLE_RETURNS: dict[tuple[str, int], float] = {
    ("medium", 1): -160.24, ("medium", 2): -159.26, ("medium", 3): -88.1, ("medium", 4): -155.8, ("medium", 5): -128.16,
    ("large", 1): -257.94, ("large", 2): -319.06, ("large", 3): -219.56, ("large", 4): -241.24, ("large", 5): -260.94,
}


@dataclass(frozen=True)
class MazeName:
    """A parsed maze dataset name: ``pointmaze-medium-stitch-singletask-task1`` -> medium, stitch, 1."""
    maze: str
    kind: str
    task: int

    @property
    def name(self) -> str:
        return f"pointmaze-{self.maze}-{self.kind}-singletask-task{self.task}"

    @property
    def task_name(self) -> str:
        """OGBench's singletask environment without ``-v0``: ``pointmaze-medium-singletask-task1``."""
        return f"pointmaze-{self.maze}-singletask-task{self.task}"

    @property
    def env_id(self) -> str:
        """OGBench's singletask environment: ``pointmaze-medium-singletask-task1-v0``."""
        return self.task_name + "-v0"

    @property
    def ogbench_name(self) -> str:
        """OGBench's name of the published dataset in its singletask form."""
        return f"pointmaze-{self.maze}-{self.kind}-singletask-task{self.task}-v0"


def dataset_names() -> list[str]:
    """Every maze dataset name, medium before large, stitch before navigate."""
    return [MazeName(m, k, t).name for m in MAZES for k in KINDS for t in TASK_IDS]


def is_maze_name(name: str) -> bool:
    return name.startswith("pointmaze-")


def parse(name: str | MazeName, kind_required: bool = True) -> MazeName:
    """``pointmaze-<maze>-<kind>-singletask-task<k>`` (a dataset) or, with ``kind_required=False``, also
    ``pointmaze-<maze>-singletask-task<k>`` (a task; its ``kind`` is then ``""``). A bad name is a one-line
    ``ValueError`` naming the field that is wrong and what was expected. A :class:`MazeName` (parsed already, e.g.
    :attr:`minirl.datasets.DatasetName.maze`) is returned as it is: every function here that takes a name takes one."""
    if isinstance(name, MazeName):
        if kind_required and not name.kind:
            raise ValueError(f"{name.task_name!r} names a task, not a maze dataset: {FORM} has a dataset type")
        return name
    parts = name.split("-")
    if not kind_required and len(parts) == 4:
        parts = parts[:2] + [""] + parts[2:]
    if len(parts) != 5 or parts[0] != "pointmaze" or parts[3] != "singletask":
        raise ValueError(f"maze dataset {name!r} is not of the form {FORM}, e.g. "
                         f"'pointmaze-medium-stitch-singletask-task1'")
    _, maze, kind, _, task = parts
    if maze not in MAZES:
        raise ValueError(f"unknown maze {maze!r} in {name!r}: the maze must be one of {', '.join(MAZES)}")
    if kind not in KINDS and (kind_required or kind):
        raise ValueError(f"unknown dataset type {kind!r} in {name!r}: the type must be one of {', '.join(KINDS)}")
    if not re.fullmatch(r"task[1-5]", task):
        raise ValueError(f"unknown task {task!r} in {name!r}: the task must be task1 to task5 (OGBench's five "
                         "singletask tasks)")
    return MazeName(maze, kind, int(task[4:]))


# ----------------------------------------------------------------------------------------------------------------
# The maze's layout, read from OGBench's environment, and breadth-first search over its cells
# ----------------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def data_env(maze: str):
    """OGBench's goal-conditioned ``pointmaze-<maze>-v0`` (unwrapped) as the generator uses it: the episode does not
    end at the goal, and the goal is re-drawn by the caller. One per maze and process (each environment writes its
    MuJoCo model to a temporary file)."""
    import gymnasium
    import ogbench.locomaze  # noqa: F401  (registers the environments)
    return gymnasium.make(f"pointmaze-{maze}-v0", terminate_at_goal=False).unwrapped


@dataclass(frozen=True, eq=False)
class Layout:
    """A maze's cells: ``walls`` (1 = wall), the cell size and offset, the goal tolerance, its five tasks, and for
    every goal cell the breadth-first distances and the next cell towards it from every cell."""
    maze: str
    walls: np.ndarray             # (H, W) 0/1
    unit: float                   # cell size (4)
    offset: tuple[float, float]   # (x, y) offset: cell (i, j) is centred at (j * unit - ox, i * unit - oy)
    goal_tol: float               # success radius (1 for the point)
    tasks: tuple                  # ((start_ij, goal_ij), ...) for task1..task5
    distance: np.ndarray          # (H, W, H, W): distance[g][c], cells from c to goal g; -1 for walls
    next_cell: np.ndarray         # (H, W, H, W, 2): the waypoint from cell c towards goal g

    @property
    def open_cells(self) -> list[tuple[int, int]]:
        """Every open cell, row by row (OGBench's ``all_cells``)."""
        return [(int(i), int(j)) for i, j in zip(*np.nonzero(self.walls == 0))]

    @property
    def vertex_cells(self) -> list[tuple[int, int]]:
        """Open cells that are not the inside of a straight corridor (OGBench's ``vertex_cells``: navigate goals)."""
        w = self.walls
        out = []
        for i, j in self.open_cells:
            vertical = w[i - 1, j] == 0 and w[i + 1, j] == 0 and w[i, j - 1] == 1 and w[i, j + 1] == 1
            horizontal = w[i, j - 1] == 0 and w[i, j + 1] == 0 and w[i - 1, j] == 1 and w[i + 1, j] == 1
            if not (vertical or horizontal):
                out.append((i, j))
        return out

    def center(self, ij) -> np.ndarray:
        """The centre ``(x, y)`` of cell ``ij`` (``(..., 2)`` integer array or a pair)."""
        ij = np.asarray(ij)
        return np.stack([ij[..., 1] * self.unit - self.offset[0], ij[..., 0] * self.unit - self.offset[1]], -1
                        ).astype(np.float64)

    def cell(self, xy) -> np.ndarray:
        """The cell ``(i, j)`` a position ``(..., 2)`` lies in (OGBench's ``xy_to_ij``: rounding to the nearest cell
        centre, for positions inside the maze)."""
        xy = np.asarray(xy, dtype=np.float64)
        i = ((xy[..., 1] + self.offset[1] + 0.5 * self.unit) / self.unit).astype(np.int64)
        j = ((xy[..., 0] + self.offset[0] + 0.5 * self.unit) / self.unit).astype(np.int64)
        return np.stack([i, j], -1)

    def goal_xy(self, task: int) -> np.ndarray:
        """Task ``task``'s goal: its goal cell's centre (the singletask environments add no noise to it)."""
        return self.center(self.tasks[task - 1][1])

    def reached(self, xy, task: int) -> np.ndarray:
        """Whether each position is within ``goal_tol`` of task ``task``'s goal (OGBench's success), in float64."""
        d = np.asarray(xy, dtype=np.float64) - self.goal_xy(task)
        return np.sqrt((d ** 2).sum(-1)) <= self.goal_tol

    def path(self, start, goal) -> list[tuple[int, int]]:
        """The cells of the shortest path from cell ``start`` to cell ``goal``, both included (``next_cell``)."""
        out, c = [tuple(int(x) for x in start)], tuple(int(x) for x in start)
        while c != tuple(goal):
            c = tuple(int(x) for x in self.next_cell[goal[0], goal[1], c[0], c[1]])
            out.append(c)
        return out

    def ring(self, start, cells: int) -> list[tuple[int, int]]:
        """The open cells exactly ``cells`` steps from ``start`` by breadth-first search, row by row."""
        d = bfs(self.walls, tuple(start))
        return [(int(i), int(j)) for i, j in zip(*np.nonzero(d == cells))]


def bfs(walls: np.ndarray, source: tuple[int, int]) -> np.ndarray:
    """Breadth-first distances (in cells, 4-neighbour moves) from ``source`` over the open cells; -1 for walls and
    cells it cannot reach."""
    d = np.full(walls.shape, -1, dtype=np.int64)
    d[source] = 0
    queue = deque([source])
    while queue:
        i, j = queue.popleft()
        for di, dj in _STEPS:
            n = (i + di, j + dj)
            if 0 <= n[0] < walls.shape[0] and 0 <= n[1] < walls.shape[1] and walls[n] == 0 and d[n] == -1:
                d[n] = d[i, j] + 1
                queue.append(n)
    return d


@lru_cache(maxsize=None)
def layout(maze: str) -> Layout:
    """The :class:`Layout` of ``maze`` (``"medium"`` or ``"large"``), read from OGBench's environment."""
    if maze not in MAZES:
        raise ValueError(f"unknown maze {maze!r}: the maze must be one of {', '.join(MAZES)}")
    env = data_env(maze)
    walls = np.array(env.maze_map, dtype=np.int64)
    h, w = walls.shape
    distance = np.full((h, w, h, w), -1, dtype=np.int64)
    next_cell = np.zeros((h, w, h, w, 2), dtype=np.int64)
    for gi, gj in zip(*np.nonzero(walls == 0)):
        d = distance[gi, gj] = bfs(walls, (gi, gj))
        for ci in range(h):
            for cj in range(w):
                best = (ci, cj)  # stay, unless a neighbour is strictly closer than the best so far
                for di, dj in _STEPS:
                    ni, nj = ci + di, cj + dj
                    if 0 <= ni < h and 0 <= nj < w and walls[ni, nj] == 0 and d[ni, nj] < d[best]:
                        best = (ni, nj)
                next_cell[gi, gj, ci, cj] = best
    tasks = tuple((tuple(map(int, t["init_ij"])), tuple(map(int, t["goal_ij"]))) for t in env.task_infos)
    return Layout(maze, walls, float(env._maze_unit), (float(env._offset_x), float(env._offset_y)),
                  float(env._goal_tol), tasks, distance, next_cell)


# ----------------------------------------------------------------------------------------------------------------
# The generator
# ----------------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def global_numpy_seed(seed: int):
    """numpy's global generator seeded inside the block and restored after it: OGBench's environments draw their
    reset noise from it, and the caller's stream is left as it was."""
    state = np.random.get_state()
    np.random.seed(seed % 2 ** 32)
    try:
        yield
    finally:
        np.random.set_state(state)


def _noisy(lay: Layout, ij, rng: np.random.Generator) -> np.ndarray:
    """A cell's centre plus uniform noise of +-unit/4 in x and in y (OGBench's ``add_noise``)."""
    return lay.center(ij) + rng.uniform(-1.0, 1.0, 2) * lay.unit / 4


def trajectories(maze: str, kind: str, n_trajectories: int | None = None, seed: int | None = None,
                 progress: bool = False) -> dict:
    """Generate ``n_trajectories`` (default: OGBench's number) of ``kind`` (``"stitch"`` or ``"navigate"``) in
    ``maze``, by the recipe of the module docstring.

    Returns ``observations`` ``(E, T + 1, 2)`` and ``actions`` ``(E, T, 2)``, float32, with ``T`` =
    :data:`LENGTH` ``[kind]``, plus ``maze``, ``kind`` and ``seed``. The draws come from one generator in order, so
    the first ``k`` trajectories are the same whatever the total.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown dataset type {kind!r}: the type must be one of {', '.join(KINDS)}")
    lay, env = layout(maze), data_env(maze)
    seed = SEEDS[(maze, kind)] if seed is None else int(seed)
    n = TRAJECTORIES[kind] if n_trajectories is None else int(n_trajectories)
    if n < 1:
        raise ValueError(f"n_trajectories must be at least 1, got {n_trajectories}")
    length = LENGTH[kind]
    rng = np.random.default_rng(seed)
    cells, vertices = lay.open_cells, lay.vertex_cells
    rings = {c: lay.ring(c, STITCH_CELLS) for c in cells} if kind == "stitch" else {}
    obs = np.empty((n, length + 1, 2))
    actions = np.empty((n, length, 2))
    from .utils import progress_bar
    with global_numpy_seed(seed):
        env.reset(seed=seed)
        for e in progress_bar(range(n), total=n, enabled=progress, desc=f"pointmaze-{maze}-{kind}"):
            start = cells[rng.integers(len(cells))]
            if kind == "stitch":
                ring = rings[start]
                goal = ring[rng.integers(len(ring))] if ring else start
            else:
                goal = vertices[rng.integers(len(vertices))]
            start_xy, goal_xy = _noisy(lay, start, rng), _noisy(lay, goal, rng)
            noise = rng.normal(0.0, NOISE, (length, 2))
            env.reset(options={"task_info": {"init_ij": start, "goal_ij": goal}})
            env.set_goal(goal_xy=goal_xy)  # the environment's own noisy draws are replaced by ours
            env.set_xy(start_xy)
            xy = env.get_xy()
            obs[e, 0] = xy
            gi, gj = lay.cell(goal_xy)
            for t in range(length):
                ci, cj = lay.cell(xy)
                direction = lay.center(lay.next_cell[gi, gj, ci, cj]) - xy
                direction /= np.linalg.norm(direction) + 1e-6
                a = np.clip(direction + noise[t], -1.0, 1.0)
                xy, _, _, _, info = env.step(a)
                actions[e, t], obs[e, t + 1] = a, xy
                if kind == "navigate" and info["success"]:  # judged after the step, on the noisy goal
                    goal_xy = _noisy(lay, vertices[rng.integers(len(vertices))], rng)
                    env.set_goal(goal_xy=goal_xy)
                    gi, gj = lay.cell(goal_xy)
    return {"observations": obs.astype(np.float32), "actions": actions.astype(np.float32),
            "maze": maze, "kind": kind, "seed": seed}


def fingerprint(traj: dict) -> str:
    """SHA-256 of a set of trajectories' observations and actions (float32 bytes)."""
    h = hashlib.sha256()
    for key in ("observations", "actions"):
        h.update(np.ascontiguousarray(traj[key], dtype=np.float32).tobytes())
    return h.hexdigest()


def recipe(maze: str, kind: str) -> dict:
    """What the trajectories of ``maze`` and ``kind`` are made from, as recorded in cache keys and ``dataset info``."""
    return {"source": "OGBench data_gen_scripts/generate_locomaze.py with commands.sh's settings "
                      "(github.com/seohongpark/ogbench), re-written in minirl/maze.py",
            "env": f"pointmaze-{maze}-v0 (terminate_at_goal=False)", "dataset_type": kind,
            "trajectories": TRAJECTORIES[kind], "transitions_per_trajectory": LENGTH[kind],
            "transitions": TRAJECTORIES[kind] * LENGTH[kind], "noise": NOISE,
            "goal": (f"a uniformly drawn cell exactly {STITCH_CELLS} cells away (breadth-first search)"
                     if kind == "stitch" else "a uniformly drawn vertex cell, drawn again on reaching it"),
            "start_and_goal_noise": "uniform +-1 in x and y around the cell centre",
            "seed": SEEDS[(maze, kind)], "recipe_version": RECIPE_VERSION}


def recipe_key(maze: str, kind: str) -> str:
    """A short hash of the recipe and of the versions that step the maze (ogbench, MuJoCo, gymnasium) and draw the
    noise (numpy): a changed recipe or an upgraded package never reuses a stale cache."""
    from importlib import metadata
    made_with = {p: metadata.version(p) for p in ("ogbench", "mujoco", "gymnasium", "numpy")}
    text = json.dumps({"recipe": recipe(maze, kind), "versions": made_with}, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def dataset_key(maze: str, kind: str) -> str:
    """The cache key of a single-task dataset: its trajectories' :func:`recipe_key` and the relabelling's version
    (the task is in the dataset's name)."""
    return hashlib.sha1(f"{recipe_key(maze, kind)}|relabel={RELABEL_VERSION}".encode()).hexdigest()[:10]


def load_trajectories(maze: str, kind: str, n_trajectories: int | None = None, cache_dir: str | Path | None = None,
                      progress: bool = False) -> dict:
    """The first ``n_trajectories`` (default: all) of ``maze``/``kind``: read from the full set cached in
    ``cache_dir`` when it is there, else generated; a full set generated with a ``cache_dir`` is cached there (the
    five tasks' datasets share it). A full set that differs from :data:`CHECKSUMS` warns (another CPU type, or
    another version of a package)."""
    full = TRAJECTORIES[kind]
    n = full if n_trajectories is None else int(n_trajectories)
    if not 1 <= n <= full:
        raise ValueError(f"n_trajectories must be between 1 and {full} for {maze}/{kind}, got {n_trajectories}")
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / f"pointmaze-{maze}-{kind}-trajectories-e{full}-{recipe_key(maze, kind)}.npz"
        if path.exists():
            with np.load(path, allow_pickle=False) as f:
                return {"observations": f["observations"][:n], "actions": f["actions"][:n],
                        "maze": maze, "kind": kind, "seed": SEEDS[(maze, kind)]}
    traj = trajectories(maze, kind, n, progress=progress)
    if n == full:
        digest = fingerprint(traj)
        if (maze, kind) in CHECKSUMS and digest != CHECKSUMS[(maze, kind)]:
            warnings.warn(f"pointmaze-{maze}-{kind}: the trajectories made here (SHA-256 {digest[:12]}...) differ "
                          f"from those recorded in minirl.maze.CHECKSUMS ({CHECKSUMS[(maze, kind)][:12]}...): "
                          "another CPU type or package version; the recipe is the same", stacklevel=2)
        if path is not None:
            from .data import atomic_write
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(path) as tmp, open(tmp, "wb") as f:
                np.savez(f, observations=traj["observations"], actions=traj["actions"])
    return traj


# ----------------------------------------------------------------------------------------------------------------
# The single-task datasets
# ----------------------------------------------------------------------------------------------------------------

def singletask(traj: dict, task: int, n_transitions: int | None = None) -> dict:
    """The D4RL dict of task ``task`` (1-5) on trajectories ``traj`` (:func:`trajectories`), OGBench's relabelling:
    ``rewards = success(s) - 1``, ``terminals = success(s)``, ``timeouts`` on each trajectory's last transition
    that is not terminal; the first ``n_transitions`` (default all), the last one closed as a timeout.
    ``infos["trajectory"]`` numbers each row's trajectory: D4RL's episodes split at goal states, so filters that
    pick whole behaviour episodes (10%BC) must pick trajectories instead (:func:`best_trajectories`)."""
    lay = layout(traj["maze"])
    obs = traj["observations"]
    e, t1, _ = obs.shape
    o, o2 = obs[:, :-1].reshape(-1, 2), obs[:, 1:].reshape(-1, 2)
    a = traj["actions"].reshape(-1, 2)
    n = len(o) if n_transitions is None else int(n_transitions)
    if not 1 <= n <= len(o):
        raise ValueError(f"n_transitions must be between 1 and {len(o)}, got {n_transitions}")
    success = lay.reached(o[:n], task)
    ends = np.zeros(len(o), dtype=bool)
    ends[t1 - 2::t1 - 1] = True
    ends[n - 1] = True
    return {"observations": o[:n], "actions": a[:n], "rewards": success.astype(np.float32) - 1.0,
            "next_observations": o2[:n], "terminals": success, "timeouts": ends[:n] & ~success,
            "infos": {"trajectory": np.repeat(np.arange(e, dtype=np.int32), t1 - 1)[:n]}}


def _trajectory_starts(ds) -> np.ndarray:
    if "trajectory" not in ds.infos:
        raise ValueError("the dataset has no infos['trajectory']: this needs a maze dataset (minirl.maze)")
    ids = ds.infos["trajectory"]
    return np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])


def trajectory_returns(ds) -> np.ndarray:
    """The return of each of the generator's trajectories in a maze dataset (float64)."""
    return np.add.reduceat(ds.rewards.astype(np.float64), _trajectory_starts(ds))


def trajectory_stats(ds) -> dict:
    """:meth:`~minirl.data.OfflineDataset.return_stats` over the generator's whole trajectories: ``episodes`` is
    the number of trajectories."""
    r = trajectory_returns(ds)
    return {"episodes": len(r), "transitions": len(ds), "return_min": float(r.min()),
            "return_mean": float(r.mean()), "return_max": float(r.max()), "return_std": float(r.std())}


def best_trajectories(ds, fraction: float = 0.1):
    """The ``fraction`` of the generator's trajectories (``ds.infos["trajectory"]``) with the highest returns
    (``floor(fraction * trajectories)``, at least one; ties to the later trajectory), whole and in order: 10%BC's
    data on a maze dataset. (:meth:`~minirl.data.OfflineDataset.best_episodes` would pick D4RL's episodes, which
    the goal's terminals cut into pieces; the best of those are single steps at the goal.)"""
    from .data import OfflineDataset
    if isinstance(fraction, bool) or not 0 < fraction <= 1:
        raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}")
    ids, starts, returns = ds.infos.get("trajectory"), _trajectory_starts(ds), trajectory_returns(ds)
    k = max(int(fraction * len(starts)), 1)
    keep = np.sort(np.argsort(returns, kind="stable")[len(starts) - k:])
    rows = np.isin(ids, ids[starts[keep]])
    timeouts = ds.timeouts[rows].copy()
    last = np.r_[ids[rows][1:] != ids[rows][:-1], True]
    timeouts |= last & ~ds.terminals[rows]
    return OfflineDataset(observations=ds.observations[rows], actions=ds.actions[rows], rewards=ds.rewards[rows],
                          next_observations=ds.next_observations[rows], terminals=ds.terminals[rows],
                          timeouts=timeouts, infos={key: v[rows] for key, v in ds.infos.items()},
                          action_low=ds.action_low, action_high=ds.action_high)


def goal_pieces(ds, name: str | MazeName, from_start_cell: bool = False):
    """The pieces of the data that reach the goal of ``name``'s task: goal-BC's data (``--algo goal-bc``).

    One rule for every maze dataset. The singletask relabelling ends a D4RL episode at each goal state, so a piece
    is an episode that ends at the goal (a terminal), and the rest of the data (episodes that time out) is dropped.
    With ``from_start_cell`` a piece begins instead at its last step in the task's start cell, and an episode that
    never passes through that cell gives nothing: what is left runs from the start to the goal, the best that any
    imitation of the data can copy. On ``navigate`` such pieces exist; on ``stitch`` none does (no trajectory
    spans more than 4 cells), so the result is an error there, which says so."""
    from .data import OfflineDataset
    m = parse(name)
    lay = layout(m.maze)
    start_cell = np.asarray(lay.tasks[m.task - 1][0])
    ends = np.flatnonzero(ds.terminals | ds.timeouts)
    if not len(ends) or ends[-1] != len(ds) - 1:
        ends = np.r_[ends, len(ds) - 1]
    rows = np.zeros(len(ds), dtype=bool)
    pieces = 0
    for lo, hi in zip(np.r_[0, ends[:-1] + 1], ends):
        if not ds.terminals[hi]:
            continue
        if from_start_cell:
            at_start = np.flatnonzero((lay.cell(ds.observations[lo:hi + 1, :2]) == start_cell).all(-1))
            if not len(at_start):
                continue
            lo = lo + at_start[-1]
        rows[lo:hi + 1] = True
        pieces += 1
    if not pieces:
        where = "from the task's start cell " if from_start_cell else ""
        raise ValueError(f"{m.name}: no piece of the data runs {where}to the goal of task {m.task} "
                         f"(start cell {tuple(start_cell.tolist())}, goal cell {lay.tasks[m.task - 1][1]})")
    return OfflineDataset(observations=ds.observations[rows], actions=ds.actions[rows], rewards=ds.rewards[rows],
                          next_observations=ds.next_observations[rows], terminals=ds.terminals[rows],
                          timeouts=ds.timeouts[rows], infos={key: v[rows] for key, v in ds.infos.items()},
                          action_low=ds.action_low, action_high=ds.action_high)


def make(name: str | MazeName, n_transitions: int | None = None, cache_dir: str | Path | None = None,
         progress: bool = False) -> dict:
    """The D4RL dict of maze dataset ``name`` with ``n_transitions`` (default: 1,000,000): the first
    ``ceil(n / T)`` trajectories, relabelled for the name's task. A smaller dataset is a prefix of the full one."""
    m = parse(name)
    length = LENGTH[m.kind]
    full = TRAJECTORIES[m.kind] * length
    n = full if n_transitions is None else int(n_transitions)
    if not 1 <= n <= full:
        raise ValueError(f"n_transitions must be between 1 and {full} for {m.name!r}, got {n_transitions}")
    traj = load_trajectories(m.maze, m.kind, math.ceil(n / length), cache_dir, progress)
    return singletask(traj, m.task, n)


def full_size(kind: str) -> int:
    return TRAJECTORIES[kind] * LENGTH[kind]


def to_ogbench(traj: dict) -> dict:
    """Trajectories in the layout of OGBench's dataset files (``ogbench.utils.load_dataset`` reads them): every
    trajectory's ``T + 1`` observations in a row, ``terminals`` on its last row, ``qpos`` (the position) and
    ``qvel`` (zero). The last row's action, which OGBench's loader drops, is zero."""
    obs = traj["observations"]
    e, t1, _ = obs.shape
    actions = np.concatenate([traj["actions"], np.zeros((e, 1, 2), np.float32)], axis=1)
    terminals = np.zeros((e, t1), dtype=bool)
    terminals[:, -1] = True
    flat = obs.reshape(-1, 2)
    return {"observations": flat, "actions": actions.reshape(-1, 2), "terminals": terminals.reshape(-1),
            "qpos": flat, "qvel": np.zeros_like(flat)}


# ----------------------------------------------------------------------------------------------------------------
# What the data covers
# ----------------------------------------------------------------------------------------------------------------

def coverage(traj: dict) -> list[dict]:
    """For each of the maze's five tasks, what the trajectories offer towards its goal:

    * ``task_cells``: the task's start-to-goal distance (cells, breadth-first);
    * ``reaching``: trajectories with a state within the goal tolerance;
    * ``max_start_cells``: the largest distance from the goal of the start of a trajectory that reaches it;
    * ``max_approach_cells``: the largest distance from the goal of any state visited before a trajectory first
      reaches it (the longest approach any single trajectory shows);
    * ``start_to_goal``: trajectories that visit the task's start cell and later reach its goal.
    """
    lay = layout(traj["maze"])
    obs = traj["observations"]
    cells = lay.cell(obs)                                    # (E, T + 1, 2)
    rows = []
    for k, (start, goal) in enumerate(lay.tasks, start=1):
        dist = lay.distance[goal]                            # (H, W): cells to this goal
        to_goal = dist[cells[..., 0], cells[..., 1]]         # (E, T + 1)
        hit = lay.reached(obs, k)                            # (E, T + 1)
        reaching = hit.any(1)
        first = np.where(reaching, hit.argmax(1), obs.shape[1])
        before = np.arange(obs.shape[1])[None, :] < first[:, None]
        approach = np.where(before & reaching[:, None], to_goal, -1).max(1)
        at_start = (cells[..., 0] == start[0]) & (cells[..., 1] == start[1]) & before
        rows.append({"task": k, "start": start, "goal": goal, "task_cells": int(dist[start]),
                     "reaching": int(reaching.sum()),
                     "max_start_cells": int(to_goal[reaching, 0].max()) if reaching.any() else None,
                     "max_approach_cells": int(approach[reaching].max()) if reaching.any() else None,
                     "start_to_goal": int((at_start.any(1) & reaching).sum())})
    return rows


# ----------------------------------------------------------------------------------------------------------------
# Evaluation, OGBench's way
# ----------------------------------------------------------------------------------------------------------------

def task_env(env_id: str):
    """OGBench's singletask environment ``env_id`` (``pointmaze-medium-singletask-task1-v0``), made offline.
    :func:`minirl.evaluation.success_rate` runs a policy in it, OGBench's way."""
    import gymnasium
    import ogbench.locomaze  # noqa: F401  (registers the environments)
    return gymnasium.make(env_id)


def oracle(name: str):
    """The noise-free waypoint controller of the data, aimed at the goal of ``name``'s task: a policy for
    :func:`minirl.evaluation.success_rate` (batch of positions in, actions out). It solves every task; its returns are the
    "expert" reference of normalised scores (:data:`ORACLE_RETURNS`)."""
    m = parse(name, kind_required=False)
    lay = layout(m.maze)
    gi, gj = lay.tasks[m.task - 1][1]

    def policy(obs):
        xy = np.asarray(obs, dtype=np.float64).reshape(-1, 2)
        c = lay.cell(xy)
        d = lay.center(lay.next_cell[gi, gj, c[:, 0], c[:, 1]]) - xy
        return d / (np.linalg.norm(d, axis=1, keepdims=True) + 1e-6)

    return policy


def reference_returns(name: str | MazeName) -> tuple[float, float]:
    """``(never, oracle)``: the return of a policy that never reaches the goal (-1000) and the oracle's mean return
    over the 50 evaluation episodes (:data:`ORACLE_RETURNS`), the 0 and 100 of normalised scores."""
    m = parse(name, kind_required=False)
    return NEVER_RETURN, ORACLE_RETURNS[(m.maze, m.task)]
