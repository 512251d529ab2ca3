"""The first script a newcomer reads (examples/iql_hopper.py) runs as written, at a tiny budget."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_iql_example_trains_and_evaluates():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(REPO / "examples" / "iql_hopper.py"), "--dataset",
                          "pendulum-medium-replay", "--steps", "20", "--eval-every", "10"],
                         capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("step")]
    assert [line.split()[1] for line in lines] == ["10", "20"]
    assert all("score" in line for line in lines)
