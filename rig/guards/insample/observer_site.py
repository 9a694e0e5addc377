"""bakeoff-sandbox's `sitecustomize` for a sample (written by the rig, root-owned, first
on PYTHONPATH): installs the rig's observer hook (`bakeoff_hook`), then runs the image's
own sitecustomize, which this one shadows (Debian's: apport's hook)."""

import contextlib
import importlib.machinery
import importlib.util
import sys

import bakeoff_hook  # noqa: F401 - installing the hook is the import


def _chain() -> None:
    here = __file__.rsplit("/", 1)[0] if "/" in __file__ else ""
    path = [p for p in sys.path if p and p.rstrip("/") != here.rstrip("/")]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    with contextlib.suppress(Exception):  # as site.py treats a failing sitecustomize
        spec.loader.exec_module(module)


_chain()
del _chain
