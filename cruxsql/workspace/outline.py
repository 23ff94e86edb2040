"""Symbols and imports of a source file: exact for Python (`ast`), approximate regex outlines otherwise.

A Python file that does not parse falls back to the regex outline, and the outline says why
(`approx` = "syntax error at line N"). Every regex-derived symbol carries `approx`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class Symbol:
    name: str
    qualname: str
    kind: str
    start: int
    end: int
    signature: str
    depth: int
    doc: str = ""


@dataclass(frozen=True)
class Import:
    module: str          # as written: "os.path", ".errors", "./util"
    line: int
    names: tuple[str, ...] = ()
    level: int = 0       # Python relative-import level


@dataclass
class Outline:
    symbols: list[Symbol] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    approx: str = ""     # empty when exact; else why the outline is approximate


def outline(text: str, lang: str) -> Outline:
    if lang == "python":
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError) as exc:
            result = regex_outline(text, lang)
            result.approx = f"syntax error at line {getattr(exc, 'lineno', 0) or 0}: approximate regex outline"
            return result
        return _python_outline(tree)
    if lang in _PATTERNS:
        return regex_outline(text, lang)
    return Outline()


# ---- Python, exact ----------------------------------------------------------------------------

def _signature(node: ast.AST) -> str:
    if isinstance(node, ast.ClassDef):
        bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
        return f"class {node.name}" + (f"({', '.join(bases)})" if bases else "")
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"


def _decorator(node: ast.expr) -> str:
    """`@click.option("--x", ...)` → `click.option(…)`: the name without its arguments."""
    if isinstance(node, ast.Call):
        return f"{ast.unparse(node.func)}({'…' if node.args or node.keywords else ''})"
    return ast.unparse(node)


def _python_outline(tree: ast.Module) -> Outline:
    result = Outline()

    def visit(body: list[ast.stmt], parents: list[str], in_class: bool) -> None:
        depth = len(parents)
        for node in body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                is_class = isinstance(node, ast.ClassDef)
                kind = "class" if is_class else ("method" if in_class else "function")
                decorators = "".join(f"@{_decorator(d)} " for d in node.decorator_list[:1])
                if len(node.decorator_list) > 1:
                    decorators += f"@…+{len(node.decorator_list) - 1} "
                start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
                doc = (ast.get_docstring(node) or "").strip().splitlines()
                result.symbols.append(Symbol(node.name, ".".join(parents + [node.name]), kind, start,
                                             node.end_lineno or node.lineno, decorators + _signature(node), depth,
                                             doc[0] if doc else ""))
                visit(node.body, parents + [node.name], is_class)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and depth == 0:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.isupper():
                        result.symbols.append(Symbol(target.id, target.id, "const", node.lineno,
                                                     node.end_lineno or node.lineno, f"{target.id} = …", 0))
            elif isinstance(node, (ast.If, ast.Try)) and depth == 0:
                visit(node.body, parents, in_class)

    visit(tree.body, [], False)
    imports: set[Import] = set()
    for node in _statements(tree.body):    # imports inside functions count for the dependency graph too
        if isinstance(node, ast.Import):
            imports.update(Import(a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imports.add(Import(node.module or "", node.lineno, tuple(a.name for a in node.names), node.level))
    result.imports = sorted(imports, key=lambda i: (i.line, i.module, i.names))
    return result


def _statements(body: list[ast.stmt]):
    """Every statement, nested ones included, without visiting expressions (imports are statements)."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, name, None)
            if children:
                stack.extend(reversed(children))


# ---- other languages, approximate -------------------------------------------------------------

