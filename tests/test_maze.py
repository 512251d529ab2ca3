"""OGBench's PointMaze datasets made by minirl.maze: checked against OGBench's own environment, oracle and loader."""
import numpy as np
import ogbench  # a test dependency: OGBench's environments, oracle and loader are the reference
import pytest

from minirl import datasets, maze
from minirl.data import OfflineDataset
from minirl.evaluation import success_rate

MEDIUM = "pointmaze-medium-stitch-singletask-task1"


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def stitch():
    return maze.trajectories("medium", "stitch", 40)


def test_names_and_one_line_errors():
    names = datasets.dataset_names()
    assert MEDIUM in names and "pointmaze-large-navigate-singletask-task5" in names
    assert len(maze.dataset_names()) == 2 * 2 * 5
    task, tier = datasets.parse_name("pointmaze-large-navigate-singletask-task4")
    assert tier == "navigate" and task.name == "pointmaze-large-singletask-task4"
    assert task.env_id == "pointmaze-large-singletask-task4-v0" and task.ref_random == -1000.0
    assert datasets.get_task(task.name) == task  # the task's own name resolves too (normalized_score(task.name, ...))
    assert datasets.full_size(MEDIUM) == 1_000_000 == datasets.full_size("pointmaze-medium-navigate-singletask-task1")
    bad = {"pointmaze-small-stitch-singletask-task1": "unknown maze 'small'.*one of medium, large",
           "pointmaze-medium-explore-singletask-task1": "unknown dataset type 'explore'.*one of stitch, navigate",
           "pointmaze-medium-stitch-singletask-task6": "unknown task 'task6'.*task1 to task5",
           "pointmaze-medium-stitch-task1": "not of the form pointmaze-<maze>-<stitch|navigate>-singletask-task"}
    for name, message in bad.items():
        with pytest.raises(ValueError, match=message) as e:
            datasets.parse_name(name)
        assert "\n" not in str(e.value)


def test_layout_and_waypoints_are_ogbenchs():
    """Cells, centres and the breadth-first waypoint agree with OGBench's xy_to_ij, ij_to_xy and
    get_oracle_subgoal from a point in every cell towards every goal cell, in both mazes."""
    rng = np.random.default_rng(0)
    for name in maze.MAZES:
        lay, env = maze.layout(name), maze.data_env(name)
        assert lay.tasks == tuple((t["init_ij"], t["goal_ij"]) for t in env.task_infos)
        assert lay.goal_tol == 1.0 and lay.unit == 4.0
        for c in lay.open_cells:
            assert np.array_equal(lay.center(c), env.ij_to_xy(c))
            xy = lay.center(c) + rng.uniform(-1.9, 1.9, 2)
            assert tuple(lay.cell(xy)) == env.xy_to_ij(xy)
            for g in lay.open_cells:
                sub, _ = env.get_oracle_subgoal(xy, lay.center(g))
                assert np.array_equal(lay.center(lay.next_cell[g][c]), sub), (name, c, g)


def test_trajectories_are_deterministic_and_a_prefix(stitch):
    again = maze.trajectories("medium", "stitch", 40)
    fewer = maze.trajectories("medium", "stitch", 7)
    assert maze.fingerprint(again) == maze.fingerprint(stitch)
    assert np.array_equal(fewer["observations"], stitch["observations"][:7])
    other = maze.trajectories("medium", "stitch", 7, seed=99)
    assert not np.array_equal(other["observations"], fewer["observations"])
    assert stitch["observations"].shape == (40, 201, 2) and stitch["actions"].shape == (40, 200, 2)
    assert np.abs(stitch["actions"]).max() <= 1.0
    state = np.random.get_state()[1].copy()
    maze.trajectories("medium", "navigate", 1)
    assert np.array_equal(np.random.get_state()[1], state)  # the caller's global numpy stream is untouched


def test_the_transitions_are_the_environments(stitch):
    """Every recorded next position is what OGBench's point does from the recorded position with the recorded
    action (up to float32 storage)."""
    env = maze.data_env("medium")
    env.reset(options={"task_info": {"init_ij": (1, 1), "goal_ij": (6, 6)}})
    obs, act = stitch["observations"], stitch["actions"]
    for e in range(0, 40, 7):
        for t in range(0, 200, 13):
            env.set_xy(obs[e, t].astype(np.float64))
            nxt = env.step(act[e, t].astype(np.float64))[0]
            assert np.allclose(nxt, obs[e, t + 1], atol=1e-4)


