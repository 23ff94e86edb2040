"""Long Python signatures shortened for an outline, so that the whole parameter list fits on one line.

An outline line has to let an agent choose its next call: which function, which parameters, what comes
back. A signature up to `WIDTH` characters is shown exactly. A longer one is not cut at the line cap,
which would hide its last parameters and its return type; it is shortened in two steps, stopping as soon
as it fits:

1. parameters with a default lose their annotation, and a default longer than `DEFAULT_CAP` characters
   becomes `…` (`token_budget: Optional[int] = None` → `token_budget=None`, `config=…`);
2. the other parameters lose their annotation too (`db: apsw.Connection` → `db`).

Names, `/`, `*`, `*args`, `**kwargs`, decorators and the return annotation always stay; the exact
header is one `ctx_read PATH mode=lines:A-B` away (the span is on the same line).
"""

from __future__ import annotations

import ast
import re

WIDTH = 100
DEFAULT_CAP = 12
_DEF = re.compile(r"^((?:@\S+ )*)((?:async )?def .*)$")


def outline_signature(signature: str, approx: str) -> str:
    """How an outline shows a symbol's signature: shortened when the outline is exact Python; a regex
    outline's line (`approx` says why it is approximate) is source text and stays as written."""
    return signature if approx else shorten(signature)


def shorten(signature: str, width: int = WIDTH) -> str:
    """`signature` (as the index stores it: decorators, then `def name(args) -> ret`) fitted to `width`."""
    match = _DEF.match(signature)
    if not match or len(match.group(2)) <= width:
        return signature
    try:
        node = ast.parse(match.group(2) + ": pass").body[0]
    except SyntaxError:
        return signature
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    shortened = signature
    for keep_required_annotations in (True, False):
        shortened = match.group(1) + _render(node, keep_required_annotations)
        if len(shortened) - len(match.group(1)) <= width:
            break
    return shortened


def _render(node: ast.FunctionDef | ast.AsyncFunctionDef, keep_required_annotations: bool) -> str:
    args = node.args
    positional = args.posonlyargs + args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)

    def parameter(arg: ast.arg, default: ast.expr | None, prefix: str = "") -> str:
        if default is not None:
            value = ast.unparse(default)
            return f"{arg.arg}={value if len(value) <= DEFAULT_CAP else '…'}"
        if keep_required_annotations and arg.annotation is not None:
            return f"{prefix}{arg.arg}: {ast.unparse(arg.annotation)}"
        return prefix + arg.arg

    parts = [parameter(arg, default) for arg, default in zip(positional, defaults)]
    if args.posonlyargs:
        parts.insert(len(args.posonlyargs), "/")
    if args.vararg:
        parts.append(parameter(args.vararg, None, "*"))
    elif args.kwonlyargs:
        parts.append("*")
    parts += [parameter(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        parts.append(parameter(args.kwarg, None, "**"))
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    return f"{prefix} {node.name}({', '.join(parts)}){returns}"
