"""Laboratory detail stays out of the lessons: a chapter notebook's stored outputs (what the book shows) print the
scale, the device and the precision first, then results; the machine that made a run, its rate, its wall time, its
parts and resumes are the lab pages' (``book/lab/*.md``, whose tables ``scripts/lab_tables.py`` writes from
``results/``). Progress bars (stderr, for whoever runs a notebook) are not rendered by the book."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ["01_offline_rl", "02_bcq", "02b_bcq_recommendation", "03_cql", "04_iql", "04b_stitching", "05_comparison"]
LAB_PAGES = {"bcq": "lab_bcq", "cql": "lab_cql", "iql": "lab_iql", "comparison": "lab_comparison"}

# a CPU or GPU model, as result.json or /proc/cpuinfo names it
MACHINE = re.compile(r"EPYC|Xeon|Intel\(R\)|\bIntel\b|\bAMD\b|Ryzen|Core\(TM\)|Apple M\d|NVIDIA|\bH100\b|\bH200\b|"
                     r"model name|cpu_id|stepping \d")
# a rate, a wall time or a run's parts: "37 updates/s", "(23 min)", "in 312 s", "wall time 1.29 h", "in 2 parts",
# "resumed without a record"
TIMING = re.compile(r"updates/s|updates per second|\bit/s\b|wall time|made on|resumed|\b\d+ parts?\b|"
                    r"\b\d[\d,.]*\s?(?:s|sec|seconds|min|minutes|h|hours)\b")
# kept: the estimate a training cell prints before it starts, for whoever runs it ("about 5 min expected on this
# device", "about 10 min of training on this device")
ESTIMATE = re.compile(r"about [\d,.]+\s?(?:s|min|h)\b(?= expected| of training)")


def _outputs(name: str) -> list[tuple[int, str]]:
    """(cell index, text) of each output the book renders: stdout, results and displays, not stderr."""
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    found = []
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                if out.get("name") == "stdout":
                    found.append((i, "".join(out["text"])))
            elif out["output_type"] in ("display_data", "execute_result"):
                for kind in ("text/markdown", "text/plain", "text/html"):
                    if kind in out.get("data", {}):
                        found.append((i, "".join(out["data"][kind])))
            elif out["output_type"] == "error":
                found.append((i, "\n".join(out.get("traceback", []))))
    return found


def lab_detail(name: str) -> list[str]:
    """The lines of a chapter notebook's rendered outputs that name a machine or give a rate, a wall time or parts."""
    problems = []
    for i, text in _outputs(name):
        for line in text.splitlines():
            rest = ESTIMATE.sub("", line)
            if MACHINE.search(rest) or TIMING.search(rest):
                problems.append(f"{name} cell {i}: {line.strip()[:160]}")
    return problems


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_notebook_outputs_name_no_machine_and_no_wall_time(name):
    assert lab_detail(name) == [], "\n".join(lab_detail(name))


def test_the_detector_finds_what_it_is_for(tmp_path, monkeypatch):
    lines = ["bcq-phi=0.25   hopper-medium-replay   made on: AMD EPYC, Intel(R) Xeon(R) Processor",
             "| bcq | 16 | cpu | 50,000 | 6.2 h + 1 not known | AMD EPYC (2 cores, 1 thread), torch 2.13.0+cpu |",
             "sac-offline: 800 steps in 13 s (62.7 updates/s)", "expert zeta = 0.0: return 9.5 (15 s)",
             "  made on Intel(R) Xeon(R) Processor (1 torch thread, bf16) in 2 parts: update time 0.44 h",
             "50,000 steps at 17 updates/s (51 min)", "IQL: 81 to 189 updates/s, 4 to 10 min per run"]
    kept = ["offline SAC, 5,000 steps: about 5 min expected on this device, plus 10 value checks",
            "24 BC runs of 5,000 steps: about 10 min of training on this device, plus one evaluation each",
            "scale: cpu | device: cpu | precision of the updates: bf16 | torch 2.13.0+cpu | torch threads: 1",
            "hopper-medium-expert    3,924 episodes: mean episode   57.9 | best 392 episodes (10%BC's data)  118.8",
            "| (b) | hopper-medium-replay | BCQ − BC | 5 / 5 | +6.4 [+3.4, +9.5] | +8.7 [+2.2, +16.5] | above |"]
    (tmp_path / "notebooks").mkdir()
    cells = [{"cell_type": "code", "source": [], "outputs": [
        {"output_type": "stream", "name": "stdout", "text": [line + "\n"]},
        {"output_type": "stream", "name": "stderr", "text": ["bar: 100%|###| 5000/5000 [05:11<00:00, 16.03it/s]"]}]}
        for line in lines + kept]
    (tmp_path / "notebooks" / "x.ipynb").write_text(json.dumps({"cells": cells}))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert [p.split(": ", 1)[1] for p in lab_detail("x")] == [line.strip()[:160] for line in lines]


def test_the_book_does_not_render_progress_bars():
    """Every stderr output of a chapter notebook is a progress bar (its elapsed time and rate are for whoever runs
    it); the book leaves stderr out (myst-nb's nb_output_stderr), so a warning would have to be printed to show."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["config"].get("nb_output_stderr") == "remove"


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_notebook_prints_scale_device_and_precision_first(name):
    first = _outputs(name)
    first = [text for i, text in first if not text.startswith("MINIRL_SCALE=")]  # the setup cell's Colab note
    assert first, f"{name}: no output"
    head = first[0].splitlines()[0]
    assert "scale" in head and "device" in head and "precision" in head, f"{name}: its first output is {head!r}"


def test_lab_tables_are_what_results_give():
    """book/generated/lab_*.md are scripts/lab_tables.py's output from results/, and each lab page includes its own."""
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab_tables.py"), "--check"], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    for page, table in LAB_PAGES.items():
        text = (ROOT / "book" / "lab" / f"{page}.md").read_text()
        assert f"```{{include}} ../generated/{table}.md" in text, f"book/lab/{page}.md does not include {table}.md"