def test_stitch_trajectories_are_short_segments(stitch):
    """Each stitch trajectory ends within 4 cells of its start (its goal is exactly 4 away) and never strays
    more than one cell beyond; no trajectory goes from a task's start to its goal, and none that reaches a goal
    started more than 4 cells from it."""
    lay = maze.layout("medium")
    cells = lay.cell(stitch["observations"])
    starts = cells[:, 0]
    spread = [lay.distance[tuple(s)][c[:, 0], c[:, 1]].max() for s, c in zip(starts, cells)]
    end = [lay.distance[tuple(s)][tuple(c[-1])] for s, c in zip(starts, cells)]
    assert max(end) <= 4 and max(spread) <= 5
    assert np.mean(np.array(end) == 4) > 0.8  # most reach their goal cell in 200 steps
    for row in maze.coverage(stitch):
        assert row["start_to_goal"] == 0
        assert row["max_start_cells"] is None or row["max_start_cells"] <= 4 < row["task_cells"]


def test_navigate_trajectories_are_long_and_redraw_goals():
    nav = maze.trajectories("medium", "navigate", 2)
    lay = maze.layout("medium")
    assert nav["observations"].shape == (2, 1001, 2)
    cells = lay.cell(nav["observations"])
    visited = {tuple(c) for c in cells.reshape(-1, 2)}
    assert len(visited) > 10  # successive goals take each trajectory across much of the maze


def test_singletask_rewards_are_ogbenchs_relabelling(stitch, tmp_path):
    """minirl's D4RL dict against OGBench's own loader, make_env_and_datasets(...-singletask-taskK-v0) reading the
    same trajectories in OGBench's file layout: the same observations, next observations, actions, rewards,
    masks (1 - terminals) and trajectory ends (terminals or timeouts), for all five tasks."""
    path = tmp_path / "pointmaze-medium-stitch-v0.npz"
    arrays = maze.to_ogbench(stitch)
    np.savez(path, **arrays)
    np.savez(tmp_path / "pointmaze-medium-stitch-v0-val.npz", **arrays)
    for k in maze.TASK_IDS:
        name = f"pointmaze-medium-stitch-singletask-task{k}"
        _, theirs, _ = ogbench.make_env_and_datasets(f"pointmaze-medium-stitch-singletask-task{k}-v0",
                                                     dataset_path=str(path))
        ours = maze.singletask(stitch, k)
        for key in ("observations", "next_observations", "actions", "rewards"):
            assert np.array_equal(ours[key], theirs[key]), (name, key)
        assert np.array_equal(~ours["terminals"], theirs["masks"].astype(bool))
        ends = np.zeros(len(ours["rewards"]), dtype=bool)
        ends[199::200] = True  # OGBench's terminals mark trajectory ends; ours are timeouts unless at the goal
        assert np.array_equal(theirs["terminals"].astype(bool), ends)
        assert np.array_equal(ours["timeouts"], ends & ~ours["terminals"])
    assert sum(maze.singletask(stitch, k)["terminals"].sum() for k in maze.TASK_IDS) > 0  # some goals are in it


def test_singletask_rewards_are_the_environments(stitch):
    """The reward and termination of OGBench's singletask environment, stepped from the dataset's states with the
    dataset's actions, are the dataset's rewards and terminals (success judged before the action, 'pre')."""
    for k in maze.TASK_IDS:
        d = maze.singletask(stitch, k)
        env = maze.task_env(f"pointmaze-medium-singletask-task{k}-v0").unwrapped
        env.reset(seed=0)
        rows = np.concatenate([np.flatnonzero(d["terminals"])[:30], np.arange(0, len(d["rewards"]), 97)])
        for i in rows:
            env.set_xy(d["observations"][i].astype(np.float64))
            _, r, terminated, _, _ = env.step(d["actions"][i].astype(np.float64))
            assert r == d["rewards"][i] and terminated == d["terminals"][i], (k, i)


