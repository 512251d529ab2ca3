"""The `full` scale takes the fast path by itself on a CUDA device (issue 73.6): runs.run captures each step as one
CUDA graph and run_suite trains the seeds of an algorithm and dataset as one batch, unless told otherwise; on a CPU
and at the smaller scales nothing changes. Checked at the planning level (what would run, nothing is run): the device
is taken for a GPU by the checks; benchmarks/gpu.py's step 0 shows the same on a real one."""
import pytest

from minirl import cli, runs

HOPPER = "hopper-medium-replay"


@pytest.fixture
def cuda(monkeypatch):
    """--device cuda passes the device check, as on a GPU machine (nothing is built on it here)."""
    monkeypatch.setattr(runs, "check_device", lambda device: device)


def plan(algo, tmp_path, scale="full", device="cuda", **kwargs):
    return runs.plan_run(algo, kwargs.pop("dataset", HOPPER), scale=scale, device=device, precision="float32",
                         out=tmp_path / algo, **kwargs)


@pytest.mark.parametrize("algo", ["bc", "bcq", "cql", "cql-lagrange", "iql", "10%bc"])
def test_the_full_scale_on_cuda_captures_each_step_by_default(algo, cuda, tmp_path):
    # before: capture was False unless --capture was given
    p = plan(algo, tmp_path)
    assert p.capture is True and p.settings()["capture"] is True  # config.json records what ran
    assert p.fast_path == "the full scale on cuda: each step replayed as one CUDA graph (--no-capture: eager updates)"


def test_an_update_a_graph_cannot_replay_stays_eager_and_says_why(cuda, tmp_path):
    td3 = plan("td3+bc", tmp_path)  # the paper's actor update every 2nd step: a Python branch
    assert td3.capture is False and "eager updates, policy_freq=2 is a Python branch" in td3.fast_path
    assert plan("td3+bc", tmp_path, overrides={"policy_freq": 1}).capture is True
    cloning = plan("cql", tmp_path, overrides={"bc_steps": 10})
    assert cloning.capture is False and "bc_steps=10" in cloning.fast_path
    assert plan("iql", tmp_path, overrides={"target_update_period": 2}).capture is False


def test_the_fast_path_can_be_turned_off_and_leaves_compile_alone(cuda, tmp_path):
    off = plan("iql", tmp_path, capture=False)
    assert off.capture is False and off.fast_path is None
    assert plan("iql", tmp_path, compile="reduce-overhead").capture is False  # torch.compile's own CUDA graphs
    parser, _ = cli.build_parser()
    base = ["train", "--algo", "iql", "--dataset", HOPPER]
    assert parser.parse_args(base).capture is None  # the scale's default
    assert parser.parse_args([*base, "--no-capture"]).capture is False
    assert parser.parse_args([*base, "--capture"]).capture is True


@pytest.mark.parametrize("scale, device", [("full", "cpu"), ("cpu", "cuda"), ("smoke", "cuda")])
def test_elsewhere_nothing_changes(scale, device, cuda, tmp_path):
    p = plan("iql", tmp_path, scale=scale, device=device)
    assert p.capture is False and p.fast_path is None
    assert runs.default_capture("iql", p.config, scale, device) == (False, None)


def test_asking_for_capture_on_a_cpu_is_still_an_error(tmp_path):
    with pytest.raises(runs.UserError, match="needs --device cuda, not cpu"):
        plan("iql", tmp_path, device="cpu", capture=True)


def suite_calls(monkeypatch, tmp_path, *extra, device="cuda", scale="full"):
    """What run_suite would run: its run_batch and run_one calls (nothing trains)."""
    import run_suite
    calls = []
    monkeypatch.setattr(run_suite.devices, "check_device", lambda d: d)
    monkeypatch.setattr(run_suite, "run_batch", lambda *a, **k: calls.append(("batch", a[3], k["capture"])) or [])
    monkeypatch.setattr(run_suite, "run_one", lambda *a, **k: calls.append(("one", a[3], k["capture"])))
    rc = run_suite.main(["--algos", "iql", "--datasets", HOPPER, "--seeds", "0", "1", "2", "--scale", scale,
                         "--device", device, "--precision", "float32", "--root", str(tmp_path), *extra])
    assert rc == 0
    return calls


def test_run_suite_at_the_full_scale_on_cuda_batches_the_seeds_by_default(monkeypatch, tmp_path, capsys):
    # before: one run_one call per seed unless --batch-seeds was given
    assert suite_calls(monkeypatch, tmp_path) == [("batch", [0, 1, 2], None)]  # capture: runs.run's default
    said = capsys.readouterr().out
    assert "the full scale on cuda: the seeds of each algorithm and dataset train as one batch" in said
    off = suite_calls(monkeypatch, tmp_path, "--no-batch-seeds", "--no-capture")
    assert off == [("one", s, False) for s in (0, 1, 2)]


@pytest.mark.parametrize("device, scale", [("cpu", "full"), ("cuda", "cpu")])
def test_run_suite_elsewhere_makes_one_seed_at_a_time(device, scale, monkeypatch, tmp_path, capsys):
    assert suite_calls(monkeypatch, tmp_path, device=device, scale=scale) == [("one", s, None) for s in (0, 1, 2)]
    assert "one batch" not in capsys.readouterr().out
