"""The floors of docs/architecture.md, enforced: what may import what, and no import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fa_doctor"

# The floors of docs/architecture.md, lowest first. A module may import (at any depth, lazily included; typing-only
# imports excepted) only modules of its own floor or of a floor below; the most specific prefix names the floor.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("fa_doctor.catalog",),  # ecosystem facts as data: imports nothing else of fa_doctor
    ("fa_doctor.model",),  # the data types: facts, findings, actions, results; no I/O, no shell text
    (
        "fa_doctor.render.shell",
        "fa_doctor.render.scrub",
    ),  # shell text and secret scrubbing: every floor above asks them
    ("fa_doctor.process",),  # subprocesses, signals, supervised children, atomic writes
    ("fa_doctor.probes",),  # every read of the disk or of a process that gathers a fact
    ("fa_doctor.diagnose",),  # derive, checks, planning: pure functions of the facts
    ("fa_doctor.knowledge",),  # the error table explain and the smoke test share
    ("fa_doctor.smoke",),  # the kernel test: child, runner, step, verdict cache, its findings
    ("fa_doctor.fix",),  # carrying out repairs: env files, fix --apply
    ("fa_doctor.fleet",),  # many nodes' reports as one
    ("fa_doctor.render",),  # every format
    ("fa_doctor.commands",),  # one module per command, thin scripts over the pipeline
    ("fa_doctor.cli", "fa_doctor.entry", "fa_doctor.__main__"),  # typer
)
# Third-party modules only the top floors may load (the terminal belongs to render and the CLI).
THIRD_PARTY = {"rich": "fa_doctor.render"}


def floor_of(name: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, floor)
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return best[1] if best else None


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime(tree: ast.Module) -> list[ast.AST]:
    """Every node that can run: `if TYPE_CHECKING:` blocks (typing only, never executed) left out."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if top_level_only:
        nodes = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    else:
        nodes = [n for n in _runtime(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_floors(name: str) -> None:
    mine = floor_of(name)
    if name == "fa_doctor":
        return
    assert mine is not None, f"{name} is on no floor: add it to LAYERS (and docs/architecture.md)"
    found = imports(MODULES[name], False)
    up = sorted(i for i in found if i in MODULES and i != "fa_doctor" and (floor_of(i) or 0) > mine)
    assert not up, f"{name} (floor {mine}) imports from a higher floor: {up}"
    for module, lowest in THIRD_PARTY.items():
        if any(i == module or i.startswith(module + ".") for i in found):
            assert mine >= (floor_of(lowest) or 0), f"{name} must not import {module}"


def test_catalog_imports_nothing_else() -> None:
    for name, path in MODULES.items():
        if name.startswith("fa_doctor.catalog"):
            own = {
                i for i in imports(path, False) if i.startswith("fa_doctor") and not i.startswith("fa_doctor.catalog")
            }
            assert not own, f"{name} imports {sorted(own)}"


def test_the_rule_sees_lazy_imports(tmp_path: Path) -> None:
    """A function-level import counts (the knowledge <-> smoke circle hid behind one)."""
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from fa_doctor.render import human\n")
    assert "fa_doctor.render" in imports(lazy, False)
    assert "fa_doctor.render" not in imports(lazy, True)
    typing_only = tmp_path / "typing_only.py"
    typing_only.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fa_doctor.cli\n")
    assert "fa_doctor.cli" not in imports(typing_only, False)


def test_no_import_cycle() -> None:
    graph = {name: {i for i in imports(path, False) if i in MODULES and i != name} for name, path in MODULES.items()}
    # Within a package a lazy import may point back (a command calling another command's helper); across
    # packages nothing may: the floors above already forbid it, this catches it inside one floor too.
    graph = {n: {i for i in deps if i.rsplit(".", 1)[0] != n.rsplit(".", 1)[0]} for n, deps in graph.items()}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt] if nxt in stack else [node, nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_model_is_data_only() -> None:
    """fa_doctor/model/ holds the types: no I/O (no process, file or OS module, no probe) and no shell text."""
    banned = {"os", "subprocess", "shlex", "shutil", "pathlib", "socket", "tempfile", "io", "signal"}
    for name, path in MODULES.items():
        if not name.startswith("fa_doctor.model"):
            continue
        found = imports(path, False)
        assert not found & banned, f"{name} imports {sorted(found & banned)}"
        up = {
            i
            for i in found
            if i.startswith("fa_doctor.") and not i.startswith(("fa_doctor.model", "fa_doctor.catalog"))
        }
        assert not up, f"{name} imports {sorted(up)}"
        assert "open(" not in path.read_text(encoding="utf-8"), f"{name} opens a file"
