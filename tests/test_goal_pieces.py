"""maze.goal_pieces, the data of the maze's imitation controls (goal-BC, path-BC): which rows each keeps."""
import numpy as np
import pytest

from minirl import maze, runs
from minirl.config import UserError
from minirl.data import OfflineDataset

NAME = "pointmaze-medium-stitch-singletask-task1"   # start cell (1, 1), goal cell (6, 6)


def dataset(cells_per_episode, reaches):
    """One D4RL episode per entry: the point at each listed cell's centre, ending at the goal (terminal) or not
    (timeout)."""
    lay = maze.layout("medium")
    obs, term, tout, traj = [], [], [], []
    for k, (cells, reached) in enumerate(zip(cells_per_episode, reaches)):
        xy = lay.center(np.array(cells))
        obs.append(xy)
        end = np.zeros(len(cells), bool)
        end[-1] = True
        term.append(end & reached)
        tout.append(end & (not reached))
        traj.append(np.full(len(cells), k))
    o = np.concatenate(obs).astype(np.float32)
    n = len(o)
    return OfflineDataset(observations=o, actions=np.zeros((n, 2), np.float32), rewards=-np.ones(n, np.float32),
                          next_observations=o, terminals=np.concatenate(term), timeouts=np.concatenate(tout),
                          infos={"trajectory": np.concatenate(traj).astype(np.int32)}, action_low=-1, action_high=1)


EPISODES = [
    [(1, 1), (1, 2), (1, 1), (2, 1), (3, 1), (6, 6)],   # leaves the start cell, comes back, then reaches the goal
    [(4, 4), (5, 6), (6, 6)],                           # reaches the goal from elsewhere
    [(1, 1), (2, 1), (3, 1)],                           # never reaches it: a timeout
]


def test_reach_keeps_the_episodes_that_end_at_the_goal_and_from_start_their_part_after_the_last_visit():
    ds = dataset(EPISODES, [True, True, False])
    reach = maze.goal_pieces(ds, NAME)
    assert len(reach) == 6 + 3 and reach.terminals.sum() == 2 and not reach.timeouts.any()
    path = maze.goal_pieces(ds, NAME, from_start_cell=True)
    lay = maze.layout("medium")
    # the piece from the start cell's last visit: (1, 1), (2, 1), (3, 1), (6, 6); the other episode never visits it
    np.testing.assert_array_equal(lay.cell(path.observations), [(1, 1), (2, 1), (3, 1), (6, 6)])
    assert path.terminals.tolist() == [False, False, False, True]
    np.testing.assert_array_equal(path.infos["trajectory"], [0, 0, 0, 0])


def test_no_piece_is_an_error_that_says_which_task_and_cells():
    ds = dataset(EPISODES[1:], [True, False])
    with pytest.raises(ValueError, match=r"no piece of the data runs from the task's start cell to the goal of task 1 "
                                         r"\(start cell \(1, 1\), goal cell \(6, 6\)\)"):
        maze.goal_pieces(ds, NAME, from_start_cell=True)
    with pytest.raises(ValueError, match="no piece of the data runs to the goal"):
        maze.goal_pieces(dataset(EPISODES[2:], [False]), NAME)


def test_the_controls_need_a_maze_and_are_one_filter():
    with pytest.raises(UserError, match="needs a maze dataset"):
        runs.plan_run("goal-bc", "hopper-medium-replay", scale="smoke", out="/tmp/never-made")
    assert runs.make_config("path-bc", {}).goal_pieces == "from_start"
    with pytest.raises(ValueError, match="two filters"):
        runs.make_config("goal-bc", {"top_fraction": 0.1})
