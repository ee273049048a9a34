"""Reads one SGLang wheel (or an unpacked source tree) and prints its surface as JSON: the launch flags of
`ServerArgs`, the HTTP routes of the server, the fields of the request/answer classes uis sends or reads, and the
answers SGLang builds outside its handlers (answers.py: /generate's meta_info, load entries, server info).

Only the standard library and `ast`: SGLang is never imported (it needs torch and a GPU). Where a value is not a
literal the surface says so (`*_source` holds the expression) instead of guessing.

    python3 extract_surface.py sglang-0.5.10.post1-py3-none-any.whl > 0.5.10.post1.json
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator

import answers

SERVER_ARGS = "sglang/srt/server_args.py"
HTTP_SERVER = "sglang/srt/entrypoints/http_server.py"
IO_STRUCT = "sglang/srt/managers/io_struct.py"
OPENAI_PROTOCOL = "sglang/srt/entrypoints/openai/protocol.py"
CONSTANTS = "sglang/srt/constants.py"
VERSION = "sglang/version.py"
VERSION_SCM = "sglang/_version.py"
# 0.5.23+: ServerArgs collects its fields from the namespace classes of this package.
FIELD_NAMESPACES = "sglang/srt/arg_groups/fields/"

# Request and answer classes uis sends or reads (names across versions; a class a version lacks is left out).
CLASSES = {
    IO_STRUCT: [
        "GenerateReqInput",
        "AbortReq",
        "PauseGenerationReqInput",
        "ContinueGenerationReqInput",
        "ReleaseMemoryOccupationReqInput",
        "ResumeMemoryOccupationReqInput",
        "UpdateWeightFromDiskReqInput",
        "UpdateWeightFromDiskReqOutput",
        "InitWeightsUpdateGroupReqInput",
        "InitWeightsUpdateGroupReqOutput",
        "DestroyWeightsUpdateGroupReqInput",
        "DestroyWeightsUpdateGroupReqOutput",
        "UpdateWeightsFromDistributedReqInput",
        "UpdateWeightsFromDistributedReqOutput",
        "UpdateWeightsFromTensorReqInput",
        "UpdateWeightsFromTensorReqOutput",
        "UpdateWeightVersionReqInput",
        "GetLoadReqOutput",
    ],
    OPENAI_PROTOCOL: [
        "ChatCompletionRequest",
        "ChatCompletionResponse",
        "ChatCompletionResponseChoice",
        "ChatCompletionStreamResponse",
        "ChatCompletionResponseStreamChoice",
        "ChatMessage",
        "DeltaMessage",
        "CompletionRequest",
        "CompletionResponse",
        "CompletionResponseChoice",
        "CompletionStreamResponse",
        "CompletionResponseStreamChoice",
        "UsageInfo",
        "ModelCard",
        "ModelList",
        "ErrorResponse",
        "StreamOptions",
    ],
}

ROUTE_METHODS = {"get": ["GET"], "post": ["POST"], "put": ["PUT"], "delete": ["DELETE"], "patch": ["PATCH"]}
# argparse actions that take no value on the command line.
ZERO_ARG_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}


class Unresolved(Exception):
    """An expression that is not a literal the surface can state."""


class Source:
    """The files of a wheel (zip) or of a directory holding the `sglang/` package."""

    def __init__(self, path: Path):
        self.path = path
        self._zip = zipfile.ZipFile(path) if path.is_file() else None
        self._modules: dict[str, ast.Module | None] = {}

    def names(self) -> list[str]:
        if self._zip is not None:
            return self._zip.namelist()
        return [str(p.relative_to(self.path)) for p in self.path.rglob("*.py")]

    def read(self, name: str) -> str | None:
        if self._zip is not None:
            try:
                return self._zip.read(name).decode("utf-8")
            except KeyError:
                return None
        file = self.path / name
        return file.read_text("utf-8") if file.is_file() else None

    def module(self, name: str) -> ast.Module | None:
        if name not in self._modules:
            text = self.read(name)
            self._modules[name] = None if text is None else ast.parse(text, filename=name)
        return self._modules[name]

    def module_of(self, dotted: str) -> str | None:
        """File of a dotted module name (`sglang.srt.constants`), package `__init__` included."""
        base = dotted.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if self.module(candidate) is not None:
                return candidate
        return None


class Resolver:
    """Evaluates the literal part of expressions: constants, containers, module-level names (followed through
    `from x import y`), `ServerArgs.field` defaults and a few list-building calls."""

    def __init__(self, source: Source, class_defaults: Callable[[str], Any] | None = None):
        self.source = source
        self.class_defaults = class_defaults
        self._depth = 0

    def value(self, node: ast.AST, module: str) -> Any:
        self._depth += 1
        try:
            if self._depth > 40:
                raise Unresolved("too deep")
            return self._value(node, module)
        finally:
            self._depth -= 1

    def _value(self, node: ast.AST, module: str) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [self.value(e, module) for e in node.elts]
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise Unresolved("dict unpacking")
            return {self.value(k, module): self.value(v, module) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.value(node.operand, module)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left, module), self.value(node.right, module)
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(left, (int, float, str)) and type(left) is type(right):
                return left + right
            raise Unresolved("add")
        if isinstance(node, ast.Name):
            return self.name(node.id, module)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and self.class_defaults:
            if node.value.id == "ServerArgs":
                return self.class_defaults(node.attr)
        if isinstance(node, ast.Call):
            return self.call(node, module)
        raise Unresolved(type(node).__name__)

    def call(self, node: ast.Call, module: str) -> Any:
        func = node.func
        if isinstance(func, ast.Name) and func.id in {"list", "sorted", "tuple", "set", "frozenset"} and len(node.args) == 1:
            inner = self.value(node.args[0], module)
            items = list(inner.keys()) if isinstance(inner, dict) else list(inner)
            return sorted(items) if func.id == "sorted" else items
        if isinstance(func, ast.Attribute) and func.attr == "keys" and not node.args:
            inner = self.value(func.value, module)
            if isinstance(inner, dict):
                return list(inner.keys())
        if isinstance(func, ast.Attribute) and func.attr == "get" and _is_os_environ(func.value):
            # os.environ.get("NAME", "/default"): the route or value without the variable set.
            if len(node.args) == 2:
                return self.value(node.args[1], module)
        raise Unresolved("call")

    def name(self, ident: str, module: str) -> Any:
        tree = self.source.module(module)
        if tree is None:
            raise Unresolved(ident)
        for stmt in reversed(tree.body):
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == ident for t in stmt.targets):
                return self.value(stmt.value, module)
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id == ident
                and stmt.value is not None
            ):
                return self.value(stmt.value, module)
            if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                for alias in stmt.names:
                    if (alias.asname or alias.name) == ident:
                        target = self.source.module_of(stmt.module)
                        if target is None:
                            raise Unresolved(ident)
                        return self.name(alias.name, target)
        raise Unresolved(ident)


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)


def literal(resolver: Resolver, node: ast.AST | None, module: str, out: dict[str, Any], key: str) -> None:
    """Sets `out[key]` to the literal value of `node`, or `out[key + '_source']` to its source when not literal."""
    if node is None:
        return
    try:
        value = resolver.value(node, module)
    except Unresolved:
        out[f"{key}_source"] = ast.unparse(node)
        return
    if isinstance(value, set):
        value = sorted(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        out[f"{key}_source"] = ast.unparse(node)
        return
    out[key] = value


def find_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == name:
            return stmt
    return None


def walk_calls(node: ast.AST) -> Iterator[ast.Call]:
    """Calls in source order (ast.walk is breadth-first, which would reorder nested blocks)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Call):
            yield child
        yield from walk_calls(child)


