"""Make three sample submissions of the exercise notebooks and grade them: the example on the instructors' page.

    python scripts/sample_submissions.py

Writes notebooks/exercises/sample_submissions/<student>/<exercise>.ipynb for
  ana   - every task filled in correctly (the reference solutions, written answers included),
  ben   - every task filled in, two of them wrong in a plausible way (tests/test_exercises.py's wrong answers), and a
          written answer of his own,
  chloe - the untouched student copy,
  dan   - every task right, except two IQL tasks handed to minirl's own code (graded `uses reference`),
then grades them with `python -m minirl.classroom grade notebooks/exercises/sample_submissions` (the grader of
minirl/classroom/grader.py) and stores, in book/generated/ (which book/instructors.md includes):
  grading_example.txt   the command and its Markdown table,
  grading_example.csv   the same grades, one row per student and task (what an LMS imports),
  self_check_example.txt  ben's self-check of one notebook, as he sees it,
  nbval_example.txt     `pytest --nbval 04_iql.ipynb` on ben's notebook, executed and saved as Jupyter saves it, in a
                        folder of its own (minirl's pytest plugin grades it against the reference; the run's duration
                        is left out of the last line).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from test_exercises import WRONG  # noqa: E402  (one source of plausible wrong answers)

from minirl.classroom import release  # noqa: E402

OUT = release.EXERCISES / "sample_submissions"
GENERATED = REPO / "book" / "generated"
# Dan hands in every notebook right, except two IQL tasks that he hands to minirl's own code (graded `uses reference`)
DAN_DELEGATES = {
    "04_iql": {
        "awr_weights": "import minirl.iql\n\nawr_weights = minirl.iql.awr_weights  # minirl's own function\n",
        "iql_update": "def iql_update(agent, batch):\n    \"\"\"One IQL update.\"\"\"\n    return agent.update(batch)  # "
                      "minirl's own update\n",
    },
}
BEN_WRITTEN = ("The curve goes up and then down, so a middle value is best. I think the ends are worse because "
               "they are extreme settings.")


def filled(solution: dict, student: dict, wrong: list[tuple[str, str]], written: str | None = None,
           ran: bool = False) -> dict:
    """The student copy with each stub replaced by the reference code (after the ``wrong`` edits) and each written
    answer by the reference's (or by ``written``); ``ran``: the cells the student runs (a long sweep) keep the
    reference's outputs, as a student's saved run would."""
    nb = json.loads(json.dumps(student))
    cells = [c for c in solution["cells"] if "rubric" not in c["metadata"].get("tags", [])]  # as the copy has them
    for cell, ref in zip(nb["cells"], cells):
        src = "".join(ref["source"])
        if ran and "student-run" in cell["metadata"].get("tags", []):
            cell["outputs"], cell["execution_count"] = ref["outputs"], ref["execution_count"]
        if "student" in cell["metadata"].get("tags", []):
            for old, new in wrong:
                src = src.replace(old, new)
            cell["source"] = src.splitlines(keepends=True)
        elif "written" in ref["metadata"].get("tags", []):
            if written is not None:
                src = src.splitlines()[0] + "\n\n" + written + "\n"
            cell["source"] = src.splitlines(keepends=True)
    return nb


def delegated(nb: dict, answers: dict[str, str]) -> dict:
    """``nb`` with the answer cell of each task in ``answers`` replaced by that code."""
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        task = next((t for t in answers if f"def {t}(" in src), None)
        if "student" in cell["metadata"].get("tags", []) and task:
            cell["source"] = answers[task].splitlines(keepends=True)
    return nb


# The grading example's key: without one the grader draws a new key each run, and the partial counts of a wrong
# answer's drawn checks (ben's iql_losses: 9 or 11 of 18) would change every time the examples are made.
EXAMPLE_KEY = "minirl sample submissions"


def run(args: list[str]) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MINIRL_GRADER_KEY": EXAMPLE_KEY}
    result = subprocess.run([sys.executable, "-m", "minirl.classroom", *args], cwd=REPO, capture_output=True,
                            text=True, env=env)
    if result.returncode not in (0, 1):
        raise SystemExit(f"python -m minirl.classroom {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def nbval_example(notebook: Path) -> str:
    """``pytest --nbval`` on a copy of ``notebook``, executed and saved first, in a new folder with no conftest."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / notebook.name
        shutil.copy(notebook, path)
        subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
                        "--allow-errors", str(path)], check=True, capture_output=True, env=env)
        result = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "-q", "-p", "no:cacheprovider",
                                 path.name], cwd=tmp, capture_output=True, text=True, env=env)
    if result.returncode not in (0, 1):
        raise SystemExit(f"pytest --nbval {notebook.name} failed to run:\n{result.stdout}{result.stderr}")
    out = re.sub(r" in [0-9.]+s( \([0-9:]+\))?", "", result.stdout.rstrip())
    return f"$ pytest --nbval {notebook.name}\n{out}\n"


def main() -> None:
    for solution_path in sorted(release.SOLUTIONS.glob("*.ipynb")):
        solution = json.loads(solution_path.read_text())
        student = json.loads((release.EXERCISES / solution_path.name).read_text())
        wrong = [(old, new) for nb, _, old, new in WRONG if nb == solution_path.stem][:2]
        right = filled(solution, student, [], ran=True)
        for name, nb in (("ana", right),
                         ("ben", filled(solution, student, wrong, BEN_WRITTEN)),
                         ("chloe", student),
                         ("dan", delegated(right, DAN_DELEGATES.get(solution_path.stem, {})))):
            (OUT / name).mkdir(parents=True, exist_ok=True)
            (OUT / name / solution_path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    folder = "notebooks/exercises/sample_submissions"
    GENERATED.mkdir(exist_ok=True)
    table = run(["grade", folder, "--csv", str(GENERATED / "grading_example.csv")])
    text = f"$ python -m minirl.classroom grade {folder} --csv grades.csv\n" + table
    (GENERATED / "grading_example.txt").write_text(text)
    check = run(["check", f"{folder}/ben/04_iql.ipynb"])
    (GENERATED / "self_check_example.txt").write_text(f"$ python -m minirl.classroom check 04_iql.ipynb\n{check}")
    example = nbval_example(OUT / "ben" / "04_iql.ipynb")
    (GENERATED / "nbval_example.txt").write_text(example)
    print(text)
    print(check)
    print(example)


if __name__ == "__main__":
    main()