def test_the_registered_dataset_is_valid_cached_and_a_prefix(data_dir):
    ds = datasets.load_dataset(MEDIUM, 900, progress=False)
    assert isinstance(ds, OfflineDataset) and len(ds) == 900 and (ds.obs_dim, ds.act_dim) == (2, 2)
    assert ds.action_low.tolist() == [-1.0, -1.0] and ds.timeouts[199] and ds.timeouts[-1]
    assert set(np.unique(ds.rewards)) <= {-1.0, 0.0} and np.array_equal(ds.rewards == 0, ds.terminals)
    assert datasets.cache_path(MEDIUM, 900).exists()
    small = datasets.make_dataset(MEDIUM, 450, progress=False)
    assert np.array_equal(small.observations, ds.observations[:450]) and small.timeouts[-1]
    task3 = datasets.make_dataset("pointmaze-medium-stitch-singletask-task3", 900, progress=False)
    assert np.array_equal(task3.observations, ds.observations)  # one set of trajectories, five relabellings
    assert datasets.recipe_key(MEDIUM) == maze.dataset_key("medium", "stitch") != maze.recipe_key("medium", "stitch")
    assert ds.infos["trajectory"].tolist() == [i // 200 for i in range(900)]
    assert datasets.recipe_key("pointmaze-medium-navigate-singletask-task1") != datasets.recipe_key(MEDIUM)


def test_full_trajectories_are_cached_once_for_the_five_tasks(data_dir, monkeypatch):
    monkeypatch.setitem(maze.TRAJECTORIES, "stitch", 6)
    datasets.get_task.cache_clear()
    try:
        with pytest.warns(UserWarning, match="differ from those recorded in minirl.maze.CHECKSUMS"):
            full = datasets.make_dataset(MEDIUM, progress=False)  # 6 "full" trajectories: not the recorded set
        assert len(full) == 1200 and len(list(data_dir.glob("pointmaze-medium-stitch-trajectories-e6-*.npz"))) == 1

        def no_generation(*args, **kwargs):
            raise AssertionError("the cached trajectories should have been used")

        monkeypatch.setattr(maze, "trajectories", no_generation)
        other = datasets.make_dataset("pointmaze-medium-stitch-singletask-task5", progress=False)
        part = datasets.make_dataset("pointmaze-medium-stitch-singletask-task5", 500, progress=False)
        assert np.array_equal(other.observations, full.observations) and len(part) == 500
        assert np.array_equal(part.next_observations, full.next_observations[:500])
    finally:
        datasets.get_task.cache_clear()


def test_cli_lists_makes_and_describes_a_maze_dataset(capsys):
    from minirl.cli import main
    assert main(["dataset", "make", MEDIUM, "--size", "400"]) == 0
    assert main(["dataset", "info", MEDIUM, "--size", "400"]) == 0
    assert main(["dataset", "list", "--size", "400"]) == 0
    out = capsys.readouterr().out
    assert '"recipe"' in out and '"coverage"' in out and '"task_cells": 10' in out and '"episodes": 2,' in out
    assert any(line.startswith(MEDIUM) and line.endswith("cached") for line in out.splitlines())


def test_best_trajectories_are_whole_trajectories_by_return(stitch):
    """10%BC's data: whole trajectories ranked by their return for the task, not D4RL's episodes, which the goal's
    terminals cut into single steps at the goal."""
    k = max(maze.TASK_IDS, key=lambda t: maze.singletask(stitch, t)["terminals"].sum())  # the task most reached
    ds = OfflineDataset(**maze.singletask(stitch, k), action_low=-1.0, action_high=1.0)
    returns = np.add.reduceat(ds.rewards.astype(np.float64), np.arange(0, len(ds), 200))
    best = maze.best_trajectories(ds, 0.1)
    assert len(best) == 4 * 200 and sorted(set(best.infos["trajectory"])) == sorted(np.argsort(returns,
                                                                                               kind="stable")[-4:])
    assert best.rewards.sum() == np.sort(returns)[-4:].sum() and best.terminals.sum() == ds.terminals[
        np.isin(ds.infos["trajectory"], best.infos["trajectory"])].sum()
    pieces = ds.best_episodes(0.1)
    assert pieces.episode_returns().max() == 0  # what best_episodes would pick: steps at the goal
    stats = maze.trajectory_stats(ds)
    assert stats["episodes"] == 40 and stats["return_max"] == returns.max() and stats["transitions"] == 8000
    with pytest.raises(ValueError, match="needs a maze dataset"):
        maze.best_trajectories(OfflineDataset(**{key: v for key, v in maze.singletask(stitch, k).items()
                                                 if key != "infos"}))


def test_success_rate_runs_ogbenchs_singletask_environment():
    name = "pointmaze-medium-stitch-singletask-task3"
    expert = success_rate(maze.oracle(name), name, episodes=6, seed=3)
    again = success_rate(maze.oracle(name), name, episodes=6, seed=3)
    assert expert["success_rate"] == 1.0 and np.array_equal(expert["returns"], again["returns"])
    # -1 per step before the goal, 0 on the step taken at the goal, which ends the episode
    assert np.array_equal(expert["returns"], -(expert["lengths"] - 1.0))
    assert expert["env_id"] == "pointmaze-medium-singletask-task3-v0"

    class Still:
        def act(self, obs, deterministic=True):
            assert deterministic and obs.shape == (2, 2) and obs.dtype == np.float32
            return np.zeros((len(obs), 2))

    still = success_rate(Still(), name, episodes=2, seed=0)
    assert still["success_rate"] == 0.0 and still["returns"].tolist() == [-1000.0, -1000.0]
    assert still["lengths"].tolist() == [1000, 1000]
    with pytest.raises(ValueError, match="unknown task 'task9'"):
        success_rate(Still(), "pointmaze-medium-singletask-task9")


def test_oracle_reference_return_is_the_recorded_one():
    name = "pointmaze-medium-singletask-task3"
    measured = success_rate(maze.oracle(name), name, episodes=maze.EVAL_EPISODES, seed=0)
    assert measured["success_rate"] == 1.0
    assert measured["returns"].mean() == pytest.approx(maze.ORACLE_RETURNS[("medium", 3)], abs=1e-9)
    assert set(maze.ORACLE_RETURNS) == {(m, k) for m in maze.MAZES for k in maze.TASK_IDS}
    task = datasets.get_task("pointmaze-medium-stitch-singletask-task3")
    assert datasets.normalized_score(task, [-1000.0, task.ref_expert]).tolist() == [0.0, 100.0]


def test_a_maze_run_is_loaded_back_with_its_environment(tmp_path):
    """load_agent rebuilds a maze run's agent (its sizes from OGBench's single-task environment, which the plain
    gymnasium registry does not have), here IQL with the paper's AntMaze settings and LayerNorm."""
    from minirl import runs
    out = tmp_path / "run"
    runs.run("iql", MEDIUM, scale="smoke", steps=20, out=out, evaluate=False, progress=False,
             overrides={"expectile": 0.9, "beta": 10.0, "reward_scale": None, "layer_norm": True})
    loaded = runs.load_agent(out)
    assert loaded.env_id == "pointmaze-medium-singletask-task1-v0" and loaded.step == 20
    assert loaded.config.layer_norm and loaded.config.reward_scale is None
    assert loaded.act(np.zeros((3, 2), np.float32)).shape == (3, 2)


def test_iql_takes_the_papers_maze_settings_on_a_maze_and_the_user_has_the_last_word():
    from minirl import runs
    maze_cfg = runs.plan_run("iql", MEDIUM, scale="smoke").config
    assert (maze_cfg.expectile, maze_cfg.beta, maze_cfg.reward_scale) == (0.9, 10.0, None)
    mine = runs.plan_run("iql", MEDIUM, scale="smoke", overrides={"expectile": 0.5}).config
    assert (mine.expectile, mine.beta) == (0.5, 10.0)
    hopper = runs.plan_run("iql", "hopper-medium-replay", scale="smoke").config
    assert (hopper.expectile, hopper.beta, hopper.reward_scale) == (0.7, 3.0, "return_range")
    assert runs.domain_config("bc", MEDIUM) == {}


def test_cql_takes_corl_s_antmaze_settings_on_a_maze():
    """CORL's and Cal-QL's AntMaze CQL: Lagrange with threshold 0.8, alpha 5, the max-target backup, and OGBench's -1/0
    reward centred at zero as +-5 (their 10 r - 5 on D4RL's 0/1)."""
    from minirl import runs
    for algo in ("cql", "cql-lagrange"):
        cfg = runs.plan_run(algo, MEDIUM, scale="smoke").config
        assert (cfg.lagrange, cfg.cql_alpha, cfg.target_action_gap, cfg.max_target_backup) == (True, 5.0, 0.8, True)
        assert [cfg.reward_multiplier * r + cfg.reward_bias for r in (-1.0, 0.0)] == [-5.0, 5.0]
    hopper = runs.plan_run("cql", "hopper-medium-replay", scale="smoke").config
    assert (hopper.lagrange, hopper.reward_multiplier, hopper.reward_bias) == (False, 1.0, 0.0)


@pytest.mark.parametrize("precision, noted", [("bf16", True), ("float32", False)])
def test_cql_lagrange_in_bf16_says_what_rounding_does_to_its_gap(tmp_path, capsys, precision, noted):
    """bfloat16 rounding in the critics' hidden layers raised the gap of CQL-Lagrange on the stitch maze by 0.7-0.8
    (experiments/cql_gap.py), about its 0.8 target: a run in bf16 says so at its start, one in float32 does not."""
    from minirl import runs
    runs.run("cql", MEDIUM, scale="smoke", steps=2, out=tmp_path / precision, evaluate=False, progress=False,
             precision=precision)
    assert ("note: CQL-Lagrange in bf16" in capsys.readouterr().out) is noted
