"""The shape of the package: no module of minirl imports, directly or through others, a module that imports it.

Every import counts, the lazy ones inside functions too (an optional dependency such as Minari is imported lazily, but
still in one direction). The package's ``__init__`` is left out: every submodule depends on its parent package by
construction, and ``minirl/__init__.py`` only forwards ``minirl.load_agent`` on first use.
"""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "minirl"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The minirl modules that the file at ``path`` imports anywhere in its body (``from . import x`` counts as
    ``minirl.x`` when that is a module, as the package otherwise)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "minirl"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "minirl":
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & modules
            found |= subs or {target}
    return {m for m in found if m in modules and m != here}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    return {m: imports(p, modules) - {"minirl"} for m, p in files.items() if m != "minirl"}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first == last), or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        state[m] = "done"
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_import_graph_reads_lazy_and_relative_imports(tmp_path):
    graph = import_graph()
    assert "minirl.data" in graph["minirl.minari_io"]       # a module-level relative import
    assert "minirl.minari_io" in graph["minirl.datasets"]   # a lazy import inside a function
    assert {"minirl.train", "minirl.evaluation", "minirl.devices"} <= graph["minirl.runs"]


def test_no_module_of_minirl_imports_itself_through_others():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)
