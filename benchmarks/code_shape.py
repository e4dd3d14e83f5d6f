"""The shape of the package at a tree (docs/measurements.md, rows 51 and 53): modules and lines, the
largest classes and functions, and the import graph of `aura_eval` (every import, function-local
ones included, read with `ast`: no module is imported), with its cycles.

    python benchmarks/code_shape.py [TREE]      # TREE: a checkout (default: this one)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def module_name(package: Path, path: Path) -> str:
    rel = path.relative_to(package).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts) or "__init__"


def imported(tree: ast.AST, modules: set[str]) -> set[str]:
    """The modules of the package a module imports (`from aura_eval.x import y` is x.y where that is a module, else x)."""
    def local(name: str) -> str:
        return name.removeprefix("aura_eval").lstrip(".") if name.split(".")[0] == "aura_eval" else ""

    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = local(f"{node.module}.{alias.name}")
                found.add(full if full in modules else local(node.module))
        elif isinstance(node, ast.Import):
            found |= {local(a.name) for a in node.names}
    return found & modules


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def main(tree: Path) -> None:
    package = tree / "aura_eval"
    paths = {module_name(package, p): p for p in sorted(package.rglob("*.py"))}
    sizes, graph, lines = [], {}, 0
    for name, path in paths.items():
        text = path.read_text(encoding="utf-8")
        lines += len(text.splitlines())
        parsed = ast.parse(text)
        for node in ast.walk(parsed):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                methods = (sum(isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)) for c in node.body)
                           if isinstance(node, ast.ClassDef) else None)
                sizes.append((node.end_lineno - node.lineno + 1, f"{name}.{node.name}", methods))
        graph[name] = imported(parsed, set(paths)) - {name}
    top = sum(1 for name in paths if "." not in name and (package / f"{name}.py").exists())
    print(f"modules {len(paths)}, lines {lines:,}, top-level modules {top}")
    print("largest classes:")
    for n, name, methods in sorted((s for s in sizes if s[2] is not None), reverse=True)[:5]:
        print(f"  {n:4d} lines  {name} ({methods} methods)")
    print("largest functions:")
    for n, name, _ in sorted((s for s in sizes if s[2] is None), reverse=True)[:6]:
        print(f"  {n:4d} lines  {name}")
    print(f"import edges {sum(map(len, graph.values()))}; cycles: {cycles(graph) or 'none'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
