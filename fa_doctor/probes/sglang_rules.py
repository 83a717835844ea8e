"""What an SGLang release does with FlashAttention, read from its source files with `ast` (never imported), for the
catalog's rows and for a release the catalog does not hold (rules and encoding: docs/catalog.md, "servers.py")."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping

from fa_doctor.probes.environment import SGLANG_KNOBS as KNOWN_VARS

BACKEND_FILE = "sglang/srt/layers/attention/flashattention_backend.py"
# The files the rules live in, over SGLang's history (paths inside the wheel), besides those under ARG_GROUPS.
FIXED_FILES = (
    "sglang/srt/server_args.py",
    "sglang/srt/environ.py",
    "sglang/srt/utils.py",
    "sglang/srt/utils/common.py",
    "sglang/srt/model_executor/model_runner.py",
    "sglang/srt/layers/attention/attention_registry.py",
    BACKEND_FILE,
    "sglang/jit_kernel/flash_attention_v4.py",
    "sglang/kernels/ops/attention/flash_attention_v4.py",
)
ARG_GROUPS = "sglang/srt/arg_groups"
SOURCE_FILES = re.compile("^(" + "|".join(map(re.escape, FIXED_FILES)) + rf"|{ARG_GROUPS}/[\w/]+\.py)$")
_FIELDS = {"attention_backend": "--attention-backend", "prefill_attention_backend": "--prefill-attention-backend",
           "decode_attention_backend": "--decode-attention-backend"}  # fmt: skip
# Default-rule conditions, canonical names (docs/catalog.md lists them).
_ATOMS = (
    ("hopper", re.compile(r"is_hopper_with_cuda_12_3")),
    ("sm100", re.compile(r"is_sm100(_supported)?\b")),
    ("blackwell", re.compile(r"is_blackwell\(\)")),
    ("no-spec", re.compile(r"is_no_spec_infer_or_topk_one|speculative")),
    ("fa3-arch", re.compile(r"is_fa3_default_architecture")),
    ("asymmetric-kv", re.compile(r"has_asymmetric_kv")),
    ("attention-sinks", re.compile(r"has_attention_sinks")),
    ("flashinfer", re.compile(r"is_flashinfer_available|has_flashinfer")),
    ("hicache", re.compile(r"enable_hierarchical_cache")),
    ("hip", re.compile(r"is_hip\b")),
    ("npu", re.compile(r"is_npu\b")),
    ("mps", re.compile(r"is_mps\b")),
    ("cuda", re.compile(r"is_cuda\b")),
)


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _message(node: ast.expr | None) -> str:
    """An exception's message as its source writes it (f-string parts as `{...}`)."""
    if node is None:
        return ""
    if isinstance(node, ast.Call) and node.args:
        return _message(node.args[0])
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(_message(v) if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                       for v in node.values if isinstance(v, (ast.Constant, ast.FormattedValue)))  # fmt: skip
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _message(node.left) + _message(node.right)
    return ast.unparse(node)


def _error(stmt: ast.Assert | ast.Raise) -> str:
    if isinstance(stmt, ast.Assert):
        return f"AssertionError: {_message(stmt.msg)}"
    exc = stmt.exc
    kind = ast.unparse(exc.func) if isinstance(exc, ast.Call) else ast.unparse(exc) if exc else "Exception"
    return f"{kind}: {_message(exc)}"


def _strings(node: ast.AST) -> tuple[str, ...]:
    return tuple(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def _ints(node: ast.AST) -> set[int]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and type(n.value) is int}


def _choices(trees: Mapping[str, ast.Module]) -> tuple[str, ...]:
    for tree in trees.values():
        for stmt in (s for s in tree.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.List)):
            if any(isinstance(t, ast.Name) and t.id == "ATTENTION_BACKEND_CHOICES" for t in stmt.targets):
                return _strings(stmt.value)
    for tree in trees.values():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value == "--attention-backend"):  # fmt: skip
                for kw in node.keywords:
                    if kw.arg == "choices" and isinstance(kw.value, ast.List):
                        return _strings(kw.value)
    return ()