# ---------------------------------------------------------------------------------------------------------------
# Flags


def arity(action: str, nargs: Any) -> list[Any]:
    """[min, max] values a flag takes on the command line (max None = unbounded)."""
    if action in ZERO_ARG_ACTIONS or action.endswith("StoreTrueAction") or action.endswith("StoreConstAction"):
        return [0, 0]
    if action == "BooleanOptionalAction":
        return [0, 0]
    if nargs is None:
        return [1, 1]
    if nargs == "?":
        return [0, 1]
    if nargs == "*":
        return [0, None]
    if nargs == "+":
        return [1, None]
    if isinstance(nargs, int):
        return [nargs, nargs]
    return [0, None]


def _type_name(node: ast.AST | None) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ast.unparse(node)


def flag_from_add_argument(call: ast.Call, resolver: Resolver, module: str) -> dict[str, Any] | None:
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not names or not names[0].startswith("-"):
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
    action_node = kw.get("action")
    if action_node is None:
        action = "store"
    elif isinstance(action_node, ast.Constant):
        action = str(action_node.value)
    else:
        action = _type_name(action_node) or "store"
    flag: dict[str, Any] = {"names": names, "action": action}
    nargs = None
    if "nargs" in kw:
        try:
            nargs = resolver.value(kw["nargs"], module)
        except Unresolved:
            nargs = ast.unparse(kw["nargs"])
        if action.startswith("Deprecated") and nargs is None:
            nargs = None
    # A custom action that names `nargs=None` explicitly (SGLang's deprecated store-const) takes one value.
    if action.endswith("StoreConstAction") and "nargs" in kw and nargs is None:
        flag["arity"] = [1, 1]
    else:
        flag["arity"] = arity(action, nargs)
    if nargs is not None:
        flag["nargs"] = nargs
    type_name = _type_name(kw.get("type"))
    if type_name is not None:
        flag["type"] = type_name
    literal(resolver, kw.get("choices"), module, flag, "choices")
    literal(resolver, kw.get("default"), module, flag, "default")
    if "dest" in kw and isinstance(kw["dest"], ast.Constant):
        flag["dest"] = kw["dest"].value
    if "required" in kw and isinstance(kw["required"], ast.Constant) and kw["required"].value is True:
        flag["required"] = True
    if action.startswith("Deprecated"):
        flag["deprecated"] = True
    return flag


