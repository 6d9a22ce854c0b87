"""The shape the code keeps: no import cycle in model/, no torch in the web pages, and the record
layout spelled only by its writer (model/transformer.py) and its one reader (model/explain/record.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD_KEYS = re.compile(r"""["'](self_attention_add_norm|cross_attention_add_norm|ffn_add_norm)["']""")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Modules a file imports when it runs (imports under ``if TYPE_CHECKING:`` do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
               and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_model_has_no_import_cycle():
    modules = {_module_name(p): p for p in (ROOT / "model").rglob("*.py")}
    graph = {name: {m for m in _imports(path) if m in modules and m != name}
             for name, path in modules.items()}
    # packages import nothing of their own here, so an edge to a package is no cycle
    graph = {name: {m for m in edges if modules[m].name != "__init__.py"}
             for name, edges in graph.items()}
    visiting, done, cycles = set(), set(), []

    def visit(name: str, path: list[str]) -> None:
        if name in done:
            return
        if name in visiting:
            cycles.append(path[path.index(name):] + [name])
            return
        visiting.add(name)
        for other in sorted(graph[name]):
            visit(other, path + [other])
        visiting.discard(name)
        done.add(name)

    for name in sorted(graph):
        visit(name, [name])
    assert cycles == []


def test_the_web_pages_import_no_torch():
    for path in sorted((ROOT / "app" / "pages").glob("*.py")):
        imported = _imports(path)
        assert not {m for m in imported if m.split(".")[0] in ("torch", "numpy")}, path.name


def test_record_keys_are_spelled_only_by_their_writer_and_their_reader():
    allowed = {ROOT / "model" / "transformer.py", ROOT / "model" / "explain" / "record.py"}
    spelled = {path for folder in ("app", "model", "bench", "scripts")
               for path in (ROOT / folder).rglob("*.py")
               if RECORD_KEYS.search(path.read_text(encoding="utf-8"))}
    assert spelled <= allowed and ROOT / "model" / "transformer.py" in spelled
