"""A tiny stdlib linter: unused imports, bare `except:` clauses, syntax errors.

    python3 tools/lint.py [PATH...]      (default: src tests)

Prints one line per finding, then `lint: N findings`. Exit code 0 either way: the count
is what a ratchet reads.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def findings(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        return [f"{path}:{exc.lineno}: syntax error ({exc.msg})"]
    imported: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                imported.setdefault(name, node.lineno)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {n.value.id for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    exported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            exported |= {e.value for e in getattr(node.value, "elts", [])
                         if isinstance(e, ast.Constant)}
    found = [f"{path}:{line}: unused import '{name}'"
             for name, line in sorted(imported.items(), key=lambda kv: kv[1])
             if name not in used and name not in exported]
    found += [f"{path}:{node.lineno}: bare 'except:'"
              for node in ast.walk(tree)
              if isinstance(node, ast.ExceptHandler) and node.type is None]
    return found


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("src"), Path("tests")]
    total = 0
    for root in roots:
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for path in files:
            for line in findings(path):
                print(line)
                total += 1
    print(f"lint: {total} findings")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
