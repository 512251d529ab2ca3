"""A dataset's name is parsed once, into the object that travels (minirl.datasets.DatasetName): runs.run reads it
at its entry and passes the parsed name to the data, the algorithms' settings and the checks (issue 73.4); the public
functions that take a name still take one."""
import numpy as np
import pytest

from minirl import datasets, maze, runs

MAZE = "pointmaze-medium-navigate-singletask-task1"


class Stop(Exception):
    pass


def _stop(*args, **kwargs):  # runs.run up to its training: the plan, the data, the settings and config.json
    raise Stop


def _counting(monkeypatch, module, name):
    calls, real = [], getattr(module, name)

    def counted(x, *args, **kwargs):
        if isinstance(x, str):  # a name read again (a parsed name passed on is not)
            calls.append(x)
        return real(x, *args, **kwargs)
    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("algo", ["10%bc", "goal-bc", "iql"])
def test_a_maze_run_reads_its_dataset_name_once(algo, monkeypatch, tmp_path):
    # before: maze.parse read the name again in datasets.parse_name, the cache key, the dataset's making, the maze
    # settings (runs.domain_config) and the filters of 10%BC and goal-BC
    calls = _counting(monkeypatch, maze, "parse")
    monkeypatch.setattr(runs, "train", _stop)
    with pytest.raises(Stop):
        runs.run(algo, MAZE, scale="smoke", out=tmp_path / "run", progress=False)
    assert calls == [MAZE]


def test_a_run_parses_its_dataset_name_once(monkeypatch, tmp_path):
    calls = _counting(monkeypatch, datasets, "parse")
    monkeypatch.setattr(runs, "train", _stop)
    with pytest.raises(Stop):
        runs.run("bc", "hopper-medium-replay", scale="smoke", out=tmp_path / "run", progress=False)
    assert calls == ["hopper-medium-replay"]


def test_the_parsed_name_says_its_task_tier_and_kind_of_task():
    d = datasets.parse(MAZE)
    assert (d.name, d.tier, d.domain, d.env_id) == (MAZE, "navigate", "maze", "pointmaze-medium-singletask-task1-v0")
    assert d.maze == maze.MazeName("medium", "navigate", 1) and d.task == datasets.get_task(MAZE)
    h = datasets.parse("hopper-medium-replay")
    assert (h.tier, h.domain, h.maze, str(h)) == ("medium-replay", "hopper", None, "hopper-medium-replay")
    assert datasets.parse(h) is h and maze.parse(d.maze) is d.maze  # parsed already: returned as it is
    assert datasets.parse_name("hopper-medium-replay") == (h.task, h.tier)
    with pytest.raises(ValueError, match="names a task, not a maze dataset"):
        maze.parse(maze.parse("pointmaze-medium-singletask-task1", kind_required=False))


@pytest.mark.parametrize("name", ["pendulum-medium", MAZE])
def test_the_functions_that_take_a_name_take_the_parsed_name_alike(name):
    d = datasets.parse(name)
    assert datasets.full_size(d) == datasets.full_size(name)
    assert datasets.recipe_key(d) == datasets.recipe_key(name)
    assert datasets.cache_path(d, 500) == datasets.cache_path(name, 500)
    assert datasets.load_dataset(d, 500, progress=False).fingerprint() == \
        datasets.load_dataset(name, 500, progress=False).fingerprint()


def test_a_file_of_your_own_named_like_a_maze_is_not_a_maze(tmp_path, monkeypatch):
    # before: the name's prefix made it one (pointmaze-...: the maze's IQL settings, 10%BC by whole trajectories)
    from minirl.data import FIELDS
    monkeypatch.chdir(tmp_path)
    ds = datasets.load_dataset("pendulum-random", 1000, progress=False)
    np.savez("pointmaze-mine.npz", **{k: getattr(ds, k) for k in FIELDS})
    plan = runs.plan_run("iql", "pointmaze-mine.npz", env="Pendulum-v1", scale="smoke", out=tmp_path / "run")
    assert (plan.config.expectile, plan.config.beta, plan.config.reward_scale) == (0.7, 3.0, "return_range")
    assert plan.named is None
