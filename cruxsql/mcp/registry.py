"""How tools are declared, discovered, described and validated (the contract is in `tools/__init__.py`)."""

from __future__ import annotations

import functools
import importlib
import inspect
import keyword
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable, Optional, get_type_hints

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..errors import InvalidInput
from ..errors import ToolError as ToolError  # re-exported: the tools raise it (see tools/__init__.py)
from ..recall.tokens import CHARS_PER_TOKEN, serialized_len
from .wire import value_problem

READ, WRITE, ACCOUNTING = "read", "write", "accounting"
KINDS = (READ, WRITE, ACCOUNTING)
_MARK = "__cruxsql_mcp_tool__"


@dataclass
class ToolResult:
    """What a tool returns: Crux's text, its structured content (None for Crux's text-only tools), and
    an error flag for Crux's soft failures (`fact not found: ...` is not an error there)."""

    text: str
    structured: Optional[dict[str, Any]] = None
    is_error: bool = False
    payload: Any = None          # the JSON value the text serialises (the holdout's compaction sample)
    sample: bool = True          # count this answer in the savings holdout (tools marked holdout=True)


@functools.cache
def frame_tokens() -> int:
    """The tokens of what carries a text-only answer to the agent (the MCP result around one text block,
    the text's JSON string aside): an answer budgeted as a whole keeps this much of its budget for it."""
    empty = types.CallToolResult(content=[types.TextContent(type="text", text="")], is_error=False)
    frame = serialized_len(empty.model_dump(mode="json", by_alias=True, exclude_none=True)) - len('""')
    return -(-frame // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    kind: str
    core: bool
    fn: Callable[..., ToolResult]
    model: type[BaseModel]
    input_schema: dict[str, Any]
    holdout: bool                # answers are sampled by the savings holdout (shaped vs unshaped)
    output_schema: Optional[dict[str, Any]] = None   # the structured content's shape (tools that return one)
    annotations: Optional[types.ToolAnnotations] = None  # the MCP hints a client approves calls by

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's keyword arguments, or InvalidInput naming the first bad argument."""
        for name, value in arguments.items():
            problem = value_problem(value, f"`{name}`")
            if problem:
                raise InvalidInput(f"{self.name}: {problem}")
        try:
            parsed = self.model.model_validate(arguments)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "arguments"
            if err["type"] == "extra_forbidden":
                raise InvalidInput(f"{self.name}: unknown argument `{where}`") from None
            if err["type"] == "missing":
                raise InvalidInput(f"missing required param: {where}") from None
            raise InvalidInput(f"{self.name}: `{where}`: {err['msg']}") from None
        return {name: getattr(parsed, name) for name in self.model.model_fields}


def tool(*, kind: str, core: bool = False, holdout: bool = False, output: Optional[dict[str, Any]] = None,
         hints: Optional[types.ToolAnnotations] = None) -> Callable[[Callable], Callable]:
    """Mark a function of a module in `cruxsql/mcp/tools/` as an MCP tool (see the package docstring).
    `output`: the shape of its structured content (`shape(...)`), for a tool that returns one.
    `hints`: its MCP annotations, `reads("Title")` or `writes("Title", destructive=..., idempotent=...)`."""
    if kind not in KINDS:
        raise ValueError(f"tool kind must be one of {KINDS}, got {kind!r}")

    def mark(fn: Callable) -> Callable:
        setattr(fn, _MARK, {"kind": kind, "core": core, "holdout": holdout, "output": output, "hints": hints})
        return fn

    return mark


def reads(title: str) -> types.ToolAnnotations:
    """The hints of a tool that changes nothing: a client may run it without asking."""
    return types.ToolAnnotations(title=title, read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                 open_world_hint=False)


def writes(title: str, *, destructive: bool, idempotent: bool) -> types.ToolAnnotations:
    """The hints of a tool that changes the store. `destructive`: it can hide or remove what was there
    (a superseding write is not: the old version stays in the history); `idempotent`: repeating the same
    call changes nothing more."""
    return types.ToolAnnotations(title=title, read_only_hint=False, destructive_hint=destructive,
                                 idempotent_hint=idempotent, open_world_hint=False)


_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object"}


def shape(**fields: str) -> dict[str, Any]:
    """An output schema from field types: `shape(fact_id="string", reason="string?")` (`?`: may be null).
    Fields are listed, none required and others allowed: a client learns the shape, and a tool's
    Crux-compatible answers (some keys only some of the time) always conform."""
    props = {}
    for name, kind in fields.items():
        base = kind.rstrip("?")
        if base not in _JSON_TYPES:
            raise ValueError(f"output field {name}: unknown JSON type {kind!r}")
        props[name] = {"type": [base, "null"] if kind.endswith("?") else base}
    return {"type": "object", "properties": props}


def _strip_titles(schema: Any) -> Any:
    """Pydantic's generated `title`s cost tokens in every turn and say nothing the names do not."""
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _simplify_optional(prop: dict[str, Any]) -> dict[str, Any]:
    """`anyOf: [T, null]` with a null default -> `T`: leaving an argument out is how it is absent."""
    options = prop.get("anyOf")
    if options and len(options) == 2 and {"type": "null"} in options and prop.get("default", 0) is None:
        other = next(o for o in options if o != {"type": "null"})
        rest = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
        return {**other, **rest}
    return prop


def _argument_name(parameter: str) -> str:
    """`from_` -> `from`: an argument named by a Python keyword is its parameter without the underscore."""
    return parameter[:-1] if parameter.endswith("_") and keyword.iskeyword(parameter[:-1]) else parameter


def spec_of(fn: Callable) -> ToolSpec:
    """Build a tool's spec from its signature: every parameter after `call` is an argument."""
    meta = getattr(fn, _MARK)
    hints = get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())[1:]
    fields: dict[str, Any] = {  # Any: create_model's keywords also name its options (__config__, __base__)
        p.name: (hints[p.name], Field(... if p.default is inspect.Parameter.empty else p.default,
                                      alias=_argument_name(p.name))) for p in params}
    model = create_model(f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid", strict=True), **fields)
    schema = _strip_titles(model.model_json_schema())
    schema["properties"] = {k: _simplify_optional(v) for k, v in schema.get("properties", {}).items()}
    schema.pop("additionalProperties", None)
    doc = inspect.cleandoc(fn.__doc__ or "").split("\n\n")[0].replace("\n", " ")
    return ToolSpec(fn.__name__, doc, meta["kind"], meta["core"], fn, model, schema, meta["holdout"], meta["output"],
                    meta["hints"])


def discover(package: str = "cruxsql.mcp.tools") -> dict[str, ToolSpec]:
    """Every marked function of every module in the tools package, by tool name."""
    root = importlib.import_module(package)
    specs: dict[str, ToolSpec] = {}
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package}.{info.name}")
        marked = [fn for _, fn in inspect.getmembers(module, inspect.isfunction)
                  if hasattr(fn, _MARK) and fn.__module__ == module.__name__]
        for fn in sorted(marked, key=lambda f: f.__code__.co_firstlineno):
                if fn.__name__ in specs:
                    raise ValueError(f"MCP tool {fn.__name__!r} is defined twice")
                specs[fn.__name__] = spec_of(fn)
    return specs
