"""The algorithms by name are a table of frozen dataclasses (minirl.agent.Algorithm), each declared in its algorithm's
file with what is special about it (issue 73.4): runs.py holds no algorithm's knowledge."""
import ast
import dataclasses
import inspect
import sys

import pytest

from minirl import runs
from minirl.agent import Algorithm


def test_every_algo_name_is_a_frozen_entry_declared_in_its_algorithm_s_file():
    # before: ALGORITHMS held tuples of module and class names, and runs.py the rest
    assert list(runs.ALGORITHMS) == ["bc", "bcq", "cql", "cql-lagrange", "sac-offline", "iql", "td3+bc", "10%bc",
                                     "goal-bc", "path-bc"]  # --help's order
    for name, entry in runs.ALGORITHMS.items():
        assert isinstance(entry, Algorithm) and entry.name == name
        with pytest.raises(dataclasses.FrozenInstanceError):
            entry.preset = {}
        home = sys.modules[entry.agent.__module__]
        assert entry in home.ALGORITHMS and entry.config.__module__ == home.__name__
        entry.config(**entry.preset)  # the preset is a config the file can build


def test_runs_py_s_code_names_no_algorithm_and_no_algorithm_s_config_field():
    """The run's code reads the entry's hooks; the names of the algorithms and of their fields (10%BC's top_fraction,
    goal-BC's goal_pieces, CQL-Lagrange's lagrange, IQL's max_steps) belong to their files. (The scales' table,
    SCALES, names the algorithms it sizes at the smoke and cpu scales: data, not code.)"""
    fields = {f.name for entry in runs.ALGORITHMS.values() for f in dataclasses.fields(entry.config)}
    fields -= {"normalize_states", "reward_scale"}  # every config's: how train.prepare_dataset readies the data
    functions = [node for node in ast.walk(ast.parse(inspect.getsource(runs)))
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    assert {f.name for f in functions} >= {"plan_run", "run", "_run_held", "load_agent", "make_config"}
    strings = {node.value for f in functions for node in ast.walk(f)
               if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    found = sorted(strings & (fields | set(runs.ALGORITHMS)))
    assert found == []
    attributes = sorted({node.attr for f in functions for node in ast.walk(f) if isinstance(node, ast.Attribute)}
                        & fields)
    assert attributes == []


def test_the_files_declare_their_special_cases():
    from minirl import bc, cql, iql
    assert runs.algorithm("iql").for_steps(300) == {"max_steps": 300} and runs.algorithm("bc").for_steps(300) == {}
    assert runs.algorithm("iql").for_domain("maze") == {"expectile": 0.9, "beta": 10.0, "reward_scale": None}
    assert runs.algorithm("cql-lagrange").for_domain("maze") == cql.MAZE
    assert runs.algorithm("sac-offline").for_domain("maze") == runs.algorithm("cql").for_domain("hopper") == {}
    assert runs.DOMAIN_CONFIG == {("iql", "maze"): iql.ALGORITHMS[0].domains["maze"], ("cql", "maze"): cql.MAZE,
                                  ("cql-lagrange", "maze"): cql.MAZE}
    assert {runs.algorithm(a).data for a in ("bc", "10%bc", "goal-bc", "path-bc")} == {bc.cloned_data}
    assert {runs.algorithm(a).notes for a in ("cql", "cql-lagrange", "sac-offline")} == {cql.precision_note}
    with pytest.raises(runs.UserError, match="unknown algorithm 'iqll'.*did you mean 'iql'"):
        runs.algorithm("iqll")


def test_a_cql_run_with_lagrange_set_by_hand_is_noted_in_bf16_too(tmp_path, capsys, monkeypatch):
    """The note follows the config (the file's hook reads plan.config.lagrange), not the --algo name."""
    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop
    monkeypatch.setattr(runs, "train", stop)
    with pytest.raises(Stop):
        runs.run("cql", "pendulum-medium-replay", scale="smoke", out=tmp_path / "run", progress=False,
                 precision="bf16", overrides={"lagrange": True})
    assert "  note: CQL-Lagrange in bf16: rounding" in capsys.readouterr().out
