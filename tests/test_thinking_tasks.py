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
