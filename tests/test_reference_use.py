"""An answer that hands its task to minirl's own implementation does not pass (issue 44).

Every checker declares its task's reference (``Checks(task, reference=...)``); the student's code runs under a
:class:`minirl.classroom.checks.ReferenceWatch` of it. Here, for every task of every exercise notebook, submissions
reach that reference by several routes (an alias, a lookup at call time, a copy of the function made from its code,
one made from its source, a call in another thread; for the agent tasks also the agent's own ``update``, through
the class and through ``super()``) and each must get ``uses the reference implementation``, not a score. The honest
answers of the reference notebooks still pass (their own test, and the grader test at the end here).
"""
import importlib
import inspect
import sys
import textwrap
import threading
import types

import pytest

from minirl.classroom import CHECKER_MODULES, agent_checks, checks, predict_checks

from test_grading import filled, rows_of, write

MODULES = [importlib.import_module(f"minirl.classroom.{m}") for m in CHECKER_MODULES]
CHECKERS = {name[len("check_"):]: getattr(module, name) for module in MODULES
            for name in dir(module) if name.startswith("check_") and callable(getattr(module, name))}
DELEGABLE = sorted(set(CHECKERS) - set(predict_checks.FORM_ONLY))  # the tasks whose answer is a function


@pytest.fixture(autouse=True)
def _a_short_training_check(monkeypatch):
    """The assignment's penalty_sweep check trains 4,000 updates (about 45 s); what is tested here is the verdict on
    the route, not the score: 20 updates, and a pass mark every run reaches."""
    from minirl.classroom import project_checks as pc
    monkeypatch.setitem(pc.GRADING, "steps", 20)
    monkeypatch.setattr(pc, "reference_distribution", lambda path=None: {"scores": [-1000.0]})


def _not_yet(*args, **kwargs):
    raise NotImplementedError("your code here")


@pytest.fixture(scope="module")
def references():
    """Each task's declared reference, read off the checker itself (run once on an unimplemented answer)."""
    found = {}
    original = checks.Checks.__init__

    def recording(self, task, *, reference, **kw):
        found[task] = reference
        original(self, task, reference=reference, **kw)

    checks.Checks.__init__ = recording
    try:
        for task, checker in CHECKERS.items():
            checker(_not_yet)
    finally:
        checks.Checks.__init__ = original
    return {task: (ref if isinstance(ref, tuple) else (ref,)) for task, ref in found.items()}


def _resolve(function):
    """The object at ``function``'s module and qualified name, looked up now."""
    obj = importlib.import_module(function.__module__)
    for part in function.__qualname__.split("."):
        obj = getattr(obj, part)
    return obj


def _evaluate(f):
    from minirl import tabular as tab
    return lambda P, R, gamma, pi: (lambda q: q[0] if isinstance(q, tuple) else q)(
        f(tab.FiniteMDP(P, R, gamma), pi, tol=1e-12) if f.__name__.endswith("iterative") else
        f(tab.FiniteMDP(P, R, gamma), pi))


def _empirical(f):
    import numpy as np

    def empirical_mdp(s, a, r, s_next, S, A):
        data = {"s": np.asarray(s), "a": np.asarray(a), "r": np.asarray(r, dtype=float),
                "s_next": np.asarray(s_next), "done": np.zeros(len(s), dtype=bool)}
        m, counts = f(data, S, A, gamma=0.9)
        return m.P, m.R, counts
    return empirical_mdp


def _bisect(f):
    from minirl import stitching as st
    from minirl import tabular as tab

    def stitching_threshold(grid, data):
        S, A = grid.mdp.n_states, grid.mdp.n_actions
        mdp_hat, counts = tab.empirical_mdp(data, S, A, grid.mdp.gamma)
        pi_beta = tab.empirical_behavior_policy(data, S, A)
        return f(lambda tau: tab.policy_return(grid.mdp, st.iql_policy(mdp_hat, pi_beta, counts > 0, tau)[0])
                 >= grid.mdp.gamma ** 9 - 1e-9, 0.5, 0.999)
    return stitching_threshold


WORDS = {1.0: "above", -1.0: "below", 0.0: "overlap"}


def _record(runs, comparisons, compare):
    """``record_verdicts``'s answer with ``compare(a, b) -> (difference, lo, hi, verdict)``."""
    from minirl import plots
    out = [compare(plots.final_scores(runs, m, ds), plots.final_scores(runs, b, ds)) for m, b, ds in comparisons]
    return tuple([o[k] for o in out] for k in range(4))


def _with_verdict(difference_ci):
    from minirl import plots
    return lambda a, b, *rest: (lambda d, lo, hi: (d, lo, hi, plots.verdict(lo, hi)))(*difference_ci(a, b, *rest))


def _verdict_of_difference(verdict):
    from minirl import plots
    return lambda a, b, *rest: (lambda d, lo, hi: (d, lo, hi, verdict(lo, hi)))(*plots.difference_ci(a, b, *rest))


