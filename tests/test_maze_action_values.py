"""experiments/maze_action_values.py: Q at the data's actions along a path, split by direction."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import maze_action_values

from minirl import maze


class _Critic:
    """Two critics, Q_1 = w . a and Q_2 = w . a + 1: the smaller is w . a."""
    def __init__(self, w):
        self.w = torch.as_tensor(w, dtype=torch.float32)

    def __call__(self, obs, act):
        q = act @ self.w
        return torch.stack([q, q + 1.0])


def test_a_critic_that_prefers_the_way_values_the_actions_toward_it_higher():
    lay = maze.layout("medium")
    start, goal = lay.tasks[0]
    route = lay.path(start, goal)
    here, there = route[0], route[1]
    way = lay.center(np.array([there]))[0] - lay.center(np.array([here]))[0]
    way = way / np.linalg.norm(way)
    centre = lay.center(np.array([here]))[0]
    acts = np.array([way, way, -way, [-way[1], way[0]]], dtype=np.float32)
    ds = SimpleNamespace(observations=np.repeat(centre[None], 4, 0).astype(np.float32), actions=acts)
    agent = SimpleNamespace(critic=_Critic(way), act=lambda obs, deterministic=True: np.repeat(-way[None], len(obs), 0))
    rows = maze_action_values.along_path(agent, lambda x: x, ds, lay, route)
    first = rows[0]
    assert first["transitions"] == 4 and first["toward"] == 2
    assert first["q_toward"] == pytest.approx(1.0) and first["q_other"] == pytest.approx(-0.5)
    assert first["q_data"] == pytest.approx(0.25)
    assert first["q_pi"] == pytest.approx(-1.0) and first["pi_cos"] == pytest.approx(-1.0)
    assert rows[1] == {"cell": list(route[1]), "transitions": 0}


def test_a_folder_that_is_not_a_run_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        maze_action_values.main([str(tmp_path)])
    err = capsys.readouterr().err
    assert "run:" in err and "has no config.json" in err
