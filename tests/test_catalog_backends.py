"""Every catalog case runs on every backend it can, and says why where it cannot.

The contract (docs: README, "Backends"): an e2e case either carries ``standin`` with its
reason, or it judges only by evidence every backend has. Read from the source, not from a run:
each case's code is followed through the e2e helpers it names (``e2e/support.py``,
``workloads.py``, ``recipes.py`` and the module's own functions), and what it reaches is
classified:

* a **stand-in read**: the sim's kubelet stand-in, data plane or simulator through the lab
  (``lab.sim`` and what it hands out: ``.kube``, ``.kubelet``, ``.stand_in``, ``.plane``,
  ``.dataplane``, ``.reregister``, ``.remove_node``, ``.registration``; and
  ``capabilities.kubelet_stand_in``), the sim-only release presets (the ``lab_at`` fixture),
  or the stand-in's pod annotations (``sim.ccm-lab.io/``);
* anything else is evidence every backend has (the API, AWS, the trail, ``lab.traffic``,
  ``lab.settle``, which covers nothing where real components run).

Two backend choices stay allowed because they change how a case waits or which lab it runs on,
not what it judges: ``lab.settles_cluster`` (one look after ``lab.settle`` where the barrier
covers the cluster, an observation window where it does not) and ``recipes.release_lab`` /
``sim_backend`` (a release preset on sim, the session's cluster elsewhere; the preset fixture is
fetched by name there, which this check does not follow).

A case without ``standin`` that reaches a stand-in read fails the contract (it would skip
nothing and fail on kind, or branch on the backend and judge differently there); a case with
``standin`` that reaches none is marked for nothing and skips on kind for no reason.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

E2E = Path(__file__).resolve().parent.parent / "e2e"

#: attributes of the lab that only the sim's stand-ins have (or that ask which backend it is)
STAND_IN_ATTRS = frozenset(
    {
        "sim",
        "stand_in",
        "plane",
        "has_kubelet_stand_in",
        "dataplane",
        "kubelet",
        "kube",
        "reregister",
        "remove_node",
        "registration",
        "kubelet_stand_in",
        "simulator",
    }
)
STAND_IN_FIXTURES = frozenset({"lab_at"})
STAND_IN_ANNOTATION = "sim.ccm-lab.io/"


@dataclasses.dataclass
class Module:
    name: str
    tree: ast.Module
    functions: dict[str, ast.FunctionDef]
    constants: dict[str, ast.expr]
    #: local name -> (module, name) for ``from e2e.X import name``
    imported: dict[str, tuple[str, str]]
    #: local name -> module for ``from e2e import X``
    modules: dict[str, str]


def _load(name: str, source: str) -> Module:
    tree = ast.parse(source, filename=f"e2e/{name}.py")
    functions: dict[str, ast.FunctionDef] = {}
    constants: dict[str, ast.expr] = {}
    imported: dict[str, tuple[str, str]] = {}
    modules: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            constants[node.target.id] = node.value
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("e2e."):
                for alias in node.names:
                    imported[alias.asname or alias.name] = (node.module[4:], alias.name)
            elif node.module == "e2e":
                for alias in node.names:
                    modules[alias.asname or alias.name] = alias.name
    return Module(name, tree, functions, constants, imported, modules)


MODULES = {p.stem: _load(p.stem, p.read_text(encoding="utf-8")) for p in sorted(E2E.glob("*.py"))}


def _is_lab_name(name: str) -> bool:
    return name == "lab" or name.startswith("lab_") or name.endswith("_lab")


def _is_lab_expr(node: ast.expr) -> bool:
    """An expression rooted at a lab: ``lab``, ``lab_session``, ``self.lab``,
    ``lab.cluster`` (so ``lab.cluster.kubelet`` counts as ``lab.kubelet`` does)."""
    while isinstance(node, ast.Attribute):
        if _is_lab_name(node.attr):
            return True
        node = node.value
    return isinstance(node, ast.Name) and _is_lab_name(node.id)


def _reads(module: Module, node: ast.AST) -> Iterator[str]:
    """The stand-in reads directly in ``node``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in STAND_IN_ATTRS:
            if sub.attr == "kubelet_stand_in" or _is_lab_expr(sub.value):
                yield f"{ast.unparse(sub)} (line {sub.lineno})"
        elif (
            isinstance(sub, ast.Constant)
            and isinstance(sub.value, str)
            and STAND_IN_ANNOTATION in sub.value
        ):
            yield f"the stand-in's annotation {sub.value!r} (line {sub.lineno})"


