"""Your own data from the command line: `minirl train --dataset PATH.npz|PATH.hdf5 --env ENV_ID`, evaluated in that
environment, reloaded by load_agent; Minari datasets without reference scores with --raw-returns; folder names that
every OS accepts (issue 73.5)."""
import csv
import json

import numpy as np
import pytest

from minirl.data import FIELDS


@pytest.fixture
def pendulum_arrays(tmp_path, monkeypatch):
    """Pendulum-v1 transitions as a researcher has them: the six D4RL arrays, |a| up to 2, no bounds stored."""
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "cache"))
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    monkeypatch.chdir(tmp_path)
    from minirl.datasets import make_dataset
    ds = make_dataset("pendulum-random", 800, progress=False)
    return {k: getattr(ds, k) for k in FIELDS}


TINY = ["--algo", "bc", "--steps", 20, "--eval-every", 20, "--eval-episodes", 1, "--set", "hidden=[16,16]"]


def test_train_on_my_npz_evaluates_in_the_environment_and_reloads(cli, pendulum_arrays, tmp_path):
    from minirl.runs import load_agent
    np.savez(tmp_path / "my.npz", **pendulum_arrays)
    code, out, err = cli("train", "--dataset", tmp_path / "my.npz", "--env", "Pendulum-v1", *TINY)
    assert code == 0, err
    run = tmp_path / "runs" / "bc-my-s0"  # the file's stem names the default folder
    settings = json.loads((run / "config.json").read_text())
    assert settings["env_id"] == "Pendulum-v1" and settings["task"] is None
    assert settings["action_low"] == [-2.0] and settings["action_high"] == [2.0]  # read from the environment
    [row] = list(csv.DictReader(open(run / "eval.csv")))
    assert row["step"] == "20" and "score_mean" not in row  # raw returns: no reference returns to normalise by
    assert "(raw returns)" in out
    loaded = load_agent(run)
    obs = pendulum_arrays["observations"][:4].copy()
    assert loaded.act(obs).shape == (4, 1) and np.abs(loaded.act(obs)).max() <= 2.0
    assert loaded.evaluate(1)["scores"] is None
    code, out, err = cli("evaluate", run, "--episodes", 1)
    assert code == 0 and "return" in out and "normalised" not in out, err


def test_train_on_a_d4rl_hdf5(cli, pendulum_arrays, tmp_path):
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "d4rl.hdf5", "w") as f:
        for k, v in pendulum_arrays.items():
            f[k] = v
    code, _, err = cli("train", "--dataset", tmp_path / "d4rl.hdf5", "--env", "Pendulum-v1", *TINY, "--out",
                       tmp_path / "h5run")
    assert code == 0, err
    assert (tmp_path / "h5run" / "agent.pt").exists()


@pytest.mark.parametrize("extra, message", [
    ([], "is a file of your own: pass --env ENV_ID"),
    (["--env", "Pendulumm-v1"], "--env Pendulumm-v1: gymnasium cannot make it"),
    (["--env", "MountainCarContinuous-v0"], "has obs_dim=3, act_dim=1; --env MountainCarContinuous-v0 has obs_dim=2"),
])
def test_my_file_mistakes_are_one_line_before_any_work(cli, pendulum_arrays, tmp_path, extra, message):
    np.savez(tmp_path / "my.npz", **pendulum_arrays)
    code, _, err = cli("train", "--dataset", tmp_path / "my.npz", *extra, *TINY)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "runs").exists()


def test_my_file_without_bounds_and_without_env_says_how_to_give_them(cli, pendulum_arrays, tmp_path):
    np.savez(tmp_path / "my.npz", **pendulum_arrays)
    code, _, err = cli("train", "--dataset", tmp_path / "my.npz", "--no-eval", "--algo", "bc", "--steps", 5)
    assert code == 2 and err.count("\n") == 1, err
    assert "outside [-1, 1]" in err and "pass --env ENV_ID (its action space gives the bounds)" in err


def test_a_missing_file_or_a_named_dataset_with_env_says_so(cli, pendulum_arrays, tmp_path):
    code, _, err = cli("train", "--dataset", tmp_path / "nothere.npz", "--env", "Pendulum-v1", *TINY)
    assert code == 2 and "nothere.npz: no such file" in err
    code, _, err = cli("train", "--dataset", "pendulum-random", "--env", "Pendulum-v1", *TINY)
    assert code == 2 and "--env is for a dataset file of your own" in err
    code, _, err = cli("train", "--dataset", "x.csv", *TINY)
    assert code == 2 and "or a file of your own, PATH.npz or PATH.hdf5, with --env ENV_ID" in err


def test_a_minari_dataset_without_reference_scores_trains_with_raw_returns_in_a_safe_folder(cli, pendulum_arrays,
                                                                                           tmp_path):
    pytest.importorskip("minari")
    from minirl.data import OfflineDataset
    from minirl.minari_io import to_minari
    from minirl.runs import load_agent
    to_minari(OfflineDataset(**pendulum_arrays, action_low=-2.0, action_high=2.0), "byo/pendulum/random-v0",
              "Pendulum-v1")  # no ref_min_score / ref_max_score
    code, _, err = cli("train", "--dataset", "minari:byo/pendulum/random-v0", *TINY)
    assert code == 2 and "records no reference returns" in err and "--raw-returns" in err, err
    code, _, err = cli("train", "--dataset", "minari:byo/pendulum/random-v0", "--raw-returns", *TINY)
    assert code == 0, err
    [run] = list((tmp_path / "runs").iterdir())
    assert run.name == "bc-minari-byo-pendulum-random-v0-s0"  # one folder, no ':' (Windows), no nesting
    assert "score_mean" not in open(run / "eval.csv").readline()
    assert load_agent(run).task is None
