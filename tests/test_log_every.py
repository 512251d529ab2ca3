"""The log interval: ``train(log_every=N)``, ``runs.run(log_every=N)`` and ``python -m minirl train --log-every N``
write a training entry every N steps (and at the last step); the default stays 1,000; anything but a positive
integer is a one-line error before any work."""
import json

import pytest

from minirl.bc import BC
from minirl.train import LOG_EVERY, train
from test_train import pendulum_like

SMALL = ["--scale", "smoke", "--set", "hidden=[16,16]", "--no-eval"]


@pytest.fixture
def cached(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path_factory.getbasetemp() / "log-every-data"))


def train_steps(out) -> list[int]:
    entries = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return [e["step"] for e in entries if e["kind"] == "train"]


def test_train_logs_every_log_every_steps_and_at_the_end():
    history = train(BC(3, 1, -2, 2), pendulum_like(), 25, log_every=10, progress=False)
    assert [e["step"] for e in history["train"]] == [10, 20, 25]
    assert LOG_EVERY == 1000
    assert [e["step"] for e in train(BC(3, 1, -2, 2), pendulum_like(), 25, progress=False)["train"]] == [25]


def test_the_command_line_takes_log_every_and_records_it(cli, cached, tmp_path):
    code, _, err = cli("train", "--algo", "bc", "--dataset", "pendulum-random", *SMALL, "--steps", 30,
                       "--log-every", 10, "--out", tmp_path / "run")
    assert code == 0, err
    assert train_steps(tmp_path / "run") == [10, 20, 30]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["log_every"] == 10
    code, _, err = cli("train", "--algo", "bc", "--dataset", "pendulum-random", *SMALL, "--steps", 30,
                       "--out", tmp_path / "default")
    assert code == 0, err
    assert train_steps(tmp_path / "default") == [30]  # the default, 1,000 steps, is beyond this run's end
    assert json.loads((tmp_path / "default" / "config.json").read_text())["log_every"] == 1000


@pytest.mark.parametrize("value, message", [(0, "--log-every must be an integer >= 1, got 0"),
                                            (-5, "--log-every must be an integer >= 1, got -5"),
                                            ("ten", "argument --log-every: invalid int value: 'ten'"),
                                            ("2.5", "argument --log-every: invalid int value: '2.5'")])
def test_log_every_must_be_a_positive_integer(cli, monkeypatch, tmp_path, value, message):
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    code, out, err = cli("train", "--algo", "bc", "--dataset", "pendulum-random", *SMALL, "--steps", 30,
                         "--log-every", value, "--out", tmp_path / "run")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "data").exists()  # refused before any work


def test_train_refuses_a_log_every_below_one():
    with pytest.raises(ValueError, match="log_every must be an integer >= 1, got 0"):
        train(BC(3, 1, -2, 2), pendulum_like(), 5, log_every=0, progress=False)
