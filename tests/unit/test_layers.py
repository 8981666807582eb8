"""The import layering of docs/design/README.md holds: no module imports upwards or sideways.

The layer table is read from the design map itself, so the map and the code cannot drift
apart: a package missing from the table, or an import that points to a higher layer or to
another package on the same layer, fails here. Every import counts, including those inside
functions and under ``TYPE_CHECKING``: a type from a higher layer is still a dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "tuffdb"


def layer_table() -> dict[str, int]:
    text = (ROOT / "docs" / "design" / "README.md").read_text()
    table: dict[str, int] = {}
    for layer, cell in re.findall(r"^\| (\d+) \| (.+?) \|", text, re.MULTILINE):
        for name in re.findall(r"`([\w.]+)`", cell):
            table["tuffdb" if name in {"tuffdb", "__init__"} else f"tuffdb.{name}"] = int(layer)
    return table


def owner(module: str, table: dict[str, int]) -> str | None:
    """The most specific package in the table that contains ``module``."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in table:
            return candidate
    return None


def imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "tuffdb":  # from tuffdb import errors: the submodule
                found += [(node.lineno, f"tuffdb.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name.split(".")[0] == "tuffdb"]


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("tuffdb", *path.relative_to(PACKAGE).with_suffix("").parts))
        found.append((module.removesuffix(".__init__"), path))
    return found


def violations(table: dict[str, int]) -> list[tuple[str, str, str]]:
    """(importing package, imported package, "file:line imports module") per bad import."""
    bad = []
    for module, path in modules():
        mine = owner(module, table)
        assert mine is not None, module
        for line, name in imports(path):
            theirs = owner(name, table)
            assert theirs is not None, name
            if theirs == mine or table[theirs] < table[mine]:
                continue
            bad.append((mine, theirs, f"{path.relative_to(ROOT)}:{line} imports {name}"))
    return bad


def test_every_module_has_a_layer() -> None:
    table = layer_table()
    assert [module for module, _path in modules() if owner(module, table) is None] == []


def test_no_import_points_up_or_sideways() -> None:
    assert violations(layer_table()) == []


def test_the_checker_catches_an_upward_import() -> None:
    # The storage layers must never reach the server: with the storage core put above the
    # server in a copy of the table, the real imports of storage (metrics, _format, ...)
    # still pass, and a server module's import of storage becomes a violation.
    table = layer_table()
    assert table["tuffdb.storage"] < table["tuffdb.server"]
    flipped = dict(table, **{"tuffdb.storage": table["tuffdb.server.umadb"] + 1})
    found = {(mine, theirs) for mine, theirs, _where in violations(flipped)}
    assert ("tuffdb.server.umadb", "tuffdb.storage") in found
    assert ("tuffdb.kv", "tuffdb.storage") in found
    assert not any(mine == "tuffdb.storage" for mine, _theirs in found)
    # Packages on one layer may not import each other either.
    sideways = dict(table, **{"tuffdb.documents": table["tuffdb.kv"]})
    assert ("tuffdb.documents", "tuffdb.kv") in {(m, t) for m, t, _w in violations(sideways)}