def _flags(trees: Mapping[str, ast.Module]) -> tuple[str, ...]:
    seen: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in _FIELDS.values():
                seen.add(str(node.value))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in _FIELDS:
                seen.add(_FIELDS[node.target.id])
    return tuple(f for f in _FIELDS.values() if f in seen)


def _fa_backend_call(nodes: list[ast.stmt]) -> ast.Call | None:
    calls = (node for stmt in nodes for node in ast.walk(stmt) if isinstance(node, ast.Call))
    return next((c for c in calls if ast.unparse(c.func).split(".")[-1] == "FlashAttentionBackend"), None)


def _majors(test: ast.expr) -> str:
    """The GPU majors an assert on the capability admits: "8:mha 9" (8 for MHA models only), ">=9"."""
    out = []
    for alt in test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]:
        text = ast.unparse(alt)
        for node in ast.walk(alt):
            left = ast.unparse(node.left) if isinstance(node, ast.Compare) else ""
            if (isinstance(node, ast.Compare) and ("get_device_capability" in left or left == "major")
                    and isinstance(node.comparators[0], ast.Constant)):  # fmt: skip
                op = {ast.Eq: "", ast.GtE: ">=", ast.Gt: ">", ast.LtE: "<=", ast.Lt: "<"}.get(type(node.ops[0]), "?")
                mha = ":mha" if re.search(r"not [\w.]*use_mla", text) else ""
                out.append(f"{op}{node.comparators[0].value!s}{mha}")
    return " ".join(out)


def _asserts_on_the_way(stmts: list[ast.stmt], call: ast.Call) -> list[ast.Assert]:
    """The asserts that run before `call`: those before it in each block on its path, not in other branches."""
    out: list[ast.Assert] = []
    for stmt in stmts:
        if not any(node is call for node in ast.walk(stmt)):
            if isinstance(stmt, ast.Assert):
                out.append(stmt)
            continue
        for block in (getattr(stmt, "body", None), getattr(stmt, "orelse", None)):
            if isinstance(block, list) and any(n is call for s in block for n in ast.walk(s)):
                out += _asserts_on_the_way(block, call)
        break
    return out


def _branches(trees: Mapping[str, ast.Module]) -> Iterator[tuple[str, str, list[ast.stmt]]]:
    """(file, backend name, statements) of every place a backend name turns into a backend object."""
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for deco in node.decorator_list:
                    if (isinstance(deco, ast.Call) and ast.unparse(deco.func) == "register_attention_backend"
                            and deco.args and isinstance(deco.args[0], ast.Constant)):  # fmt: skip
                        yield path, str(deco.args[0].value), node.body
            elif isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1:
                right = node.test.comparators[0]
                left = ast.unparse(node.test.left)
                if (isinstance(node.test.ops[0], ast.Eq) and isinstance(right, ast.Constant)
                        and (left == "backend_str" or left.endswith("attention_backend"))):  # fmt: skip
                    yield path, str(right.value), node.body


def _registry(trees: Mapping[str, ast.Module]) -> tuple[dict[str, str], list[tuple[str, ...]], list[tuple[str, ...]]]:
    backends: dict[str, str] = {}
    gates: list[tuple[str, ...]] = []
    refuse: list[tuple[str, ...]] = []
    for path, name, body in _branches(trees):
        call = _fa_backend_call(body)
        if call is None or name in backends or not re.fullmatch(r"fa\d", name):
            continue
        version = next((_ints(k.value) for k in call.keywords if k.arg == "fa_impl_ver"), {3})
        backends[name] = str(min(version))
        for stmt in _asserts_on_the_way(body, call):
            test = ast.unparse(stmt.test)
            if "get_device_capability" in test or re.search(r"\bmajor\s*[=<>]", test):
                gates.append((name, _majors(stmt.test), _error(stmt), path.rsplit("/", 1)[-1]))
            elif "use_mla" in test:
                refused = "mla" if test.startswith("not ") else "mha"
                for phase in ("prefill", "decode"):
                    refuse.append((phase, name, refused, "start-up", _error(stmt), path.rsplit("/", 1)[-1]))
    return backends, gates, refuse


