"""The package's shape: imports run one way between its sub-packages, with no cycle, no module runs long
without saying why, and the run-directory and comparison side loads neither torch nor Lightning."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import attnlab

PACKAGE = Path(attnlab.__file__).parent
# What each sub-package may import of attnlab (besides itself). The order of the README's layout:
# leaves first; ``cli`` is the only package allowed to import everything, and nothing imports it.
ALLOWED = {
    "attnlab": {"config"},  # attnlab/__init__.py registers the resolvers
    "config": set(),
    "rundir": set(),
    "data": set(),
    "posenc": set(),
    "attention": {"posenc"},
    "model": {"attention", "posenc"},
    "analysis": {"attention", "model"},
    "training": {"config", "rundir", "data", "posenc", "attention", "model", "analysis"},
    "compare": {"config", "rundir", "analysis"},
    "cli": {"config", "rundir", "data", "posenc", "attention", "model", "analysis", "training", "compare"},
}
MAX_LINES = 310


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path) -> set[str]:
    """The attnlab modules a file imports, at module level or inside functions (lazy imports count:
    they run), but not under ``if TYPE_CHECKING:`` (those never run)."""
    found: set[str] = set()
    inside = path.resolve().is_relative_to(PACKAGE.resolve())
    own = module_name(path) if inside else ""
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "attnlab")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base])
            if base.split(".")[0] == "attnlab":
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the attnlab modules it imports (names that are not modules fold into their module)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges = {}
    for name, path in files.items():
        targets = set()
        for imported in imports_of(path):
            while imported not in files and "." in imported:
                imported = imported.rpartition(".")[0]  # ``from attnlab.rundir import RunDir``
            if imported in files and imported != name:
                targets.add(imported)
        edges[name] = targets
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, …, a], or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := dfs(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := dfs(node)):
            return cycle
    return None


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "attnlab"


def test_the_import_graph_of_attnlab_has_no_cycle():
    assert find_cycle(graph()) is None, " -> ".join(find_cycle(graph()))


def test_the_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_every_import_between_sub_packages_runs_the_allowed_way():
    wrong = sorted(
        f"{source} imports {target}"
        for source, targets in graph().items()
        for target in targets
        if package_of(target) != package_of(source) and package_of(target) not in ALLOWED[package_of(source)]
    )
    assert not wrong, "\n".join(wrong)


def test_every_sub_package_is_placed_in_the_import_order():
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(ALLOWED) - {"attnlab"}


def test_the_graph_sees_lazy_imports_and_ignores_type_checking_ones(tmp_path):
    file = tmp_path / "m.py"
    file.write_text(
        "from typing import TYPE_CHECKING\n"
        "from attnlab.rundir import RunDir\n"
        "if TYPE_CHECKING:\n    from attnlab.cli.train import main\n"
        "def f():\n    import attnlab.training.run\n"
    )
    assert imports_of(file) == {"attnlab.rundir", "attnlab.rundir.RunDir", "attnlab.training.run"}


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_long_without_saying_why_in_its_docstring(path):
    lines = len(path.read_text().splitlines())
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert lines <= MAX_LINES or "long because" in docstring, f"{path.name}: {lines} lines"


def test_reading_run_directories_and_comparing_them_loads_neither_torch_nor_lightning():
    code = (
        "import sys, attnlab.rundir, attnlab.rundir.sweep, attnlab.compare, attnlab.compare.text\n"
        "heavy = sorted(m for m in ('torch', 'lightning', 'wandb') if m in sys.modules)\n"
        "print(','.join(heavy))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
