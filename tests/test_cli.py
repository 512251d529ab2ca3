"""The command line as a user meets it: typed settings, errors before any work, runs that resume and reload.

Every user mistake must end in one line on stderr and exit status 2, before any dataset is made (the tests point
``MINIRL_DATA`` at an empty folder and check that it stays empty). Training runs here use ``pendulum-random`` at the
``smoke`` size (made in a fraction of a second, cached once per module).
"""
import json

import pytest
import torch


SMALL = ["--scale", "smoke", "--set", "hidden=[16,16]"]


def train_args(out, *extra, algo="bc", steps=10, dataset="pendulum-random"):
    evaluation = [] if "--no-eval" in extra else ["--eval-episodes", 1]
    return ["train", "--algo", algo, "--dataset", dataset, *SMALL, "--steps", steps, "--out", out, *evaluation, *extra]


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


def test_a_checkpoint_older_than_a_config_field_resumes_at_its_default_and_refuses_another_value(cli, cached,
                                                                                                  tmp_path):
    # IQL's actor_squash was added after some checkpoints were written: theirs has no such field. The code that wrote
    # them behaved as its default ("tanh"), so resuming with the default is no change, and any other value still is.
    out = tmp_path / "run"
    args = ("--set", "actor=deterministic", "--set", "extraction=ddpg_bc", "--set", "max_steps=20")
    assert cli(*train_args(out, *args, "--checkpoint-every", 10, algo="iql"))[0] == 0
    ck = torch.load(out / "checkpoint.pt", weights_only=False)
    del ck["meta"]["config"]["actor_squash"]
    torch.save(ck, out / "checkpoint.pt")
    code, _, err = cli(*train_args(out, *args, "--set", "actor_squash=clip", "--resume", algo="iql", steps=20))
    assert code == 2 and "actor_squash None -> 'clip'" not in err and "actor_squash 'tanh' -> 'clip'" in err, err
    assert len(err.strip().splitlines()) == 1, err
    code, _, err = cli(*train_args(out, *args, "--resume", "--checkpoint-every", 10, algo="iql", steps=20))
    assert code == 0, err
    assert torch.load(out / "checkpoint.pt", weights_only=False)["step"] == 20


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


def test_repeated_set_adds_up(cli, cached, tmp_path):
    assert cli(*train_args(tmp_path / "run", "--set", "lr=1e-3", "--set", "actor=gaussian", steps=5))[0] == 0
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert cfg == {"hidden": [16, 16], "lr": 1e-3, "actor": "gaussian", "normalize_states": True, "reward_scale": None,
                   "top_fraction": 1.0, "goal_pieces": "off"}


# ----------------------------------------------------------------------------------------------------------------
# Bad input: one line, exit status 2, no data made
# ----------------------------------------------------------------------------------------------------------------