def _startup_refusals(trees: Mapping[str, ast.Module]) -> list[tuple[str, ...]]:
    """server_args' `if self.attention_backend == "fa4" or ...: raise`, for tests made only of such comparisons."""
    out: list[tuple[str, ...]] = []
    for path, tree in ((p, t) for p, t in trees.items() if "server_args" in p or "arg_groups" in p):
        for node in (n for n in ast.walk(tree) if isinstance(n, ast.If)):
            raises = [s for s in node.body if isinstance(s, ast.Raise)]
            test = node.test
            pairs = []
            for alt in test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]:
                if not (isinstance(alt, ast.Compare) and len(alt.ops) == 1 and isinstance(alt.ops[0], ast.Eq)):
                    break
                field = ast.unparse(alt.left).split(".")[-1]
                value = alt.comparators[0]
                if field not in _FIELDS or not (isinstance(value, ast.Constant) and str(value.value) in ("fa3", "fa4")):
                    break
                pairs.append((_FIELDS[field], str(value.value)))
            else:
                if raises and pairs:
                    out += [(flag, backend, "any", "start-up", _error(raises[0]), path.rsplit("/", 1)[-1])
                            for flag, backend in pairs]  # fmt: skip
    return out


def _forward_refusals(tree: ast.Module, backends: Mapping[str, str]) -> list[tuple[str, ...]]:
    """`assert self.fa_impl_ver in [3]` in FlashAttentionBackend.forward_extend/forward_decode, and its models."""
    out: list[tuple[str, ...]] = []
    phases = {"forward_extend": "prefill", "forward_decode": "decode"}

    def visit(stmts: list[ast.stmt], phase: str, models: str) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.Assert) and "fa_impl_ver" in ast.unparse(stmt.test):
                allowed = {str(v) for v in _ints(stmt.test)}
                for name, version in backends.items():
                    if version not in allowed:
                        out.append((phase, name, models, "first call", _error(stmt), "flashattention_backend.py"))
            elif isinstance(stmt, ast.If):
                test = ast.unparse(stmt.test)
                mla = "use_mla" in test and " and " not in test and " or " not in test
                inside, other = ("mha", "mla") if test.startswith("not ") else ("mla", "mha")
                visit(stmt.body, phase, inside if mla else models)
                visit(stmt.orelse, phase, other if mla else models)
            elif isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try)):
                for block in (stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])):
                    visit(block, phase, models)

    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and cls.name == "FlashAttentionBackend":
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name in phases:
                    visit(fn.body, phases[fn.name], "any")
    return out


def _fa4(trees: Mapping[str, ast.Module], backends: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """Where fa_impl_ver=4 gets its kernels, and the variable that switches it to another module."""
    backend = trees.get(BACKEND_FILE)
    if "4" not in backends.values() or backend is None:
        return "", ()
    wrappers = {n.module for n in ast.walk(backend) if isinstance(n, ast.ImportFrom) and n.module
                and n.module.endswith(".flash_attention_v4")}  # fmt: skip
    for module in sorted(wrappers):
        tree = trees.get(module.replace(".", "/") + ".py")
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.If):
                var = re.search(r"(SGLANG_\w+)['\"]\)?\s*==\s*['\"](\w+)", ast.unparse(node.test))
                mods = [_import_of(node.body), _import_of(node.orelse)]
                if var and mods[0] and mods[1]:
                    return mods[1], (var.group(1), var.group(2), mods[0])
        found = _import_of(tree.body, deep=True) if tree else None
        if found:
            return found, ()
    if any(isinstance(n, ast.ImportFrom) and n.module == "sgl_kernel.flash_attn" for n in ast.walk(backend)):
        return "sgl_kernel.flash_attn", ()
    return "", ()


def _import_of(stmts: list[ast.stmt], deep: bool = False) -> str | None:
    """The module `flash_attn_varlen_func` is imported from in these statements."""
    for stmt in stmts:
        for node in ast.walk(stmt) if deep or isinstance(stmt, ast.ImportFrom) else [stmt]:
            if isinstance(node, ast.ImportFrom) and any(a.name == "flash_attn_varlen_func" for a in node.names):
                return node.module
    return None


