"""Make three sample submissions of the exercise notebooks and grade them: the example on the instructors' page.

    python scripts/sample_submissions.py

Writes notebooks/exercises/sample_submissions/<student>/<exercise>.ipynb for
  ana   - every task filled in correctly (the reference solutions),
  ben   - every task filled in, two of them wrong in a plausible way (tests/test_exercises.py's wrong answers),
  chloe - the untouched student copy,
then runs `python -m minirl.exercises grade notebooks/exercises/sample_submissions` and stores the command and its
output in book/generated/grading_example.txt, which book/instructors.md includes.
"""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from test_exercises import WRONG  # noqa: E402  (one source of plausible wrong answers)

from minirl import exercises as ex  # noqa: E402

OUT = ex.EXERCISES / "sample_submissions"


def filled(solution: dict, student: dict, wrong: list[tuple[str, str]]) -> dict:
    """The student copy with each stub replaced by the reference code, after applying the ``wrong`` edits."""
    sources = ["".join(c["source"]) for c in solution["cells"]]
    nb = json.loads(json.dumps(student))
    for cell, src in zip(nb["cells"], sources):
        if "student" in cell["metadata"].get("tags", []):
            for old, new in wrong:
                src = src.replace(old, new)
            cell["source"] = src.splitlines(keepends=True)
    return nb


def main() -> None:
    for solution_path in sorted(ex.SOLUTIONS.glob("*.ipynb")):
        solution = json.loads(solution_path.read_text())
        student = json.loads((ex.EXERCISES / solution_path.name).read_text())
        wrong = [(old, new) for nb, _, old, new in WRONG if nb == solution_path.stem][:2]
        for name, nb in (("ana", filled(solution, student, [])), ("ben", filled(solution, student, wrong)),
                         ("chloe", student)):
            (OUT / name).mkdir(parents=True, exist_ok=True)
            (OUT / name / solution_path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    cmd = [sys.executable, "-m", "minirl.exercises", "grade", "notebooks/exercises/sample_submissions"]
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
    text = "$ python -m minirl.exercises grade notebooks/exercises/sample_submissions\n" + result.stdout
    target = REPO / "book" / "generated" / "grading_example.txt"
    target.parent.mkdir(exist_ok=True)
    target.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