def _subscript_parts(node: ast.AST) -> tuple[str, list[ast.AST]] | None:
    """`A[T, meta, ...]` / `Annotated[T, ...]` / `Optional[T]` as (name, [args])."""
    if not isinstance(node, ast.Subscript):
        return None
    head = _type_name(node.value) or ""
    sl = node.slice
    args = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
    return head, args


def _unwrap_optional(node: ast.AST) -> ast.AST:
    parts = _subscript_parts(node)
    if parts and parts[0] == "Optional":
        return parts[1][0]
    if parts and parts[0] == "Union":
        rest = [a for a in parts[1] if not (isinstance(a, ast.Constant) and a.value is None)]
        if len(rest) == 1:
            return rest[0]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [node.left, node.right]
        rest = [s for s in sides if not (isinstance(s, ast.Constant) and s.value is None)]
        if len(rest) == 1:
            return rest[0]
    return node


def flag_from_field(
    stmt: ast.AnnAssign, resolver: Resolver, module: str
) -> dict[str, Any] | None:
    """The flag `add_cli_args_from_dataclass` derives from one `A[T, "help" | Arg(...)]` field (SGLang
    `arg_groups/arg_utils.py`: custom action, Literal -> choices, list -> nargs '+', bool -> store_true, scalar)."""
    if not isinstance(stmt.target, ast.Name):
        return None
    parts = _subscript_parts(stmt.annotation)
    if parts is None or parts[0] not in {"A", "Annotated"} or len(parts[1]) < 2:
        return None
    raw_type, metas = parts[1][0], parts[1][1:]
    meta: dict[str, ast.AST] | None = None
    for m in metas:
        if isinstance(m, ast.Constant) and isinstance(m.value, str):
            meta = {}
            break
        if isinstance(m, ast.JoinedStr):
            meta = {}
            break
        if isinstance(m, ast.Call) and _type_name(m.func) == "Arg":
            meta = {k.arg: k.value for k in m.keywords if k.arg is not None}
            break
        if isinstance(m, ast.BinOp):  # "help " + "text"
            meta = {}
            break
    if meta is None:
        return None
    if _const(meta.get("no_cli")) is True:
        return None
    field = stmt.target.id
    cli_name = _const(meta.get("cli_name")) or "--" + field.replace("_", "-")
    aliases: list[str] = []
    if "aliases" in meta:
        try:
            aliases = list(resolver.value(meta["aliases"], module))
        except Unresolved:
            aliases = []
    flag: dict[str, Any] = {"names": [cli_name, *aliases]}
    default_node = _field_default(stmt.value)
    if meta.get("action") is not None:
        action_node = meta["action"]
        action = str(action_node.value) if isinstance(action_node, ast.Constant) else (_type_name(action_node) or "")
        flag["action"] = action
        nargs = None
        if "action_kwargs" in meta:
            try:
                kwargs = resolver.value(meta["action_kwargs"], module)
                nargs = kwargs.get("nargs") if isinstance(kwargs, dict) else None
            except Unresolved:
                pass
        flag["arity"] = arity(action, nargs)
        literal(resolver, default_node, module, flag, "default")
        if action.startswith("Deprecated"):
            flag["deprecated"] = True
        return _finish_field_flag(flag, field, cli_name)
    inner = _unwrap_optional(raw_type)
    inner_parts = _subscript_parts(inner)
    type_parser = _type_name(meta.get("type_parser"))
    nargs_meta = _const(meta.get("nargs"))
    if inner_parts and inner_parts[0] == "Literal":
        values = []
        for a in inner_parts[1]:
            try:
                values.append(resolver.value(a, module))
            except Unresolved:
                pass
        flag["action"] = "store"
        flag["arity"] = [1, 1]
        first = values[0] if values else ""
        flag["type"] = type_parser or _py_type(first)
        if "choices" in meta:
            literal(resolver, meta["choices"], module, flag, "choices")
        else:
            flag["choices"] = values
    elif inner_parts and inner_parts[0] in {"list", "List"} and type_parser is None:
        elem = _type_name(inner_parts[1][0]) if inner_parts[1] else "str"
        nargs = nargs_meta or "+"
        flag["action"] = "store"
        flag["nargs"] = nargs
        flag["arity"] = arity("store", nargs)
        flag["type"] = elem if elem in {"str", "int", "float"} else "str"
        literal(resolver, meta.get("choices"), module, flag, "choices")
    elif _type_name(inner) == "bool":
        flag["action"] = "store_true"
        flag["arity"] = [0, 0]
    else:
        name = _type_name(inner)
        flag["action"] = "store"
        flag["type"] = type_parser or (name if name in {"str", "int", "float"} else "str")
        literal(resolver, meta.get("choices"), module, flag, "choices")
        if nargs_meta is not None:
            flag["nargs"] = nargs_meta
        flag["arity"] = arity("store", nargs_meta)
        required = _const(meta.get("required"))
        if required is True or (required is None and stmt.value is None):
            flag["required"] = True
    literal(resolver, default_node, module, flag, "default")
    return _finish_field_flag(flag, field, cli_name)


