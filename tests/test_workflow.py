"""The deploy workflow (.github/workflows/book.yml): valid YAML, builds the book with the README's commands, checks
the site, publishes it to GitHub Pages with the permissions that needs."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / ".github" / "workflows" / "book.yml"
STRICT_FLAGS = {"-W", "-n", "--keep-going"}   # .ci/run's additions to the README's build: warnings are errors


@pytest.fixture(scope="module")
def workflow():
    return yaml.safe_load(WORKFLOW.read_text())


def _runs(workflow) -> list[str]:
    return [" ".join(s["run"].split()) for s in workflow["jobs"]["build"]["steps"] if "run" in s]


def _uses(workflow, job) -> list[str]:
    return [s["uses"].split("@")[0] for s in workflow["jobs"][job]["steps"] if "uses" in s]


def readme_book_commands() -> list[str]:
    """The commands of the README's "build the book" block (``pip install ... && jupyter-book build .``)."""
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    block = next(b for b in blocks if "jupyter-book build" in b)
    return [" ".join(c.split()) for line in block.splitlines() if line.strip() and not line.startswith("#")
            for c in line.split("&&")]


def _without_strict_flags(command: str) -> str:
    return " ".join(t for t in shlex.split(command) if t not in STRICT_FLAGS)


def test_triggers_permissions_and_concurrency(workflow):
    on = workflow.get("on", workflow.get(True))   # YAML 1.1 reads the key `on` as True
    assert on["push"]["branches"] == ["main"] and "workflow_dispatch" in on
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert workflow["concurrency"]["group"] == "pages"


def test_runs_the_readmes_commands_in_order(workflow):
    runs = _runs(workflow)
    readme = readme_book_commands()
    assert readme == ["pip install -r requirements.txt", "jupyter-book build ."], readme
    install = runs.index("pip install -r requirements.txt")
    build = next(i for i, r in enumerate(runs) if r.startswith("jupyter-book build"))
    assert _without_strict_flags(runs[build]) == readme[1], runs[build]
    assert set(shlex.split(runs[build])) >= STRICT_FLAGS, "the published build must fail on any warning"
    ci = [" ".join(l.split()) for l in (REPO / ".ci" / "run").read_text().splitlines()
          if l.startswith("jupyter-book build")]
    assert ci == [runs[build]], f"the workflow builds as .ci/run does: {ci} vs {runs[build]}"
    name = next(i for i, r in enumerate(runs) if r.startswith("python scripts/set_repository.py"))
    assert '"${{ github.repository }}"' in runs[name] and "--warn-if-changed" in runs[name]
    check = next(i for i, r in enumerate(runs) if r.startswith("python scripts/check_site.py _build/html"))
    assert '--repository "${{ github.repository }}"' in runs[check]
    assert install < name < build < check, runs


def test_uploads_the_built_site_and_deploys_it(workflow):
    steps = workflow["jobs"]["build"]["steps"]
    assert _uses(workflow, "build")[:2] == ["actions/checkout", "actions/setup-python"]
    assert next(s for s in steps if s.get("uses", "").startswith("actions/setup-python"))["with"]["python-version"] \
        == "3.11"
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    assert steps.index(upload) == len(steps) - 1, "upload the site after it was built and checked"
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert _uses(workflow, "deploy") == ["actions/deploy-pages"]
    assert deploy["if"] == "github.ref == 'refs/heads/main'"


def test_workflow_matches_github_actions_schema():
    """Checked against the GitHub workflow schema that check-jsonschema ships (pip install check-jsonschema)."""
    pytest.importorskip("check_jsonschema", reason="check-jsonschema is not installed (not a requirement)")
    result = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                             str(WORKFLOW)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
