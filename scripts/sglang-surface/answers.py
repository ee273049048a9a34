"""The answers uis reads that SGLang builds outside its HTTP handlers, read from the source with `ast`:

- `generate` and `generate.meta_info`: the dicts the tokenizer manager builds per request (`meta_info = {...}`,
  `meta_info["k"] = ...`, `meta_info.update({...})`, and the helpers it hands `meta_info` to), each key with the
  conditions (`if` tests on the way to it) under which it is set; `[]` = always.
- `get_load[]`: one entry of `/get_load` where the handler returns what a tokenizer-manager method returns (a
  dict literal, or the fields of the class its return annotation names).
- `v1/loads.loads[]`: one entry of `/v1/loads`, `dataclasses.asdict` of the class `get_loads` returns, or that
  class's `to_dict` (a dict literal, or its fields less the section fields), plus keys the handler adds.

A key is never guessed: a dict built by a call the source does not spell out makes the answer `open` (its
`open_sources` name the expression).
"""

from __future__ import annotations

import ast
from typing import Any, Iterator

TOKENIZER_MANAGER = "sglang/srt/managers/tokenizer_manager.py"
MANAGERS = "sglang/srt/managers/"
V1_LOADS = "sglang/srt/entrypoints/v1_loads.py"
IO_STRUCT = "sglang/srt/managers/io_struct.py"

Guards = list[str]


def guarded(stmts: list[ast.stmt], guards: Guards) -> Iterator[tuple[ast.stmt, Guards]]:
    """Each simple statement of a body with the `if` conditions that lead to it (`not (c)` in an else branch).
    Loops, `with` and `try` bodies keep the guards they are in; nested functions and classes are not entered."""
    for st in stmts:
        if isinstance(st, ast.If):
            cond = ast.unparse(st.test)
            yield from guarded(st.body, [*guards, cond])
            yield from guarded(st.orelse, [*guards, f"not ({cond})"])
        elif isinstance(st, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
            yield from guarded(st.body, guards)
            yield from guarded(getattr(st, "orelse", []), guards)
        elif isinstance(st, ast.Try):
            yield from guarded(st.body, guards)
            for h in st.handlers:
                yield from guarded(h.body, [*guards, f"except {ast.unparse(h.type) if h.type else ''}".strip()])
            yield from guarded(st.orelse, guards)
            yield from guarded(st.finalbody, guards)
        elif not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield st, guards


class Answer:
    """Keys of one answer dict, each with the guard lists under which it is set."""

    def __init__(self, source: str):
        self.source = source
        self.fields: dict[str, list[Guards]] = {}
        self.open_sources: list[str] = []

    def add(self, key: str, guards: Guards) -> None:
        alternatives = self.fields.setdefault(key, [])
        if guards not in alternatives:
            alternatives.append(list(guards))

    def add_dict(self, node: ast.Dict, guards: Guards) -> None:
        for k, v in zip(node.keys, node.values):
            if k is None:
                self.open_sources.append(f"**{ast.unparse(v)}")
            elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                # A literal None is a placeholder the caller fills later: said, so a reader can tell.
                none = isinstance(v, ast.Constant) and v.value is None
                self.add(k.value, [*guards, "= None"] if none else guards)

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "fields": dict(sorted(self.fields.items()))}
        if self.open_sources:
            out["open_sources"] = sorted(set(self.open_sources))
        return out


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _str_subscript(node: ast.AST, name: str) -> str | None:
    if isinstance(node, ast.Subscript) and _is_name(node.value, name):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return node.slice.value
    return None


def _calls(node: ast.AST) -> Iterator[ast.Call]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            yield sub


def _collect_on(
    fn: ast.AST,
    var: str,
    answer: Answer,
    guards: Guards,
    helper_of: Any,
    depth: int = 0,
) -> None:
    """Keys set on the dict `var` inside `fn` (assignments, `update`, helpers it is handed to)."""
    for st, g in guarded(getattr(fn, "body", []), guards):
        if isinstance(st, ast.Assign):
            for t in st.targets:
                key = _str_subscript(t, var)
                if key is not None:
                    answer.add(key, g)
                if _is_name(t, var) and isinstance(st.value, ast.Dict):
                    answer.add_dict(st.value, g)
        for call in _calls(st):
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr == "update" and _is_name(f.value, var) and call.args:
                arg = call.args[0]
                if isinstance(arg, ast.Dict):
                    answer.add_dict(arg, g)
                else:
                    answer.open_sources.append(ast.unparse(arg))
                continue
            # A helper handed the dict sets keys on its own parameter.
            positions = [i for i, a in enumerate(call.args) if _is_name(a, var)]
            if not positions or depth >= 2:
                continue
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            helper = helper_of(name)
            if helper is None:
                continue
            params = [a.arg for a in helper.args.args]
            offset = 1 if params[:1] == ["self"] and isinstance(f, ast.Attribute) else 0
            index = positions[0] + offset
            if index < len(params):
                _collect_on(helper, params[index], answer, [*g, f"via {name}"], helper_of, depth + 1)


