"""The gateway runs from a read-only mount in the toolchain image, where nothing of the
project is installed: it may load the standard library and itself, nothing else."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import gateway

ROOT = Path(__file__).resolve().parents[3]
CHILD = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def test_gateway_loads_only_the_standard_library() -> None:
    modules = ["gateway", *[f"gateway.{info.name}" for info in
                            pkgutil.iter_modules(gateway.__path__)]]
    assert "gateway.server" in modules and "gateway.__main__" in modules
    done = subprocess.run([sys.executable, "-S", "-c", CHILD, json.dumps(modules)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    loaded = {name.split(".")[0] for name in json.loads(done.stdout)}
    foreign = sorted(loaded - set(sys.stdlib_module_names) - {"gateway", "__main__"})
    assert foreign == [], f"the gateway loads modules outside the standard library: {foreign}"
