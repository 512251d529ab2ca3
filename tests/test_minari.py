"""Minari in and out: exact round trips on minirl's own data and on episodes recorded from an environment."""
import gymnasium as gym
import numpy as np
import pytest

from minirl.data import FIELDS, OfflineDataset
from minirl.datasets import get_task, make_dataset

minari = pytest.importorskip("minari")
from minirl.minari_io import from_minari, minari_info, to_minari  # noqa: E402


@pytest.fixture(autouse=True)
def minari_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "cache"))


@pytest.mark.parametrize("name", ["hopper-medium", "pendulum-medium-replay"])
def test_round_trip_is_bit_exact(name):
    ds = make_dataset(name, 2500, progress=False)
    task = get_task(name)
    dataset_id = f"minirl/{task.name}/{name.split('-', 1)[1]}-v0"
    m = to_minari(ds, dataset_id, task.env_id, ref_min_score=task.ref_random, ref_max_score=task.ref_expert)
    assert m.total_steps == len(ds) and m.total_episodes == len(ds.episode_bounds())
    back = from_minari(dataset_id)  # by id, from local storage
    for k in FIELDS:
        assert np.array_equal(getattr(back, k), getattr(ds, k)) and getattr(back, k).dtype == getattr(ds, k).dtype
    assert np.array_equal(back.action_low, ds.action_low) and np.array_equal(back.action_high, ds.action_high)
    info = minari_info(dataset_id)
    assert info["env_id"] == task.env_id and info["ref_max_score"] == task.ref_expert
    # Minari's 0-1 score is minirl's 0-100 score / 100
    r = ds.episode_returns()
    assert np.allclose(minari.get_normalized_score(m, r) * 100, 100 * (r - task.ref_random) /
                       (task.ref_expert - task.ref_random))


def _episode_from_env(env, seed, steps, policy_seed):
    """One episode recorded with Gymnasium as Minari stores it: T+1 observations, flags per step."""
    from minari.data_collector.episode_buffer import EpisodeBuffer
    rng = np.random.default_rng(policy_seed)
    obs = [env.reset(seed=seed)[0]]
    acts, rews, terms, truncs = [], [], [], []
    for _ in range(steps):
        a = rng.uniform(env.action_space.low, env.action_space.high).astype(np.float32)
        o, r, term, trunc, _ = env.step(a)
        obs.append(o), acts.append(a), rews.append(r), terms.append(term), truncs.append(trunc)
        if term or trunc:
            break
    return EpisodeBuffer(id=seed, observations=np.array(obs), actions=np.array(acts), rewards=rews,
                         terminations=terms, truncations=truncs)


def test_from_minari_maps_terminations_truncations_and_cut_episodes():
    env = gym.make("Hopper-v5")
    fell = _episode_from_env(env, 0, 1000, 1)           # random actions: the hopper falls (a termination)
    cut = _episode_from_env(env, 1, 5, 2)                # collection stopped after 5 steps: neither flag
    timed = _episode_from_env(gym.make("Hopper-v5", max_episode_steps=7), 2, 1000, 3)  # a time limit
    assert fell.terminations[-1] and not cut.terminations[-1] and not cut.truncations[-1] and timed.truncations[-1]
    minari.create_dataset_from_buffers("test/hopper/env-v0", [fell, cut, timed], env="Hopper-v5",
                                       algorithm_name="random", author="test", author_email="t@t",
                                       code_permalink="none", description="test", eval_env="Hopper-v5")
    ds = from_minari("test/hopper/env-v0")
    n0, n1 = len(fell.rewards), len(cut.rewards)
    assert len(ds) == n0 + n1 + len(timed.rewards) == len(ds.rewards)
    assert ds.terminals[n0 - 1] and not ds.timeouts[n0 - 1]               # termination -> terminal
    assert ds.timeouts[n0 + n1 - 1] and not ds.terminals[n0 + n1 - 1]     # cut -> timeout, like D4RL
    assert ds.timeouts[-1] and not ds.terminals[-1]                       # truncation -> timeout
    assert np.array_equal(ds.observations[:n0], np.asarray(fell.observations[:-1], np.float32))
    assert np.array_equal(ds.next_observations[:n0], np.asarray(fell.observations[1:], np.float32))
    assert [e - s for s, e in ds.episode_bounds()] == [n0, n1, len(timed.rewards)]


