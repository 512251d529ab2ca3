"""benchmarks/speed.py: the table it prints, the optional d3rlpy column and the size check (no timing asserted)."""
import sys
from pathlib import Path

import pytest
import torch

import speed

TINY = ["--seconds", "0.2", "--dataset-size", "2000"]


def _rows(out: str) -> dict[str, list[str]]:
    """The first table's rows by algorithm: ``{"bc": [cells...]}``."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("| ") and not line.startswith("| algorithm") and not line.startswith("| ---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows.setdefault(cells[0], cells)
    return rows


def test_main_prints_a_row_per_algorithm(capsys):
    assert speed.main(["--algos", "bc", "--no-d3rlpy", *TINY]) == 0
    out = capsys.readouterr().out
    assert "| algorithm | updates/s |" in out and "d3rlpy" not in out.splitlines()[2]
    row = _rows(out)["bc"]
    assert float(row[1].replace(",", "")) > 0


def test_unfused_variant_adds_columns_and_restores_the_fused_layer(capsys):
    fused = speed.nets.VectorizedLinear.forward
    assert speed.main(["--algos", "iql", "--unfused", "--no-d3rlpy", *TINY]) == 0
    row = _rows(capsys.readouterr().out)["iql"]
    assert len(row) == 4 and float(row[3]) > 0  # rate, unfused rate, fused / unfused
    assert speed.nets.VectorizedLinear.forward is fused
    # the unfused layer computes the same function
    layer = speed.nets.VectorizedLinear(5, 4, n=3)
    x = torch.randn(3, 7, 5)
    with speed.unfused_critics():
        looped = layer(x)
    torch.testing.assert_close(looped, layer(x))


def test_amp_adds_a_bfloat16_column(capsys):
    assert speed.main(["--algos", "bc", "--amp", "--no-d3rlpy", *TINY]) == 0
    out = capsys.readouterr().out
    assert "| algorithm | updates/s | bf16 autocast updates/s |" in out
    row = _rows(out)["bc"]
    assert len(row) == 3 and float(row[2].replace(",", "")) > 0
    assert not torch.is_autocast_enabled("cpu")  # the autocast context did not leak


def test_profile_with_amp_profiles_the_bfloat16_update(capsys):
    def conversions(out: str) -> float:  # dtype conversions per update, from the profile's table
        calls = [line.split("|")[3] for line in out.splitlines() if line.startswith("| aten::_to_copy |")]
        return float(calls[0]) if calls else 0.0

    args = ["--algos", "bc", "--profile", "3", "--no-d3rlpy", "--dataset-size", "2000"]
    assert speed.main([*args, "--amp"]) == 0
    bf16 = capsys.readouterr().out
    assert speed.main(args) == 0
    f32 = capsys.readouterr().out
    assert "## bc (bf16): 3 updates" in bf16 and "## bc (float32): 3 updates" in f32
    assert conversions(bf16) > conversions(f32)  # autocast casts the hidden layers' inputs and weights
    assert not torch.is_autocast_enabled("cpu")


def test_compile_adds_a_compiled_column(monkeypatch, capsys):
    compiled = []
    real = speed.devices.compile_agent

    def quick(agent, backend="inductor", mode=None):  # aot_eager: the same graphs, no C++ build in a test
        compiled.append(real(agent, backend="aot_eager"))
        return compiled[-1]

    monkeypatch.setattr(speed.devices, "compile_agent", quick)
    assert speed.main(["--algos", "bc", "--compile", "--no-d3rlpy", *TINY]) == 0
    out = capsys.readouterr().out
    assert "| algorithm | updates/s | compiled updates/s | compiled / eager |" in out
    row = _rows(out)["bc"]
    assert len(row) == 4 and float(row[2].replace(",", "")) > 0
    assert float(row[3]) == pytest.approx(float(row[2].replace(",", "")) / float(row[1].replace(",", "")), abs=0.01)
    assert compiled == [["actor"]]  # only the compiled measurement compiled the agent


def test_missing_d3rlpy_prints_not_installed(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "d3rlpy", None)  # makes `import d3rlpy` raise ImportError
    assert speed.import_d3rlpy() is None
    assert speed.main(["--algos", "bc", *TINY]) == 0
    out = capsys.readouterr().out
    assert "d3rlpy not installed" in out.splitlines()[0]
    assert _rows(out)["bc"][2:] == ["not installed", "-", "-"]


d3rlpy = speed.import_d3rlpy()
needs_d3rlpy = pytest.mark.skipif(d3rlpy is None, reason="d3rlpy is not installed (optional benchmark dependency)")


@needs_d3rlpy
def test_d3rlpy_networks_have_minirls_sizes():
    data = speed.synthetic_dataset(2000)
    speed._quiet_d3rlpy()
    d3data = speed.d3rlpy_dataset(data, d3rlpy)
    expected = {"bc": 69_635, "iql": 278_537, "cql": 407_560, "cql-lagrange": 407_560, "bcq": 1_542_920}
    for algo, n in expected.items():
        assert speed.param_counts(algo, data, 256, d3data, d3rlpy) == (n, n), algo
    assert speed.param_counts("sac-offline", data, 256, d3data, d3rlpy)[1] is None  # no d3rlpy counterpart
    # the settings that decide the work per update
    cql = speed.d3rlpy_config("cql", speed.minirl_config("cql"), 3, 256, d3rlpy)
    assert (cql.batch_size, cql.n_critics, cql.n_action_samples, cql.alpha_learning_rate) == (256, 2, 10, 0.0)
    bcq = speed.d3rlpy_config("bcq", speed.minirl_config("bcq"), 3, 256, d3rlpy)
    assert (bcq.n_action_samples, bcq.imitator_encoder_factory.hidden_units) == (10, [750, 750])


@needs_d3rlpy
def test_main_measures_d3rlpy_in_the_same_run(capsys):
    assert speed.main(["--algos", "bc", "sac-offline", *TINY]) == 0
    out = capsys.readouterr().out
    assert f"d3rlpy {d3rlpy.__version__}" in out.splitlines()[0]
    rows = _rows(out)
    assert float(rows["bc"][2].replace(",", "")) > 0 and float(rows["bc"][3]) > 0
    assert rows["bc"][4] == "-"  # no speed target for BC
    assert rows["sac-offline"][2] == "no counterpart"
    sizes = [line for line in out.splitlines() if line.startswith("| bc | 69,635 | 69,635 | yes |")]
    assert len(sizes) == 1


def _fake_corl(root: Path) -> Path:
    """A stand-in CORL checkout: algorithms/offline/iql.py with the names corl_peer uses, importing what CORL's
    file imports at the top (d4rl, wandb, gym, pyrallis), so the stand-in modules are exercised too."""
    offline = root / "algorithms" / "offline"
    offline.mkdir(parents=True)
    (offline / "iql.py").write_text('''
import d4rl, gym, pyrallis, wandb, torch
from dataclasses import dataclass
@dataclass
class TrainConfig:
    device: str = "cpu"; actor_lr: float = 3e-4; qf_lr: float = 3e-4; vf_lr: float = 3e-4; discount: float = 0.99
    tau: float = 0.005; beta: float = 3.0; iql_tau: float = 0.7; max_timesteps: int = 10
def annotated(env: gym.Env) -> gym.Env: return env
class ReplayBuffer:
    def __init__(self, s, a, n, device): self.n = n
    def load_d4rl_dataset(self, d): self.obs = torch.as_tensor(d["observations"])
    def sample(self, b): return [self.obs[:b]]
def _net(*dims): return torch.nn.Linear(dims[0], 1)
TwinQ = lambda s, a: _net(s + a)
ValueFunction = lambda s: _net(s)
GaussianPolicy = lambda s, a, m: _net(s)
class ImplicitQLearning:
    calls = 0
    def __init__(self, **kw): self.kw = kw
    def train(self, batch): ImplicitQLearning.calls += 1
@pyrallis.wrap()
def train(config): pass
''')
    return root


def test_targets_table_with_a_corl_peer(tmp_path, monkeypatch, capsys):
    import corl_peer
    monkeypatch.setattr(speed, "matmul_peak", lambda dtype, device="cpu": 100.0)
    monkeypatch.setattr(speed.devices, "compile_agent", lambda agent, backend="inductor", mode=None: [])
    corl = _fake_corl(tmp_path / "CORL")
    assert speed.main(["--algos", "bc", "iql", "--targets", "--corl", str(corl), "--no-d3rlpy", *TINY]) == 0
    out = capsys.readouterr().out
    assert "float32 100 GFLOP/s, bfloat16 100 GFLOP/s" in out
    rows = _rows(out)
    assert rows["bc"][5] == "-" and rows["bc"][7] == "-"          # CORL has no single-file BC peer here
    rates = [float(c.replace(",", "")) for c in rows["iql"][1:4]]
    corl_rate = float(rows["iql"][5].replace(",", ""))
    assert rows["iql"][4] == "-" and corl_rate > 0                 # no d3rlpy here; CORL measured
    assert float(rows["iql"][7]) == pytest.approx(max(rates) / corl_rate, abs=0.01)
    assert rows["iql"][10].endswith(")") and "%" in rows["iql"][10]
    m = corl_peer.load_module(corl, "iql")
    assert m.ImplicitQLearning.calls == 0 and "d4rl" not in sys.modules  # the stand-ins are removed after import
    import importlib.util  # the real gym where it is installed (d3rlpy's needs include it), else gymnasium
    assert m.gym.Env is __import__("gym" if importlib.util.find_spec("gym") else "gymnasium").Env
    with pytest.raises(SystemExit):
        speed.main(["--targets", "--corl", str(tmp_path / "nowhere"), "--no-d3rlpy", *TINY])
    assert "not a CORL checkout" in capsys.readouterr().err


def test_scale_option_gives_minirl_and_d3rlpy_the_scales_sizes(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(speed, "SIZES", "full")
    data = speed.synthetic_dataset(2000)
    full = sum(p.numel() for p in speed.make_minirl("cql", data, "cpu")[0].critic.parameters())
    assert speed.main(["--algos", "cql", "--no-d3rlpy", "--scale", "cpu", *TINY]) == 0
    assert "cpu scale's network sizes" in capsys.readouterr().out
    agent, cfg = speed.make_minirl("cql", data, "cpu")
    assert (cfg.n_actions, cfg.critic_hidden) == (4, (256, 256)) == (speed.minirl_config("cql").n_actions,
                                                                     speed.minirl_config("cql").critic_hidden)
    assert sum(p.numel() for p in agent.critic.parameters()) < full
    monkeypatch.setattr(speed, "SIZES", "full")
    (tmp_path / "algorithms" / "offline").mkdir(parents=True)  # looks like a CORL checkout
    with pytest.raises(SystemExit):
        speed.main(["--algos", "cql", "--scale", "cpu", "--corl", str(tmp_path), "--targets", *TINY])
    assert "--corl runs CORL's scripts at the papers' sizes" in capsys.readouterr().err


def test_adam_option_switches_minirls_optimiser(monkeypatch, capsys):
    from minirl import nets
    monkeypatch.setattr(nets, "_FUSED_ADAM", nets._FUSED_ADAM)  # restored after the test
    assert speed.main(["--algos", "bc", "--no-d3rlpy", "--adam", "plain", *TINY]) == 0
    assert "plain Adam" in capsys.readouterr().out
    agent, _ = speed.make_minirl("bc", speed.synthetic_dataset(2000), "cpu")
    assert not agent.opt.param_groups[0]["fused"]


def test_targets_table_gives_the_peak_line_before_timing_any_algorithm(monkeypatch):
    # the table is printed line by line as it is measured: the peak first, each algorithm's row when it is done
    monkeypatch.setattr(speed, "matmul_peak", lambda dtype, device="cpu": 50.0)

    def not_yet(*args, **kwargs):
        raise AssertionError("an algorithm was timed before the peak line was given")
    monkeypatch.setattr(speed, "time_updates", not_yet)
    lines = speed.targets_table(["iql"], speed.synthetic_dataset(500), 32, 0.1, "cpu", None, None, None)
    assert next(lines).startswith("Matmul peak of this core (2048x2048): float32 50 GFLOP/s")
    assert [next(lines) for _ in range(3)][1].startswith("| algorithm |")
    with pytest.raises(AssertionError, match="timed before"):
        next(lines)  # the first row is where the timing starts
