"""The package's shape: no import cycle among cruxsql's modules, and no function over 100 lines.

The import graph counts every import a module runs, at module level or inside a function, and leaves
out those under `if TYPE_CHECKING:` (never run). `from pkg import name` is an edge to `pkg.name` when
that is a module of the package, else to `pkg`; relative imports are resolved.
"""

import ast
import shutil
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cruxsql"
MAX_FUNCTION_LINES = 100


def module_name(path: Path, root: Path) -> str:
    """`cruxsql/facts/codec.py` -> `cruxsql.facts.codec`; a package's `__init__.py` -> the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_imports(tree: ast.AST):
    """Every import statement that can run: all of them but those of an `if TYPE_CHECKING:` body."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package's modules it imports."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _run_imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in paths else source
                           for alias in node.names]
            graph[name].update(t for t in targets if t in paths and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each group of modules that import each other (a strongly connected component
    of more than one module), as the modules in import order, the first repeated at the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return [_cycle_through(graph, set(c), c[0]) for c in sorted(components)]


def _cycle_through(graph: dict[str, set[str]], members: set[str], start: str) -> list[str]:
    """The shortest import path from `start` back to itself within `members`."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                return paths[node] + [start]
            if nxt not in paths:
                paths[nxt] = paths[node] + [nxt]
                queue.append(nxt)
    raise AssertionError(f"{start} is in no cycle of {sorted(members)}")


def long_functions(root: Path = PACKAGE, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """`file:function:lines` for every function or method over `limit` lines (decorators not counted)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.name}:{lines}")
    return found


def test_the_import_graph_has_no_cycle():
    found = cycles(import_graph())
    assert found == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_function_is_over_100_lines():
    found = long_functions()
    assert found == [], f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps):\n" + "\n".join(found)


def test_a_planted_cycle_is_named_and_a_type_checking_import_is_not_one(tmp_path):
    """In a copy of the package: a function-level import of `store` in `codec` (which `store` imports)
    is a cycle, named; the same import under `if TYPE_CHECKING:` is none."""
    copy = tmp_path / "cruxsql"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    codec = copy / "facts" / "codec.py"
    original = codec.read_text(encoding="utf-8")
    before = cycles(import_graph(copy))
    codec.write_text(original + "\n\nif TYPE_CHECKING:\n    from .store import Store\n", encoding="utf-8")
    assert cycles(import_graph(copy)) == before
    codec.write_text(original + "\n\ndef _planted():\n    from . import store\n    return store\n", encoding="utf-8")
    planted = [c for c in cycles(import_graph(copy)) if c not in before]
    assert len(planted) == 1 and "cruxsql.facts.codec" in planted[0] and "cruxsql.facts.store" in planted[0], planted
    assert planted[0][0] == planted[0][-1]
    assert all(b in import_graph(copy)[a] for a, b in zip(planted[0], planted[0][1:]))


def test_a_function_over_100_lines_is_named_with_its_length(tmp_path):
    package = tmp_path / "cruxsql"
    package.mkdir()
    lines = [f"x{i} = {i}\n" for i in range(99)]
    shape = package / "shape.py"
    shape.write_text("def fits():\n" + "".join("    " + line for line in lines), encoding="utf-8")
    assert long_functions(package) == []  # 100 lines
    shape.write_text("class C:\n    def method(self):\n" + "".join("        " + line for line in lines)
                     + "        return x0\n", encoding="utf-8")
    assert long_functions(package) == ["cruxsql/shape.py:method:101"]