def _finish_field_flag(flag: dict[str, Any], field: str, cli_name: str) -> dict[str, Any]:
    if cli_name.lstrip("-").replace("-", "_") != field:
        flag["dest"] = field
    return flag


def _py_type(value: Any) -> str:
    return {int: "int", float: "float"}.get(type(value), "str")


def _const(node: ast.AST | None) -> Any:
    return node.value if isinstance(node, ast.Constant) else None


def _field_default(node: ast.AST | None) -> ast.AST | None:
    """The default of a dataclass/msgspec field: `= x`, `field(default=x)`; a factory has no literal default."""
    if isinstance(node, ast.Call) and _type_name(node.func) in {"field", "Field"}:
        for k in node.keywords:
            if k.arg == "default":
                return k.value
        # pydantic's Field(x, ...) / Field(...): the first positional argument is the default (... = required).
        return node.args[0] if node.args and _type_name(node.func) == "Field" else None
    return node


def class_field_defaults(resolver: Resolver, cls: ast.ClassDef, module: str) -> Callable[[str], Any]:
    """`ServerArgs.<field>` -> the field's literal default (old-style `default=ServerArgs.tp_size`)."""
    nodes: dict[str, ast.AST] = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            default = _field_default(stmt.value)
            if default is not None:
                nodes[stmt.target.id] = default

    def lookup(name: str) -> Any:
        if name not in nodes:
            raise Unresolved(name)
        return resolver.value(nodes[name], module)

    return lookup


def _parser_helpers(tree: ast.Module) -> dict[str, ast.AST]:
    """Module functions and ServerArgs static methods add_cli_args may delegate to."""
    out: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[stmt.name] = stmt
    cls = find_class(tree, "ServerArgs")
    if cls is not None:
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(stmt.name, stmt)
    return out


def _field_classes(source: Source, tree: ast.Module) -> list[tuple[ast.ClassDef, str]]:
    """The classes whose annotated fields become flags: ServerArgs itself, or (0.5.23+) every namespace class of
    `arg_groups/fields/` (those carrying `_NS_PATH`)."""
    classes: list[tuple[ast.ClassDef, str]] = []
    cls = find_class(tree, "ServerArgs")
    if cls is not None:
        classes.append((cls, SERVER_ARGS))
    for name in sorted(n for n in source.names() if n.startswith(FIELD_NAMESPACES) and n.endswith(".py")):
        mod = source.module(name)
        if mod is None:
            continue
        for stmt in mod.body:
            if isinstance(stmt, ast.ClassDef) and any(
                isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_NS_PATH" for t in s.targets)
                for s in stmt.body
            ):
                classes.append((stmt, name))
    return classes


