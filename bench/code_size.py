"""Code size: the largest modules and every function over 80 lines, read with ``ast``.

Issue #8 asks for no module over 800 lines and no function over 80 unless it is a faithful port
whose structure mirrors AICR's; docs/benchmarks.md ("Code size") names each exception and why.
Product code (``aicr_site``, ``evidence_app``, ``recipes_app``, ``validators_app``; migrations
left out: generated, or frozen data steps) is listed first, then ``bench/`` and ``tests/``.
A function's lines run from its ``def`` to its last line, docstring and comments included;
nested functions and methods are counted on their own and inside their parent.

Run: ``make size`` (``.venv/bin/python bench/code_size.py``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GROUPS = {
    "product": ("aicr_site", "evidence_app", "recipes_app", "validators_app"),
    "bench": ("bench",),
    "tests": ("tests",),
}
MODULE_LIMIT = 800
FUNCTION_LIMIT = 80


@dataclass(frozen=True)
class Function:
    path: str
    line: int
    name: str
    lines: int


def modules(folders: tuple[str, ...]) -> Iterator[Path]:
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "migrations" not in path.relative_to(ROOT).parts:
                yield path


def functions(tree: ast.AST, path: str) -> Iterator[Function]:
    """Every function and method, named ``Class.method`` / ``outer.inner`` as nested."""

    def walk(node: ast.AST, prefix: str) -> Iterator[Function]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                yield Function(path, child.lineno, name, end - child.lineno + 1)
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def report(group: str, folders: tuple[str, ...], top: int) -> None:
    sizes: list[tuple[int, str]] = []
    long: list[Function] = []
    for path in modules(folders):
        source = path.read_text(encoding="utf-8")
        relative = str(path.relative_to(ROOT))
        sizes.append((len(source.splitlines()), relative))
        found = functions(ast.parse(source, filename=relative), relative)
        long.extend(f for f in found if f.lines > FUNCTION_LIMIT)
    sizes.sort(key=lambda item: (-item[0], item[1]))
    over = sum(1 for lines, _ in sizes if lines > MODULE_LIMIT)
    total = sum(lines for lines, _ in sizes)
    print(f"\n## {group} ({', '.join(folders)}): {len(sizes)} modules, {total:,} lines")
    print(f"  {top} largest modules (lines; {over} over {MODULE_LIMIT}):")
    for lines, relative in sizes[:top]:
        print(f"    {lines:5}  {relative}")
    print(f"  functions over {FUNCTION_LIMIT} lines ({len(long)}):")
    for f in sorted(long, key=lambda f: (-f.lines, f.path, f.line)):
        print(f"    {f.lines:5}  {f.path}:{f.line} {f.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15, help="how many modules to list")
    args = parser.parse_args()
    for group, folders in GROUPS.items():
        report(group, folders, args.top)


if __name__ == "__main__":
    main()
