"""experiments/maze_advantages.py: the path it measures along (maze.Layout.path) and the advantage-weighted mean."""
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "experiments"))
import maze_advantages  # noqa: E402

from minirl import maze  # noqa: E402


def test_the_path_of_stitch_task_1_is_its_ten_cell_shortest_path():
    lay = maze.layout("medium")
    start, goal = lay.tasks[0]
    path = lay.path(start, goal)
    assert path[0] == tuple(start) and path[-1] == tuple(goal) and len(path) == 11  # 10 cells apart
    assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in zip(path, path[1:]))  # neighbours
    assert all(lay.walls[c] == 0 for c in path)
    assert [lay.distance[goal[0], goal[1], c[0], c[1]] for c in path] == list(range(10, -1, -1))


def test_the_weighted_mean_is_the_plain_mean_for_equal_advantages_and_the_best_action_for_a_large_beta():
    actions = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    assert maze_advantages.weighted_mean(actions, np.zeros(4), beta=10.0, max_weight=100.0) == pytest.approx([0, 0])
    adv = np.array([0.0, -0.5, 0.02, -0.1])
    # beta x spread of 0.2: the weights barely differ and the mean action is short
    short = maze_advantages.weighted_mean(actions, adv * 0.04, beta=10.0, max_weight=1e9)
    assert np.linalg.norm(short) < 0.05
    sharp = maze_advantages.weighted_mean(actions, adv, beta=1000.0, max_weight=1e30)
    assert sharp == pytest.approx([0.0, 1.0], abs=1e-6)  # the best action (advantage 0.02) alone
    clipped = maze_advantages.weighted_mean(actions, adv, beta=1000.0, max_weight=100.0)
    assert np.linalg.norm(clipped) < 1.0  # the clip at 100 keeps the others in


def test_the_committed_diagnosis_says_what_the_chapter_reads():
    import json
    runs = json.loads(maze_advantages.OUT.read_text())
    assert [r["seed"] for r in runs] == [0, 1, 2]
    for r in runs:
        spread = [c["beta_spread"] for c in r["cells"]]
        assert [c["cells_to_goal"] for c in r["cells"]] == list(range(10, 0, -1))
        assert spread[0] < 3 and spread[-1] > 40  # about 2 at the start, 50 to 60 next to the goal
        assert len(r["starts"]) == r["episodes"] == 50
