"""The package's layout: imports run one way along the pipeline, and no two modules import each other.

Layers, lowest first (docs/architecture.md draws them): a module may import its own layer and the layers below
it, never one above. Every ``import`` counts, also those inside functions (a lazy import that runs back up is
still a loop in the design).
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

LAYERS = [
    (
        "base",
        [
            "tiedlm.errors",
            "tiedlm.interrupts",
            "tiedlm.paths",
            "tiedlm.runtime",
            "tiedlm.native",
            "tiedlm.registry",
            "tiedlm.run_dir",
            "tiedlm.checkpoint_file",
        ],
    ),
    ("data", ["tiedlm.data"]),
    ("models", ["tiedlm.models"]),  # each with its own typed config (models.config: the [model] table)
    ("config", ["tiedlm.config", "tiedlm.optimizers"]),  # the loader of every task's settings; the optimisers
    ("losses", ["tiedlm.losses"]),
    ("hf", ["tiedlm.hf"]),  # the output layers and the augmented loss on Hugging Face causal LMs
    # perplexity over a split (the language model validates with it), dynamic evaluation, the subspace distance
    ("evaluation", ["tiedlm.evaluation", "tiedlm.analysis.subspace"]),
    ("train", ["tiedlm.train"]),  # the harness: it knows no task
    ("tasks", ["tiedlm.tasks"]),  # peers, each registered (tiedlm.registry.register_task)
    ("analysis", ["tiedlm.inference", "tiedlm.run", "tiedlm.analysis", "tiedlm.selfcheck"]),
    ("cli", ["tiedlm.reproduce", "tiedlm.cli", "tiedlm.__main__"]),
]


def _layer(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    if rank is None:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS in {__file__}")
    return rank


def _modules() -> dict[str, Path]:
    out = {}
    for f in (SRC / "tiedlm").rglob("*.py"):
        parts = f.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """tiedlm modules that ``name`` imports (``from .x import y`` counts as x.y where y is a module)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in modules and m != name}


@pytest.fixture(scope="module")
def graph():
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items() if name != "tiedlm"}


def test_every_module_has_a_layer(graph):
    for name in graph:
        _layer(name)


def test_no_import_runs_back_up_the_pipeline(graph):
    upward = [
        f"{m} ({LAYERS[_layer(m)][0]}) imports {t} ({LAYERS[_layer(t)][0]})"
        for m, targets in graph.items()
        for t in targets
        if t != "tiedlm" and _layer(t) > _layer(m)
    ]
    assert not upward, "\n".join(upward)


def test_the_tasks_are_peers_that_know_no_other_task(graph):
    """A task (tiedlm.tasks.X) imports the layers below it, never another task; the harness imports none, nor does
    ``reproduce`` (it asks the registry, tiedlm.tasks.TASKS, what it needs of a task)."""

    def task_of(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "tasks" else None

    crossing = [
        f"{m} imports {t}" for m, ts in graph.items() for t in ts if task_of(m) and task_of(t) not in (None, task_of(m))
    ]
    from_harness = [
        f"{m} imports {t}"
        for m, ts in graph.items()
        for t in ts
        if m.startswith(("tiedlm.train", "tiedlm.reproduce")) and task_of(t)
    ]
    assert not crossing and not from_harness, "\n".join(crossing + from_harness)


def test_no_two_modules_import_each_other(graph):
    """No cycle among modules (a package's ``__init__`` re-exporting its own modules is not one)."""
    edges = {
        m: {t for t in ts if not (m.startswith(t + ".") and (SRC / Path(*t.split("."))).is_dir())}
        for m, ts in graph.items()
    }
    edges = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in edges.items()}  # package -> own module
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_the_checks_see_a_lazy_import_that_runs_back_up(tmp_path):
    modules = {"tiedlm.models.probe": tmp_path / "probe.py", "tiedlm.cli": Path("c.py")}
    modules["tiedlm.models.probe"].write_text("def f():\n    from ..cli import main\n")
    got = _imports("tiedlm.models.probe", modules["tiedlm.models.probe"], modules)
    assert got == {"tiedlm.cli"} and _layer("tiedlm.cli") > _layer("tiedlm.models.probe")


def test_no_function_in_the_package_is_longer_than_60_lines():
    """Small functions with one job each (ruff's C901/PLR0915 bound branches and statements; this bounds length,
    docstring and signature included)."""
    long = []
    for path in sorted((SRC / "tiedlm").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})")
    assert not long, "split these functions: " + "; ".join(long)


@pytest.mark.parametrize("package", ["tiedlm.train", "tiedlm.run_dir", "tiedlm.reproduce", "tiedlm.registry"])
def test_the_harness_and_reproduce_load_no_task_whatever_they_import(package):
    """Transitively, not just by their own imports: importing the harness, the run folders or ``reproduce`` (and all
    they import in turn) loads no module of ``tiedlm.tasks``; they reach a task only through the registry, at run
    time."""
    import subprocess
    import sys

    code = f"import sys, {package}; print(sorted(m for m in sys.modules if m.startswith('tiedlm.tasks')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"importing {package} loads {out.stdout.strip()}"