def _helpers(source: Any, module: str, tree: ast.Module) -> Any:
    """Name -> function: the module's own functions and methods, and functions it imports from sglang."""
    own = {f.name: f for f in _functions(tree)}
    imported: dict[str, tuple[str, str]] = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.module.startswith("sglang"):
            for alias in stmt.names:
                imported[alias.asname or alias.name] = (stmt.module, alias.name)

    def lookup(name: str | None) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        if name is None:
            return None
        if name in own:
            return own[name]
        if name in imported:
            target = source.module_of(imported[name][0])
            sub = source.module(target) if target else None
            if sub is not None:
                for f in sub.body:
                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == imported[name][1]:
                        return f
        return None

    return lookup


def generate_answers(source: Any) -> dict[str, Any]:
    """`generate` (the answer of one request) and `generate.meta_info`, from the tokenizer manager function that
    builds `meta_info = {"id": ...}`."""
    tree = source.module(TOKENIZER_MANAGER)
    if tree is None:
        return {}
    for fn in _functions(tree):
        builds = any(
            isinstance(st, ast.Assign)
            and any(_is_name(t, "meta_info") for t in st.targets)
            and isinstance(st.value, ast.Dict)
            and any(isinstance(k, ast.Constant) and k.value == "id" for k in st.value.keys)
            for st, _ in guarded(fn.body, [])
        )
        if not builds:
            continue
        where = f"{TOKENIZER_MANAGER}:{fn.name}"
        meta = Answer(where)
        _collect_on(fn, "meta_info", meta, [], _helpers(source, TOKENIZER_MANAGER, tree))
        out = Answer(where)
        for st, g in guarded(fn.body, []):
            if isinstance(st, ast.Assign) and isinstance(st.value, ast.Dict):
                keys = [k.value for k in st.value.keys if isinstance(k, ast.Constant)]
                if "meta_info" in keys and any(_is_name(t, "out_dict") for t in st.targets):
                    out.add_dict(st.value, g)
            if isinstance(st, ast.Assign):
                for t in st.targets:
                    key = _str_subscript(t, "out_dict")
                    if key is not None:
                        out.add(key, g)
        return {"generate": out.json(), "generate.meta_info": meta.json()}
    return {}