def extract_flags(source: Source) -> dict[str, dict[str, Any]]:
    tree = source.module(SERVER_ARGS)
    if tree is None:
        raise SystemExit(f"{SERVER_ARGS} not found in {source.path}")
    cls = find_class(tree, "ServerArgs")
    resolver = Resolver(source)
    if cls is not None:
        resolver.class_defaults = class_field_defaults(resolver, cls, SERVER_ARGS)
    helpers = _parser_helpers(tree)
    entry = helpers.get("add_cli_args")
    if entry is None:
        raise SystemExit("ServerArgs.add_cli_args not found")
    flags: list[dict[str, Any]] = []
    seen: set[str] = set()

    def visit(fn: ast.AST) -> None:
        for call in walk_calls(fn):
            callee = call.func
            name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", None)
            if name == "add_argument":
                flag = flag_from_add_argument(call, resolver, SERVER_ARGS)
                if flag is not None:
                    flags.append(flag)
            elif name == "add_cli_args_from_dataclass":
                for klass, module in _field_classes(source, tree):
                    for stmt in klass.body:
                        if isinstance(stmt, ast.AnnAssign):
                            flag = flag_from_field(stmt, resolver, module)
                            if flag is not None:
                                flags.append(flag)
            elif name in helpers and name not in seen and name != "add_cli_args":
                # A helper that receives the parser registers flags too.
                if any(isinstance(a, ast.Name) and a.id == "parser" for a in call.args):
                    seen.add(name)
                    visit(helpers[name])

    visit(entry)
    out: dict[str, dict[str, Any]] = {}
    for flag in flags:
        primary = flag["names"][0]
        # A later registration of the same option string would make argparse fail at startup; keep the first.
        out.setdefault(primary, flag)
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------------------------------------
# Routes


def _route_decorator(dec: ast.AST, routers: dict[str, str]) -> tuple[str, ast.AST, list[str] | None] | None:
    """(prefix, path node, methods) of `@app.post("/x")`, `@app.api_route("/x", methods=[...])`,
    `@router.get(...)`."""
    if not isinstance(dec, ast.Call) or not isinstance(dec.func, ast.Attribute):
        return None
    owner = dec.func.value
    if not isinstance(owner, ast.Name) or owner.id not in routers:
        return None
    attr = dec.func.attr
    if not dec.args:
        return None
    if attr in ROUTE_METHODS:
        return routers[owner.id], dec.args[0], ROUTE_METHODS[attr]
    if attr == "api_route":
        for k in dec.keywords:
            if k.arg == "methods":
                return routers[owner.id], dec.args[0], None
        return routers[owner.id], dec.args[0], ["GET"]
    return None


def _body_class(fn: ast.AsyncFunctionDef | ast.FunctionDef) -> str | None:
    """The request model of a handler: the annotation of its first non-Request parameter."""
    for arg in fn.args.args:
        if arg.annotation is None:
            continue
        ann = arg.annotation
        parts = _subscript_parts(ann)
        if parts and parts[0] == "Annotated":
            ann = parts[1][0]
        # A request model is a class name; builtins and Optional[...] are query parameters.
        if isinstance(ann, (ast.Name, ast.Attribute)):
            name = _type_name(ann) or ""
            if name[:1].isupper() and name not in {"Request", "Response", "RawRequest", "BackgroundTasks"}:
                return name
    return None


def _is_error_response(call: ast.Call) -> bool:
    """`ORJSONResponse(..., status_code=400)` and the like: an error answer, not the route's answer."""
    for k in call.keywords:
        if k.arg == "status_code":
            v = k.value
            if isinstance(v, ast.Constant):
                return v.value != 200
            if isinstance(v, ast.IfExp):
                # `200 if success else HTTPStatus.BAD_REQUEST`: the same body either way, so the route's answer.
                return not any(ast.unparse(b).endswith(("OK", "200")) for b in (v.body, v.orelse))
            return not ast.unparse(v).endswith(("OK", "200"))
    return False


