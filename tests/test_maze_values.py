"""experiments/maze_values.py: where it reads values from an agent without a V (CQL), and the reference curve in the
units the agent was trained on."""
import math
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
import maze_values  # noqa: E402


def test_iql_is_read_through_its_own_v():
    from minirl.iql import IQL, IQLConfig
    torch.manual_seed(0)
    agent = IQL(2, 2, config=IQLConfig(hidden=(16, 16)))
    obs = np.random.default_rng(0).normal(size=(7, 2)).astype(np.float32)
    expected = agent.V(torch.as_tensor(obs)).detach().numpy()
    np.testing.assert_allclose(maze_values.state_values(agent, obs), expected, rtol=0, atol=1e-6)


def test_cql_is_read_through_the_smaller_critic_at_its_greedy_action():
    from minirl.cql import CQL, CQLConfig
    torch.manual_seed(0)
    agent = CQL(2, 2, config=CQLConfig(actor_hidden=(16, 16), critic_hidden=(16, 16)))
    obs = np.random.default_rng(1).normal(size=(9, 2)).astype(np.float32)
    o = torch.as_tensor(obs)
    with torch.no_grad():
        a = agent.actor.to_env(torch.tanh(agent.actor.mean_std(o)[0]))  # the tanh of the Gaussian's mean
        q1, q2 = agent.critic(o, a)
    got = maze_values.state_values(agent, obs)
    np.testing.assert_allclose(got, torch.minimum(q1, q2).numpy(), rtol=0, atol=1e-6)
    assert not np.allclose(q1.numpy(), q2.numpy())  # two different critics, so taking the smaller one is tested


@pytest.mark.parametrize("steps", [1, 40, 150])
def test_the_reference_is_the_discounted_sum_of_the_rewards_as_trained(steps):
    gamma = 0.99
    raw = -(1 - gamma ** steps) / (1 - gamma)
    assert maze_values.reference_value(steps, gamma, {}) == pytest.approx(raw)
    # CQL's maze rewards: 10 r + 5 on each of the same steps, r = -1
    by_sum = sum(gamma ** t * (10 * -1 + 5) for t in range(steps))
    assert maze_values.reference_value(steps, gamma, {"reward_multiplier": 10.0, "reward_bias": 5.0}) == \
        pytest.approx(by_sum)
    assert math.isclose(by_sum, 10 * raw + 5 * (1 - gamma ** steps) / (1 - gamma))


def test_only_needs_runs(capsys):
    with pytest.raises(SystemExit):
        maze_values.main(["report", "--only"])
    assert "--only needs --with" in capsys.readouterr().err


def test_a_panel_names_the_extraction_when_it_is_ddpg_bc():
    r = {"setting": "iql-x", "algo": "iql", "config": {"layer_norm": True, "extraction": "ddpg_bc", "alpha": 0.0005}}
    assert maze_values.title(r) == "maze settings + LayerNorm, DDPG+BC alpha 0.0005"
    r["config"] = {"layer_norm": True, "extraction": "awr"}
    assert maze_values.title(r) == "maze settings + LayerNorm"
    assert maze_values.title({"setting": "paper", "config": {}}) == TITLE_PAPER


TITLE_PAPER = "the paper's maze settings"


def test_reach_share_counts_states_whose_own_trajectory_reaches_the_goal_later():
    # two trajectories over cells A = (1, 1) and B = (1, 2); the goal (a terminal row) is reached once, in
    # trajectory 0 at row 2, so its rows 0-2 reach it and its row 3 (after the goal) and all of trajectory 1 do not
    cells = np.array([(1, 1), (1, 2), (1, 2), (1, 1), (1, 1), (1, 2), (1, 2)])
    trajectory = np.array([0, 0, 0, 0, 1, 1, 1])
    terminals = np.array([False, False, True, False, False, False, False])
    got = maze_values.reach_share(cells, trajectory, terminals, [(1, 1), (1, 2)])
    assert got == [pytest.approx(1 / 3), pytest.approx(2 / 4)]
    # a trajectory that never reaches the goal contributes nothing, however its rows are ordered
    assert maze_values.reach_share(cells, trajectory, np.zeros(7, bool), [(1, 1), (1, 2)]) == [0.0, 0.0]


DIAGNOSES = REPO / "results" / "stitching-diagnostics"


@pytest.mark.parametrize("folder, expectile", [("one-step", 0.5), ("expectile-0.7", 0.7)])
def test_low_expectile_iql_learns_the_value_of_never_arriving_where_no_trajectory_arrives(folder, expectile):
    """What book/stitching.md reads from the committed controls (IQL at expectile 0.5, one step, and 0.7, the sweep's
    middle, on stitch task 1, three seeds each): the data's trajectories reach the goal from none of the path's first
    six cells and from under 5% of the states one cell from it; V is within 2.5 of -1 / (1 - gamma) = -100, never
    arriving, in every cell of the path but the goal; and the policy reaches the goal in no evaluation."""
    import json
    runs = json.loads((DIAGNOSES / folder / "values.json").read_text())
    assert sorted(r["seed"] for r in runs) == [0, 1, 2]
    for r in runs:
        assert r["config"]["expectile"] == expectile and r["steps"] == 300_000 and tuple(r["goal"]) == (6, 6)
        reach = r["data_reach_path"]
        assert reach[:6] == [0.0] * 6 and 0 < reach[-2] < 0.05, reach
        never = -1 / (1 - r["config"]["gamma"])
        assert all(abs(v - never) < 2.5 for v in r["v_path"][:-1]), r["v_path"]
        assert set(r["success"].values()) == {0.0}