def test_clear_errors():
    with pytest.raises(ValueError, match="no local Minari dataset 'mujoco/hopper/medium-v0'.*minari download"):
        from_minari("mujoco/hopper/medium-v0")
    ds = make_dataset("pendulum-random", 400, progress=False)
    bad = OfflineDataset(**{k: getattr(ds, k) for k in FIELDS if k != "next_observations"},
                         next_observations=ds.next_observations + 1.0, action_low=-2.0, action_high=2.0)
    with pytest.raises(ValueError, match=r"next_observations\[0\] differs from observations\[1\] inside episode 0"):
        to_minari(bad, "minirl/pendulum/bad-v0", "Pendulum-v1")


def test_train_cli_on_a_local_minari_dataset(tmp_path, capsys):
    """`python -m minirl train --dataset minari:<id>` trains on a Minari dataset and scores with its references."""
    import csv
    import json

    from minirl.cli import main
    task = get_task("pendulum")
    to_minari(make_dataset("pendulum-random", 600, progress=False),
              "minirl/pendulum/random-v0", "Pendulum-v1", ref_min_score=task.ref_random,
              ref_max_score=task.ref_expert)
    out = tmp_path / "run"
    assert main(["train", "--algo", "bc", "--dataset", "minari:minirl/pendulum/random-v0", "--scale", "smoke",
                 "--steps", "40", "--eval-every", "40", "--eval-episodes", "2", "--out", str(out)]) == 0
    settings = json.loads((out / "config.json").read_text())
    assert settings["dataset"] == "minari:minirl/pendulum/random-v0"
    evals = list(csv.DictReader(open(out / "eval.csv")))
    ret, score = float(evals[-1]["return_mean"]), float(evals[-1]["score_mean"])
    assert score == pytest.approx(100 * (ret - task.ref_random) / (task.ref_expert - task.ref_random), abs=1e-6)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--algo", "bc", "--dataset", "minari:nobody/nothing-v0", "--steps", "5"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no local Minari dataset 'nobody/nothing-v0'" in err[0]


def test_run_suite_on_a_minari_dataset_writes_one_folder_that_load_results_reads(tmp_path):
    """A Minari id's ':' and '/' would make nested folders (which `plots.load_results`' `<label>/<dataset>/s<seed>`
    does not see) and a ':' that Windows cannot check out: the run's folder is the id made one name."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from minirl import plots
    repo = Path(__file__).resolve().parent.parent
    task = get_task("pendulum")
    to_minari(make_dataset("pendulum-random", 600, progress=False),
              "minirl/pendulum/random-v0", "Pendulum-v1", ref_min_score=task.ref_random,
              ref_max_score=task.ref_expert)
    cmd = [sys.executable, str(repo / "experiments" / "run_suite.py"), "--algos", "bc", "--datasets",
           "minari:minirl/pendulum/random-v0", "--seeds", "0", "--scale", "smoke", "--steps", "20", "--root",
           str(tmp_path / "results"), "--tag", "t", "--set", "hidden=[32,32]"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=repo, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-2000:]
    run = tmp_path / "results" / "t" / "bc-hidden=32,32" / "minari-minirl-pendulum-random-v0" / "s0"
    assert (run / "result.json").exists()
    [found] = plots.load_results(tmp_path / "results" / "t")
    assert found["dataset"] == "minari:minirl/pendulum/random-v0" and found["path"] == str(run)


def test_to_local_minari_makes_once_and_refuses_a_different_size():
    from minirl.datasets import to_local_minari
    ds = make_dataset("hopper-medium", 2500, progress=False)
    calls = []

    def build(n):
        def f():
            calls.append(n)
            return ds.select_episodes(range(n)), f"the first {n} episodes"
        return f

    three = len(ds.select_episodes(range(3)))
    assert to_local_minari("test/hopper/part-v0", "hopper", three, build(3)) == "minari:test/hopper/part-v0"
    assert to_local_minari("test/hopper/part-v0", "hopper", three, build(3)) == "minari:test/hopper/part-v0"
    assert calls == [3]  # made once: the second call finds it with the size asked for
    info = minari_info("test/hopper/part-v0")
    assert info["total_steps"] == three and info["ref_max_score"] == get_task("hopper").ref_expert
    with pytest.raises(ValueError, match=f"test/hopper/part-v0: a local Minari dataset of {three} steps exists, "
                                         "expected 7; remove it"):
        to_local_minari("test/hopper/part-v0", "hopper", 7, build(2))
    assert calls == [3]
    with pytest.raises(ValueError, match="build: expected a dataset of 5 transitions"):
        to_local_minari("test/hopper/other-v0", "hopper", 5, build(1))
