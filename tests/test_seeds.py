"""Seeds as a batch axis (minirl.seeds, train(list of agents)): K seeds stacked make the updates, evaluations and
files of K separate runs."""
import json

import pytest
import torch

import batched_seeds
from minirl import seeds
from minirl.bc import BC, BCConfig
from minirl.bcq import BCQ, BCQConfig
from minirl.config import UserError
from minirl.cql import CQL, CQLConfig
from minirl.discrete import DiscreteCQL
from minirl.iql import IQL, IQLConfig
from minirl.td3bc import TD3BC, TD3BCConfig
from minirl.train import train
from test_train import pendulum_like, strip_timing

OBS, ACT = 5, 3
AGENTS = {
    "iql": lambda: IQL(OBS, ACT, -1, 1, IQLConfig(max_steps=10, hidden=(32, 32))),
    "iql-layer-norm-deterministic": lambda: IQL(OBS, ACT, -1, 1, IQLConfig(max_steps=10, hidden=(32, 32),
                                                                           layer_norm=True, actor="deterministic")),
    "iql-ddpg-bc": lambda: IQL(OBS, ACT, -1, 1, IQLConfig(max_steps=10, hidden=(32, 32), actor="deterministic",
                                                          extraction="ddpg_bc", alpha=0.1)),
    "td3+bc": lambda: TD3BC(OBS, ACT, -1, 1, TD3BCConfig(hidden=(32, 32))),
    "bc": lambda: BC(OBS, ACT, -1, 1, BCConfig(hidden=(32, 32))),
    "bc-gaussian": lambda: BC(OBS, ACT, -1, 1, BCConfig(hidden=(32, 32), actor="gaussian")),
    "cql": lambda: CQL(OBS, ACT, -1, 1, CQLConfig(actor_hidden=(32, 32), critic_hidden=(32, 32), n_actions=4,
                                                  bc_steps=2)),
    "cql-lagrange-max-backup": lambda: CQL(OBS, ACT, -1, 1, CQLConfig(
        actor_hidden=(32, 32), critic_hidden=(32, 32), n_actions=4, bc_steps=0, lagrange=True,
        max_target_backup=True, deterministic_backup=False)),
    "cql-unweighted": lambda: CQL(OBS, ACT, -1, 1, CQLConfig(actor_hidden=(32, 32), critic_hidden=(32, 32),
                                                             n_actions=4, bc_steps=0, importance_sample=False)),
    "offline-sac": lambda: CQL(OBS, ACT, -1, 1, CQLConfig(actor_hidden=(32, 32), critic_hidden=(32, 32),
                                                          cql_alpha=0.0, bc_steps=0)),
    "bcq": lambda: BCQ(OBS, ACT, -1, 1, BCQConfig(actor_hidden=(32, 32), critic_hidden=(32, 32),
                                                  vae_hidden=(32, 32), n_target_samples=4)),
}


@pytest.fixture
def same_noise():
    """The updates' random draws made the same for every seed (:func:`batched_seeds.same_noise`), so that separate
    agents and a stack consume the same noise, as they do the same batches."""
    with batched_seeds.same_noise():
        yield


def batch(g: torch.Generator, n: int = 64) -> dict:
    return {"obs": torch.randn(n, OBS, generator=g), "act": torch.rand(n, ACT, generator=g) * 2 - 1,
            "rew": torch.randn(n, generator=g), "next_obs": torch.randn(n, OBS, generator=g),
            "done": (torch.rand(n, generator=g) < 0.1).float()}


def tensors(x):
    """Every tensor in a (nested) state dict, in order."""
    if torch.is_tensor(x):
        return [x]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors(v)]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors(v)]
    return []


def build(name: str, seed: int):
    torch.manual_seed(seed)
    return AGENTS[name]()


@pytest.mark.parametrize("name", AGENTS)
def test_three_stacked_seeds_make_the_updates_of_three_separate_agents(name, same_noise):
    torch.set_default_dtype(torch.float32)
    singles = [build(name, s) for s in range(3)]
    stacked = seeds.stack(singles)
    assert seeds.members(stacked) == 3 and seeds.members(singles[0]) is None
    # stacking copies: member k is seed k before any update, exactly
    for k, single in enumerate(singles):
        for a, b in zip(tensors(single.state_dict()), tensors(seeds.member(stacked, k).state_dict())):
            assert torch.equal(a, b)
    gens = [torch.Generator().manual_seed(100 + s) for s in range(3)]
    for _ in range(4):
        batches = [batch(g) for g in gens]
        single_logs = [a.update(b) for a, b in zip(singles, batches)]
        stacked_logs = stacked.update(seeds.stack_batches(batches))
        # the losses of the stack are the sums of the seeds' losses
        for key in single_logs[0]:
            if key.endswith("loss"):
                assert float(stacked_logs[key]) == pytest.approx(sum(float(l[key]) for l in single_logs), rel=1e-5)
    for k, single in enumerate(singles):
        member = seeds.member(stacked, k)
        for a, b in zip(tensors(single.state_dict()), tensors(member.state_dict())):
            assert a.shape == b.shape
            torch.testing.assert_close(b.float(), a.float(), rtol=1e-4, atol=1e-5)
    # the members stay different seeds: member 0 is not member 1
    assert not torch.allclose(next(seeds.member(stacked, 0).actor.parameters()),
                              next(seeds.member(stacked, 1).actor.parameters()))