def _bad_inputs():
    def t(*extra, algo="bc", dataset="pendulum-random"):
        return ["train", "--algo", algo, "--dataset", dataset, "--scale", "smoke", *extra]
    cases = [
        (t(algo="iq"), "unknown algorithm 'iq' (did you mean 'iql'?)"),
        (t(algo="dqn"), "unknown algorithm 'dqn'"),
        (["train", "--dataset", "pendulum-random"], "the following arguments are required: --algo"),
        (t(dataset="pendulum-medum"), "unknown dataset 'pendulum-medum' (did you mean 'pendulum-medium'?)"),
        (t(dataset="walker2d-medium"), "unknown dataset 'walker2d-medium'"),
        (t(dataset="pendulum"), "unknown dataset 'pendulum'"),
        (t("--set", "lr=fast"), "--set lr=fast: BCConfig.lr expected a finite number, got 'fast'"),
        (t("--set", "lr=nan"), "BCConfig.lr expected a finite number"),
        (t("--set", "hidden=256"), "BCConfig.hidden expected a list of integers such as [256,256], got '256'"),
        (t("--set", "hidden=[a,b]"), "BCConfig.hidden expected a list of integers"),
        (t("--set", "normalize_states=maybe"), "BCConfig.normalize_states expected true or false"),
        (t("--set", "lrr=1e-3"), "BCConfig has no field 'lrr' (did you mean 'lr'?)"),
        (t("--set", "actor=gausian"), "(did you mean 'gaussian'?)"),
        (t("--set", "lr"), "--set expects NAME=VALUE, got 'lr'"),
        (t("--set", "lr=-1"), "BCConfig.lr must be > 0, got -1.0"),
        (t("--set", "lr=1e-3", "--set", "lr=2e-3"), "--set lr is given twice"),
        (t("--set", "reward_scale=max", algo="iql"), "IQLConfig.reward_scale expected None or 'return_range'"),
        (t("--set", "expectile=1.5", algo="iql"), "IQLConfig.expectile must be in (0, 1), got 1.5"),
        (t("--set", "n_action_samples=0", algo="bcq"), "BCQConfig.n_action_samples must be >= 1"),
        (t("--set", "gamma=1", algo="cql"), "CQLConfig.gamma must be in [0, 1)"),
        (t("--set", "cql_alpha=0", algo="cql-lagrange"), "cql_alpha must be > 0 when lagrange=True"),
        (t("--lagrange"), "--lagrange is for the CQL algorithms"),
        (t("--device", "gpu"), "(did you mean 'cuda'?)"),
        (t("--device", "cuda:99" if torch.cuda.is_available() else "cuda"), "--device cuda"),
        (t("--scale", "laptop"), "--scale must be smoke"),
        (t("--steps", -5), "--steps must be an integer >= 1, got -5"),
        (t("--steps", 0), "--steps must be an integer >= 1, got 0"),
        (t("--seed", -1), "--seed must be an integer >= 0"),
        (t("--batch-size", 0), "--batch-size must be an integer >= 1"),
        (t("--eval-every", 0), "--eval-every must be an integer >= 1"),
        (t("--eval-every", -1), "--eval-every must be an integer >= 1"),
        (t("--eval-episodes", 0), "--eval-episodes must be an integer >= 1"),
        (t("--no-eval", "--eval-every", 5), "--no-eval switches evaluation off"),
        (t("--checkpoint-every", 0), "--checkpoint-every must be an integer >= 1"),
        (t("--threads", 0), "--threads must be an integer >= 1"),
        (t("--precision", "fp16"), "argument --precision: invalid choice: 'fp16'"),
        (t("--amp", "--precision", "float32"), "--amp is --precision bf16: it contradicts --precision float32"),
        (t("--compile", "fast"), "argument --compile: invalid choice: 'fast'"),
        (t("--stepz", 5), "unrecognized arguments: --stepz 5 (did you mean '--steps'?)"),
        (t("--eval", 5), "unrecognized arguments: --eval 5"),  # no abbreviations: neither --eval-every nor ...
        (t("--step", 100), "unrecognized arguments: --step 100 (did you mean '--steps'?)"),  # ... --step as --steps
        (t("--batch-size", 1_000_000), "--batch-size 1,000,000 is larger than the dataset (5,000 transitions of "
                                       "pendulum-random at the smoke scale)"),
        (t("--set", "lr=1e-3", algo="iql"), "IQLConfig has no field 'lr' (did you mean 'actor_lr', 'critic_lr', "
                                            "'value_lr'"),
        (t("--override", "lr"), "--override names settings a resumed run may change: it needs --resume"),
        (t("--resume", "--overwrite"), "choose one"),
        (t("--out", "{ws}/a_file"), "is a file, not a directory"),
        (t("--out", "{ws}/another_run"), "already holds a run (config.json): pass --resume to continue it, "
                                         "--overwrite to replace it"),
        (t("--out", "{ws}/iql_run", "--resume"), "was made by --algo iql, not bc"),
        (t("--out", "{ws}/at_300", "--resume", "--steps", 50), "is at step 300, beyond --steps 50"),
        (t("--out", "{ws}/lr_changed", "--resume", "--steps", 400), "changes lr 0.001 -> 0.0003 from its checkpoint"),
        (t("--out", "{ws}/lr_changed", "--resume", "--steps", 400, "--override", "lrr"),
         "--override lrr: not a setting of this run (did you mean 'lr'?)"),
        (t("--out", "{ws}/damaged", "--resume"), "checkpoint.pt is damaged or not a minirl checkpoint"),
        (t("--out", "{ws}/no_checkpoint", "--resume"), "holds a run (log.jsonl) but no checkpoint.pt"),
        (["evaluate", "{ws}/missing_dir"], "missing_dir is not a run directory"),
        (["evaluate", "{ws}/another_run", "--episodes", 0], "--episodes must be an integer >= 1"),
        (["evaluate", "{ws}/another_run", "--video", "{ws}/film.avi"], "the file must end in .gif or .mp4"),
        (["dataset", "info", "nosuch"], "unknown dataset 'nosuch'"),
        (["dataset", "make", "pendulum-random", "--size", 0], "--size must be between 1 and"),
        (["dataset", "make"], "dataset make needs at least one dataset name"),
        (["fly"], "argument command: invalid choice: 'fly'"),
    ]
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:  # what requirements.txt installs: no mp4 writer
        cases.append((["evaluate", "{ws}/another_run", "--video", "{ws}/film.mp4"],
                      "writing .mp4 needs the imageio-ffmpeg package"))
    return cases


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """An empty dataset cache and working directory, plus output folders in every state a user can leave one."""
    from minirl.runs import plan_run
    data, cwd, ws = tmp_path / "data", tmp_path / "cwd", tmp_path / "ws"
    for d in (data, cwd, ws):
        d.mkdir()
    monkeypatch.setenv("MINIRL_DATA", str(data))
    monkeypatch.chdir(cwd)
    (ws / "a_file").write_text("not a folder")
    settings = plan_run("bc", "pendulum-random", scale="smoke", steps=300, out=ws / "x").settings()
    for name, changes, step in [("iql_run", {"algo": "iql"}, 10), ("at_300", {}, 300),
                                ("lr_changed", {"config": {**settings["config"], "lr": 1e-3}}, 300)]:
        (ws / name).mkdir()
        torch.save({"agent": {}, "step": step, "meta": {**settings, **changes}}, ws / name / "checkpoint.pt")
    for name, files in [("another_run", {"config.json": json.dumps(settings)}),
                        ("damaged", {"checkpoint.pt": "PK\x03\x04 half a zip"}), ("no_checkpoint", {"log.jsonl": ""})]:
        (ws / name).mkdir()
        for file, text in files.items():
            (ws / name / file).write_text(text)
    return data, cwd, ws


