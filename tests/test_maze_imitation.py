"""experiments/maze_imitation.py: what it reads from the data's actions along a path."""
from types import SimpleNamespace

import numpy as np
import pytest

import maze_imitation

from minirl import maze


def _data(lay, cells_and_actions):
    obs = np.array([lay.center(np.array([c]))[0] for c, _ in cells_and_actions], dtype=np.float32)
    return SimpleNamespace(observations=obs, actions=np.array([a for _, a in cells_and_actions], dtype=np.float32))


def test_agreeing_actions_give_a_long_mean_along_the_way_and_opposed_ones_a_short_mean():
    lay = maze.layout("medium")
    start, goal = lay.tasks[0]
    route = lay.path(start, goal)
    first, second, third = route[0], route[1], route[2]
    way1 = lay.center(np.array([second]))[0] - lay.center(np.array([first]))[0]
    way1 = way1 / np.linalg.norm(way1)
    way2 = lay.center(np.array([third]))[0] - lay.center(np.array([second]))[0]
    way2 = way2 / np.linalg.norm(way2)
    side = np.array([-way2[1], way2[0]])  # at right angles to the way
    ds = _data(lay, [(first, way1), (first, way1), (first, way1),                 # all along the way
                     (second, way2), (second, -way2), (second, side), (second, -side)])  # every direction
    rows = maze_imitation.along_path(ds, lay, route)
    assert len(rows) == len(route) - 1                    # the goal cell has no next cell
    a, b = rows[0], rows[1]
    assert a["transitions"] == 3 and a["mean_action_length"] == pytest.approx(1.0)
    assert a["mean_action_cos"] == pytest.approx(1.0) and a["share_within_45deg"] == 1.0
    assert b["transitions"] == 4 and b["mean_action_length"] == pytest.approx(0.0, abs=1e-6)
    assert b["share_within_45deg"] == 0.25
    assert all(r["transitions"] == 0 and r["share_within_45deg"] == 0.0 for r in rows[2:])


def test_a_name_that_is_not_a_maze_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit):
        maze_imitation.main(["hopper-medium"])
    assert "datasets: 'hopper-medium' is not a maze dataset" in capsys.readouterr().err
