"""The shape of the package (docs/python.md, "Package layout"): imports one
way, layers respected, public faces that only re-export, a stub for every
extension, and no torch in processes that only host actors."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from typing import Dict, List, Set

import monarch

PACKAGE = os.path.dirname(os.path.realpath(monarch.__file__))
# What each layer of monarch._src may import (besides itself and common).
ALLOWED = {
    "common": set(),
    "mesh": set(),
    "backend": {"mesh"},
    "actor": {"mesh"},
    "rdma": {"actor"},
    "job": {"actor"},
    "tensor": {"mesh", "backend", "actor"},
}


# What the build generates or compiles into the package (not public faces).
GENERATED = {"monarch", "monarch.plan_pb2"}


def _modules() -> Dict[str, str]:
    out = {}
    for root, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
                if rel.endswith(".__init__"):
                    rel = rel[: -len(".__init__")]
                out[rel] = path
    return out


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(module: str, path: str, known: Set[str]) -> Set[str]:
    """Every monarch module ``module`` imports by an import statement, at any
    depth (an import deferred into a function still counts), outside
    ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(open(path).read(), path)
    package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
    found: Set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking(node):
            return
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("monarch"):
                    found.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("monarch"):
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    found.add(sub if sub in known else target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    return {m for m in found if m in known}


def _graph() -> Dict[str, Set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: _imports(m, p, known) for m, p in mods.items()}


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[List[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def test_no_import_cycle_inside_the_package():
    graph = _graph()
    assert len(graph) > 30, sorted(graph)  # the walk found the package
    assert _cycles(graph) == []


def test_the_cycle_check_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "_src" else ""


def test_layers_import_one_way():
    bad = []
    for module, deps in _graph().items():
        layer = _layer(module)
        if layer not in ALLOWED:
            continue
        for dep in deps:
            other = _layer(dep)
            if dep.startswith("monarch._src") and other and other != layer and \
                    other != "common" and other not in ALLOWED[layer]:
                bad.append(f"{module} -> {dep}")
            if not dep.startswith("monarch._src") and dep not in GENERATED:
                bad.append(f"{module} -> {dep} (a public face)")
    assert bad == []


def test_public_faces_only_reexport():
    for face in ("__init__.py", os.path.join("actor", "__init__.py"),
                 os.path.join("rdma", "__init__.py"), os.path.join("job", "__init__.py"),
                 "trace.py"):
        tree = ast.parse(open(os.path.join(PACKAGE, face)).read())
        defs = [n.name for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                and n.name not in ("__getattr__", "__dir__", "_CallableModule")]
        assert defs == [], f"{face} defines {defs}"


def test_every_extension_has_a_stub():
    for ext in ("_C", "_actors", "_rdma", "_tensor_worker"):
        assert os.path.exists(os.path.join(PACKAGE, f"{ext}.pyi")), ext


def test_actor_processes_do_not_import_torch():
    code = ("import sys, monarch, monarch.actor\n"
            "from monarch.actor import Actor, endpoint, this_host, ValueMesh, Future\n"
            "from monarch._src.actor import worker, actor_mesh, procs\n"
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_public_names_resolve():
    for name in monarch.__all__:
        assert getattr(monarch, name) is not None, name
    import monarch.actor as actor
    for name in actor.__all__:
        assert hasattr(actor, name), name
    import monarch.job as job
    for name in job.__all__:
        assert hasattr(job, name), name
