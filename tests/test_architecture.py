"""The floors of docs/architecture.md, enforced: what may import what, and no import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fa_doctor"

# floor -> what it must never import (at any level, lazily included)
FORBIDDEN = {
    "fa_doctor.probes": (
        "fa_doctor.derive",
        "fa_doctor.checks",
        "fa_doctor.render",
        "fa_doctor.commands",
        "fa_doctor.cli",
        "fa_doctor.output",
        "typer",
        "rich",
    ),
    "fa_doctor.derive": (
        "fa_doctor.checks",
        "fa_doctor.render",
        "fa_doctor.commands",
        "fa_doctor.cli",
        "fa_doctor.output",
        "typer",
        "rich",
    ),
    "fa_doctor.checks": (
        "fa_doctor.render",
        "fa_doctor.commands",
        "fa_doctor.cli",
        "fa_doctor.output",
        "typer",
        "rich",
    ),
    "fa_doctor.smoke": ("fa_doctor.checks", "fa_doctor.render", "fa_doctor.commands", "fa_doctor.cli", "typer", "rich"),
    "fa_doctor.render": ("fa_doctor.checks", "fa_doctor.commands", "fa_doctor.cli", "fa_doctor.output", "typer"),
    "fa_doctor.result": ("fa_doctor.render", "fa_doctor.commands", "fa_doctor.cli", "typer", "rich"),
    "fa_doctor.finding": ("fa_doctor.render", "fa_doctor.commands", "fa_doctor.cli", "typer", "rich"),
    "fa_doctor.commands": ("fa_doctor.cli", "fa_doctor.output", "typer"),
    "fa_doctor.knowledge": ("fa_doctor.render", "fa_doctor.commands", "fa_doctor.cli", "typer", "rich"),
    "fa_doctor.fixes": ("fa_doctor.render", "fa_doctor.commands", "fa_doctor.cli", "fa_doctor.output", "typer"),
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes: list[ast.AST] = []
    if top_level_only:
        for node in tree.body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue  # typing only: never executed
            nodes.append(node)
        nodes = [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
    else:
        nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    out: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_floors(name: str) -> None:
    for floor, forbidden in FORBIDDEN.items():
        if name == floor or name.startswith(floor + "."):
            bad = sorted(i for i in imports(MODULES[name], False) for f in forbidden if i == f or i.startswith(f + "."))
            assert not bad, f"{name} ({floor}) must not import {bad}"


def test_no_import_cycle() -> None:
    graph = {name: {i for i in imports(path, True) if i in MODULES and i != name} for name, path in MODULES.items()}
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
