"""experiments/maze_extraction.py: a fresh actor trained against a run's fixed V and critics, and its table."""
import json
from dataclasses import asdict

import numpy as np
import pytest
import torch

import maze_extraction

from minirl import datasets, runs
from minirl.iql import IQL, IQLConfig

MEDIUM = "pointmaze-medium-stitch-singletask-task1"


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    datasets.get_task.cache_clear()
    yield
    datasets.get_task.cache_clear()


def a_trained_run(data):
    """What runs.load_agent gives back for a (barely) trained IQL run with LayerNorm on the maze's own rewards."""
    cfg = IQLConfig(hidden=(16, 16), layer_norm=True, reward_scale=None, expectile=0.9, beta=10.0, max_steps=5)
    torch.manual_seed(1)
    agent = IQL(data.observations.shape[1], data.actions.shape[1], -1.0, 1.0, cfg)
    norm = data.state_normalizer()
    g = torch.Generator().manual_seed(0)
    prepared = data.transformed(state=norm)
    for _ in range(5):
        agent.update(prepared.sample(32, generator=g))
    settings = {"algo": "iql", "dataset": MEDIUM, "seed": 0, "config": asdict(cfg)}
    task, _ = datasets.parse_name(MEDIUM)
    return runs.LoadedAgent(agent, cfg, settings, 5, task.env_id, task.name, norm)


@pytest.mark.parametrize("setting", ["ddpg_bc", "awr_beta100"])
def test_extraction_trains_a_new_actor_on_the_runs_fixed_critics(setting):
    data = datasets.make_dataset(MEDIUM, 400, progress=False)
    loaded = a_trained_run(data)
    before = {k: v.clone() for part in ("critic_target", "value") for k, v in
              getattr(loaded.agent, part).state_dict().items()}
    res = maze_extraction.extract_loaded(loaded, data, setting, steps=20, eval_every=10, precision="float32",
                                         episodes=2)
    agent = res["agent"]
    assert [e["step"] for e in res["evals"]] == [10, 20] and res["episodes"] == 2
    assert agent.cfg.extraction == maze_extraction.SETTINGS[setting]["extraction"]
    assert agent.cfg.layer_norm and agent.cfg.max_steps == 20  # the run's fields, the extraction's on top
    for part in ("critic_target", "value"):  # the copies were never updated, and the run's own are untouched
        for k, v in getattr(agent, part).state_dict().items():
            assert torch.equal(v, before[k]), (part, k)
        for k, v in getattr(loaded.agent, part).state_dict().items():
            assert torch.equal(v, before[k]), (part, k)
    actor_kind = "DeterministicActor" if setting == "ddpg_bc" else "GaussianActor"
    assert type(agent.actor).__name__ == actor_kind and agent.actor is not loaded.agent.actor  # a fresh actor
    assert all(int(agent.actor_opt.state[p]["step"]) == 20 for p in agent.actor.parameters())  # 20 actor steps
    assert not agent.critic_opt.state and not agent.value_opt.state  # and no step of the others
    assert len(res["failure_ends"]) == round(2 * (1 - res["final_success_rate"]))


def test_summary_means_and_intervals_over_seeds(tmp_path):
    for seed, (final, rest) in enumerate([(1.0, 0.5), (0.0, 0.5), (0.5, 0.5)]):
        evals = [{"step": 5000 * (i + 1), "success_rate": rest} for i in range(5)] + [{"step": 30000,
                                                                                      "success_rate": final}]
        path = tmp_path / "ddpg_bc" / f"s{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"setting": "ddpg_bc", "actor_steps": 30000, "evals": evals,
                                    "failure_end_cells": [[1, 1]] if final < 1 else []}))
    table = maze_extraction.summary(tmp_path).splitlines()
    assert table[2].startswith("| ddpg_bc | 3 | 30,000 | 50.0 [")
    last5 = np.mean([np.mean([0.5] * 4 + [f]) for f in (1.0, 0.0, 0.5)]) * 100
    assert f"| {last5:.1f} [" in table[2] and table[2].endswith("| (1, 1) |")


def test_bad_arguments_fail_with_one_line(capsys):
    with pytest.raises(SystemExit):
        maze_extraction.main(["--default", "--steps", "0"])
    assert "--steps must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        maze_extraction.main([])
    assert "name RUN_DIRs or --default" in capsys.readouterr().err
