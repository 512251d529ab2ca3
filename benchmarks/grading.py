"""Grading a class: N students x every exercise notebook, timed, with the conditions printed.

    python benchmarks/grading.py                      # 30 students, --parallel 2
    python benchmarks/grading.py --students 30 --parallel 1 --keep /tmp/class

Makes the class with a script (a mix that a real class hands in: 40% every task right, 30% two plausible wrong answers
per notebook, 10% the untouched copy, 20% one notebook broken: a syntax error, a deleted task, a file that is not
JSON, a loop that never ends), grades it with `minirl.classroom.grader.grade_folder` (one forked process per
task, the default CPU-time limit of 120 s unless --time-limit), and prints a table: students, notebooks, wall time,
notebooks per minute, the slowest notebook, the grades by status, and the machine's load before and after (other
work on the machine slows grading down: read the timing with it).

To compare two commits, grade them at the same time, one per core, and again with the cores swapped: on this project's
2-core machine the same grader gave 52.0 s and 69.7 s of CPU per student one after the other, an hour apart (2
December 2026), while two side-by-side runs of each agreed within 2%:

    (cd OLD && taskset -c 0 python benchmarks/grading.py --students 10 --parallel 1) &
    (cd NEW && taskset -c 1 python benchmarks/grading.py --students 10 --parallel 1) &
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "tests"))
from sample_submissions import filled  # noqa: E402
from test_exercises import WRONG  # noqa: E402

from minirl.classroom import grader, release  # noqa: E402


def make_class(folder: Path, n: int) -> dict[str, str]:
    """Write ``folder/<student>/<exercise>.ipynb`` for ``n`` students; returns each student's kind."""
    names = [p.stem for p in sorted(release.SOLUTIONS.glob("*.ipynb"))]
    solutions = {k: json.loads((release.SOLUTIONS / f"{k}.ipynb").read_text()) for k in names}
    students = {k: json.loads((release.EXERCISES / f"{k}.ipynb").read_text()) for k in names}
    broken = ["syntax error", "deleted task", "invalid JSON", "infinite loop"]
    kinds = {}
    n_broken = 0
    for i in range(n):
        student = f"student{i + 1:02d}"
        kind = ("right", "right", "right", "right", "wrong", "wrong", "wrong", "untouched", "broken",
                "broken")[i % 10]
        if kind == "broken":
            kind, n_broken = broken[n_broken % len(broken)], n_broken + 1
        kinds[student] = kind
        (folder / student).mkdir(parents=True)
        for k in names:
            wrong = [(o, nw) for nb, _, o, nw in WRONG if nb == k][:2]
            nb = {"right": filled(solutions[k], students[k], []), "wrong": filled(solutions[k], students[k], wrong),
                  "untouched": students[k]}.get(kinds[student], filled(solutions[k], students[k], []))
            text = json.dumps(nb, indent=1)
            if kinds[student] in broken and k == "01_offline_rl":
                what = kinds[student]
                if what == "syntax error":
                    text = text.replace("S, A, _ = P.shape", "S, A, _ = P.shape)", 1)
                elif what == "deleted task":
                    nb["cells"] = [c for c in nb["cells"] if "def empirical_mdp(" not in "".join(c["source"])]
                    text = json.dumps(nb, indent=1)
                elif what == "invalid JSON":
                    text = text[: len(text) // 2]
                else:
                    text = text.replace("S, A = R.shape", "while True:\\n        pass", 1)
            (folder / student / f"{k}.ipynb").write_text(text)
    return kinds


def load() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--time-limit", type=float, default=None,
                   help="seconds per notebook (default: each notebook's own, else the grader's default)")
    p.add_argument("--keep", type=Path, help="make the class in this (new) folder and keep it")
    a = p.parse_args(argv)
    folder = a.keep or Path(tempfile.mkdtemp(prefix="minirl-class-")) / "submissions"
    kinds = make_class(folder, a.students)
    load_before = load()
    times: list[float] = []
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    results, jobs = grader.grade_folder(folder, time_limit=a.time_limit, parallel=a.parallel,
                                        progress=lambda job: times.append(job.elapsed))
    wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    cpu = [sum(getattr(b, f) - getattr(a, f) for f in ("ru_utime", "ru_stime")) for a, b in zip(cpu0, cpu1)]
    load_after = load()
    if a.keep is None:
        shutil.rmtree(folder.parent, ignore_errors=True)
    ran = [j for j in jobs if j.steps is not None]
    status = Counter(r.status for r in results)
    # a limit hit by a right answer: any row of a student whose answers are all right, or of the looping student but
    # its loop (chapter 1's evaluate_policy)
    right_limited = sum(1 for r in results if r.status == "time limit" and (kinds.get(r.student) == "right" or (
        kinds.get(r.student) == "infinite loop" and (r.notebook, r.task) != ("01_offline_rl", "evaluate_policy"))))
    rows = [
        ("students x notebooks", f"{a.students} x {len({j.notebook for j in jobs})} = {len(jobs)}"),
        ("notebooks run (the rest: invalid JSON)", f"{len(ran)}"),
        ("parallel, time limit", f"{a.parallel}, " + (f"{a.time_limit:g} s per notebook" if a.time_limit else
                                                      ", ".join(sorted({f"{j.notebook} {j.time_limit:g} s"
                                                                        for j in jobs})))),
        ("wall time", f"{wall:.0f} s ({wall / 60:.1f} min)"),
        ("notebooks per minute", f"{len(ran) / wall * 60:.1f}"),
        ("CPU time: the notebooks (sum) / the grader", f"{cpu[0]:.0f} s / {cpu[1]:.0f} s"),
        ("CPU time per student (notebooks and grader)", f"{(cpu[0] + cpu[1]) / a.students:.1f} s"),
        ("wall time per student", f"{wall / a.students:.1f} s"),
        ("isolation", grader.isolation_line()),
        ("one notebook: median / slowest", f"{sorted(times)[len(times) // 2]:.1f} s / {max(times):.1f} s"),
        ("task rows", f"{len(results)}"),
        ("rows by status", ", ".join(f"{k} {v}" for k, v in status.most_common())),
        ("right answers that hit a time limit", f"{right_limited}"),
        ("students by kind", ", ".join(f"{k} {v}" for k, v in Counter(kinds.values()).most_common())),
        ("load average before / after (1, 5, 15 min)", f"{load_before}  |  {load_after}"),
        ("machine", f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"| {'what'.ljust(width)} | value |\n| {'-' * width} | --- |")
    for k, v in rows:
        print(f"| {k.ljust(width)} | {v} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
