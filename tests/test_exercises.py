"""The classroom exercises: reference notebooks pass strict nbval, student copies fail at every task with
NotImplementedError, plausible wrong answers fail with a readable message, and the copies stay in sync."""
import contextlib
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from minirl import exercises as ex

SOLUTIONS = sorted(ex.SOLUTIONS.glob("*.ipynb"))

# One plausible wrong answer per task: (notebook, function, text in its solution cell, replacement).
WRONG = [
    ("01_offline_rl", "policy_transition", "* pi[None, None, :, :]", "* np.ones_like(pi)[None, None, :, :]"),
    ("01_offline_rl", "evaluate_policy", "gamma * policy_transition(P, pi)", "gamma * policy_transition(P, pi).T"),
    ("01_offline_rl", "empirical_mdp", "T_hat[unseen_s, unseen_a, unseen_s] = 1.0", "pass"),
    ("01_offline_rl", "optimism_experiment", "unseen_reward=1.0", "unseen_reward=0.0"),
    ("02_bcq", "soft_clipped_double_q", "lmbda * torch.minimum(q1, q2) + (1 - lmbda) * torch.maximum(q1, q2)",
     "lmbda * torch.maximum(q1, q2) + (1 - lmbda) * torch.minimum(q1, q2)"),
    ("02_bcq", "critic_target", ".max(dim=1).values", ".mean(dim=1)"),
    ("02_bcq", "vae_loss", "torch.log(std ** 2)", "torch.log(std)"),
    ("02_bcq", "bcq_action_mask", "log_ratio = log_probs - log_probs.max(dim=-1, keepdim=True).values",
     "log_ratio = log_probs"),
    ("03_cql", "discrete_cql_penalty", "torch.logsumexp(q_all, dim=-1)", "q_all.max(dim=-1).values"),
    ("03_cql", "cql_penalty", "q_sampled / temperature - log_density", "q_sampled / temperature"),
    ("03_cql", "lagrange_loss", "penalty.detach()", "penalty"),
    ("04_iql", "expectile_loss", "weight * diff ** 2", "0.5 * diff ** 2"),
    ("04_iql", "q_target", "gamma * (1.0 - done) * next_v", "gamma * next_v"),
    ("04_iql", "awr_weights", "torch.exp(beta * adv.detach()).clamp(max=max_weight)", "torch.exp(beta * adv.detach())"),
    ("04_iql", "expectile_experiment", "expectile_loss(q - m, 0.9)", "expectile_loss(q - m, 0.5)"),
]


def _nbval(path: Path, tmp_path: Path) -> list[tuple[str, str]]:
    """Strict nbval over ``path`` the way a student runs it; returns (cell name, failure text or '') per cell."""
    xml = tmp_path / f"{path.stem}.xml"
    subprocess.run([sys.executable, "-m", "pytest", "--nbval", "-q", str(path), f"--junitxml={xml}"],
                   cwd=path.parent, capture_output=True, text=True)
    cases = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        bad = [e for e in case if e.tag in ("failure", "error")]
        cases.append((case.get("name"), "\n".join((e.get("message") or "") + (e.text or "") for e in bad)))
    return cases


def _checker_cells(nb: dict) -> list[int]:
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    return [i for i, c in enumerate(code) if ex.checker_task("".join(c["source"]))]


def test_there_are_exercises_and_the_student_copies_are_in_sync():
    assert SOLUTIONS, "no reference notebooks in notebooks/exercises/solutions"
    assert ex.make_student(check=True) == [], "run: python -m minirl.exercises make-student"


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_reference_notebook_passes_strict_nbval(path, tmp_path):
    cases = _nbval(path, tmp_path)
    assert cases and all(not failure for _, failure in cases), [c for c in cases if c[1]]


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_student_copy_fails_at_every_task_with_not_implemented(path, tmp_path):
    student = ex.EXERCISES / path.name
    nb = json.loads(student.read_text())
    checkers = {f"Cell {i}" for i in _checker_cells(nb)}
    cases = dict(_nbval(student, tmp_path))
    failed = {name for name, failure in cases.items() if failure}
    assert failed == checkers
    for name in checkers:
        assert "not implemented yet (NotImplementedError" in cases[name]