def _table_then_record(baseline_table):
    from minirl.classroom.comparison_checks import compare_reference

    def record_verdicts(runs, comparisons):
        baseline_table(runs, ["iql"], ["bc"], ["hopper-medium-replay"])  # read off the library's table
        return _record(runs, comparisons, compare_reference)
    return record_verdicts


# what a student who delegates writes around a reference whose signature is not the task's (the task's result, got
# from the reference): by (task, the reference's name), else by the reference's name
ADAPT = {
    "iqm_weights": lambda f: lambda values: float(f(len(values)) @ __import__("numpy").sort(values)),
    ("compare", "difference_ci"): _with_verdict,
    "verdict": _verdict_of_difference,
    "record_verdicts_reference": lambda f: lambda runs, comparisons: (lambda d, lo, hi, v: (
        d, lo, hi, [WORDS[float(x)] for x in v]))(*f(comparisons)),
    "baseline_table": _table_then_record,
    ("record_verdicts", "difference_ci"): lambda f: lambda runs, comparisons: _record(runs, comparisons,
                                                                                      _with_verdict(f)),
    "evaluate_policy_exact": _evaluate,
    "evaluate_policy_iterative": _evaluate,
    "empirical_mdp": _empirical,
    "expectile": lambda f: lambda: float(f(__import__("numpy").array([0.0, 1.0, 5.0]),
                                           __import__("numpy").array([0.5, 0.3, 0.2]), 0.9)),
    "optimism_experiment": lambda f: lambda: (lambda d: (d["J_hat"], d["J_true"]))(f()),
    "closed_forms": lambda f: lambda grid, data: f(grid)["tau_c"],  # right on the chapter's data only
    "threshold": _bisect,
}


def routes(ref, task: str) -> dict:
    """Answers to ``task`` that obtain their result from ``ref`` (a function, or an agent's method), each by its own
    route."""
    function = getattr(ref, "__func__", ref)
    adapt = ADAPT.get((task, function.__name__), ADAPT.get(function.__name__, lambda f: f))

    def lookup(*args, **kwargs):  # found by name when called, as getattr(minirl.iql, "awr_" + "weights")
        return _resolve(function)(*args, **kwargs)

    copy = types.FunctionType(function.__code__, function.__globals__, "my_copy", function.__defaults__,
                              function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    namespace = dict(function.__globals__)
    exec(textwrap.dedent(inspect.getsource(function)), namespace)  # re-made from the library's source file
    from_source = namespace[function.__name__]

    def in_a_thread(*args, **kwargs):
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("value", function(*args, **kwargs)))
        t.start()
        t.join()
        return out["value"]

    return {route: adapt(f) for route, f in {"alias": ref, "lookup when called": lookup, "copy of its code": copy,
                                            "re-made from its source": from_source,
                                            "in another thread": in_a_thread}.items()}


AGENT_ROUTES = {
    "agent.update": lambda agent, batch: agent.update(batch),
    "through the class": lambda agent, batch: type(agent).update(agent, batch),
    "getattr": lambda agent, batch: getattr(agent, "up" + "date")(batch),
}


def _super_route(agent, batch):
    class Mine(type(agent)):
        def update(self, batch):
            return super().update(batch)
    agent.__class__ = Mine
    return agent.update(batch)


AGENT_ROUTES["super()"] = _super_route


def _verdict_of(checker, fn, capsys) -> tuple[dict, str]:
    del checks._VERDICTS[:]
    checker(fn)
    return checks._VERDICTS[-1], capsys.readouterr().out


def test_every_task_declares_its_reference(references):
    assert set(references) == set(CHECKERS), "a checker that makes no Checks"
    missing = {t for t, refs in references.items() if refs == (None,)}
    # the predictions are values the student types, not functions: nothing to delegate (predict_checks.FORM_ONLY)
    assert missing == set(predict_checks.FORM_ONLY), f"tasks without a reference: {sorted(missing)}"
    library = {t for t, refs in references.items() if t not in missing and all(r.__module__.split(".")[1] != "classroom" for r in refs)}
    # the tasks whose reference is minirl's library code (the others: the classroom's own reference experiments)
    assert {"awr_weights", "iql_update", "policy_transition", "one_step_policy", "bcq_action_mask"} <= library


@pytest.mark.parametrize("task", predict_checks.FORM_ONLY)
def test_a_prediction_is_a_value_and_a_function_in_its_place_is_not_one(task, capsys):
    """The form-only tasks take a number: the experiment's reference (or any function) handed in instead of the
    prediction fails the form check, so no route delegates a prediction."""
    reference = {"coverage_prediction": predict_checks.coverage_experiment_reference,
                 "gap_prediction": predict_checks.unseen_gap_reference}[task]
    why = "the rare actions are seen least often"
    verdict, out = _verdict_of(lambda v: CHECKERS[task](v, why), reference, capsys)
    assert verdict["passed"] < verdict["n"] and "the prediction must be a number, got a function" in out
    verdict, out = _verdict_of(lambda v: CHECKERS[task](v, why), 0.5, capsys)
    assert verdict["passed"] == verdict["n"] == 2, out