def _named(module: Module, node: ast.AST) -> Iterator[tuple[str, str]]:
    """The e2e functions and constants ``node`` names: (module, name)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            if sub.id in module.functions or sub.id in module.constants:
                yield module.name, sub.id
            elif sub.id in module.imported:
                yield module.imported[sub.id]
        elif (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name)
            and sub.value.id in module.modules
        ):
            yield module.modules[sub.value.id], sub.attr


def stand_in_reads(module: str, name: str) -> list[str]:
    """Every stand-in read reachable from ``module.name``, each with the path to it."""
    found: list[str] = []
    seen: set[tuple[str, str]] = set()
    todo: list[tuple[str, str, str]] = [(module, name, f"{module}.{name}")]
    while todo:
        mod_name, item, path = todo.pop()
        if (mod_name, item) in seen or mod_name not in MODULES:
            continue
        seen.add((mod_name, item))
        mod = MODULES[mod_name]
        node: ast.AST | None = mod.functions.get(item) or mod.constants.get(item)
        if node is None:
            continue
        if isinstance(node, ast.FunctionDef):
            args = [a.arg for a in node.args.args + node.args.kwonlyargs]
            found += [f"{path}: the sim-only fixture {a!r}" for a in args if a in STAND_IN_FIXTURES]
        found += [f"{path}: {read}" for read in _reads(mod, node)]
        for target in _named(mod, node):
            todo.append((*target, f"{path} -> {target[0]}.{target[1]}"))
    return found


def _marks(decorators: list[ast.expr]) -> list[str]:
    return [ast.unparse(d) for d in decorators]


def _is_standin(module: Module, mark: str) -> bool:
    if "mark.standin" in mark:
        return True
    value = module.constants.get(mark.split("(", maxsplit=1)[0])
    return value is not None and "mark.standin" in ast.unparse(value)


def catalog_cases() -> Iterator[tuple[str, str, bool]]:
    """(module, test function, carries ``standin``) for every e2e case."""
    for mod in MODULES.values():
        if not mod.name.startswith("test_"):
            continue
        module_marks = [ast.unparse(v) for k, v in mod.constants.items() if k == "pytestmark"]
        module_standin = any("mark.standin" in m for m in module_marks)
        for fn in mod.functions.values():
            if not fn.name.startswith("test_"):
                continue
            standin = module_standin or any(_is_standin(mod, m) for m in _marks(fn.decorator_list))
            yield mod.name, fn.name, standin


def test_cases_without_standin_judge_by_evidence_every_backend_has() -> None:
    broken = {
        f"{mod}.{fn}": reads
        for mod, fn, standin in catalog_cases()
        if not standin and (reads := stand_in_reads(mod, fn))
    }
    assert not broken, "cases that read the sim's stand-ins without `standin`:\n" + "\n".join(
        f"  {case}:\n" + "\n".join(f"    {r}" for r in reads) for case, reads in broken.items()
    )


def test_cases_with_standin_use_a_stand_in() -> None:
    idle = [
        f"{mod}.{fn}"
        for mod, fn, standin in catalog_cases()
        if standin and not stand_in_reads(mod, fn)
    ]
    assert not idle, f"marked `standin` but reach none of the sim's stand-ins: {idle}"


def test_the_contract_sees_a_stand_in_read_and_a_clean_case() -> None:
    """The checker itself: it finds a read through a helper, an annotation behind a constant
    and the sim-only fixture, and passes evidence-only code."""
    source = (
        "from e2e.support import wait_for\n"
        "def helper(lab):\n    return lab.dataplane.kube_proxy\n"
        "def test_reads(lab):\n    helper(lab)\n"
        "def test_clean(lab, core_v1):\n    lab.settle(); wait_for(lambda: 1)\n"
        "ANNOTATED = {'sim.ccm-lab.io/shutdown-seconds': '1'}\n"
        "def test_annotated(lab):\n    return ANNOTATED\n"
        "def test_presets(lab_at):\n    pass\n"
        "def test_deep(lab):\n    lab.cluster.kubelet.stop_heartbeat('w')\n"
        "def test_label(label, table):\n    return label.kubelet, table.dataplane\n"
    )
    MODULES["test_contract_probe"] = _load("test_contract_probe", source)
    try:
        reads = stand_in_reads("test_contract_probe", "test_reads")
        assert len(reads) == 1, reads
        assert "test_reads -> test_contract_probe.helper: lab.dataplane" in reads[0]
        assert stand_in_reads("test_contract_probe", "test_clean") == []
        assert "sim.ccm-lab.io/" in stand_in_reads("test_contract_probe", "test_annotated")[0]
        assert "lab_at" in stand_in_reads("test_contract_probe", "test_presets")[0]
        assert "lab.cluster.kubelet" in stand_in_reads("test_contract_probe", "test_deep")[0]
        assert stand_in_reads("test_contract_probe", "test_label") == [], "not a lab"
    finally:
        del MODULES["test_contract_probe"]
