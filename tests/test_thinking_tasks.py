"""The tasks that cannot be answered by typing a printed formula back (issue 72, item 6): "find the bug" (a broken
update given to the student, who writes the fixed function) and "design a dataset" (a property the chapter's
solvers verify). Each checker is seen to fail on what it guards: the broken function the notebook hands out, each of
its bugs alone, and the degenerate designs; the fixed function and the reference notebook's design pass, on the
public inputs and on inputs drawn as in a graded run."""
import contextlib
import io
import json
import math

import pytest
import torch

from minirl.classroom import checks, debug_checks, release


def _verdict(checker, fn) -> tuple[int, int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        checker(fn)
    last = out.getvalue().strip().splitlines()[-1]
    k, n = (int(x) for x in last.split(": ")[1].split(" ")[0].split("/"))
    return k, n, out.getvalue()


@contextlib.contextmanager
def _graded_inputs(draw: int):
    """The checker's random inputs as a graded run draws them (checks.fresh), not the self-check's public ones."""
    previous, checks._FRESH = checks._FRESH, draw
    try:
        yield
    finally:
        checks._FRESH = previous


def _given_cell(notebook: str, name: str) -> str:
    """The source of the given (not answer) code cell of the reference notebook that defines ``name``."""
    nb = json.loads((release.SOLUTIONS / f"{notebook}.ipynb").read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and f"def {name}(" in src and "solution" not in cell["metadata"].get("tags", []):
            return src
    raise AssertionError(f"{notebook} hands out no {name}")


def _function(source: str, name: str):
    scope = {"torch": torch, "math": math}
    exec(source, scope)  # noqa: S102 - the notebook's own given code
    return scope[name]


# each bug of the given function and its fix (old, new): the fixed function applies all, a single bug all but one
BUGS = {
    ("04_iql", "iql_losses", debug_checks.IQL_LOSSES_BUGGY): [
        ("q_min = q.min(dim=0).values", "q_min = q_target.min(dim=0).values"),    # the online critics
        ("torch.where(diff > 0, ", "torch.where(diff < 0, "),                      # the expectile's weights swapped
        ("adv = q_min - v\n", "adv = q_min - v.detach()\n"),                       # the advantage not detached
    ],
    ("03_cql", "cql_critic_loss", debug_checks.CQL_CRITIC_LOSS_BUGGY): [
        ("full_like(log_pi, math.log(0.5))", "full_like(log_pi, act_dim * math.log(0.5))"),  # 0.5, not 0.5^d
        ("soft_max = torch.logsumexp", "soft_max = temperature * torch.logsumexp"),       # T * missing
        ("[log_uniform, log_pi]", "[log_uniform, log_pi.detach()]"),                     # log_pi not detached
    ],
}


@pytest.mark.parametrize("notebook,task,buggy", list(BUGS), ids=[k[1] for k in BUGS])
def test_the_notebook_hands_out_the_broken_function_the_tests_know(notebook, task, buggy):
    assert buggy in _given_cell(notebook, f"{task}_buggy")


@pytest.mark.parametrize("draw", [None, 12345, 987654321], ids=["public", "graded-1", "graded-2"])
@pytest.mark.parametrize("notebook,task,buggy", list(BUGS), ids=[k[1] for k in BUGS])
def test_the_broken_function_fails_each_bug_alone_fails_the_fixed_one_passes(notebook, task, buggy, draw):
    checker = getattr(debug_checks, f"check_{task}")
    fixes = BUGS[(notebook, task, buggy)]
    with _graded_inputs(draw) if draw is not None else contextlib.nullcontext():
        k, n, out = _verdict(checker, _function(buggy, f"{task}_buggy"))
        assert k < n and "check FAILED" in out, out
        for left in range(len(fixes)):
            source = buggy
            for j, (old, new) in enumerate(fixes):
                assert old in source
                source = source if j == left else source.replace(old, new)
            k, n, out = _verdict(checker, _function(source, f"{task}_buggy"))
            assert k < n, f"{task}: bug {left} alone passed:\n{out}"
        source = buggy
        for old, new in fixes:
            source = source.replace(old, new)
        k, n, out = _verdict(checker, _function(source, f"{task}_buggy"))
        assert k == n > 0 and "FAILED" not in out, out


def test_the_graded_inputs_are_not_the_public_ones():
    """The random batches of a find-the-bug check are drawn per grading run: a table of the public losses fails."""
    args = debug_checks._iql_case(8, 2, 40)
    with _graded_inputs(12345):
        drawn = debug_checks._iql_case(8, 2, 40)
    assert not torch.equal(args[0], drawn[0]) and not torch.equal(args[2], drawn[2])


# ---------------------------------------------------------------------------------------------------------------
# Design a dataset: the property is the check, and the degenerate designs are rejected
# ---------------------------------------------------------------------------------------------------------------

def _families(n_a, n_b, n_c):
    from minirl import stitching as st
    return [tuple(st.FAMILIES[f]) for f, n in zip("ABC", (n_a, n_b, n_c)) for _ in range(n)]


def _reference_design():
    src = next("".join(c["source"]) for c in json.loads((release.SOLUTIONS / "04b_stitching.ipynb").read_text())[
        "cells"] if "solution" in c["metadata"].get("tags", []) and "def stitching_design(" in "".join(c["source"]))
    return _function(src, "stitching_design")


DESIGNS = {  # a design, and the first check it must fail (None: it passes all four)
    "the reference notebook's": (None, None),
    "the chapter's 90/5/5 data (too many segments)": (lambda g: _families(90, 5, 5), 0),
    "the chapter's families, 30/5/5 (CQL's move up at J1 too rare)": (lambda g: _families(30, 5, 5), 2),
    "one segment from S to G (the whole path, nothing to stitch)": (lambda g: [("start", "RRUUUURRRR")], 1),
    "the whole path next to the pieces": (lambda g: _families(1, 2, 1) + [((4, 0), "RRUUUURRRR")], 1),
    "pieces that IQL stitches too (no pit at J2)": (lambda g: [("start", "RRRRRR"), ("junction1", "UU"),
                                                               ("west", "RRUURRRR")], 3),
    "a move after an exit": (lambda g: [("start", "RRRRRRRR")], 0),
    "a dataset dict instead of segments": (lambda g: {"s": [0], "a": [1]}, 0),
    "an unknown cell": (lambda g: [("somewhere", "RR")], 0),
}


@pytest.mark.parametrize("name", list(DESIGNS))
def test_the_design_check_verifies_the_property_and_rejects_degenerate_designs(name):
    from minirl.classroom import stitching_checks
    design, first_failure = DESIGNS[name]
    del checks._VERDICTS[:]
    k, n, out = _verdict(stitching_checks.check_stitching_design, design or _reference_design())
    failed = [i for i, (_, problem) in enumerate(checks._VERDICTS[-1]["checks"]) if problem is not None]
    if first_failure is None:
        assert k == n == 4 and not failed, out
    else:
        assert failed and failed[0] == first_failure, out


def test_the_design_is_judged_in_the_grader_from_the_recorded_segments():
    """The child records the segments as plain data (tuples become lists); the judge rebuilds the dataset and runs
    the solvers itself: the reference's design passes, a degenerate one fails, whatever the child claims."""
    from minirl.classroom import grader, stitching_checks
    for design, passes in ((_reference_design(), True), (lambda g: _families(30, 5, 5), False)):
        checks._MODE = "probe"
        try:
            del checks._PROBES[:]
            stitching_checks.check_stitching_design(design)
            recorded = checks._PROBES[-1]["results"]
        finally:
            checks._MODE = "local"
        verdict, _ = grader.judge_task("stitching_design", recorded)
        assert (verdict["passed"] == verdict["n"] == 4) == passes, verdict


def _seed_design_solution():
    src = next("".join(c["source"]) for c in json.loads((release.SOLUTIONS / "05_comparison.ipynb").read_text())[
        "cells"] if "solution" in c["metadata"].get("tags", []) and "def seed_design(" in "".join(c["source"]))
    return _function(src, "seed_design")


SPLIT, STEADY = [10.0, 12.0, 14.0, 80.0, 84.0], [20.0, 22.0, 24.0, 26.0, 28.0]
TIGHT_A, TIGHT_B = [56.0, 57.0, 58.0, 59.0, 60.0], [54.0, 55.0, 56.0, 57.0, 58.0]
SEED_DESIGNS = {  # a design of chapter 5's task, and the first check it must fail (None: it passes all three)
    "the reference notebook's": (None, None),
    "pair 1 without the split seeds (a tight 16-point gap: above)": (
        lambda: (([36.0, 38.0, 40.0, 42.0, 44.0], STEADY), (TIGHT_A, TIGHT_B)), 1),
    "pair 2 with the seeds spread (a 2-point gap: overlap)": (
        lambda: ((SPLIT, STEADY), ([50.0, 54.0, 58.0, 62.0, 66.0], [48.0, 52.0, 56.0, 60.0, 64.0])), 2),
    "identical seeds (no spread: the interval is a point)": (lambda: ((SPLIT, STEADY), ([58.0] * 5, [56.0] * 5)), 0),
    "scores outside [0, 100]": (lambda: (([-50.0, 0.0, 1.0, 200.0, 250.0], STEADY), (TIGHT_A, TIGHT_B)), 0),
    "three seeds": (lambda: ((SPLIT[:3], STEADY[:3]), (TIGHT_A[:3], TIGHT_B[:3])), 0),
}


@pytest.mark.parametrize("name", list(SEED_DESIGNS))
def test_the_seed_design_check_verifies_the_verdicts_and_rejects_degenerate_seeds(name):
    from minirl.classroom import comparison_checks
    design, first_failure = SEED_DESIGNS[name]
    del checks._VERDICTS[:]
    k, n, out = _verdict(comparison_checks.check_seed_design, design or _seed_design_solution())
    failed = [i for i, (_, problem) in enumerate(checks._VERDICTS[-1]["checks"]) if problem is not None]
    if first_failure is None:
        assert k == n == 3 and not failed, out
    else:
        assert failed and failed[0] == first_failure, out


# ---------------------------------------------------------------------------------------------------------------
# Predict, then run (chapters 1 and 2): a prediction checked for its form only, an experiment judged on drawn inputs
# ---------------------------------------------------------------------------------------------------------------

def _solution_cell(notebook: str, name: str) -> str:
    return next("".join(c["source"]) for c in json.loads((release.SOLUTIONS / f"{notebook}.ipynb").read_text())[
        "cells"] if "solution" in c["metadata"].get("tags", []) and f"def {name}(" in "".join(c["source"]))


def _experiment(notebook: str, name: str, edits=()):
    """The reference notebook's experiment after the ``(old, new)`` edits, defined after the notebook's own setup."""
    from test_exercises import _run_setup_and
    source = _solution_cell(notebook, name)
    for old, new in edits:
        assert old in source, (name, old)
        source = source.replace(old, new)
    return _run_setup_and(notebook, source)["__fn__"]


def _stub(notebook: str, name: str):
    return _experiment(notebook, name, [(_solution_cell(notebook, name).split('"""\n', 2)[-1],
                                         f'    raise NotImplementedError("{name}: your code here")\n')])


PREDICTIONS = {  # task: (a right prediction, a wrong one, a value of the wrong form)
    "coverage_prediction": (0.1, 0.0, 0.2),    # 0.2 is not one of COVERAGE_EPS
    "gap_prediction": (2.0, -1.5, 40.0),       # a gap of 40 is beyond any return here
}
REASON = "the maximum picks the pairs whose few samples came out high"


@pytest.mark.parametrize("task", list(PREDICTIONS))
def test_a_prediction_is_checked_for_its_form_only(task):
    """Right or wrong, a prediction of the expected form passes the same two checks (no credit for being right); the
    stub is not implemented; a value outside the choices, a text for a number, a reason of two words or none fail."""
    from minirl.classroom import predict_checks
    checker = getattr(predict_checks, f"check_{task}")
    right, wrong, bad = PREDICTIONS[task]

    def verdict(value, why):
        del checks._VERDICTS[:]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            checker(value, why)
        v = checks._VERDICTS[-1]
        return v, [i for i, (_, problem) in enumerate(v["checks"]) if problem is not None], out.getvalue()

    for value in (right, wrong, int(right) if right == int(right) else right):
        v, failed, out = verdict(value, REASON)
        assert v["passed"] == v["n"] == 2 and not failed, out
    v, _, out = verdict(None, None)
    assert v["not_implemented"] and "not implemented yet" in out
    for value, why, first in ((bad, REASON, 0), (str(right), REASON, 0), (True, REASON, 0), (right, "too thin", 1),
                              (right, 3.0, 1)):
        v, failed, out = verdict(value, why)
        assert failed == [first], (value, why, out)


EXPERIMENTS = {  # (notebook, task): {a wrong experiment: (edits, passes the public self-check?)}
    ("01_offline_rl", "coverage_experiment"): {
        "the reward noise left out": ([(", reward_noise=0.5)", ")")], False),
        "the empirical start distribution (no init)": ([(", init=mdp.init)", ")")], False),
        "the optimistic convention (unseen pairs pay 1)": ([("init=mdp.init)", "init=mdp.init, unseen_reward=1.0)")],
                                                           False),
        "one dataset per eps, not the mean over the seeds": ([("for seed in seeds:", "for seed in list(seeds)[:1]:")],
                                                             False),
        "the seeds ignored (always 0-19)": ([("for seed in seeds:", "for seed in range(20):")], True),
        "the dataset size ignored (always 300)": ([("coverage_behaviour(eps), n_transitions,",
                                                    "coverage_behaviour(eps), 300,")], True),
    },
    ("02_bcq", "unseen_gap_sweep"): {
        "the gap read off the target network": ([("q = agent.q(states).numpy()", "q = agent.q_target(states).numpy()")],
                                                False),
        "the believed value alone, the true return not subtracted": (
            [(".mean() - greedy_return(agent, problem))", ".mean())")], False),
        "the unseen actions' largest value, not their mean": ([("q[:, 2:].mean() - q", "q[:, 2:].max() - q")], False),
        "the seed ignored (always 0)": ([("make_discrete_bcq(threshold, seed)", "make_discrete_bcq(threshold)")], True),
    },
}


@pytest.mark.parametrize("draw", [None, 12345, 987654321], ids=["public", "graded-1", "graded-2"])
@pytest.mark.parametrize("notebook,task", list(EXPERIMENTS), ids=[k[1] for k in EXPERIMENTS])
def test_the_experiment_passes_the_solution_and_fails_the_stub_and_wrong_experiments(notebook, task, draw):
    """The reference notebook's experiment passes, on the public and on drawn settings; the handed-out stub is not
    implemented; each plausible wrong experiment fails, and one that ignores an argument the self-check never varies
    (the seeds, the dataset size) passes the self-check and fails the graded run."""
    from minirl.classroom import predict_checks
    checker = getattr(predict_checks, f"check_{task}")
    with _graded_inputs(draw) if draw is not None else contextlib.nullcontext():
        k, n, out = _verdict(checker, _experiment(notebook, task))
        assert k == n > 0 and "FAILED" not in out, out
        del checks._VERDICTS[:]
        with contextlib.redirect_stdout(io.StringIO()):
            checker(_stub(notebook, task))
        assert checks._VERDICTS[-1]["not_implemented"], "the stub did not read as not implemented"
        for name, (edits, public_passes) in EXPERIMENTS[(notebook, task)].items():
            k, n, out = _verdict(checker, _experiment(notebook, task, edits))
            if draw is None and public_passes:
                assert k == n, f"{name}: {out}"
            else:
                assert k < n and "check FAILED" in out, f"{name} passed:\n{out}"


def test_the_experiments_settings_are_drawn_per_grading_run():
    """A table of the public outputs passes the self-check and fails a graded run: the settings are drawn."""
    from minirl.classroom import predict_checks as pc
    public = pc.coverage_setting(), pc.gap_setting()
    with _graded_inputs(12345):
        drawn = pc.coverage_setting(), pc.gap_setting()
    assert drawn[0]["eps_values"] != public[0]["eps_values"] and drawn[0]["seeds"] != public[0]["seeds"]
    assert drawn[1]["seed"] != public[1]["seed"] == 0
    table = pc.coverage_experiment_reference()
    remembered = lambda eps_values, n_transitions=300, seeds=range(20): table  # noqa: E731
    assert _verdict(pc.check_coverage_experiment, remembered)[:2] == (12, 12)
    with _graded_inputs(12345):
        k, n, _ = _verdict(pc.check_coverage_experiment, remembered)
    assert k < n


def test_predict_then_run_is_judged_in_the_grader_from_the_recorded_numbers():
    """The child records the prediction and the experiment's numbers as plain data; the judge decides: the right
    experiment passes, a wrong one fails, and a prediction of the wrong form fails, whatever the child printed."""
    from minirl.classroom import grader, predict_checks
    right = _experiment("01_offline_rl", "coverage_experiment")
    wrong = _experiment("01_offline_rl", "coverage_experiment", [(", reward_noise=0.5)", ")")])
    cases = [("coverage_experiment", lambda: predict_checks.check_coverage_experiment(right), True),
             ("coverage_experiment", lambda: predict_checks.check_coverage_experiment(wrong), False),
             ("coverage_prediction", lambda: predict_checks.check_coverage_prediction(0.0, REASON), True),
             ("coverage_prediction", lambda: predict_checks.check_coverage_prediction(0.25, REASON), False)]
    for task, run, passes in cases:
        checks._MODE = "probe"
        try:
            del checks._PROBES[:]
            with contextlib.redirect_stdout(io.StringIO()):
                run()
            recorded = checks._PROBES[-1]["results"]
        finally:
            checks._MODE = "local"
        verdict, _ = grader.judge_task(task, recorded)
        assert (verdict["passed"] == verdict["n"] > 0) == passes, (task, verdict)


@pytest.mark.parametrize("notebook,prediction,experiment", [("01_offline_rl", "coverage_prediction",
                                                             "coverage_experiment"),
                                                            ("02_bcq", "gap_prediction", "unseen_gap_sweep")])
def test_the_prediction_comes_before_the_experiment_and_the_written_answer_after(notebook, prediction, experiment):
    """In the checks file the grader runs: the prediction's answer and check, then the experiment's, then the written
    answer with its points; the student copy hands out the prediction as ``None``."""
    cells = json.loads(release.CHECKS_FILE.read_text())["notebooks"][notebook]["cells"]
    order = [(c["kind"], c.get("task")) for c in cells if c["kind"] in ("answer", "check", "written")]
    at = order.index(("check", prediction))
    assert order[at + 1:at + 4] == [("answer", experiment), ("check", experiment), ("written", f"{experiment}_answer")]
    answer = next(c for c in cells if c["kind"] == "answer" and c.get("task") == prediction)
    assert answer["points"] == 1 and f"{prediction} = None  # your answer" in answer["stub"]
    assert f"{prediction}_why = None  # your answer" in answer["stub"]
