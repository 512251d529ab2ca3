"""The agent protocol (minirl.agent): every agent declares its modules, optimisers, tensors and counters; stacking,
capture, checkpoints and evaluation use those declarations, and a piece left undeclared is an error, not a piece
silently left out of checkpoints. And the training loop stays one screen long."""
import ast
import inspect
import re
from pathlib import Path

import pytest
import torch

from minirl import agent as protocol
from minirl import seeds, train as train_module
from minirl.bc import BC
from minirl.bcq import BCQ, BCQConfig
from minirl.cql import CQL, CQLConfig
from minirl.discrete import DiscreteBCQ, DiscreteCQL
from minirl.iql import IQL, IQLConfig
from minirl.sac import SAC
from minirl.td3bc import TD3BC
from minirl.train import train
from test_train import pendulum_like

SMALL = (16, 16)
AGENTS = {
    "bc": lambda: BC(3, 1, -2, 2),
    "bcq": lambda: BCQ(3, 1, -2, 2, BCQConfig(vae_hidden=SMALL, actor_hidden=SMALL, critic_hidden=SMALL)),
    "cql": lambda: CQL(3, 1, -2, 2, CQLConfig(actor_hidden=SMALL, critic_hidden=SMALL, n_actions=2)),
    "iql": lambda: IQL(3, 1, -2, 2, IQLConfig(hidden=SMALL, max_steps=100)),
    "td3bc": lambda: TD3BC(3, 1, -2, 2),
    "sac": lambda: SAC(3, 1, -2, 2),
    "discrete-bcq": lambda: DiscreteBCQ(3, 2),
    "discrete-cql": lambda: DiscreteCQL(3, 2),
}


@pytest.mark.parametrize("name", AGENTS)
def test_every_agent_declares_its_pieces_and_saves_them_with_its_step(name):
    agent = AGENTS[name]()
    assert isinstance(agent, protocol.Agent) or name == "sac"  # SAC learns online and acts through its actor
    protocol.check_agent(agent)
    state = agent.state_dict()
    assert state["step"] == 0
    for kind in ("modules", "optimizers", "tensors", "counters"):
        assert set(getattr(agent, kind)) <= set(state), kind


@pytest.mark.parametrize("name", ["bc", "cql", "iql", "sac", "discrete-bcq"])
def test_a_state_dict_round_trip_keeps_every_declared_piece_and_the_step(name):
    agent, other = AGENTS[name](), AGENTS[name]()
    with torch.no_grad():
        for module in protocol.declared(agent, "modules").values():
            for p in module.parameters():
                p.add_(1.0)
        for t in protocol.declared(agent, "tensors").values():
            t.add_(2.0)
    agent.step = 7
    other.load_state_dict(agent.state_dict())
    assert other.step == 7
    for key, value in protocol.state_of(agent).items():
        mine = protocol.state_of(other)[key]
        if torch.is_tensor(value):
            assert torch.equal(value, mine), key
        elif key in agent.modules:
            assert all(torch.equal(value[k], mine[k]) for k in value), key


class ForgetsAnOptimiser(IQL):
    optimizers = ("actor_opt", "value_opt")  # critic_opt left out: the critic would train, its Adam state unsaved


class ForgetsANetwork(IQL):
    modules = ("actor", "critic", "critic_target")  # value left out: value_opt steps a network nobody saves


class ForgetsTheStep(BC):
    counters = ()


class SavesItsOwnWay(BC):
    def state_dict(self):
        return {"actor": self.actor.state_dict(), "step": self.step}  # its optimiser's moments are not saved


def small_iql(cls):
    return cls(3, 1, -2, 2, IQLConfig(hidden=SMALL, max_steps=100))


def test_an_undeclared_optimiser_is_an_error_before_any_work(tmp_path):
    agent = small_iql(ForgetsAnOptimiser)
    assert "critic_opt" not in protocol.state_of(agent)  # what silence would cost: the checkpoints would lack it
    message = r"ForgetsAnOptimiser.critic takes a gradient but no declared optimiser steps it: add its optimiser"
    with pytest.raises(TypeError, match=message):
        protocol.check_agent(agent)
    with pytest.raises(TypeError, match=message):
        train(agent, pendulum_like(), 20, out=tmp_path / "run", checkpoint_every=10, progress=False)
    assert not (tmp_path / "run").exists() and agent.step == 0  # refused before any folder, checkpoint or update
    with pytest.raises(TypeError, match=message):
        seeds.stack([small_iql(ForgetsAnOptimiser), small_iql(ForgetsAnOptimiser)])


def test_an_undeclared_network_a_missing_step_and_a_short_state_dict_are_errors():
    with pytest.raises(TypeError, match=r"ForgetsANetwork.value_opt steps a parameter of no declared module"):
        protocol.check_agent(small_iql(ForgetsANetwork))
    with pytest.raises(TypeError, match=r"ForgetsTheStep.counters must include 'step'"):
        protocol.check_agent(ForgetsTheStep(3, 1, -2, 2))
    with pytest.raises(TypeError, match=r"SavesItsOwnWay.state_dict\(\) leaves out opt"):
        protocol.check_agent(SavesItsOwnWay(3, 1, -2, 2))

    class NoDeclarations:
        def update(self, batch):
            return {}
    with pytest.raises(TypeError, match=r"NoDeclarations does not declare its modules, optimizers, tensors, counters"):
        protocol.check_agent(NoDeclarations())

    class WrongKind(BC):
        modules = ("actor", "opt")
    with pytest.raises(TypeError, match=r"WrongKind.modules names 'opt', of type Adam, not a torch.nn.Module"):
        protocol.check_agent(WrongKind(3, 1, -2, 2))

    class Misspelt(BC):
        optimizers = ("optimizer",)
    with pytest.raises(TypeError, match=r"Misspelt.optimizers names 'optimizer', which Misspelt does not have"):
        protocol.check_agent(Misspelt(3, 1, -2, 2))


def test_capture_and_compile_take_the_declared_pieces():
    from minirl import devices
    agent = AGENTS["cql"]()
    held = {id(t) for t in devices._state_tensors(agent)}
    assert id(agent.log_alpha) in held and id(agent.log_alpha_prime) in held
    assert devices._optimizers(agent) == [agent.actor_opt, agent.critic_opt, agent.alpha_opt, agent.alpha_prime_opt]


def test_an_iql_file_that_saved_schedule_t_loads_its_schedule():
    agent = small_iql(IQL)
    state = {k: v for k, v in agent.state_dict().items() if k != "t"} | {"step": 5, "schedule_t": 12}
    agent.load_state_dict(state)  # written between the schedule fix and the agent protocol
    assert agent.step == 5 and int(agent.t) == 12


def test_no_agent_is_scanned_with_vars_in_minirl():
    package = Path(protocol.__file__).parent
    scans = [f"{p.name}:{n}" for p in sorted(package.glob("*.py")) if p.name != "tabular.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\bvars\(|__dict__", line)]
    assert scans == []


def test_the_training_loop_is_one_screen_and_flat():
    source = inspect.getsource(train_module.train)
    function = ast.parse(source).body[0]
    body = function.end_lineno - function.body[0].lineno + 1  # everything after the signature, docstring included
    assert body <= 80, f"train()'s body is {body} lines"
    calls = {node.func.id for node in ast.walk(function) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert {"progress_bar", "Interrupted"} <= calls  # the loop over the steps is train's own, not handed elsewhere
    nested = [type(node).__name__ for node in ast.walk(function) if node is not function
              and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))]
    assert nested == []