@pytest.mark.parametrize("args, message", _bad_inputs(), ids=lambda x: " ".join(map(str, x)) if isinstance(x, list)
                         else None)
def test_bad_input_is_one_line_and_exit_2_before_any_data(cli, workspace, args, message):
    data, cwd, ws = workspace
    before = sorted(p.relative_to(ws) for p in ws.rglob("*"))
    code, out, err = cli(*[str(a).replace("{ws}", str(ws)) for a in args])
    assert code == 2, (code, out, err)
    assert err.startswith("minirl: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert message.replace("{ws}", str(ws)) in err, err
    assert list(data.iterdir()) == [] and list(cwd.iterdir()) == []  # no dataset made, no run folder
    assert sorted(p.relative_to(ws) for p in ws.rglob("*")) == before  # nothing written or deleted


def test_bad_input_count():
    assert len(_bad_inputs()) >= 25


def test_scale_from_the_environment_names_the_variable(cli, workspace, monkeypatch):
    monkeypatch.setenv("MINIRL_SCALE", "laptop")
    code, _, err = cli("train", "--algo", "bc", "--dataset", "pendulum-random")
    assert code == 2 and "MINIRL_SCALE must be smoke" in err and err.count("\n") == 1


def test_the_real_command_exits_2_with_one_line(workspace):
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "minirl", "train", "--algo", "bc", "--dataset", "pendulum-random",
                           "--set", "hidden=256"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("python -m minirl: error: --set hidden=256: BCConfig.hidden expected a list")


# ----------------------------------------------------------------------------------------------------------------
# Typed settings
# ----------------------------------------------------------------------------------------------------------------

def test_values_are_parsed_by_the_declared_type():
    from typing import Literal

    from minirl.config import parse_value
    assert [parse_value(bool, t) for t in ("False", "true", "0", "yes", "OFF")] == [False, True, False, True, False]
    assert parse_value(int, "1_000") == 1000 and parse_value(int, "1e6") == 1_000_000
    assert parse_value(float, "1e-3") == 1e-3 and parse_value(float, "5") == 5.0
    assert parse_value(tuple[int, ...], "[64,64]") == parse_value(tuple[int, ...], "(64, 64)") == (64, 64)
    assert parse_value(tuple[int, ...], "128,") == (128,)
    assert parse_value(int | None, "None") is None and parse_value(int | None, "3") == 3
    assert parse_value(Literal["a", "b"] | None, "b") == "b"
    for tp, text in [(int, "1.5"), (bool, "maybe"), (float, "inf"), (tuple[int, ...], "256"), (Literal["a"], "c")]:
        with pytest.raises(ValueError, match="expected"):
            parse_value(tp, text)


def test_every_config_checks_types_and_ranges():
    from minirl.bc import BCConfig
    from minirl.bcq import BCQConfig
    from minirl.config import UserError
    from minirl.discrete import DiscreteBCQConfig, DiscreteCQLConfig
    assert BCConfig(hidden=[8, 8]).hidden == (8, 8)  # a list becomes the declared tuple
    for make, message in [(lambda: BCConfig(lr="fast"), "BCConfig.lr must be a finite number, got 'fast'"),
                          (lambda: BCConfig(hidden=()), "BCConfig.hidden must be a non-empty list of layer sizes"),
                          (lambda: BCConfig(normalize_states="False"), "must be true or false, got 'False'"),
                          (lambda: BCConfig(actor="mse"), "BCConfig.actor must be 'deterministic' or 'gaussian'"),
                          (lambda: BCQConfig(latent_dim=0), "BCQConfig.latent_dim must be None or >= 1"),
                          (lambda: BCQConfig(n_target_samples=2.5), "must be an integer, got 2.5"),
                          (lambda: DiscreteBCQConfig(threshold=1.5), "DiscreteBCQConfig.threshold must be in"),
                          (lambda: DiscreteCQLConfig(lr=0.0), "DiscreteCQLConfig.lr must be > 0")]:
        with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
            make()


def test_train_help_lists_datasets_and_every_algorithms_fields(cli):
    code, out, _ = cli("train", "--help")
    assert code == 0 and out.startswith("usage: minirl train")  # the console script's name, not python -m
    assert "datasets: pendulum-random, pendulum-medium" in out
    assert "--threads" in out and "--precision {auto,float32,bf16}" in out
    for algo in ("bc (BCConfig)", "bcq (BCQConfig)", "cql (CQLConfig)", "iql (IQLConfig)"):
        assert algo in out
    assert "sac-offline: cql's fields with cql_alpha=0.0, lagrange=False" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("expectile"))
    assert "float" in line and "0.7" in line and "expectile tau of the value loss" in line
    line = next(x for x in out.splitlines() if x.strip().startswith("reward_scale") and "|None" in x)
    assert "return_range|None" in line


