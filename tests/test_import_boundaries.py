"""Import boundaries (docs/architecture.md): stages import downward only, and no module
imports itself back through others. Every import counts, function-level ones included:
an import deferred into a function still ties the two modules together.

``LAYERS`` lists the units of the package from the bottom up. A module belongs to the unit
with the longest matching prefix. An import from one unit into another must go to a unit
of a strictly lower layer; units of one layer are peers and do not import each other.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "tracecanary"

LAYERS: list[tuple[str, list[str]]] = [
    (
        "foundation",
        [
            "tracecanary",
            "errors",
            "json_depth",
            "formatting",
            "progress",
            "memory",
            "command_process",
            "grouped",
            "ports",
            "factorize",
            "columns",
        ],
    ),
    ("policy and bytes", ["limits", "canonical", "figures"]),
    ("formats and shipped data", ["formats", "defaults", "parquet_io", "trace_io"]),
    ("the skew datum", ["clocks.status"]),
    ("the program model and the claim words", ["program", "clocks.calibration", "verify.claims"]),
    ("the checks of a trace's events", ["event_checks"]),
    (
        "reading one source",
        [
            "kineto",
            "matching",
            "synth",
            "param.dtypes",
            "param.target",
            "columnar_capture",
            "record_completeness",
            "trace_columns",
        ],
    ),
    (
        "ingest and capture",
        ["ingest", "capture", "record", "param.program", "param.compat", "flightrec"],
    ),
    ("merge inputs", ["merge_inputs", "clocks.constraints"]),
    ("merge", ["merge"]),
    ("per-rank work in blocks of rank files, gathered by merge", ["rank_blocks"]),
    ("clock derivation; real workloads captured and merged", ["clocks", "zoo", "autorecord"]),
    ("compile", ["compile"]),
    ("loading any input; export; fits", ["load", "param.export", "alphabeta", "physical.config"]),
    ("simulator", ["sim"]),
    ("PARAM's own numbers beside the simulator's", ["param.side_by_side"]),
    ("verification and physical replay", ["verify", "physical"]),
    ("upstream PARAM on the physical launcher", ["param"]),
    ("rollout gate", ["gate"]),
    ("campaign records", ["campaign", "doctor", "diagnostics"]),
    ("commands", ["commands"]),
    ("command line", ["cli"]),
    ("in-process entry points", ["__main__", "physical.slurm_launch", "campaign.stages"]),
    ("the Snakemake bridge", ["campaign.workflow"]),
]

UNITS = {
    ("tracecanary" if unit == "tracecanary" else f"tracecanary.{unit}"): index
    for index, (_, units) in enumerate(LAYERS)
    for unit in units
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def unit_of(module: str) -> str:
    """The longest unit prefix of ``module`` (the root unit is the package's __init__ only)."""
    best = None
    for unit in UNITS:
        if unit == "tracecanary":
            continue
        if module == unit or module.startswith(unit + "."):
            if best is None or len(unit) > len(best):
                best = unit
    if best is None and module == "tracecanary":
        return "tracecanary"
    assert best is not None, f"{module} is in no layer: add its package to LAYERS"
    return best


def imported_modules(module: str, path: Path) -> set[str]:
    """Every tracecanary module ``module`` imports, at any depth of its code."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names]
            names = [n if n in MODULES else base for n in names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("tracecanary") and name != module:
                found.add(name)
    return found


GRAPH = {module: imported_modules(module, path) for module, path in MODULES.items()}


def test_every_module_has_a_layer():
    for module in MODULES:
        unit_of(module)


def test_layers_name_each_unit_once():
    listed = [unit for _, units in LAYERS for unit in units]
    assert len(listed) == len(set(listed))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports_only_downward(module):
    mine = unit_of(module)
    upward = []
    for target in sorted(GRAPH[module]):
        theirs = unit_of(target)
        if theirs == mine:
            continue
        if UNITS[theirs] >= UNITS[mine]:
            upward.append(f"{target} ({LAYERS[UNITS[theirs]][0]}) from {LAYERS[UNITS[mine]][0]}")
    assert upward == [], f"{module} imports upward or sideways: {upward}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_import_cycles():
    assert _cycles(GRAPH) == []


def test_no_unit_import_cycles():
    """Units (packages, top-level modules, and the named parts of a package that sit at
    another layer, as ``clocks.status``) as nodes: a cycle between units means one of them
    holds something that belongs in a lower layer."""
    units: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        for target in targets:
            a, b = unit_of(module), unit_of(target)
            if a != b:
                units[a].add(b)
    assert _cycles({u: units.get(u, set()) for u in UNITS}) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_boundary_check_sees_function_level_imports():
    """compile.expand imported inside a function of verify.behavior still counts."""
    assert "tracecanary.compile.expand" in GRAPH["tracecanary.verify.behavior"]


def test_architecture_doc_states_these_layers():
    """docs/architecture.md's layer table lists the same units, layer by layer, bottom up."""
    doc = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    documented = [
        (name.strip(), sorted(u.strip("` ") for u in re.findall(r"`[^`]+`", units)))
        for name, units in (row.strip("| ").split(" | ", 1) for row in rows)
    ]
    assert documented == [(name, sorted(units)) for name, units in LAYERS]