def _answer_shape(fn: ast.AST) -> tuple[list[str], bool]:
    """Keys of the dict a handler answers with, and whether the answer has more than those (a `**spread`, or a
    value built elsewhere). Only returned values count: error answers (status_code >= 400) do not."""
    assigned: dict[str, list[ast.AST]] = {}
    subscripted: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(node.value)
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    if isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                        subscripted.setdefault(t.value.id, set()).add(t.slice.value)
    keys: set[str] = set()
    open_ = False
    found = False

    def take(value: ast.AST | None, depth: int = 0) -> None:
        nonlocal open_, found
        if value is None or depth > 6:
            return
        if isinstance(value, ast.Await):
            return take(value.value, depth + 1)
        if isinstance(value, ast.Call):
            if _is_error_response(value):
                return
            content = next((k.value for k in value.keywords if k.arg == "content"), None)
            return take(content if content is not None else (value.args[0] if value.args else None), depth + 1)
        if isinstance(value, ast.Dict):
            found = True
            for k in value.keys:
                if k is None:
                    open_ = True
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    keys.add(k.value)
            return
        if isinstance(value, (ast.ListComp, ast.List)):
            elts = [value.elt] if isinstance(value, ast.ListComp) else value.elts
            for e in elts:
                take(e, depth + 1)
            return
        if isinstance(value, ast.Name) and value.id in assigned:
            for v in assigned[value.id]:
                take(v, depth + 1)
            if value.id in subscripted:
                found = True
                keys.update(subscripted[value.id])
            return
        open_ = True

    for node in ast.walk(fn):
        if isinstance(node, ast.Return):
            take(node.value)
    if not found:
        return [], True
    return sorted(keys), open_


def _always_raises(fn: ast.AST) -> int | None:
    """The status of a handler whose whole body is `raise HTTPException(status_code=N, ...)` (a route kept only to
    say it is gone: 0.5.9 to 0.5.17's /get_weight_version answers 404 and names /model_info)."""
    body = [s for s in getattr(fn, "body", []) if not isinstance(s, ast.Expr)]
    if len(body) == 1 and isinstance(body[0], ast.Raise) and isinstance(body[0].exc, ast.Call):
        for k in body[0].exc.keywords:
            if k.arg == "status_code" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, int):
                return k.value.value
    return None


def _delegate(fn: ast.AST) -> str | None:
    """`return await other()` / `return other()`: the handler answers what `other` answers."""
    body = [s for s in getattr(fn, "body", []) if not isinstance(s, ast.Expr)]
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        value = body[0].value
        if isinstance(value, ast.Await):
            value = value.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and not value.args:
            return value.func.id
    return None