# ----------------------------------------------------------------------------------------------------------------
# Threads and precision
# ----------------------------------------------------------------------------------------------------------------

def test_native_bf16_reads_the_cpu_flags(tmp_path):
    from minirl.devices import native_bf16
    for flags, native in [("fpu avx512f avx512_bf16 sse", True), ("fpu amx_bf16", True), ("fpu avx2 avx512f", False)]:
        (tmp_path / "cpuinfo").write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        assert native_bf16("cpu", str(tmp_path / "cpuinfo")) is native


def test_precision_auto_and_threads_are_recorded(cli, cached, tmp_path, monkeypatch):
    from minirl import devices
    for native, resolved in [(False, "float32"), (True, "bf16")]:
        monkeypatch.setattr(devices, "native_bf16", lambda device, native=native: native)
        out = tmp_path / resolved
        try:
            code, printed, err = cli(*train_args(out, "--precision", "auto", "--threads", 2, steps=5))
        finally:
            torch.set_num_threads(1)
        assert code == 0, err
        cfg = json.loads((out / "config.json").read_text())
        assert (cfg["precision"], cfg["precision_requested"], cfg["threads"]) == (resolved, "auto", 2)
        assert f"precision={resolved} threads=2" in printed


# ----------------------------------------------------------------------------------------------------------------
# Runs you can reload
# ----------------------------------------------------------------------------------------------------------------