@pytest.mark.parametrize("task", DELEGABLE)
def test_every_route_to_the_reference_is_caught(task, references, capsys):
    caught = {}
    for ref in references[task]:
        candidates = dict(routes(ref, task))
        if task.endswith("_update"):
            candidates.update(AGENT_ROUTES)
        for route, fn in candidates.items():
            verdict, out = _verdict_of(CHECKERS[task], fn, capsys)
            caught[f"{ref.__qualname__}: {route}"] = verdict["uses_reference"]
            assert verdict["uses_reference"], f"{task}: the route {route!r} to {ref.__qualname__} was not noticed"
            assert f"{task}: uses the reference implementation" in out
            assert "checks passed" not in out.splitlines()[-1]
    assert len(caught) >= 3


@pytest.mark.parametrize("task", DELEGABLE)
def test_without_the_watch_the_delegating_answer_would_pass(task, references, capsys, monkeypatch):
    """What the watch is for: the alias route scores full marks when the checker does not watch (the hole of issue
    44). The exception: closed_forms answers the chapter's data only."""
    original = checks.Checks.__init__
    monkeypatch.setattr(checks.Checks, "__init__", lambda self, task, *, reference, **kw: original(self, task, reference=None))
    for ref in references[task]:
        verdict, out = _verdict_of(CHECKERS[task], routes(ref, task)["alias"], capsys)
        if getattr(ref, "__name__", "") != "closed_forms":
            assert verdict["passed"] == verdict["n"] > 0, out


def test_the_watch_sees_nothing_in_an_honest_answer(capsys):
    def awr_weights(adv, beta, max_weight=100.0):
        import torch
        return torch.clamp(torch.exp(beta * adv), max=max_weight)

    verdict, out = _verdict_of(checks.check_awr_weights, awr_weights, capsys)
    assert verdict["uses_reference"] == [] and out.strip().endswith("checks passed")


def test_other_pieces_of_minirl_stay_usable(capsys):
    """An honest IQL update that uses minirl's other tasks' functions and the agent's networks is not flagged."""
    import torch

    from minirl import iql

    def iql_update(agent, batch):
        # the reference's algorithm, written out with the library's pure losses (other tasks' functions)
        obs, act, rew, nxt, done = (batch[k] for k in ("obs", "act", "rew", "next_obs", "done"))
        cfg = agent.config
        with torch.no_grad():
            target_q = iql.value_target(agent.critic_target(obs, act))
        v = agent.V(obs)
        value_loss = iql.value_loss(v, target_q, cfg.expectile)
        agent.value_opt.zero_grad()
        value_loss.backward()
        agent.value_opt.step()
        return {"value_loss": value_loss, "actor_loss": value_loss, "critic_loss": value_loss}

    verdict, out = _verdict_of(agent_checks.check_iql_update, iql_update, capsys)
    assert verdict["uses_reference"] == [], out  # wrong (it skips the actor and critics) but honest
    assert "checks passed" in out.splitlines()[-1]


def test_the_watch_restores_a_tracer_already_installed():
    seen = []

    def tracer(frame, event, arg):
        seen.append(event)
        return None

    sys.settrace(tracer)
    try:
        with checks.ReferenceWatch([checks.mismatch]):
            checks.mismatch(1.0, 1.0)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)
    assert "call" in seen  # the installed tracer kept receiving its events


def test_the_grader_rows_say_uses_reference(tmp_path):
    """End to end: a submission whose awr_weights is minirl's and whose iql_update calls agent.update is graded
    `uses reference` on those two tasks; its other (honest) answers pass."""
    from minirl.classroom import grader
    delegating = {
        "awr_weights": "import minirl.iql\nawr_weights = minirl.iql.awr_weights\ndef awr_weights(adv, beta, "
                       "max_weight=100.0):\n    return minirl.iql.awr_weights(adv, beta, max_weight)\n",
        "iql_update": "def iql_update(agent, batch):\n    return agent.update(batch)\n",
    }
    folder = tmp_path / "subs"
    write(folder, "dan", "04_iql", filled("04_iql", replace=delegating))
    results, _ = grader.grade_folder(folder, parallel=1)
    rows = rows_of(results, "dan", "04_iql")
    assert rows["awr_weights"].status == "uses reference" and not rows["awr_weights"].passed
    assert "minirl.iql.awr_weights" in rows["awr_weights"].message
    assert rows["iql_update"].status == "uses reference" and "IQL.update" in rows["iql_update"].message
    assert rows["expectile_loss"].status == "passed" and rows["q_target"].status == "passed"