def _solution_source(notebook: str, function: str) -> str:
    nb = json.loads((ex.SOLUTIONS / f"{notebook}.ipynb").read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if "solution" in cell["metadata"].get("tags", []) and f"def {function}(" in src:
            return src
    raise AssertionError(f"no solution cell defines {function} in {notebook}")


def _run_setup_and(notebook: str, source: str) -> dict:
    """Execute the notebook's non-checker code cells up to and including ``source``'s cell, with ``source`` in place
    of that solution cell; returns the namespace."""
    nb = json.loads((ex.SOLUTIONS / f"{notebook}.ipynb").read_text())
    ns: dict = {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        if ex.checker_task(src):
            continue
        exec(compile(src, notebook, "exec"), ns)  # noqa: S102 - our own notebooks
    fn_name = next(line.split("(")[0][4:] for line in source.splitlines() if line.startswith("def "))
    exec(compile(source, notebook, "exec"), ns)  # noqa: S102
    return ns | {"__fn__": ns[fn_name]}


@pytest.mark.parametrize("notebook,function,old,new", WRONG, ids=[w[1] for w in WRONG])
def test_a_plausible_wrong_answer_fails_with_a_readable_message(notebook, function, old, new):
    src = _solution_source(notebook, function)
    assert old in src, f"the wrong-answer edit no longer applies to {function}"
    checker = getattr(ex, f"check_{function}")
    for source, should_pass in ((src, True), (src.replace(old, new), False)):
        ns = _run_setup_and(notebook, source)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            checker(ns["__fn__"])
        text = out.getvalue()
        last = text.strip().splitlines()[-1]
        k, n = (int(x) for x in last.split(": ")[1].split(" ")[0].split("/"))
        if should_pass:
            assert k == n and "FAILED" not in text, text
        else:
            assert k < n, text
            assert "check FAILED: " in text and any(w in text for w in ("expected", "raised", "detach")), text


def test_wrong_answer_shows_in_nbval_diff(tmp_path):
    nb = json.loads((ex.SOLUTIONS / "01_offline_rl.ipynb").read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if "def evaluate_policy(" in src:
            cell["source"] = src.replace("gamma * policy_transition(P, pi)", "gamma * policy_transition(P, pi).T")
    path = tmp_path / "submission.ipynb"
    path.write_text(json.dumps(nb))
    failures = [f for _, f in _nbval(path, tmp_path) if f]
    assert len(failures) == 1
    assert "evaluate_policy: 5/5 checks passed" in failures[0] and "check FAILED: " in failures[0]


def test_stub_source_keeps_signature_docstring_and_imports():
    src = ('import numpy as np\n\n# helper comment\ndef f(x, y=1):\n    """Doc."""\n    z = x + y\n    return z\n\n'
           'def g():\n    return 3\nanswer = 42\n')
    stub = ex.stub_source(src)
    assert stub == ('import numpy as np\n\n# helper comment\ndef f(x, y=1):\n    """Doc."""\n'
                    '    raise NotImplementedError("f: your code here: replace this line")\n\n'
                    'def g():\n    raise NotImplementedError("g: your code here: replace this line")\n'
                    'answer = None  # your answer\n')
    with pytest.raises(ValueError, match="line 1 is a For"):
        ex.stub_source("for i in range(3):\n    pass\n")


def test_mismatch_messages():
    assert ex.mismatch(np.ones(3), np.ones(3)) is None
    assert ex.mismatch(np.ones(3), np.ones((3, 1))) == "shape (3,), expected shape (3, 1)"
    msg = ex.mismatch(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
    assert msg.startswith("1 of 2 values differ at index (1,): got 2, expected 2.5")
    assert ex.mismatch(np.array([-np.inf]), np.array([-np.inf])) is None
    assert "not an array" in ex.mismatch("abc", np.ones(1))


def test_grade_table(tmp_path):
    student = ex.EXERCISES / "01_offline_rl.ipynb"
    (tmp_path / "dana").mkdir()
    (tmp_path / "dana" / student.name).write_text(student.read_text())
    table = ex.grade(tmp_path)
    assert "| dana | 01_offline_rl.ipynb | 0/4 | policy_transition not implemented" in table
    with pytest.raises(ValueError, match="no student folders"):
        ex.grade(tmp_path / "dana")