def test_a_gradient_per_seed_is_the_seeds_own():
    """Summed, not averaged, over the seeds: each seed's gradient is the one its own loss gives."""
    singles = [build("iql", s) for s in range(2)]
    stacked = seeds.stack(singles)
    batches = [batch(torch.Generator().manual_seed(s)) for s in range(2)]
    for agent, b in [*zip(singles, batches), (stacked, seeds.stack_batches(batches))]:
        loss = agent.actor_nll(b["obs"], b["act"]).mean(-1).sum()
        loss.backward()
    w = "mean_net.0.weight"
    for k, single in enumerate(singles):
        torch.testing.assert_close(stacked.actor.get_parameter(w).grad[k], single.actor.get_parameter(w).grad)


def test_stack_refuses_what_is_not_a_batch_of_seeds():
    with pytest.raises(UserError, match="DiscreteCQL cannot train several seeds as one batch"):
        seeds.stack([DiscreteCQL(OBS, 3), DiscreteCQL(OBS, 3)])
    with pytest.raises(ValueError, match="differ in class or settings"):
        seeds.stack([build("iql", 0), build("iql-layer-norm-deterministic", 1)])
    one = build("bc", 0)
    other = BC(OBS, ACT, -2, 2, BCConfig(hidden=(32, 32)))
    with pytest.raises(ValueError, match="actor.action_scale differ"):
        seeds.stack([one, other])
    with pytest.raises(ValueError, match="not a stack of seeds"):
        seeds.member(one, 0)
    with pytest.raises(IndexError, match="k=2 outside the 2 seeds"):
        seeds.member(seeds.stack([build("bc", 0), build("bc", 1)]), 2)


KW = dict(eval_env="Pendulum-v1", eval_every=20, eval_episodes=2, log_every=10, progress=False, batch_size=32,
          precision="float32")


def pendulum_iql():
    return IQL(3, 1, -2, 2, IQLConfig(max_steps=40, hidden=(32, 32)))


def test_train_with_a_list_of_agents_is_the_separate_runs(tmp_path):
    ds = pendulum_like()
    run_seeds = [3, 7]
    separate = []
    for s in run_seeds:
        torch.manual_seed(s)
        separate.append((pendulum_iql(), s))
    for agent, s in separate:
        train(agent, ds, 40, seed=s, out=tmp_path / f"single{s}", **KW)
    batched = []
    for s in run_seeds:
        torch.manual_seed(s)
        batched.append(pendulum_iql())
    histories = train(batched, ds, 40, seed=run_seeds, out=[tmp_path / f"s{s}" for s in run_seeds],
                      checkpoint_every=20, **KW)
    assert len(histories) == 2
    for (single, s), agent, history in zip(separate, batched, histories):
        # the caller's agents end trained, as the separate runs' did
        for a, b in zip(single.actor.parameters(), agent.actor.parameters()):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
        # each seed's evaluations: its own episodes (seeded by its seed), the same returns within float rounding
        evals = [json.loads(x) for x in (tmp_path / f"s{s}" / "log.jsonl").read_text().splitlines()
                 if json.loads(x)["kind"] == "eval"]
        singles = [json.loads(x) for x in (tmp_path / f"single{s}" / "log.jsonl").read_text().splitlines()
                   if json.loads(x)["kind"] == "eval"]
        assert [e["step"] for e in evals] == [20, 40]
        for e, f in zip(evals, singles):
            assert e["return_mean"] == pytest.approx(f["return_mean"], rel=1e-3)
        assert history["eval"][-1]["return_mean"] == evals[-1]["return_mean"]
        assert all(e["members"] == 2 for e in history["train"])
        # what a single run writes, seed by seed: an agent.pt of this seed alone, and its checkpoint
        saved = torch.load(tmp_path / f"s{s}" / "agent.pt", weights_only=False)
        assert saved["agent"]["actor"]["log_std"].shape == (1,)
        ck = torch.load(tmp_path / f"s{s}" / "checkpoint.pt", weights_only=False)
        assert ck["step"] == 40 and len(ck["history"]["eval"]) == 2