def test_load_agent_rebuilds_the_trained_agent(cli, cached, tmp_path):
    import minirl
    out = tmp_path / "run"
    assert cli(*train_args(out, "--eval-every", 10, steps=10))[0] == 0
    final = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()][-1]
    loaded = minirl.load_agent(out)
    assert loaded.step == 10 and loaded.settings["algo"] == "bc" and loaded.config.hidden == (16, 16)
    assert loaded.act(torch.zeros(4, 3).numpy()).shape == (4, 1)
    # the same episodes as the run's last evaluation (its seed is 10,000 x (seed + 1)) give the same return
    assert loaded.evaluate(1, seed=10_000)["returns"].mean() == pytest.approx(final["return_mean"])
    saved = torch.load(out / "agent.pt", weights_only=False)
    assert saved["step"] == 10 and saved["meta"]["algo"] == "bc" and saved["meta"]["dataset"] == "pendulum-random"
    assert set(saved["versions"]) >= {"minirl", "torch", "gymnasium", "mujoco", "numpy"}
    code, printed, err = cli("evaluate", out, "--episodes", 2)
    assert code == 0 and "bc on pendulum-random, step 10: return" in printed and "normalised score" in printed, err


def test_evaluate_films_an_episode(cli, cached, tmp_path):
    out = tmp_path / "hopper"
    assert cli(*train_args(out, "--no-eval", steps=5, dataset="hopper-random"))[0] == 0
    code, printed, err = cli("evaluate", out, "--episodes", 1, "--video", tmp_path / "hopper.gif")
    if code == 2 and "rendering Hopper-v5 failed" in err:
        pytest.skip(f"this machine cannot render MuJoCo off-screen: {err}")
    assert code == 0, err
    from PIL import Image
    with Image.open(tmp_path / "hopper.gif") as gif:
        assert gif.n_frames > 1 and gif.size == (240, 240)


def test_a_damaged_agent_or_dataset_cache_is_one_line_naming_the_file(cli, monkeypatch, tmp_path):
    from minirl import datasets
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    cache = datasets.cache_path("pendulum-random", 5000)
    cache.parent.mkdir()
    cache.write_bytes(b"PK\x03\x04 not a whole npz file")
    code, _, err = cli(*train_args(tmp_path / "run"))
    assert code == 2 and err.count("\n") == 1 and f"{cache} is damaged" in err and "delete it" in err, err
    cache.unlink()
    assert cli(*train_args(tmp_path / "run"))[0] == 0  # made again
    (tmp_path / "run" / "agent.pt").write_bytes(b"\x80\x04 half a pickle")
    code, _, err = cli("evaluate", tmp_path / "run")
    assert code == 2 and err.count("\n") == 1 and "agent.pt is damaged" in err, err
    (tmp_path / "run" / "agent.pt").unlink()  # a run folder brought from another machine: git keeps no weights
    code, _, err = cli("evaluate", tmp_path / "run")
    assert code == 2 and err.count("\n") == 1 and "has no agent.pt (nor checkpoint.pt)" in err, err


# ----------------------------------------------------------------------------------------------------------------
# Faults, done for real in child processes: Ctrl-C, a kill while a file is being written, a closed pipe
# ----------------------------------------------------------------------------------------------------------------

def _child(code_or_args, data_dir, unbuffered=True):
    import os
    import subprocess
    import sys
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else ["-m", "minirl", *map(str, code_or_args)]
    env = {**os.environ, "MINIRL_DATA": str(data_dir), "PYTHONUNBUFFERED": "1" if unbuffered else ""}
    return subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _wait_for(condition, proc, seconds=120):
    import time
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_ctrl_c_leaves_a_resumable_run(cli, cached, data_dir, tmp_path):
    import signal
    out = tmp_path / "run"
    proc = _child(train_args(out, "--checkpoint-every", 5, "--no-eval", steps=1_000_000), data_dir)
    _wait_for(lambda: (out / "checkpoint.pt").exists(), proc)  # training is under way
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err and "interrupted at step" in last and "add --resume" in last, err
    step = int(last.split("interrupted at step ")[1].split(":")[0])
    ck = torch.load(out / "checkpoint.pt", weights_only=False)
    assert ck["step"] == step >= 5  # saved at the step it stopped at, not only at the last multiple of 5
    code, _, err = cli(*train_args(out, "--checkpoint-every", 5, "--no-eval", "--resume", steps=step + 3))
    assert code == 0, err
    assert torch.load(out / "agent.pt", weights_only=False)["step"] == step + 3
    steps_logged = [json.loads(x)["step"] for x in (out / "log.jsonl").read_text().splitlines()]
    assert steps_logged == sorted(steps_logged) and steps_logged[-1] == step + 3


