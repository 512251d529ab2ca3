"""Name the book's GitHub repository, the one fact the online book needs, in every place that uses it.

    python scripts/set_repository.py OWNER/NAME                 # then commit _config.yml and notebooks/
    python scripts/set_repository.py OWNER/NAME --branch main --warn-if-changed   # what the deploy workflow runs

Writes into ``_config.yml`` (keeping its comments):
- ``repository.url`` (https://github.com/OWNER/NAME), ``repository.branch``, ``repository.path_to_book`` ("": the
  repository root is the book's source directory);
- ``html.baseurl``: the GitHub Pages address, https://OWNER.github.io/NAME/ (https://OWNER.github.io/ for a
  repository named OWNER.github.io);
- the buttons that need a repository, switched on: ``launch_buttons`` (Colab and Binder URLs), ``html.use_repository_
  button``, ``use_issues_button``, ``use_edit_page_button`` and the theme's ``use_source_button``;
then names the repository in the setup cell of every chapter and exercise notebook (scripts/setup_cell.py), so that a notebook
opened on Colab installs minirl from ``git+https://github.com/OWNER/NAME``.

``--warn-if-changed`` prints a GitHub Actions ``::warning::`` when the committed ``_config.yml`` named another
repository (or none): the site built from this run is right, but Colab opens the *committed* notebooks, whose setup
cell still names the old one until this script is run and its changes committed once.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import setup_cell  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BINDERHUB_URL = "https://mybinder.org"
COLAB_URL = "https://colab.research.google.com"
# GitHub: an owner is 1-39 letters, digits or single inner hyphens; a repository name is letters, digits, '.', '-', '_'.
OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}"
NAME = r"[A-Za-z0-9._-]{1,100}"
BRANCH = r"[A-Za-z0-9._/-]+"


def parse_repository(text: str) -> tuple[str, str]:
    """``(owner, name)`` from ``OWNER/NAME`` or ``https://github.com/OWNER/NAME[.git]``; ValueError otherwise."""
    s = text.strip()
    s = re.sub(r"^(?:https?://)?github\.com/", "", s).removesuffix("/").removesuffix(".git")
    m = re.fullmatch(f"({OWNER})/({NAME})", s)
    if not m or m.group(2) in (".", ".."):
        raise ValueError(f"expected the GitHub repository as OWNER/NAME (the part after https://github.com/), "
                         f"got {text!r}")
    return m.group(1), m.group(2)


def pages_url(owner: str, name: str) -> str:
    """GitHub Pages address of a repository's site (host names are lower case)."""
    host = f"{owner.lower()}.github.io"
    return f"https://{host}/" if name.lower() == host else f"https://{host}/{name}/"


def settings(owner: str, name: str, branch: str) -> dict[tuple[str, ...], object]:
    """Every _config.yml key that depends on the repository, and its value."""
    return {
        ("repository", "url"): f"https://github.com/{owner}/{name}",
        ("repository", "path_to_book"): "",
        ("repository", "branch"): branch,
        ("html", "baseurl"): pages_url(owner, name),
        ("launch_buttons", "binderhub_url"): BINDERHUB_URL,
        ("launch_buttons", "colab_url"): COLAB_URL,
        ("html", "use_repository_button"): True,
        ("html", "use_issues_button"): True,
        ("html", "use_edit_page_button"): True,
        ("sphinx", "config", "html_theme_options", "use_source_button"): True,
    }


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)  # a double-quoted YAML string