_PATTERNS: dict[str, list[tuple[str, re.Pattern]]] = {
    "python": [("class", re.compile(r"^(\s*)class\s+(\w+)")), ("function", re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)"))],
    "javascript": [("function", re.compile(r"^(\s*)(?:export\s+)?(?:default\s+)?(?:async\s+)?function\*?\s+(\w+)")),
                   ("class", re.compile(r"^(\s*)(?:export\s+)?(?:default\s+)?class\s+(\w+)")),
                   ("function", re.compile(r"^(\s*)(?:export\s+)?const\s+(\w+)\s*=\s*(?:async\s*)?\(?[^=]*\)?\s*=>")),
                   ("method", re.compile(r"^(\s+)(?:async\s+|static\s+|get\s+|set\s+)*(\w+)\s*\([^)]*\)\s*\{\s*$"))],
    "go": [("function", re.compile(r"^()func\s+(?:\([^)]*\)\s*)?(\w+)\s*\(")),
           ("type", re.compile(r"^()type\s+(\w+)\s+(?:struct|interface)"))],
    "rust": [("function", re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")),
             ("type", re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|mod)\s+(\w+)")),
             ("impl", re.compile(r"^(\s*)impl(?:<[^>]*>)?\s+(?:[\w:<>, ]+\s+for\s+)?(\w+)"))],
    "java": [("class", re.compile(r"^(\s*)(?:public\s+|private\s+|protected\s+|abstract\s+|final\s+|static\s+)*"
                                  r"(?:class|interface|enum)\s+(\w+)")),
             ("method", re.compile(r"^(\s+)(?:public|private|protected)[\w\s<>\[\],]*?\s(\w+)\s*\([^;]*$"))],
    "c": [("function", re.compile(r"^()[A-Za-z_][\w\s\*]*?\b(\w+)\s*\([^;]*$")),
          ("type", re.compile(r"^()(?:typedef\s+)?(?:struct|enum|union)\s+(\w+)"))],
    "ruby": [("function", re.compile(r"^(\s*)def\s+(?:self\.)?(\w+[?!]?)")),
             ("class", re.compile(r"^(\s*)(?:class|module)\s+(\w+)"))],
    "shell": [("function", re.compile(r"^()(?:function\s+)?(\w+)\s*\(\)\s*\{"))],
}
_PATTERNS["typescript"] = _PATTERNS["javascript"] + [
    ("type", re.compile(r"^(\s*)(?:export\s+)?(?:interface|type|enum)\s+(\w+)"))]
_PATTERNS["cpp"] = _PATTERNS["c"] + [("class", re.compile(r"^()class\s+(\w+)"))]
_PATTERNS["kotlin"] = _PATTERNS["java"]
_PATTERNS["csharp"] = _PATTERNS["java"]
_KEYWORDS = frozenset({"if", "for", "while", "switch", "return", "catch", "else", "do", "sizeof", "new"})
_IMPORTS = {
    "javascript": re.compile(r"""(?:^\s*import\s.*?from\s+|^\s*import\s+|require\()\s*['"]([^'"]+)['"]"""),
    "go": re.compile(r"""^\s*(?:import\s+)?(?:\w+\s+)?"([\w./-]+)"\s*$"""),
    "rust": re.compile(r"^\s*(?:pub\s+)?(?:use|mod)\s+([\w:]+)"),
    "c": re.compile(r'^\s*#\s*include\s+[<"]([^>"]+)[>"]'),
    "ruby": re.compile(r"""^\s*require(?:_relative)?\s+['"]([^'"]+)['"]"""),
}
_IMPORTS["typescript"] = _IMPORTS["javascript"]
_IMPORTS["cpp"] = _IMPORTS["c"]


def regex_outline(text: str, lang: str) -> Outline:
    """Line-pattern definitions; ends from brace matching (or indentation for Python/Ruby)."""
    lines = text.splitlines()
    result = Outline(approx="approximate regex outline")
    for number, line in enumerate(lines, start=1):
        for kind, pattern in _PATTERNS.get(lang, []):
            match = pattern.match(line)
            if match and match.group(2) not in _KEYWORDS:
                indent = len(match.group(1).expandtabs())
                end = _block_end(lines, number - 1, indent, lang)
                result.symbols.append(Symbol(match.group(2), match.group(2), kind, number, end,
                                             line.strip().rstrip("{").strip()[:160], min(indent // 2, 4)))
                break
        importer = _IMPORTS.get(lang)
        if importer:
            found = importer.search(line)
            if found:
                result.imports.append(Import(found.group(1), number))
    return result


def _block_end(lines: list[str], index: int, indent: int, lang: str) -> int:
    if lang in {"python", "ruby"}:
        for j in range(index + 1, len(lines)):
            stripped = lines[j].strip()
            if stripped and len(lines[j]) - len(lines[j].lstrip()) <= indent and not stripped.startswith(("#", ")")):
                return j if lang == "python" else j + 1
        return len(lines)
    depth, opened = 0, False
    for j in range(index, min(len(lines), index + 5000)):
        for char in lines[j]:
            if char == "{":
                depth, opened = depth + 1, True
            elif char == "}":
                depth -= 1
                if opened and depth <= 0:
                    return j + 1
        if not opened and j > index and lines[j].rstrip().endswith(";"):
            return j + 1
    return index + 1


def enclosing(symbols: list[Symbol], line: int) -> Optional[Symbol]:
    """The innermost symbol whose span holds `line`."""
    best = None
    for symbol in symbols:
        if symbol.start <= line <= symbol.end and (best is None or symbol.start >= best.start):
            best = symbol
    return best