# A child that trains (or makes a dataset) and freezes half-way through writing a file, so that the test can kill it
# there: the writer is patched to write the first half of the real bytes, flush, say so, and wait.
_FREEZE = """
import io, sys, time
def freeze(path, write):
    buf = io.BytesIO()
    write(buf)
    data = buf.getvalue()
    with open(path, "wb") as out:
        out.write(data[: len(data) // 2])
    print("HALF", flush=True)
    time.sleep(600)
"""


def test_a_kill_while_writing_a_checkpoint_leaves_the_previous_one(tmp_path):
    import signal
    out = tmp_path / "run"
    code = _FREEZE + f"""
import torch
from minirl.bc import BC
from minirl.train import train
sys.path.insert(0, {str(__file__.rsplit('/', 1)[0])!r})
from test_train import pendulum_like
real_save = torch.save
calls = []
def save(obj, f, *a, **k):
    calls.append(f)
    if len(calls) == 2:  # the second checkpoint freezes half-written
        freeze(f, lambda buf: real_save(obj, buf))
    real_save(obj, f, *a, **k)
torch.save = save
torch.manual_seed(0)
train(BC(3, 1, -2, 2), pendulum_like(), 40, out={str(out)!r}, checkpoint_every=10, progress=False)
"""
    proc = _child(code, tmp_path)
    _wait_for(lambda: any(out.glob(".checkpoint.*.tmp.pt")), proc)
    assert proc.stdout.readline().strip() == "HALF"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert torch.load(out / "checkpoint.pt", weights_only=False)["step"] == 10  # the first one, whole
    from minirl.bc import BC
    from minirl.train import train

    from test_train import pendulum_like
    assert list(out.glob(".checkpoint.*.tmp.pt"))  # the killed write's half file
    train(BC(3, 1, -2, 2), pendulum_like(), 40, out=out, checkpoint_every=10, resume=True, progress=False)
    assert torch.load(out / "agent.pt", weights_only=False)["step"] == 40
    assert not list(out.glob(".*.tmp*"))  # removed on resume (issue 73.7: it stayed forever)


def test_a_kill_while_caching_a_dataset_leaves_no_cache(tmp_path):
    import signal

    from minirl import datasets
    code = _FREEZE + """
import numpy as np
real = np.savez_compressed
np.savez_compressed = lambda path, **arrays: freeze(path, lambda buf: real(buf, **arrays))
from minirl import datasets
datasets.load_dataset("pendulum-random", 600, progress=False)
"""
    proc = _child(code, tmp_path)
    _wait_for(lambda: any(tmp_path.glob(".pendulum-random-*.tmp.npz")), proc)
    assert proc.stdout.readline().strip() == "HALF"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    import os
    os.environ["MINIRL_DATA"], before = str(tmp_path), os.environ.get("MINIRL_DATA")
    try:
        assert not datasets.cache_path("pendulum-random", 600).exists()  # no half file under the cache's name
        assert len(datasets.load_dataset("pendulum-random", 600, progress=False)) == 600  # made again, whole
        assert len(datasets.load_dataset("pendulum-random", 600, progress=False)) == 600  # and read back
    finally:
        os.environ.pop("MINIRL_DATA") if before is None else os.environ.update(MINIRL_DATA=before)


def test_a_closed_pipe_ends_quietly(tmp_path):
    proc = _child(["dataset", "list"], tmp_path, unbuffered=False)  # a pipe gets block-buffered output
    proc.stdout.close()  # the reader is gone before the first line (what `| head` does after its lines)
    err = proc.stderr.read()
    proc.wait()
    assert proc.returncode == 1 and err == "", err


def test_a_non_editable_install_ships_every_asset():
    # `pip install .` copies only the package data that pyproject.toml names; a new kind of asset file must be named
    import fnmatch
    import tomllib
    from pathlib import Path
    repo = Path(__file__).resolve().parent.parent
    patterns = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["minirl"]
    assets = [p.relative_to(repo / "minirl").as_posix() for p in (repo / "minirl" / "assets").rglob("*") if p.is_file()]
    assert assets and [a for a in assets if not any(fnmatch.fnmatch(a, pat) for pat in patterns)] == []
