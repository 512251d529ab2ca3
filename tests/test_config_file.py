"""``python -m minirl train --config FILE``: a TOML file of the config fields ``--set`` takes, ``--set`` over it, the
same one-line errors naming the file and the field, and the values in the run folder's config.json."""
import json
import sys

import pytest

SMALL = ["--scale", "smoke", "--steps", 5, "--eval-episodes", 1]


def settings_file(tmp_path, text: str, name: str = "iql.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def train(out, config, *extra, algo="iql"):
    return ["train", "--algo", algo, "--dataset", "pendulum-random", *SMALL, "--out", out, "--config", config, *extra]


needs_tomllib = pytest.mark.skipif(sys.version_info < (3, 11), reason="TOML files are read with tomllib (3.11+)")


@needs_tomllib
def test_the_files_values_are_the_runs_settings_and_set_wins(cli, cached, tmp_path):
    path = settings_file(tmp_path, '# IQL on Pendulum, small\nhidden = [16, 16]\nexpectile = 0.8\nbeta = 2\n'
                                   'normalize_states = false\nreward_scale = "none"\n')
    code, _, err = cli(*train(tmp_path / "run", path, "--set", "beta=5.0"))
    assert code == 0, err
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert cfg["hidden"] == [16, 16] and cfg["expectile"] == 0.8 and cfg["normalize_states"] is False
    assert cfg["reward_scale"] is None                   # "none" is None, as --set reward_scale=None
    assert cfg["beta"] == 5.0                            # --set over the file
    assert isinstance(cfg["beta"], float)


@needs_tomllib
@pytest.mark.parametrize("text, message", [
    ("expectle = 0.9\n", "--config {path}: IQLConfig has no field 'expectle' (did you mean 'expectile'?)"),
    ("lr = 1e-3\n", "IQLConfig has no field 'lr' (did you mean 'actor_lr', 'critic_lr', 'value_lr'"),
    ('expectile = "high"\n', "--config {path}: expectile = 'high': IQLConfig.expectile expected a finite number, "
                             "got 'high'"),
    ("hidden = 256\n", "--config {path}: hidden = 256: IQLConfig.hidden expected a list of integers such as "
                       "[256,256], got 256"),
    ("hidden = [16.5, 16]\n", "IQLConfig.hidden expected a list of integers such as [256,256], got [16.5, 16]"),
    ('hidden = ["16", "16"]\n', "IQLConfig.hidden expected a list of integers"),
    ("normalize_states = 1\n", "--config {path}: normalize_states = 1: IQLConfig.normalize_states expected true or "
                               "false, got 1"),
    ('max_steps = "10"\n', "IQLConfig.max_steps expected an integer, got '10'"),
    ('actor = "gausian"\n', "IQLConfig.actor expected 'gaussian' or 'deterministic', got 'gausian' (did you mean "
                            "'gaussian'?)"),
    ("[iql]\nexpectile = 0.9\n", "IQLConfig has no field 'iql'"),
    ("expectile = 1.5\n", "--config {path}: IQLConfig.expectile must be in (0, 1), got 1.5"),
    ("expectile = \n", "--config {path}: not a TOML file"),
])
def test_a_mistake_in_the_file_is_one_line_naming_the_file_and_the_field(cli, tmp_path, monkeypatch, text, message):
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    path = settings_file(tmp_path, text)
    code, out, err = cli(*train(tmp_path / "run", path))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert message.format(path=path) in err, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "data").exists()  # before any work


def test_a_missing_file_is_one_line(cli, tmp_path):
    code, _, err = cli(*train(tmp_path / "run", tmp_path / "nowhere.toml"))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"--config {tmp_path / 'nowhere.toml'}: no such file" in err, err


def test_train_help_names_the_option(cli):
    code, out, _ = cli("train", "--help")
    assert code == 0 and "--config FILE" in out