def reads(sources: Mapping[str, str]) -> tuple[str, ...]:
    """KNOWN_VARS that appear in code: a string or an identifier, not a comment."""
    found: set[str] = set()
    for text in sources.values():
        hits = {v for v in KNOWN_VARS if v in text} - found
        tree = _parse(text) if hits else None
        for node in ast.walk(tree) if tree else ():
            word = (node.value if isinstance(node, ast.Constant) else node.id if isinstance(node, ast.Name)
                    else node.attr if isinstance(node, ast.Attribute) else None)  # fmt: skip
            if word in hits:
                found.add(str(word))
    return tuple(v for v in KNOWN_VARS if v in found)


def _default(trees: Mapping[str, ast.Module]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The MHA branch (`if not ...use_mla_backend:`) of the function that picks the default backend."""
    named, logging = [], []
    for node in (n for tree in trees.values() for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        if node.name in ("get_default_attn_backend", "_get_default_attn_backend"):
            named.append(node)
        elif any("backend by default" in s or "Attention backend not set" in s for s in _strings(node)):
            logging.append(node)
    branches = [node.body for fn in named + logging for node in ast.walk(fn)
                if isinstance(node, ast.If) and re.match(r"not .*use_mla_backend", ast.unparse(node.test))]  # fmt: skip
    rules: list[tuple[str, str]] = []

    def walk(stmts: list[ast.stmt], conds: list[str]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                walk(stmt.body, conds + [a for a in _atoms(stmt.test) if a not in conds])
                walk(stmt.orelse, conds)
            elif isinstance(stmt, (ast.Assign, ast.Return)) and stmt.value is not None:
                if isinstance(stmt, ast.Assign) and not ast.unparse(stmt.targets[0]).endswith("attention_backend"):
                    continue
                value = stmt.value
                if isinstance(value, ast.IfExp):
                    rules.append((" ".join(conds + _atoms(value.test)), _message(value.body)))
                    rules.append((" ".join(conds), _message(value.orelse)))
                elif isinstance(value, ast.Constant):
                    rules.append((" ".join(conds), str(value.value)))

    for body in branches:  # the first `if not use_mla_backend:` that sets a backend
        walk(body, [])
        if rules:
            break
    archs: tuple[str, ...] = ()
    if any("fa3-arch" in c for c, _ in rules):
        for node in (n for tree in trees.values() for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            if node.name == "is_fa3_default_architecture":
                archs = tuple(sorted(s for s in _strings(node) if s.endswith(("ForCausalLM", "Generation"))))
    return tuple(rules), archs


def _atoms(test: ast.expr) -> list[str]:
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    out = []
    for part in parts:
        negated = isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not)
        text = ast.unparse(part.operand if isinstance(part, ast.UnaryOp) and negated else part)
        name = next((n for n, rx in _ATOMS if rx.search(text)), None)
        atom = ("!" if negated else "") + (name or "?" + re.sub(r"\s+", "", text))
        if atom not in out:
            out.append(atom)
    return out


def read_rules(sources: Mapping[str, str]) -> dict[str, object]:
    """The row for one release in the catalog's encoding, from SOURCE_FILES (and for `reads` any other files)."""
    trees = {p: t for p, text in sources.items() if SOURCE_FILES.match(p) and (t := _parse(text)) is not None}
    backends, gates, refuse = _registry(trees)
    refuse = _startup_refusals(trees) + refuse
    if BACKEND_FILE in trees:
        refuse += _forward_refusals(trees[BACKEND_FILE], backends)
    fa4, switch = _fa4(trees, backends)
    default, archs = _default(trees)
    return {
        "choices": _choices(trees),
        "flags": _flags(trees),
        "backends": " ".join(f"{k}={v}" for k, v in sorted(backends.items())),
        "gates": tuple(f"{b} {m.replace(' ', ',')} {f}: {e}" for b, m, e, f in gates),
        "refuse": tuple(
            dict.fromkeys(f"{w} {b} {m} {when.replace(' ', '-')} {f}: {e}" for w, b, m, when, e, f in refuse)
        ),
        "fa4": fa4,
        "fa4_switch": f"{switch[0]}={switch[1]} {switch[2]}" if switch else "",
        "reads": reads(sources),
        "default": tuple(f"{backend} if {conds}" if conds else backend for conds, backend in default),
        "fa3_archs": archs,
    }
