"""Where the book's exercises live and what follows what: the repository, the reference notebooks, the chapter each
exercise follows and the reference sweeps computed once before grading. Plain data, imported by ``release.py``,
``sandbox.py`` and ``course.py`` (a course folder's names must not collide with these), so that none of them imports
another to read it."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXERCISES = REPO / "notebooks" / "exercises"
SOLUTIONS = EXERCISES / "solutions"          # the reference notebooks: the only place the solutions live
# the chapter each exercise follows: its prose page and its executed notebook(s), read before the exercise
CHAPTERS = {"01_offline_rl": ("offline_rl", ["01_offline_rl"]), "02_bcq": ("bcq", ["02_bcq"]),
            "03_cql": ("cql", ["03_cql"]), "04_iql": ("iql", ["04_iql"]),
            "04b_stitching": ("stitching", ["04b_stitching"]), "05_comparison": ("comparison", ["05_comparison"]),
            "06_project": (None, [])}  # the end-to-end assignment: no new reading (chapter 3 again)
# the reference sweeps of the experiment tasks, by notebook: (cache key, classroom module, function)
WARM = {"02_bcq": ("threshold", "agent_checks", "threshold_sweep_reference"),
        "03_cql": ("alpha", "agent_checks", "alpha_sweep_reference"),
        "04_iql": ("expectile", "agent_checks", "expectile_sweep_reference"),
        "04b_stitching": ("stitching", "stitching_checks", "stitching_sweep_reference"),
        "05_comparison": ("record-verdicts", "comparison_checks", "record_verdicts_reference")}
