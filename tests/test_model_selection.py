"""experiments/model_selection.py on the committed runs (book/choosing.md): its two tables' numbers, recomputed here
from the runs' eval.csv with the csv module alone, and the page's tables are the script's output."""
import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("model_selection", ROOT / "experiments" / "model_selection.py")
ms = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ms)

FOLDERS = {("IQL tau", "0.5"): "record-iql-tau/iql-expectile=0.5", ("IQL tau", "0.7"): "record/iql",
           ("IQL tau", "0.9"): "record-iql-tau/iql-expectile=0.9", ("BCQ Phi", "0.0"): "record-bcq-phi/bcq-phi=0.0",
           ("BCQ Phi", "0.05"): "record/bcq", ("BCQ Phi", "0.25"): "record-bcq-phi/bcq-phi=0.25"}


@pytest.fixture(scope="module")
def output():
    if not (ROOT / "results" / "record-iql-tau").is_dir():
        pytest.skip("the committed sweeps are not in this checkout")
    run = subprocess.run([sys.executable, str(ROOT / "experiments" / "model_selection.py")], capture_output=True,
                         text=True, check=True, cwd=ROOT)
    return run.stdout


def _table(text: str, header: str) -> list[list[str]]:
    block = text.split(header, 1)[1].split("\n\n", 1)[0]
    lines = [line for line in block.strip().splitlines()[1:] if not line.startswith("| ---")]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]


def _runs(folder: str, dataset: str) -> list[list[dict]]:
    out = []
    for s in (0, 1, 2):
        with open(ROOT / "results" / folder / dataset / f"s{s}" / "eval.csv") as f:
            out.append([{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)])
    return out


def _mean(xs):
    return sum(xs) / len(xs)


def test_the_settings_table_is_the_statistic_of_record_of_score_and_of_the_critic(output):
    rows = _table(output, "| sweep | setting |")
    assert len(rows) == 6
    groups = {}
    for sweep, setting, *cells in rows:
        for dataset, (score, q) in zip(ms.DATASETS, [cells[0:2], cells[2:4]]):
            runs = _runs(FOLDERS[(sweep, setting.split()[0])], dataset)
            want_score = _mean([_mean([r["score_mean"] for r in run[-5:]]) for run in runs])
            want_q = _mean([_mean([r["q_start"] for r in run[-5:]]) for run in runs])
            assert float(score.strip("*")) == pytest.approx(want_score, abs=0.051), (sweep, setting, dataset)
            assert float(q.strip("*")) == pytest.approx(want_q, abs=0.051), (sweep, setting, dataset)
            groups.setdefault((sweep, dataset), []).append((want_score, want_q, setting.split()[0], score, q))
    for group in groups.values():  # bold: the first of each column, and only it
        assert [g[3].startswith("**") for g in group] == [g == max(group) for g in group]
        best_q = max(group, key=lambda g: g[1])
        assert [g[4].startswith("**") for g in group] == [g == best_q for g in group]
        # the finding the page states: the critic ranks first the widest setting (0.9, 0.25) in every group
        assert best_q[2] in ("0.9", "0.25")


def test_the_checkpoints_table_is_recomputed_from_the_evaluations(output):
    rows = _table(output, "| sweep | dataset | final |")
    assert len(rows) == 5 and rows[-1][0] == "all"
    every = {"final": [], "pick": [], "oracle": [], "last": 0, "same": 0}
    for sweep, dataset, final, pick, oracle, is_last, is_oracle in rows:
        if sweep == "all":
            group = every
        else:
            group = {"final": [], "pick": [], "oracle": [], "last": 0, "same": 0}
            for (sw, _), folder in FOLDERS.items():
                if sw != sweep:
                    continue
                for run in _runs(folder, dataset.strip("`")):
                    i = max(range(len(run)), key=lambda k: run[k]["q_start"])
                    j = max(range(len(run)), key=lambda k: run[k]["score_mean"])
                    for g in (group, every):
                        g["final"].append(run[-1]["score_mean"])
                        g["pick"].append(run[i]["score_mean"])
                        g["oracle"].append(run[j]["score_mean"])
                        g["last"] += i == len(run) - 1
                        g["same"] += i == j
        n = len(group["final"])
        assert float(final) == pytest.approx(_mean(group["final"]), abs=0.051), (sweep, dataset)
        assert float(pick) == pytest.approx(_mean(group["pick"]), abs=0.051), (sweep, dataset)
        assert float(oracle) == pytest.approx(_mean(group["oracle"]), abs=0.051), (sweep, dataset)
        assert (is_last, is_oracle) == (f"{group['last']} of {n}", f"{group['same']} of {n}"), (sweep, dataset)
    assert len(every["final"]) == 36


def test_the_page_shows_the_scripts_tables(output):
    page = (ROOT / "book" / "choosing.md").read_text(encoding="utf-8")
    for header in ("| sweep | setting |", "| sweep | dataset | final |"):
        assert _table(page, header) == _table(output, header), f"book/choosing.md's table {header!r}"


def test_a_missing_run_is_named():
    with pytest.raises(FileNotFoundError, match="missing committed runs: results/no-such"):
        ms.runs_of("no-such", "hopper-medium-replay")


def test_the_closing_pages_ours_columns_are_the_statistic_of_record():
    """book/after.md's Hopper table: each "ours" cell is the mean over seeds of results/record's statistic of record;
    TD3+BC's too since its five seeds per tier were made (2 December 2026; "queued" before); ReBRAC's are empty."""
    if not (ROOT / "results" / "record").is_dir():
        pytest.skip("results/record is not in this checkout")
    from minirl import plots
    runs = plots.load_results(ROOT / "results" / "record")
    rows = _table((ROOT / "book" / "after.md").read_text(encoding="utf-8"), "| method | medium, CORL |")
    labels = {"BC": "bc", "10%BC": "10%bc", "CQL": "cql", "IQL": "iql", "TD3+BC": "td3+bc"}
    assert [r[0] for r in rows] == ["BC", "10%BC", "CQL", "IQL", "TD3+BC", "ReBRAC"]
    for method, *cells in rows:
        ours = cells[1::2]
        if method == "ReBRAC":
            assert ours == [""] * 3
        else:
            for dataset, cell in zip(("hopper-medium", "hopper-medium-replay", "hopper-medium-expert"), ours):
                assert cell == f"{plots.record_scores(runs, labels[method], dataset).mean():.1f}", (method, dataset)
    assert all(len(plots.record_scores(runs, "td3+bc", d)) == 5 for d in ("hopper-medium", "hopper-medium-replay",
                                                                          "hopper-medium-expert", "hopper-expert"))
