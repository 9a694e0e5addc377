"""Canaries planted: the rig-written tests of one sample (principle 7), beside the tests
its command runs, with per-sample random names.

pytest's are a file of the rig's that only the observer's plugin collects; node, go and
cargo also get canaries in the protected tests' own process or binary
(`rig.guards.inprocess`); a browser criterion's are a pytest file in the browser's
container. What their outcome proves is read back by `rig.guards.canary`. Pure: planning
needs the tree's paths (and a few files' text), never docker.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence

from rig.guards import binaries, inprocess, shell
from rig.guards.canary import CANARY_RUNNERS, Canary, Seen


def plan(runner: str, token: str, paths: Sequence[str], command: str,
         protected: Sequence[str], text_of: Mapping[str, str]) -> Canary | None:
    """The canaries for one sample of `runner`, or None when it gets none.

    `paths` are the tree's files; `text_of` gives the text of the files a plan may need
    (Go test files for their package clause, Cargo.toml files), keyed by path.
    """
    if runner not in CANARY_RUNNERS:
        return None
    anchor = _anchor(runner, paths, command, protected)
    if runner == "pytest":
        return _pytest(token, anchor)
    failing = shell.may_fail(command, runner)
    if runner == "node-test":
        return inprocess.node(token, anchor, paths, command, protected, text_of, failing)
    if runner == "go-test":
        return binaries.go(token, anchor, paths, command, protected, text_of, failing)
    if runner in ("vitest", "jest"):
        return inprocess.js_runner(runner, token, anchor, paths, command, protected, text_of,
                                   failing)
    return binaries.cargo(token, anchor, paths, command, protected, text_of, failing)


def _is_test_file(runner: str, path: str) -> bool:
    name = posixpath.basename(path)
    if runner == "pytest":
        return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
    if runner == "go-test":
        return name.endswith("_test.go")
    if runner == "cargo":
        return path.endswith(".rs") and "tests" in path.split("/")[:-1]
    if runner in ("vitest", "jest"):
        return bool(re.search(r"[-_.](test|spec)\.[cm]?[jt]sx?$", name))
    return bool(re.search(r"(^test[-_.]|[-_.]test\.[cm]?js$|\.test\.[cm]?js$)", name))


def _anchor(runner: str, paths: Sequence[str], command: str,
            protected: Sequence[str]) -> str:
    """The directory next to the tests the command runs: a protected test file's, else a
    path the command names, else the first test file's; else the root ("")."""
    for path in protected:
        if _is_test_file(runner, path) and path in paths:
            return posixpath.dirname(path)
    dirs = {posixpath.dirname(p) for p in paths}
    for word in shell.arguments(command):
        word = word.removeprefix("./").rstrip("/").removesuffix("/...")
        if word in paths and _is_test_file(runner, word):
            return posixpath.dirname(word)
        if word and word in dirs and any(_is_test_file(runner, p) for p in paths
                                         if p.startswith(word + "/")):
            return word
    tests = sorted(p for p in paths if _is_test_file(runner, p))
    return posixpath.dirname(tests[0]) if tests else ""


def _join(anchor: str, name: str) -> str:
    return posixpath.join(anchor, name) if anchor else name


def _pytest(token: str, anchor: str) -> Canary:
    # Not named like a test module: only the observer's plugin collects it (never an
    # argument: in pytest 8.0-8.3 a file argument inside a directory argument replaces the
    # directory). The must-fail one is a strict xfail: it fails as planted without
    # changing the exit status, and the observer tells that from "did not run".
    path = _join(anchor, f"bakeoff_{token}.py")
    passing, failing = f"test_{token}_pass", f"test_{token}_fail"
    content = ("import pytest\n\n\n"
               f"def {passing}():\n    assert True\n\n\n"
               "@pytest.mark.xfail(strict=True, reason='bakeoff canary: must fail')\n"
               f"def {failing}():\n    assert False\n")
    return Canary("pytest", token, path, content.encode(), passing, failing, Seen.XFAILED)


def browser(token: str) -> Canary:
    """A browser criterion's canaries: a pytest file of the rig's beside the criterion in
    the browser's container (nothing of the arm's runs there but the page), one test that
    must pass and one that must fail, read from pytest's verbose lines (`runner` "browser":
    no observer in that container)."""
    passing, failing = f"test_{token}_pass", f"test_{token}_fail"
    content = (f"def {passing}():\n    assert True\n\n\n"
               f"def {failing}():\n    assert False, 'bakeoff canary: must fail'\n")
    return Canary("browser", token, f"test_{token}.py", content.encode(), passing, failing)
