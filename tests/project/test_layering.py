"""Imports run one way: facts, embeddings <- recall, documents <- governance, curation <- surfaces (cli, mcp, ...).

Every module under cruxsql/ is parsed; each import of another cruxsql unit must be allowed by LAYERS.
A new package must be added here, which is the point: its place in the order is a decision.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "cruxsql"

FEATURES = {"errors", "facts", "embeddings", "recall", "documents"}
SURFACE_DEPS = {"errors", "facts", "recall", "documents", "governance", "curation", "workspace", "embeddings",
                "interchange", "accounting"}
LAYERS: dict[str, set[str]] = {
    "errors": set(),
    "lazy_exports": set(),
    "facts": {"errors", "lazy_exports"},
    "embeddings": {"errors", "lazy_exports"},
    "recall": {"errors", "facts", "embeddings", "documents", "lazy_exports"},  # the ranked recall reuses the documents analyzer
    "documents": {"errors", "facts", "embeddings", "lazy_exports"},
    "governance": FEATURES,
    "interchange": {"errors", "facts"},
    "workspace": {"errors", "facts", "documents", "lazy_exports"},
    "curation": FEATURES,
    "accounting": {"errors", "facts", "recall"},
    "cluster": SURFACE_DEPS,
    "console": SURFACE_DEPS,
    "cli": SURFACE_DEPS | {"mcp", "console", "cluster"},
    "mcp": SURFACE_DEPS,
    "__init__": SURFACE_DEPS,
    "__main__": {"cli"},
}


def unit_of(module: str) -> str:
    """`cruxsql.facts.codec` -> `facts`; `cruxsql` -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, absolute module) for every cruxsql import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    this = module_name(path, root)
    package = this if path.name == "__init__.py" else this.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "cruxsql"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "cruxsql":
                continue
            if target == "cruxsql":  # `from cruxsql import facts` names units directly
                out += [(node.lineno, f"cruxsql.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, target))
    return out


def violations(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        source = unit_of(module_name(path, root))
        if path.parent == root and path.stem not in LAYERS:
            found.append(f"{path.relative_to(root)}: top-level module {path.stem!r} has no place in LAYERS")
            continue
        if source not in LAYERS:
            found.append(f"{path.relative_to(root)}: package {source!r} has no place in LAYERS")
            continue
        for line, target in imported_modules(path, root):
            dest = unit_of(target)
            if dest != source and dest not in LAYERS[source]:
                found.append(f"{path.relative_to(root)}:{line}: {source} must not import {target}")
    return found


@pytest.mark.slow
def test_imports_follow_the_layer_order():
    assert violations() == []


@pytest.mark.slow
def test_a_wrong_way_import_is_caught(tmp_path):
    """Plant `facts` importing `recall` in a copy of the package: the check must name it."""
    import shutil

    copy = tmp_path / "cruxsql"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    codec = copy / "facts" / "codec.py"
    codec.write_text(codec.read_text(encoding="utf-8") + "\nfrom ..recall.scope import rust_lower\n",
                     encoding="utf-8")
    found = violations(copy)
    assert len(found) == 1 and found[0].startswith("facts/codec.py:") and "must not import cruxsql.recall.scope" in found[0]


@pytest.mark.parametrize("unit", sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()))
def test_every_package_states_what_it_is(unit):
    doc = ast.get_docstring(ast.parse((PACKAGE / unit / "__init__.py").read_text(encoding="utf-8")))
    assert doc and doc.splitlines()[0].strip(), f"cruxsql/{unit}/__init__.py needs a one-line docstring"
