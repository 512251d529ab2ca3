"""The notebooks' setup cell, executed in a child Python as Colab would run it (with pip and git recorded, not run)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
import setup_cell  # noqa: E402

CHILD = r'''
import json, os, subprocess, sys
calls = []
def fake_run(cmd, check=False, **kw):  # record pip and git instead of running them
    calls.append(cmd)
    return subprocess.CompletedProcess(cmd, 0)
subprocess.run = fake_run
if len(sys.argv) > 2:
    sys.path.insert(0, sys.argv[2])  # an unrelated package called minirl, first on the path
exec(open(sys.argv[1]).read())
import minirl.datasets
print("RESULT " + json.dumps({"calls": calls, "scale": os.environ["MINIRL_SCALE"], "file": minirl.__file__}))
'''


def run_cell(tmp_path, scale=None, foreign=False):
    source = tmp_path / "cell.py"
    source.write_text(setup_cell.cell_source("Octo-Org/minirl-book"))
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    args = [sys.executable, str(child), str(source)]
    if foreign:  # PyPI's minirl 0.0.2: a package with other modules and no minirl.datasets
        pkg = tmp_path / "site" / "minirl"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "vit.py").write_text("")
        args.append(str(tmp_path / "site"))
    work = tmp_path / "content"  # Colab's working directory; the clone is already there (no network here)
    work.mkdir()
    (work / "minirl-book").symlink_to(REPO, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "MINIRL_SCALE"}
    if scale:
        env["MINIRL_SCALE"] = scale
    done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed, _, result = done.stdout.rpartition("RESULT ")
    return printed, json.loads(result)


def test_an_unrelated_minirl_is_replaced_by_the_books(tmp_path):
    printed, result = run_cell(tmp_path, foreign=True)
    pip = [sys.executable, "-m", "pip"]
    assert result["calls"] == [pip + ["uninstall", "-q", "-y", "minirl"],
                               pip + ["install", "-q", "-e", str(tmp_path / "content" / "minirl-book")]]
    assert "unrelated package named minirl" in printed
    assert Path(result["file"]).parent.name == "minirl" and "site" not in Path(result["file"]).parts  # the book's
    assert result["scale"] == "cpu" and "MINIRL_SCALE=cpu" in printed


@pytest.mark.parametrize("scale", ["full", "smoke"])
def test_an_installed_minirl_and_a_set_scale_are_left_alone_silently(tmp_path, scale):
    printed, result = run_cell(tmp_path, scale=scale)
    assert result == {"calls": [], "scale": scale, "file": result["file"]} and printed == ""


def test_no_gpu_check_decides_the_scale():
    """The cell never picks `full` by itself, on a GPU or not: only MINIRL_SCALE does."""
    source = setup_cell.cell_source("")
    assert "cuda" not in source and '"full"' not in source and 'os.environ["MINIRL_SCALE"] = "cpu"' in source