def set_key(text: str, key: tuple[str, ...], value) -> str:
    """``text`` (YAML) with the block-mapping entry at ``key`` set to ``value``, its comment kept."""
    lines = text.splitlines(keepends=True)
    start, end, indent = 0, len(lines), -1
    for depth, part in enumerate(key):
        pattern = re.compile(rf"^( *){re.escape(part)}:(?=\s|$)")
        found = None
        for i in range(start, end):
            m = pattern.match(lines[i])
            if m and len(m.group(1)) > indent and (depth == 0) == (m.group(1) == ""):
                found, child_indent = i, len(m.group(1))
                break
            stripped = lines[i].strip()
            if stripped and not stripped.startswith("#") and len(lines[i]) - len(lines[i].lstrip(" ")) <= indent:
                break
        if found is None:
            raise KeyError(f"_config.yml has no key {'.'.join(key[:depth + 1])} (expected the layout of the "
                           f"committed _config.yml, which set_repository.py edits in place)")
        indent = child_indent
        start, end = found + 1, len(lines)
        for j in range(found + 1, len(lines)):
            stripped = lines[j].strip()
            if stripped and not stripped.startswith("#") and len(lines[j]) - len(lines[j].lstrip(" ")) <= indent:
                end = j
                break
        last = found
    line = lines[last]
    m = re.match(rf"^( *{re.escape(key[-1])}:)([^\n#]*?)(\s+#.*)?(\n?)$", line)
    lines[last] = f"{m.group(1)} {_scalar(value)}{m.group(3) or ''}{m.group(4)}"
    return "".join(lines)


def _get(config: dict, key: tuple[str, ...]):
    for part in key:
        config = (config or {}).get(part)
    return config


def write_config(config: Path, owner: str, name: str, branch: str) -> list[str]:
    """Set the repository's keys in ``config``; the list of ``key = value`` that changed."""
    text = config.read_text()
    before = yaml.safe_load(text)
    wanted = settings(owner, name, branch)
    for key, value in wanted.items():
        if _get(before, key) != value:  # lines already right keep their spelling
            text = set_key(text, key, value)
    after = yaml.safe_load(text)
    wrong = [".".join(k) for k, v in wanted.items() if _get(after, k) != v]
    if wrong:
        raise RuntimeError(f"{config}: after editing, {', '.join(wrong)} do not read back as written")
    config.write_text(text)
    return [f"{'.'.join(k)} = {_scalar(v)}" for k, v in wanted.items() if _get(before, k) != v]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("repository", help="OWNER/NAME of the book's GitHub repository")
    p.add_argument("--branch", default="main", help="the branch the launch, edit and source links open (main)")
    p.add_argument("--root", type=Path, default=REPO,
                   help="the repository checkout: its _config.yml and notebooks/*.ipynb are edited (default: this one)")
    p.add_argument("--warn-if-changed", action="store_true",
                   help="print a GitHub Actions ::warning:: if _config.yml named another repository (or none)")
    a = p.parse_args(argv)
    try:
        owner, name = parse_repository(a.repository)
    except ValueError as e:
        p.error(str(e))
    if not re.fullmatch(BRANCH, a.branch) or ".." in a.branch or a.branch.startswith(("/", "-")):
        p.error(f"expected a git branch name for --branch (letters, digits, '.', '_', '-', '/'), got {a.branch!r}")
    config = a.root / "_config.yml"
    if not config.exists():
        p.error(f"no _config.yml in {a.root} (expected the root of a minirl checkout; see --root)")
    repository = f"{owner}/{name}"
    committed = setup_cell.configured_repository(config)
    if a.warn_if_changed and committed.lower() != repository.lower():
        named = f"names {committed}" if committed else "names no repository"
        print(f"::warning title=Book repository not committed::The committed _config.yml {named}; this site is "
              f"built for {repository}. The published pages are right, but Colab opens the committed notebooks, "
              f"whose setup cell installs minirl from the repository they name. Run "
              f"`python scripts/set_repository.py {repository}` once and commit _config.yml and notebooks/.")
    for change in write_config(config, owner, name, a.branch):
        print(f"{config}: {change}")
    for path in setup_cell.all_notebooks(a.root):
        changed = setup_cell.apply(path, repository)
        print(f"{path}: setup cell names {repository} ({'updated' if changed else 'unchanged'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
