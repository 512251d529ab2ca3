"""experiments/maze_rollouts.py's choice of runs, and the figure's drawing of what it writes."""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
import maze_rollouts  # noqa: E402


def test_a_run_is_named_and_labelled_at_the_first_equals_sign():
    label = "iql-actor=deterministic-alpha=0.0005-extraction=ddpg_bc-layer_norm=True"
    assert maze_rollouts.parse_runs(["BC=bc", f"IQL, α 0.0005={label}"]) == {"BC": "bc", "IQL, α 0.0005": label}


@pytest.mark.parametrize("pairs, message", [(["bc"], "is not NAME=LABEL"), (["=bc"], "is not NAME=LABEL"),
                                            (["BC="], "is not NAME=LABEL"), (["BC=bc", "BC=10%bc"], "given twice")])
def test_a_bad_run_is_refused_in_one_line(pairs, message):
    with pytest.raises(ValueError, match=message):
        maze_rollouts.parse_runs(pairs)


def test_the_cli_names_the_field(capsys):
    for argv, field in ((["--run", "bc"], "--run:"), (["--root", "no/such/folder"], "--root:")):
        with pytest.raises(SystemExit):
            maze_rollouts.main(argv)
        assert field in capsys.readouterr().err


def test_runs_that_stay_at_the_start_are_drawn_as_rings_and_said_so():
    import matplotlib
    matplotlib.use("Agg")
    import importlib.util

    import matplotlib.pyplot as plt
    # by its path: scripts/figures holds iql.py, cql.py and bcq.py, which must not shadow anything on sys.path
    spec = importlib.util.spec_from_file_location("figures_stitching", REPO / "scripts" / "figures" / "stitching.py")
    stitching = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stitching)

    walls = [[1] * 4, [1, 0, 0, 1], [1, 0, 0, 1], [1] * 4]
    run = {"success_rate": 0.0, "success": False, "steps": 10}
    r = {"unit": 4.0, "offset": [4.0, 4.0], "walls": walls, "data": [[[0, 0], [4, 0]]], "start": [0.0, 0.0],
         "goal": [4.0, 4.0], "missing": ["CQL"],
         "methods": {"BC": {**run, "algo": "bc", "path": [[0, 0], [0.2, 0.1]]},
                     "IQL a": {**run, "algo": "iql", "path": [[0, 0], [0.1, 0.1]]},
                     "IQL b": {**run, "algo": "iql", "path": [[0, 0], [4, 4]], "success": True,
                               "success_rate": 1.0}}}
    fig, ax = plt.subplots()
    stitching.draw(ax, r, "a maze")
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts[:3] == ["BC: misses the goal, stays by the start; 0% of 50 episodes",
                         "IQL a: misses the goal, stays by the start; 0% of 50 episodes",
                         "IQL b: reaches the goal; 100% of 50 episodes"]
    colors = [line.get_color() for line in ax.get_lines()[:6:2]]
    assert len(set(colors)) == 3               # the second IQL run gets a colour of its own
    rings = [line for line in ax.get_lines() if line.get_markerfacecolor() == "none"]
    assert len(rings) == 2 and "CQL" in ax.get_title()
    plt.close(fig)
