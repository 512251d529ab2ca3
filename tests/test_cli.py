"""The command line as a user meets it: typed settings, errors before any work, runs that resume and reload.

Every user mistake must end in one line on stderr and exit status 2, before any dataset is made (the tests point
``MINIRL_DATA`` at an empty folder and check that it stays empty). Training runs here use ``pendulum-random`` at the
``smoke`` size (made in a fraction of a second, cached once per module).
"""
import json

import pytest
import torch

from minirl.train import main

SMALL = ["--scale", "smoke", "--set", "hidden=[16,16]"]


@pytest.fixture
def cli(capsys):
    """``cli(*args)`` runs ``python -m minirl ARGS`` in this process: ``(exit status, stdout, stderr)``."""
    def run(*args):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        return code, out, err
    return run


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def cached(monkeypatch, data_dir):
    """A shared dataset cache, so that each training test makes its data once."""
    monkeypatch.setenv("MINIRL_DATA", str(data_dir))


def train_args(out, *extra, algo="bc", steps=10):
    evaluation = [] if "--no-eval" in extra else ["--eval-episodes", 1]
    return ["train", "--algo", algo, "--dataset", "pendulum-random", *SMALL, "--steps", steps, "--out", out,
            *evaluation, *extra]


# ----------------------------------------------------------------------------------------------------------------
# What used to go wrong without a word (these tests failed before the fix)
# ----------------------------------------------------------------------------------------------------------------

def test_set_false_switches_normalisation_off(cli, cached, tmp_path):
    code, _, err = cli(*train_args(tmp_path / "run", "--set", "normalize_states=False"))
    assert code == 0, err
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["config"]["normalize_states"] is False
    assert torch.load(tmp_path / "run" / "agent.pt", weights_only=False)["state_normalizer"] is None


def test_set_none_for_iql_reward_scale(cli, cached, tmp_path):
    code, _, err = cli(*train_args(tmp_path / "run", "--set", "reward_scale=None", algo="iql", steps=5))
    assert code == 0, err
    assert json.loads((tmp_path / "run" / "config.json").read_text())["config"]["reward_scale"] is None


@pytest.mark.parametrize("flag, value", [("--batch-size", 0), ("--eval-every", 0), ("--eval-every", -1),
                                         ("--eval-episodes", 0)])
def test_zero_or_negative_is_an_error_not_the_default(cli, cached, tmp_path, flag, value):
    code, _, err = cli(*train_args(tmp_path / "run", flag, value))
    assert code == 2 and flag in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_evaluation_can_be_switched_off(cli, cached, tmp_path):
    code, out, err = cli(*train_args(tmp_path / "run", "--no-eval"))
    assert code == 0, err
    kinds = [json.loads(x)["kind"] for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert kinds and "eval" not in kinds and "final evaluation" not in out


def test_resume_refuses_a_changed_setting_unless_overridden(cli, cached, tmp_path):
    out = tmp_path / "run"
    assert cli(*train_args(out, "--set", "lr=1e-3", "--checkpoint-every", 10))[0] == 0
    code, _, err = cli(*train_args(out, "--resume", steps=20))  # lr back to its default, 3e-4
    assert code == 2 and "lr" in err and "--override" in err and len(err.strip().splitlines()) == 1, err
    code, _, err = cli(*train_args(out, "--resume", "--override", "lr", "--checkpoint-every", 10, steps=20))
    assert code == 0, err
    ck = torch.load(out / "checkpoint.pt", weights_only=False)
    assert ck["step"] == 20 and ck["agent"]["opt"]["param_groups"][0]["lr"] == 3e-4  # the new lr took effect
    assert json.loads((out / "config.json").read_text())["config"]["lr"] == 3e-4


def test_resume_with_fewer_steps_than_the_checkpoint_is_an_error(cli, cached, tmp_path):
    out = tmp_path / "run"
    assert cli(*train_args(out, "--checkpoint-every", 10))[0] == 0
    code, _, err = cli(*train_args(out, "--resume", steps=5))
    assert code == 2 and "step 10" in err and len(err.strip().splitlines()) == 1, err
    assert torch.load(out / "agent.pt", weights_only=False)["step"] == 10


def test_out_holding_another_run_needs_overwrite(cli, cached, tmp_path):
    out = tmp_path / "run"
    assert cli(*train_args(out))[0] == 0
    before = (out / "config.json").read_text()
    code, _, err = cli(*train_args(out, "--set", "lr=1e-3"))
    assert code == 2 and "--overwrite" in err and len(err.strip().splitlines()) == 1, err
    assert (out / "config.json").read_text() == before  # untouched
    code, _, err = cli(*train_args(out, "--set", "lr=1e-3", "--overwrite"))
    assert code == 0, err
    assert json.loads((out / "config.json").read_text())["config"]["lr"] == 1e-3
