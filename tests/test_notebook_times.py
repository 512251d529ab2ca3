"""The intro's table of notebook times comes from the committed measurements (results/notebook_times/*.json, made by
benchmarks/notebook_times.py on fresh clones), not from hand-typed numbers."""
import json
from pathlib import Path

import notebook_times as nt

REPO = Path(__file__).resolve().parent.parent


def _record(name):
    return json.loads((nt.RECORDS / f"{name}.json").read_text())


def test_the_intro_s_times_are_the_measured_ones():
    intro = (REPO / "book" / "intro.md").read_text()
    rows = nt.intro_rows(_record("smoke"), _record("cpu-bf16"), _record("cpu-float32"))
    missing = [row for row in rows if row not in intro]
    assert not missing, missing


def test_each_record_says_how_it_was_measured():
    for name, precision in (("smoke", None), ("cpu-bf16", "bf16"), ("cpu-float32", "float32")):
        record = _record(name)
        assert record["machine"]["cpu"] and record["settings"]["OMP_NUM_THREADS"] == "1"
        assert not record["data_cached_at_start"]  # a first run: the datasets were made
        assert all(row["returncode"] == 0 for row in record["runs"])
        if precision:
            assert record["precision"] == precision and record["settings"]["MINIRL_SCALE"] == "cpu"
    assert _record("cpu-float32")["settings"]["ATEN_CPU_CAPABILITY"] == "avx2"


def test_minutes_and_the_table():
    assert nt.minutes(65.4) == "65&nbsp;s" and nt.minutes(652.7) == "10.9&nbsp;min"
    record = {"label": "x", "runs": [{"notebook": "01_offline_rl", "kind": "first", "returncode": 0, "cpu_s": 30.0},
                                      {"notebook": "01_offline_rl", "kind": "cached", "returncode": 0, "cpu_s": 9.0}]}
    assert nt.intro_rows(record, record, {"runs": []})[0] == (
        "| {doc}`../notebooks/01_offline_rl` | 30&nbsp;s (cached: 9&nbsp;s) | 30&nbsp;s (cached: 9&nbsp;s) | "
        "not measured |")