def _routes_of(source: Source, module: str, routers: dict[str, str], resolver: Resolver) -> list[dict[str, Any]]:
    tree = source.module(module)
    if tree is None:
        return []
    handlers = {
        s.name: s for s in ast.walk(tree) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    routes: list[dict[str, Any]] = []
    for fn in handlers.values():
        for dec in fn.decorator_list:
            found = _route_decorator(dec, routers)
            if found is None:
                continue
            prefix, path_node, methods = found
            try:
                path = resolver.value(path_node, module)
            except Unresolved:
                # Said, not dropped: a route whose path is computed at run time.
                routes.append({"path_source": ast.unparse(path_node), "methods": methods or [], "handler": fn.name})
                continue
            if methods is None:
                methods_node = next(k.value for k in dec.keywords if k.arg == "methods")
                try:
                    methods = [str(m) for m in resolver.value(methods_node, module)]
                except Unresolved:
                    continue
            route: dict[str, Any] = {"path": prefix + str(path), "methods": sorted(set(methods)), "handler": fn.name}
            status = _always_raises(fn)
            if status is not None:
                route["always_status"] = status
            body = _body_class(fn)
            if body is not None:
                route["body"] = body
            target = handlers.get(_delegate(fn) or "", fn)
            keys, open_ = _answer_shape(target)
            if keys:
                route["answer_keys"] = keys
                if open_:
                    route["answer_open"] = True
            routes.append(route)
    return routes


def _router_prefixes(tree: ast.Module) -> dict[str, str]:
    """`name = APIRouter(prefix="/x")` in a module -> {name: prefix}."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            if _type_name(stmt.value.func) in {"APIRouter", "FastAPI"}:
                prefix = ""
                for k in stmt.value.keywords:
                    if k.arg == "prefix" and isinstance(k.value, ast.Constant):
                        prefix = str(k.value.value)
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        out[t.id] = prefix
    return out


def extract_routes(source: Source) -> list[dict[str, Any]]:
    tree = source.module(HTTP_SERVER)
    if tree is None:
        raise SystemExit(f"{HTTP_SERVER} not found in {source.path}")
    resolver = Resolver(source)
    routers = _router_prefixes(tree) or {"app": ""}
    routes = _routes_of(source, HTTP_SERVER, routers, resolver)
    # app.include_router(name): the router's routes, from the module it is imported from.
    imports: dict[str, tuple[str, str]] = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
            for alias in stmt.names:
                imports[alias.asname or alias.name] = (stmt.module, alias.name)
    for call in walk_calls(tree):
        if isinstance(call.func, ast.Attribute) and call.func.attr == "include_router" and call.args:
            arg = call.args[0]
            if not isinstance(arg, ast.Name) or arg.id not in imports:
                continue
            dotted, name = imports[arg.id]
            module = source.module_of(dotted)
            sub = source.module(module) if module else None
            if module is None or sub is None:
                continue
            prefixes = _router_prefixes(sub)
            if name in prefixes:
                routes.extend(_routes_of(source, module, {name: prefixes[name]}, resolver))
    routes.sort(key=lambda r: (r.get("path", "~" + r.get("path_source", "")), r["methods"]))
    return routes


# ---------------------------------------------------------------------------------------------------------------
# Request and answer classes


def _class_fields(
    source: Source, module: str, cls: ast.ClassDef, resolver: Resolver, depth: int = 0
) -> dict[str, dict[str, Any]]:
    fields: dict[str, dict[str, Any]] = {}
    if depth < 8:
        for base in cls.bases:
            base_name = _type_name(base)
            if not base_name:
                continue
            found = _locate_class(source, module, base_name)
            if found is not None:
                fields.update(_class_fields(source, found[0], found[1], resolver, depth + 1))
    for stmt in cls.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        name = stmt.target.id
        if _type_name(stmt.annotation) == "ClassVar" or (
            isinstance(stmt.annotation, ast.Subscript) and _type_name(stmt.annotation.value) == "ClassVar"
        ):
            continue
        entry: dict[str, Any] = {"type": ast.unparse(stmt.annotation)}
        if stmt.value is None:
            entry["required"] = True
        else:
            default = _field_default(stmt.value)
            if isinstance(default, ast.Constant) and default.value is Ellipsis:
                entry["required"] = True
            elif default is not None:
                literal(resolver, default, module, entry, "default")
        fields[name] = entry
    return fields


def _locate_class(source: Source, module: str, name: str) -> tuple[str, ast.ClassDef] | None:
    tree = source.module(module)
    if tree is None:
        return None
    cls = find_class(tree, name)
    if cls is not None:
        return module, cls
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0 and stmt.module.startswith("sglang"):
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    target = source.module_of(stmt.module)
                    if target is not None:
                        return _locate_class(source, target, alias.name)
    return None


def extract_classes(source: Source) -> dict[str, dict[str, Any]]:
    resolver = Resolver(source)
    out: dict[str, dict[str, Any]] = {}
    for module, names in CLASSES.items():
        for name in names:
            found = _locate_class(source, module, name)
            if found is None:
                continue
            out[name] = {"module": found[0], "fields": _class_fields(source, found[0], found[1], resolver)}
    return dict(sorted(out.items()))


def extract_memory_tags(source: Source) -> list[str]:
    tree = source.module(CONSTANTS)
    tags: list[str] = []
    if tree is None:
        return tags
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
            for t in stmt.targets:
                if isinstance(t, ast.Name) and t.id.startswith("GPU_MEMORY_TYPE_") and isinstance(stmt.value.value, str):
                    tags.append(stmt.value.value)
    return sorted(tags)


def extract_version(source: Source) -> str:
    """`__version__` of `sglang/version.py`, or of the `_version.py` setuptools-scm writes (0.5.8+), or the
    wheel's METADATA."""
    for module in (VERSION, VERSION_SCM):
        if source.module(module) is not None:
            try:
                return str(Resolver(source).name("__version__", module))
            except Unresolved:
                pass
    for name in source.names():
        if name.endswith(".dist-info/METADATA"):
            for line in (source.read(name) or "").splitlines():
                if line.startswith("Version: "):
                    return line.removeprefix("Version: ").strip()
    raise SystemExit(f"no literal __version__ in {VERSION} or {VERSION_SCM}, and no METADATA")


def extract_answers(source: Source, routes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Answers uis reads that SGLang builds outside the handlers (answers.py): /generate and its meta_info, one
    /get_load entry (when the handler returns a tokenizer-manager method's answer), one /v1/loads entry."""
    out: dict[str, dict[str, Any]] = dict(answers.generate_answers(source))
    tree = source.module(HTTP_SERVER)
    get_load = next((r for r in routes if r.get("path") == "/get_load" and "answer_keys" not in r), None)
    if get_load is not None and tree is not None:
        handler = next(
            (
                f
                for f in ast.walk(tree)
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == get_load["handler"]
            ),
            None,
        )
        entry = answers.get_load_answer(source, handler, _locate_class)
        if entry is not None:
            out["get_load[]"] = entry
    loads = answers.v1_loads_answer(source, _locate_class, Resolver(source))
    if loads is not None:
        out["v1/loads.loads[]"] = loads
    server_args = source.module(SERVER_ARGS)
    if server_args is not None:
        out["server_info.ServerArgs"] = _server_args_fields(source, server_args)
    return dict(sorted(out.items()))


def _server_args_fields(source: Source, tree: ast.Module) -> dict[str, Any]:
    """The fields of ServerArgs (its own, or from 0.5.23 those of its namespace classes): server info spreads
    them (`dataclasses.asdict(server_args)`, later `server_args.resolved_dict()`). Not the argparse dests:
    `--tensor-parallel-size` fills the field `tp_size`."""
    fields: dict[str, Any] = {}
    for cls, _module in _field_classes(source, tree):
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                name = stmt.target.id
                if not name.startswith("_") and not ast.unparse(stmt.annotation).startswith("ClassVar"):
                    fields[name] = [[]]
    return {"source": f"{SERVER_ARGS}:ServerArgs fields", "fields": dict(sorted(fields.items()))}


def extract(path: Path) -> dict[str, Any]:
    source = Source(path)
    flags = extract_flags(source)
    routes = extract_routes(source)
    return {
        "sglang_version": extract_version(source),
        "extractor": "scripts/sglang-surface/extract_surface.py",
        "flags": flags,
        "routes": routes,
        "classes": extract_classes(source),
        "answers": extract_answers(source, routes),
        "memory_tags": extract_memory_tags(source),
    }


def render(surface: dict[str, Any]) -> str:
    """JSON with one line per flag, route and class field, so a version bump reads as a line diff."""

    def one(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = ["{"]
    lines.append(f' "sglang_version": {one(surface["sglang_version"])},')
    lines.append(f' "extractor": {one(surface["extractor"])},')
    lines.append(' "flags": {')
    flags = list(surface["flags"].items())
    lines += [f"  {one(k)}: {one(v)}{',' if i < len(flags) - 1 else ''}" for i, (k, v) in enumerate(flags)]
    lines.append(" },")
    lines.append(' "routes": [')
    routes = surface["routes"]
    lines += [f"  {one(r)}{',' if i < len(routes) - 1 else ''}" for i, r in enumerate(routes)]
    lines.append(" ],")
    lines.append(' "classes": {')
    classes = list(surface["classes"].items())
    for i, (name, cls) in enumerate(classes):
        lines.append(f"  {one(name)}: {{")
        lines.append(f'   "module": {one(cls["module"])},')
        lines.append('   "fields": {')
        fields = list(cls["fields"].items())
        lines += [f"    {one(k)}: {one(v)}{',' if j < len(fields) - 1 else ''}" for j, (k, v) in enumerate(fields)]
        lines.append("   }")
        lines.append(f"  }}{',' if i < len(classes) - 1 else ''}")
    lines.append(" },")
    lines.append(' "answers": {')
    entries = list(surface["answers"].items())
    for i, (name, entry) in enumerate(entries):
        lines.append(f"  {one(name)}: {{")
        lines.append(f'   "source": {one(entry["source"])},')
        if "open_sources" in entry:
            lines.append(f'   "open_sources": {one(entry["open_sources"])},')
        lines.append('   "fields": {')
        fields = list(entry["fields"].items())
        lines += [f"    {one(k)}: {one(v)}{',' if j < len(fields) - 1 else ''}" for j, (k, v) in enumerate(fields)]
        lines.append("   }")
        lines.append(f"  }}{',' if i < len(entries) - 1 else ''}")
    lines.append(" },")
    lines.append(f' "memory_tags": {one(surface["memory_tags"])}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="an sglang wheel, or a directory holding the sglang/ package")
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    args = parser.parse_args(argv)
    if not args.source.exists():
        print(f"extract_surface: {args.source} does not exist", file=sys.stderr)
        return 2
    text = render(extract(args.source))
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
