"""experiments/maze_advantages.py: the path it measures along (maze.Layout.path) and the advantage-weighted mean."""

import numpy as np
import pytest

import maze_advantages

from minirl import maze


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


def test_hovering_measures_the_share_at_the_centre_and_ddpg_bc_s_two_pulls_there():
    import torch

    from minirl.iql import IQL, IQLConfig, value_target
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(200, 2)).astype(np.float32)
    act = rng.uniform(-1, 1, size=(200, 2)).astype(np.float32)
    offset = np.r_[np.full(150, 0.1), np.full(50, 1.5)]  # 150 of 200 rows within HOVER of the centre
    direction = np.array([1.0, 0.0])
    plain = maze_advantages.hovering(None, None, obs, act, offset, direction, None, None)
    assert plain["hover_share"] == pytest.approx(0.75)
    assert plain["hover_mean_action"] == pytest.approx(np.linalg.norm(act[:150].mean(0)), rel=1e-6)
    assert "critic_push" not in plain  # an AWR run: no DDPG+BC pulls
    torch.manual_seed(0)
    agent = IQL(2, 2, -1.0, 1.0, IQLConfig(hidden=(16, 16), extraction="ddpg_bc", actor="deterministic"))
    alpha, scale = 0.0015, 3.0
    out = maze_advantages.hovering(agent, None, obs, act, offset, direction, alpha, scale)
    near = torch.as_tensor(obs[:150])
    with torch.no_grad():
        pi = agent.actor(near, True)

    def q(a):
        with torch.no_grad():
            return value_target(agent.critic_target(near, a)).numpy()
    eps = 1e-3  # the push by central differences of min_i Q_i along each action axis, over the batch's scale
    push = np.array([((q(pi + eps * e) - q(pi - eps * e)) / (2 * eps)).mean() for e in torch.eye(2)]) / scale
    assert out["critic_push"] == pytest.approx(np.linalg.norm(push), rel=1e-2)
    pull = (2 * alpha * (act[:150] - pi.numpy())).mean(0)
    assert out["data_pull"] == pytest.approx(np.linalg.norm(pull), rel=1e-5)
    assert out["data_pull_cos"] == pytest.approx(maze_advantages.cosine(pull, direction), abs=1e-5)


def test_the_committed_ddpg_bc_diagnosis_says_what_the_lab_page_reads():
    import json
    runs = json.loads((maze_advantages.OUT.parent / "advantages-ddpg-bc.json").read_text())
    task2 = [r for r in runs if r["dataset"].endswith("task2")]
    assert [r["seed"] for r in task2] == [0, 1, 2]
    for r in runs:
        assert all(0.45 < c["hover_share"] < 0.8 and c["hover_mean_action"] < 0.1 for c in r["cells"])
    for r in task2:
        start, last = r["cells"][0], r["cells"][-1]
        assert start["cells_to_goal"] == 10 and last["cells_to_goal"] == 1
        assert 0.8 < start["critic_push"] / start["data_pull"] < 1.3  # equal at the start ...
        assert last["critic_push"] / last["data_pull"] > 9  # ... about ten times the pull next to the goal
        assert r["failure_end_cells"] and all(tuple(c) in {(6, 1), (5, 1)} for c in r["failure_end_cells"])


def to_wall(lay, xy: np.ndarray) -> np.ndarray:
    """Each point's distance to the nearest wall cell (a square of side ``lay.unit``)."""
    walls = lay.center(np.argwhere(lay.walls == 1))
    gap = np.maximum(np.abs(xy[:, None, :] - walls[None]) - lay.unit / 2, 0)
    return np.linalg.norm(gap, axis=-1).min(1)


def test_the_committed_task_3_diagnosis_says_what_the_chapter_reads():
    """Stitch task 3's goal is behind a wall: every failed episode ends against a wall with the goal straight behind
    it, where the data hardly goes and V is extrapolated high; seed 0's critics push against the path in the start cell
    only, and DDPG+BC's push is 6-300 times the pull."""
    import json
    runs = json.loads((maze_advantages.OUT.parent / "task3" / "advantages.json").read_text())
    lay = maze.layout("medium")
    goal = lay.goal_xy(3)
    assert [r["seed"] for r in runs] == [0, 1, 2]
    assert [r["success_rate"] for r in runs] == [0.0, 0.52, 0.0]
    assert {tuple(f["cell"]) for f in runs[0]["cell_fields"]} == set(lay.open_cells)
    for r in runs:
        ends = np.array(r["failure_ends"])
        assert len(ends) == round(r["episodes"] * (1 - r["success_rate"]))
        for end in ends:
            line = end + np.linspace(0, 1, 2001)[:, None] * (goal - end)
            assert to_wall(lay, line).min() < 0.01  # the straight way to the goal meets a wall (or its corner) ...
            assert to_wall(lay, end[None])[0] < 0.7  # ... and the episode ends against it
        ratios = [c["critic_push"] / c["data_pull"] for c in r["cells"]]
        assert 6 < min(ratios) and max(ratios) < 300
        # where they end the data hardly goes, and V there is far above V at the start (seed 2: above the goal's 0)
        assert r["data_near_failure_ends"] < 0.001 * r["data_near_start_centre"]
        start_v = next(v["value"] for v in r["value_at_cell_centres"] if v["cell"] == r["start_cell"])
        assert r["value_at_failure_ends"] > start_v + 25
    assert runs[2]["value_at_failure_ends"] > 20
    cos = [c["critic_push_cos"] for c in runs[0]["cells"]]
    assert cos[0] < -0.85 and min(cos[1:]) > 0.65


def test_the_committed_task_4_diagnosis_says_what_the_book_reads():
    """Stitch task 4 (the goal in the start's row, a wall cell between them): the prediction written from task 3 holds
    in every seed of the tanh actor, whose output is saturated over the start cell; the clipped actor, on the same three
    seeds, is not saturated and reaches the goal in every episode."""
    import json
    folder = maze_advantages.OUT.parent / "task4"
    runs = json.loads((folder / "advantages.json").read_text())
    lay = maze.layout("medium")
    goal = lay.goal_xy(4)
    assert [r["seed"] for r in runs] == [0, 1, 2]
    for r in runs:
        assert r["success_rate"] == 0.0 and r["actor_squash"] == "tanh"
        ends = np.array(r["failure_ends"])
        assert len(ends) == r["episodes"] == 50
        for end in ends:
            line = end + np.linspace(0, 1, 2001)[:, None] * (goal - end)
            assert to_wall(lay, line).min() < 0.01 and to_wall(lay, end[None])[0] < 0.7
        assert r["data_near_failure_ends"] < 0.001 * r["data_near_start_centre"]
        start_v = next(v["value"] for v in r["value_at_cell_centres"] if v["cell"] == r["start_cell"])
        assert r["value_at_failure_ends"] > start_v
        assert r["field_pre_squash_abs"]["min"] > 15  # 1 - tanh^2 is 0 in float32: no gradient reaches the action
    clipped = json.loads((folder / "advantages-clip.json").read_text())
    assert [r["seed"] for r in clipped] == [0, 1, 2]
    for clip in clipped:
        assert clip["actor_squash"] == "clip" and clip["success_rate"] == 1.0
        assert clip["field_pre_squash_abs"]["median"] < 2
        assert min(c["policy_cos"] for c in clip["cells"]) > 0.65  # its action points along the path in every cell