def test_a_batch_of_seeds_resumes_where_it_stopped(tmp_path):
    ds = pendulum_like()

    def agents():
        out = []
        for s in (0, 1):
            torch.manual_seed(s)
            out.append(pendulum_iql())
        return out

    outs_a, outs_b = [tmp_path / "a0", tmp_path / "a1"], [tmp_path / "b0", tmp_path / "b1"]
    straight = train(agents(), ds, 40, seed=[0, 1], out=outs_a, checkpoint_every=20, **KW)
    train(agents(), ds, 30, seed=[0, 1], out=outs_b, checkpoint_every=20, **KW)  # stops at 30, checkpoint at 20
    resumed_agents = agents()
    resumed = train(resumed_agents, ds, 40, seed=[0, 1], out=outs_b, checkpoint_every=20, resume=True, **KW)
    for h_a, h_b in zip(straight, resumed):
        assert strip_timing(h_a) == strip_timing(h_b)
    (outs_b[1] / "checkpoint.pt").unlink()
    with pytest.raises(UserError, match="only 1 of 2 have a checkpoint.pt"):
        train(agents(), ds, 40, seed=[0, 1], out=outs_b, resume=True, **KW)


def test_train_checks_a_batch_of_seeds(tmp_path):
    ds = pendulum_like()
    two = [pendulum_iql(), pendulum_iql()]
    with pytest.raises(ValueError, match="2 agents need a list of 2 seeds, got seed=0"):
        train(two, ds, 5, progress=False)
    with pytest.raises(ValueError, match="the seeds of a batch must differ"):
        train(two, ds, 5, seed=[1, 1], progress=False)
    with pytest.raises(ValueError, match="each seed of a batch needs its own out directory"):
        train(two, ds, 5, seed=[0, 1], out=[tmp_path, tmp_path], progress=False)
    with pytest.raises(ValueError, match="need a list of 2 out directories"):
        train(two, ds, 5, seed=[0, 1], out=tmp_path, progress=False)
    with pytest.raises(ValueError, match="a custom update= trains one agent"):
        train(two, ds, 5, seed=[0, 1], progress=False, update=lambda a, b: {})


# --------------------------------------------------------------------------------------------------------------
# The command line and the suite
# --------------------------------------------------------------------------------------------------------------

def test_minirl_train_seeds_writes_one_run_per_seed(tmp_path, monkeypatch, capsys):
    from minirl.cli import main
    from minirl.runs import load_agent
    monkeypatch.setenv("MINIRL_DATA", str(tmp_path / "data"))
    args = ["train", "--dataset", "pendulum-random", "--scale", "smoke", "--steps", "10", "--eval-episodes", "1",
            "--out", str(tmp_path / "runs")]
    assert main([*args, "--algo", "iql", "--set", "hidden=[16,16]", "--seeds", "4", "5"]) == 0
    out = capsys.readouterr().out
    assert "seeds=4 5 (one batch)" in out and "(seed 5)" in out
    for s in (4, 5):
        config = json.loads((tmp_path / "runs" / f"s{s}" / "config.json").read_text())
        assert config["seed"] == s and config["batch_of_seeds"] == [4, 5]
        assert type(load_agent(tmp_path / "runs" / f"s{s}").agent).__name__ == "IQL"
    for bad, message in [(["--algo", "iql", "--seeds", "1", "--seed", "2"], "--seed and --seeds"),
                         (["--algo", "iql", "--seeds", "1", "1"], "the seeds of a batch must differ, got 1 1"),
                         (["--algo", "iql", "--seeds", "0", "-1"], "--seeds")]:
        with pytest.raises(SystemExit) as e:
            main([*args[:-1], str(tmp_path / "other"), *bad])
        assert e.value.code == 2
        assert message in capsys.readouterr().err


def test_run_suite_batch_seeds_records_each_seed(tmp_path, capsys):
    import run_suite
    base = ["--algos", "bc", "--datasets", "pendulum-random", "--scale", "smoke", "--steps", "10", "--set",
            "hidden=[16,16]", "--root", str(tmp_path), "--tag", "t", "--eval-episodes", "1"]
    assert run_suite.main([*base, "--seeds", "0", "1", "--batch-seeds"]) == 0
    results = [json.loads((tmp_path / "t" / "bc-hidden=16,16" / "pendulum-random" / f"s{s}" / "result.json")
                          .read_text()) for s in (0, 1)]
    assert [r["seed"] for r in results] == [0, 1] and all(r["batch_of_seeds"] == [0, 1] for r in results)
    capsys.readouterr()
    assert run_suite.main([*base, "--seeds", "0", "1", "2", "--batch-seeds"]) == 0  # 0 and 1 done: 2 alone
    out = capsys.readouterr().out
    assert out.count("(done)") == 2 and "seeds=2 (one batch)" in out
    with pytest.raises(SystemExit) as e:
        run_suite.main([*base, "--seeds", "0", "--batch-seeds", "--executor", "local"])
    assert e.value.code == 2 and "--batch-seeds makes a batch of seeds in one process" in capsys.readouterr().err
