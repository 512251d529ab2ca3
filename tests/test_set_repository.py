"""scripts/set_repository.py: the book's repository named in one step, in every place that uses it."""
import json
import shutil
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
import set_repository  # noqa: E402
import setup_cell  # noqa: E402

DEPENDENT_KEYS = list(set_repository.settings("o", "n", "main"))


def _get(config, key):
    for part in key:
        config = (config or {}).get(part)
    return config


@pytest.fixture
def root(tmp_path):
    shutil.copy(REPO / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "notebooks").mkdir()
    shutil.copy(REPO / "notebooks" / "01_offline_rl.ipynb", tmp_path / "notebooks")
    (tmp_path / "notebooks" / "exercises" / "solutions").mkdir(parents=True)
    for exercise in ("exercises/03_cql.ipynb", "exercises/solutions/03_cql.ipynb"):
        shutil.copy(REPO / "notebooks" / exercise, tmp_path / "notebooks" / exercise)
    return tmp_path


def test_committed_config_is_consistent_with_its_repository():
    """Either no repository and every repository-dependent key off/empty, or all of them as set_repository writes."""
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    repository = setup_cell.configured_repository()
    if repository:
        owner, name = set_repository.parse_repository(repository)
        branch = config["repository"]["branch"]
        wrong = {".".join(k): _get(config, k) for k, v in set_repository.settings(owner, name, branch).items()
                 if _get(config, k) != v}
        assert not wrong, f"run python scripts/set_repository.py {repository}: {wrong}"
    else:
        on = {".".join(k): _get(config, k) for k in DEPENDENT_KEYS if k != ("repository", "branch")
              and _get(config, k) not in ("", False)}
        assert not on, f"no repository.url, yet these keys are set (sphinx-book-theme needs a repository): {on}"


def test_notebooks_setup_cells_name_the_configured_repository():
    repository = setup_cell.configured_repository()
    problems = [p for p in (setup_cell.stale(nb, repository) for nb in setup_cell.all_notebooks()) if p]
    assert not problems, problems


def test_writes_every_key_and_the_setup_cell_and_keeps_comments(root, capsys):
    before = (root / "_config.yml").read_text()
    assert set_repository.main(["Octo-Org/minirl-book", "--root", str(root)]) == 0
    text = (root / "_config.yml").read_text()
    config = yaml.safe_load(text)
    assert config["repository"] == {"url": "https://github.com/Octo-Org/minirl-book", "path_to_book": "",
                                    "branch": "main"}
    assert config["html"]["baseurl"] == "https://octo-org.github.io/minirl-book/"
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert config["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert config["launch_buttons"]["notebook_interface"] == "jupyterlab"
    assert all(config["html"][k] for k in ("use_repository_button", "use_issues_button", "use_edit_page_button"))
    assert config["sphinx"]["config"]["html_theme_options"]["use_source_button"] is True
    # everything else is untouched, comments included
    assert [l for l in before.splitlines() if l.lstrip().startswith("#")] == \
           [l for l in text.splitlines() if l.lstrip().startswith("#")]
    assert len(before.splitlines()) == len(text.splitlines())
    assert setup_cell.configured_repository(root / "_config.yml") == "Octo-Org/minirl-book"
    nb = root / "notebooks" / "01_offline_rl.ipynb"
    assert setup_cell.stale(nb, "Octo-Org/minirl-book") is None
    for exercise in ("exercises/03_cql.ipynb", "exercises/solutions/03_cql.ipynb"):  # the exercises' cells too
        assert setup_cell.stale(root / "notebooks" / exercise, "Octo-Org/minirl-book") is None
    cell = next(c for c in json.loads(nb.read_text())["cells"] if setup_cell.TAG in c["metadata"].get("tags", []))
    assert 'MINIRL_REPOSITORY = "Octo-Org/minirl-book"' in "".join(cell["source"])
    out = capsys.readouterr().out
    assert "repository.url = \"https://github.com/Octo-Org/minirl-book\"" in out and "(updated)" in out
    # a second run changes nothing
    assert set_repository.main(["Octo-Org/minirl-book", "--root", str(root)]) == 0
    assert (root / "_config.yml").read_text() == text
    assert "(unchanged)" in capsys.readouterr().out


def test_branch_and_url_forms_and_user_site(root):
    assert set_repository.main(["https://github.com/someone/someone.github.io.git", "--branch", "gh/book",
                                "--root", str(root)]) == 0
    config = yaml.safe_load((root / "_config.yml").read_text())
    assert config["repository"]["url"] == "https://github.com/someone/someone.github.io"
    assert config["repository"]["branch"] == "gh/book"
    assert config["html"]["baseurl"] == "https://someone.github.io/"


def test_warning_only_when_the_committed_config_names_another_repository(root, capsys):
    set_repository.main(["first/book", "--root", str(root), "--warn-if-changed"])
    out = capsys.readouterr().out
    assert out.startswith("::warning title=Book repository not committed::The committed _config.yml names no "
                          "repository; this site is built for first/book.")
    assert "python scripts/set_repository.py first/book" in out and "Colab" in out
    set_repository.main(["first/book", "--root", str(root), "--warn-if-changed"])
    assert "::warning" not in capsys.readouterr().out
    set_repository.main(["second/book", "--root", str(root), "--warn-if-changed"])
    assert "::warning title=Book repository not committed::The committed _config.yml names first/book; " \
           "this site is built for second/book." in capsys.readouterr().out


@pytest.mark.parametrize("arg", ["minirl", "a/b/c", "owner-/name", "owner/", "owner/..", "own er/name",
                                 "https://gitlab.com/a/b"])
def test_bad_repository_is_refused_with_what_was_expected(root, arg, capsys):
    before = (root / "_config.yml").read_text()
    with pytest.raises(SystemExit) as e:
        set_repository.main([arg, "--root", str(root)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "expected the GitHub repository as OWNER/NAME" in err and repr(arg) in err
    assert (root / "_config.yml").read_text() == before


def test_bad_branch_and_missing_config_are_refused(root, tmp_path, capsys):
    with pytest.raises(SystemExit):
        set_repository.main(["a/b", "--branch", "../main", "--root", str(root)])
    assert "expected a git branch name for --branch" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        set_repository.main(["a/b", "--root", str(tmp_path / "nowhere")])
    assert "no _config.yml in" in capsys.readouterr().err


def test_a_config_without_the_expected_key_is_an_error_naming_it(root):
    path = root / "_config.yml"
    path.write_text(path.read_text().replace("  colab_url:", "  colab:"))
    with pytest.raises(KeyError, match="launch_buttons.colab_url"):
        set_repository.main(["a/b", "--root", str(root)])