def _manager_method(source: Any, name: str) -> tuple[str, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """A TokenizerManager method (defined on the class or one of its mixins in `managers/`)."""
    for module in sorted(n for n in source.names() if n.startswith(MANAGERS + "tokenizer") and n.endswith(".py")):
        tree = source.module(module)
        if tree is None:
            continue
        for cls in tree.body:
            if isinstance(cls, ast.ClassDef):
                for f in cls.body:
                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == name:
                        return module, f
    return None


def _returned_class(fn: ast.AST) -> str | None:
    """`-> List[C]` / `-> C`: C."""
    ann = getattr(fn, "returns", None)
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id in {"List", "list"}:
        ann = ann.slice
    return ann.id if isinstance(ann, ast.Name) and ann.id[:1].isupper() else None


def _class_keys(source: Any, locate: Any, name: str, answer: Answer) -> ast.ClassDef | None:
    """Every field of class `name` (with its inherited ones) as always-set keys; returns the class."""
    found = locate(source, IO_STRUCT, name) or _locate_in_managers(source, locate, name)
    if found is None:
        answer.open_sources.append(f"class {name} (not found)")
        return None
    module, cls = found
    answer.source += f" -> {module}:{name}"
    for base in cls.bases:
        base_name = base.id if isinstance(base, ast.Name) else None
        if base_name and base_name not in {"BaseReq", "object"}:
            _class_keys(source, locate, base_name, answer)
    for st in cls.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            ann = ast.unparse(st.annotation)
            if ann.startswith("ClassVar"):
                continue
            optional = ann.startswith("Optional[") or ann.endswith("| None")
            default_none = isinstance(st.value, ast.Constant) and st.value.value is None
            answer.add(st.target.id, ["not None"] if optional and default_none else [])
    return cls


def _locate_in_managers(source: Any, locate: Any, name: str) -> tuple[str, ast.ClassDef] | None:
    for module in sorted(n for n in source.names() if n.startswith(MANAGERS) and n.endswith(".py")):
        found = locate(source, module, name)
        if found is not None and found[0] == module:
            return found
    return None


def get_load_answer(source: Any, handler: ast.AST | None, locate: Any) -> dict[str, Any] | None:
    """One entry of `/get_load` when its handler returns `tokenizer_manager.get_load()` (0.5.2 to 0.5.15)."""
    if handler is None:
        return None
    value = next((n.value for n in ast.walk(handler) if isinstance(n, ast.Return) and n.value is not None), None)
    if isinstance(value, ast.Await):
        value = value.value
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return None
    found = _manager_method(source, value.func.attr)
    if found is None:
        return None
    module, fn = found
    answer = Answer(f"{module}:{fn.name}")
    cls = _returned_class(fn)
    if cls is not None:
        _class_keys(source, locate, cls, answer)
        return answer.json()
    for st, g in guarded(fn.body, []):
        if isinstance(st, ast.Return) and isinstance(st.value, ast.Dict):
            answer.add_dict(st.value, g)
    return answer.json() if answer.fields else None


def v1_loads_answer(source: Any, locate: Any, resolver: Any) -> dict[str, Any] | None:
    """One entry of `/v1/loads`'s `loads` (0.5.10+)."""
    tree = source.module(V1_LOADS)
    if tree is None:
        return None
    handler = next((f for f in _functions(tree) if f.name == "get_loads"), None)
    manager = _manager_method(source, "get_loads")
    if handler is None or manager is None:
        return None
    cls_name = _returned_class(manager[1])
    if cls_name is None:
        return None
    answer = Answer(f"{V1_LOADS}:get_loads")
    entry_var = None
    for st, _g in guarded(handler.body, []):
        for call in _calls(st):
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr == "append" and _is_name(f.value, "loads") and call.args:
                arg = call.args[0]
                entry_var = arg.id if isinstance(arg, ast.Name) else None
    built_by_to_dict = any(
        isinstance(c.func, ast.Attribute) and c.func.attr == "to_dict" for c in _calls(handler)
    )
    if built_by_to_dict:
        _to_dict_keys(source, locate, resolver, cls_name, answer)
    else:
        # dataclasses.asdict(load, dict_factory=...): every field (the factory drops None values).
        _class_keys(source, locate, cls_name, answer)
    if entry_var is not None:
        _collect_on(handler, entry_var, answer, [], lambda _n: None)
    return answer.json()


def _to_dict_keys(source: Any, locate: Any, resolver: Any, cls_name: str, answer: Answer) -> None:
    """Keys of `cls.to_dict()`: the dict literal it starts from, or `{k: getattr(self, k) for k in KEYS}` where
    KEYS is the class's fields less a literal set of section fields (0.5.17+)."""
    found = _locate_in_managers(source, locate, cls_name)
    if found is None:
        answer.open_sources.append(f"{cls_name}.to_dict (class not found)")
        return
    module, cls = found
    answer.source += f" -> {module}:{cls_name}.to_dict"
    fn = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "to_dict"), None)
    if fn is None:
        answer.open_sources.append(f"{cls_name}.to_dict (not found)")
        return
    first = next((st for st in fn.body if isinstance(st, ast.Assign)), None)
    if first is None:
        answer.open_sources.append(f"{cls_name}.to_dict")
        return
    if isinstance(first.value, ast.Dict):
        answer.add_dict(first.value, [])
    elif isinstance(first.value, ast.DictComp) and isinstance(first.value.generators[0].iter, ast.Name):
        keys = _fields_less(source, module, cls, first.value.generators[0].iter.id, resolver)
        if keys is None:
            answer.open_sources.append(ast.unparse(first.value))
        for k in keys or []:
            answer.add(k, [])
    else:
        answer.open_sources.append(ast.unparse(first.value))
    target = first.targets[0]
    if isinstance(target, ast.Name):
        # Sections added after the core keys: only on request (include=...), so conditional.
        for st, g in guarded(fn.body, ["include sections"]):
            if isinstance(st, ast.Assign):
                for t in st.targets:
                    if isinstance(t, ast.Subscript) and _is_name(t.value, target.id):
                        if isinstance(t.slice, ast.Constant):
                            answer.add(str(t.slice.value), g)
                        else:
                            answer.open_sources.append(f"{target.id}[{ast.unparse(t.slice)}] (a section)")


def _fields_less(source: Any, module: str, cls: ast.ClassDef, keys_name: str, resolver: Any) -> list[str] | None:
    """`KEYS = tuple(f for f in Cls.__struct_fields__ if f not in SECTIONS)`: the class's field names less SECTIONS."""
    tree = source.module(module)
    node = None
    for st in tree.body:
        if isinstance(st, ast.Assign) and any(_is_name(t, keys_name) for t in st.targets):
            node = st.value
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.GeneratorExp)):
        return None
    gen = node.args[0].generators[0]
    if not (isinstance(gen.iter, ast.Attribute) and gen.iter.attr == "__struct_fields__"):
        return None
    excluded: list[str] = []
    for cond in gen.ifs:
        if isinstance(cond, ast.Compare) and isinstance(cond.ops[0], ast.NotIn):
            try:
                excluded += list(resolver.value(cond.comparators[0], module))
            except Exception:
                return None
    fields = [
        st.target.id
        for st in cls.body
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
        and not ast.unparse(st.annotation).startswith("ClassVar")
    ]
    return [f for f in fields if f not in excluded]
