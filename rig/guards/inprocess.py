"""Canaries for the runners read from their output lines (node --test, go test, cargo),
planted where the protected tests run: in their own process or binary (class 4). This
module plants node's and the JS runners'; go's and cargo's binaries are
`rig.guards.binaries`'s.

Each sample gets, besides a canary file of its own (a separate process or binary: it
proves the runner ran and reported the rig's tests at all):

- node --test: a preload (`NODE_OPTIONS=--require`, a root-owned file of the rig's in the
  tree) that acts only in the process whose main module is a protected test file. There
  it registers, before the file's own tests, a must-fail TWIN of each protected test,
  with the same name, and after them a must-pass sentinel. A rewrite of the protected
  test's result by name (TAP text or the child's serialized events) hits its twin too,
  and the twin cannot pass; an early exit after a forged report loses the sentinel. The
  rig tells a twin from the real test by its `location` (the preload's path), or, when
  the reporter prints none, as the first of that name (it runs first).
- go test: a TestMain (unless the protected package has its own) that runs the tests
  and then prints one test line of its own, PASS or FAIL as `m.Run()` returned, under a
  per-sample name derived from a protected test's. The binary's status is the testing
  package's own bookkeeping, not its output: a forged `--- PASS` over a failure leaves
  the sentinel reading FAIL (or the binary failing), an early `os.Exit(0)` leaves no
  sentinel at all. No must-fail canary goes into a protected package's binary (its
  failure would explain the binary's failing status and hide a forged line): the
  canary file is a package of its own, beside the protected one, in a package the
  command builds (`rig.guards.gopackages`; see `rig.guards.binaries.go`).
- cargo: each protected integration test (`tests/NAME.rs`) is built from a rig root,
  `[[test]] name = NAME` in the pinned Cargo.toml, that `include!`s the protected file
  (so its tests keep their names and `crate::` paths) beside must-fail twins (with
  `--no-fail-fast`) and a must-pass sentinel: one binary, one `running N tests` header
  that counts them all. A forged `test result:` line with the base's numbers no longer
  adds up; a forged pass of every listed test passes the twins. Under terse output
  (`-q`) the twins are read from libtest's `failures:` list, and no sentinel is planted
  where twins are (see `rig.guards.binaries.cargo`).

No name holds "bakeoff": the names are the protected tests' own plus a per-sample
suffix (hex of the sample's secret token). What an attacker in the test's process still
needs is in docs/threat-model.md (class 4): to find the rig's canaries among its own
tests (the preload named by NODE_OPTIONS, a test in the binary the base does not have)
and spare them, or to forge the testing package's own status in step with its output.
Pure: planning needs the tree's paths and the text of a few files, never docker.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Mapping, Sequence

from rig.guards import js_selection
from rig.guards.canary import Canary

WORK = "/work"  # the sample's tree root (runner.containers.sandbox.WORKDIR)
MAX_TWINS = 50  # per sample: a protected suite of thousands gets this many twins
# The sample's env per runner, whatever is planted: go lists every test only with -v
# (the success criterion reads protected tests by id); a command's own GOFLAGS wins.
RUNNER_ENV = {"go-test": {"GOFLAGS": "-v"}}


def runner_env(parser: str) -> dict[str, str]:
    return dict(RUNNER_ENV.get(parser, {}))


def sources_needed(runner: str, paths: Sequence[str], protected: Sequence[str]) -> list[str]:
    """The files whose text a plan reads: the protected test files, the runner's
    manifests, the test files beside a protected Go test (for a TestMain)."""
    found = {p for p in protected if p in paths and _is_source(runner, p)}
    if runner == "cargo":
        found |= {p for p in paths if posixpath.basename(p) == "Cargo.toml"}
    if runner == "go-test":
        dirs = {posixpath.dirname(p) for p in found}
        found |= {p for p in paths if p.endswith("_test.go") and posixpath.dirname(p) in dirs}
        found |= {p for p in paths if posixpath.basename(p) == "go.mod"}
        found |= set(_go_clauses(paths))
    if runner == "node-test":  # an `npm test` script names what runs; maybe helpers
        found |= {p for p in paths if posixpath.basename(p) == "package.json"
                  and "node_modules" not in p.split("/")}
    if runner in ("vitest", "jest"):
        found |= {p for p in paths if _JS_CONFIG.match(posixpath.basename(p))}
        found |= set(sorted(p for p in paths if _JS_TEST.search(p))[:1])
    return sorted(found)


def _go_clauses(paths: Sequence[str]) -> list[str]:
    """One Go file per directory (a non-test one first): the package a canary file
    there declares."""
    first: dict[str, list[str]] = {}
    for path in sorted(paths, key=lambda p: (p.endswith("_test.go"), p)):
        if path.endswith(".go"):
            here = first.setdefault(posixpath.dirname(path), [])
            if len(here) < 3:  # a generator behind `//go:build ignore` may come first
                here.append(path)
    return [p for here in first.values() for p in here]


def _is_source(runner: str, path: str) -> bool:
    if runner == "go-test":
        return path.endswith("_test.go")
    if runner == "cargo":
        return path.endswith(".rs")
    return path.endswith((".js", ".cjs", ".mjs", ".ts", ".mts", ".cts", ".jsx", ".tsx"))


def suffix(token: str, label: str) -> str:
    """A per-sample suffix: hex that only the rig's token gives."""
    return hashlib.sha256(f"{token}:{label}".encode()).hexdigest()[:6]


def join(anchor: str, name: str) -> str:
    """`name` in the directory `anchor` ("": the tree's root)."""
    return posixpath.join(anchor, name) if anchor else name


# -- node --test ---------------------------------------------------------------------------

_NODE_TEST = re.compile(r"""(?<![\w$.])(?:t\.|[\w$]+\.)?(?:test|it)\s*\(\s*(["'])"""
                        r"""((?:\\.|(?!\1)[^\\\n]){1,300})\1""")


def node_names(text: str) -> list[str]:
    """The literal names a node test file gives its tests (`test('x'`, `it("x"`,
    `t.test('x'`); `.skip`/`.todo` calls are not tests that run."""
    found: list[str] = []
    for match in _NODE_TEST.finditer(text):
        head = text[max(0, match.start() - 6):match.start() + 12]
        if ".skip" in head or ".todo" in head:
            continue
        name = re.sub(r"\\(.)", r"\1", match.group(2))
        if name not in found:
            found.append(name)
    return found


def node(token: str, anchor: str, paths: Sequence[str], command: str,
          protected: Sequence[str], text_of: Mapping[str, str], failing: bool
          ) -> Canary | None:
    """Twins and a sentinel in the process of each protected file the command runs, and a
    canary file only where the command's files, directories or globs pick it up; names
    its name filters would drop are not planted. None: nothing can be planted where the
    command goes (the record says the run is unguarded)."""
    selection = js_selection.read("node-test", command, text_of)
    if selection is None or selection.direct or any(
            r not in _NODE_REPORTERS for r in selection.printed()):
        return None  # `node FILE` (no runner): the preload's hold would lose its summary
    files = [p for p in protected if p in paths and _is_source("node-test", p)
             and js_selection.runs_file(selection, p)]
    given = {p: node_names(text_of.get(p, ""))[:MAX_TWINS] for p in files}
    kept = {n: js_selection.keeps_name(selection, n) for p in files for n in given[p]}
    if None in kept.values():
        return None
    names = {p: [n for n in given[p] if kept[n]] for p in files}
    every = list(dict.fromkeys(n for p in files for n in names[p]))
    first = (every or [n for p in files for n in given[p]] or ["works"])[0]
    stem = posixpath.basename(files[0]).split(".", 1)[0] if files else "t"
    passing, failing_name = f"{first} ({suffix(token, 'pass')})", \
        f"{first} ({suffix(token, 'fail')})"
    path = join(anchor, f"{stem}.{suffix(token, 'file')}.test.cjs")
    if not (js_selection.runs_file(selection, path)
            and js_selection.keeps_name(selection, passing)
            and (not failing or js_selection.keeps_name(selection, failing_name))):
        path, passing = "", ""  # the command never runs a file of the rig's
    content = ("'use strict';\nconst test = require('node:test');\n\n"
               f"test({json.dumps(passing)}, () => {{}});\n")
    if failing:
        content += (f"\ntest({json.dumps(failing_name)}, () => {{\n"
                    "  require('node:assert').strictEqual(1, 2);\n});\n")
    fail_name = failing_name if failing and path else None
    helpers = _node_helpers(selection, [p for p in paths if p not in files])
    preload = f".{suffix(token, 'preload')}.cjs"  # at the root: no runner collects it
    env = (("NODE_OPTIONS", f"--require {WORK}/{preload}"),)
    if not files:
        loads = ((preload, _preload({}, (), token, helpers)),) if helpers else ()
        return Canary("node-test", token, path, content.encode(), passing, fail_name,
                      files=loads, env=env if loads else (),
                      helpers=helpers) if path else None
    sentinel = f"{first} ({suffix(token, 'sentinel')})"
    sentinels = (sentinel,) if js_selection.keeps_name(selection, sentinel) else ()
    if not (path or sentinels or (failing and every)):
        return None
    twins = {f"{WORK}/{p}": (names[p] if failing else []) for p in files}
    return Canary("node-test", token, path, content.encode() if path else b"", passing,
                  fail_name, twins=tuple(every) if failing else (), sentinels=sentinels,
                  files=((preload, _preload(twins, sentinels, token, helpers)),),
                  env=env, marker=f"{WORK}/{preload}", helpers=helpers)


# The reporters whose per-test lines rig.parsers.node_test reads (the canaries' too).
_NODE_REPORTERS = ("tap", "spec")
MAX_HELPERS = 1000  # files named in the preload's plan; beyond them a helper reads aborted


def _node_candidates(paths: Sequence[str]) -> list[str]:
    """JavaScript files node may run that are not named as tests (maybe helpers; a glob
    may pick any), those under a `test` directory first."""
    found = [p for p in paths if p.endswith((".js", ".cjs", ".mjs"))
             and "node_modules" not in p.split("/")
             and not js_selection.node_default(posixpath.basename(p))]
    return sorted(found, key=lambda p: (not js_selection.node_default(p), p))


def _node_helpers(selection: js_selection.Selection, paths: Sequence[str]) -> tuple[str, ...]:
    """The files the command runs that are not named as tests (maybe helpers), as node
    names them: absolute (node 18) and relative to its working directory (node 20 and
    later). Whether one registered a test is the run's to say, not its text's: the
    preload makes node report one that registered tests and ended before reporting
    them as failed (`_preload`)."""
    found: list[str] = []
    for path in _node_candidates(paths)[:MAX_HELPERS]:
        if js_selection.runs_file(selection, path):
            relative = path[len(selection.cwd) + 1:] if selection.cwd else path
            found += [f"{WORK}/{path}", relative]
    return tuple(found)


def _preload(twins: Mapping[str, list[str]], sentinels: Sequence[str], token: str,
             helpers: Sequence[str] = ()) -> bytes:
    """The preload: twins first in a protected file's process, the sentinel after its
    tests. The runner's own beforeExit handler (added when the twins create its root) is
    held back until the sentinel, registered at the first beforeExit (every test of the
    file done, an ES module's too), has run; an exit before that loses the sentinel.
    Without twins (no must-fail canary) the sentinel goes in once the main module's top
    level has run (setImmediate). Never in `node --test FILE`'s own process (its argv[1]
    is the file too): only in the child that runs it. Without a sentinel (a name filter
    drops it) the runner's handlers go back in place at once. In a helper's process
    (`_HELPER`), a file that registered tests and ended before its loop ran dry exits 1."""
    a = int(suffix(token, "a"), 16)
    config = json.dumps({"files": twins, "sentinel": sentinels[0] if sentinels else None,
                         "a": a, "b": a + 1,
                         "helpers": [h for h in helpers if h.startswith(f"{WORK}/")]})
    return (f"'use strict';\nconst plan = {config};\n"
            "const main = process.argv[1] ? require('path').resolve(process.argv[1]) : '';\n"
            + _HELPER +
            "if (Object.prototype.hasOwnProperty.call(plan.files, main)\n"
            "    && !process.execArgv.includes('--test')) {  // not the runner's parent\n"
            "  const test = require('node:test');\n"
            "  const assert = require('node:assert');\n"
            "  const names = plan.files[main];\n"
            "  const held = [];\n"
            "  const on = process.on;\n"
            "  process.on = function (event, listener) {\n"
            "    if (event === 'beforeExit') { held.push(listener); return this; }\n"
            "    return on.apply(this, arguments);\n"
            "  };\n"
            "  try {\n"
            "    for (const name of names) {\n"
            "      test(name, () => { assert.strictEqual(plan.a, plan.b); });\n"
            "    }\n"
            "  } finally { process.on = on; }\n"
            "  if (plan.sentinel === null) {\n"
            "    for (const l of held) on.call(process, 'beforeExit', l);\n"
            "  } else if (names.length === 0) {\n"
            "    setImmediate(() => { test(plan.sentinel, () => {}); });\n"
            "  } else {\n"
            "    let stage = 0;\n"
            "    on.call(process, 'beforeExit', (...args) => {\n"
            "      if (stage === 0) { stage = 1; test(plan.sentinel, () => {}); return; }\n"
            "      if (stage === 1) { stage = 2; for (const l of held) l.apply(process, args); }\n"
            "    });\n"
            "  }\n"
            "}\n").encode()


# A helper's process: node reports a file that registers no test as one passing test, and
# so it reports a file that registered tests and ended (process.exit) before reporting
# them. The runner's root adds its beforeExit handler when a test registers; a process
# that ends before its loop ran dry (beforeExit) with one registered exits 1, which node
# reports as the file failing.
_HELPER = (
    "if (plan.helpers.includes(main) && !process.execArgv.includes('--test')) {\n"
    "  const on = process.on;\n"
    "  let registered = false;\n"
    "  let settled = false;\n"
    "  on.call(process, 'beforeExit', () => { settled = true; });\n"
    "  process.on = function (event) {\n"
    "    if (event === 'beforeExit') registered = true;\n"
    "    return on.apply(this, arguments);\n"
    "  };\n"
    "  on.call(process, 'exit', () => { if (registered && !settled) process.exitCode = 1; });\n"
    "}\n")


# -- vitest and jest ---------------------------------------------------------------------

_JS_TEST = re.compile(r"[-_.](?:test|spec)\.[cm]?[jt]sx?$")
_JS_CONFIG = re.compile(r"^(?:vitest|vite|jest)\.config\.[cm]?[jt]s$|^package\.json$")
_BAIL = re.compile(r"\bbail\b")


def js_runner(runner: str, token: str, anchor: str, paths: Sequence[str], command: str,
               protected: Sequence[str], text_of: Mapping[str, str],
               failing: bool) -> Canary | None:
    """A must-fail test in a file of the runner's own naming beside a protected test (a
    filter a configuration or code applies to the protected tests' names drops it too).
    vitest and jest list only failures when several files run, so a passing canary
    cannot be read back: there is none. A configuration or command that bails on the
    first failure would let the canary stop the run: then none is planted."""
    tests = [p for p in protected if p in paths and _JS_TEST.search(p)] or \
        sorted(p for p in paths if _JS_TEST.search(p) and posixpath.dirname(p) == anchor) or \
        sorted(p for p in paths if _JS_TEST.search(p))
    configs = [p for p in paths if _JS_CONFIG.match(posixpath.basename(p))]
    if not tests or not failing or _BAIL.search(command) or any(
            _BAIL.search(text_of.get(p, "")) for p in configs):
        return None
    model = tests[0]
    source = text_of.get(model, "")
    first = (node_names(source) or ["works"])[0]
    name = f"{first} ({suffix(token, 'fail')})"
    stem, _, rest = posixpath.basename(model).partition(".")
    path = join(posixpath.dirname(model), f"{stem}-{suffix(token, 'file')}.{rest}")
    head = _js_import(runner, source)
    body = (f"{head}test({json.dumps(name)}, () => {{\n"
            "  throw new Error('expected 1, got 2');\n});\n")
    listing: dict[str, object] = {}
    preload = f".{suffix(token, 'preload')}.cjs"  # at the root: no runner collects it
    if runner == "vitest":  # every test by id, passed ones too (the success criterion's)
        listing = {"files": ((preload, VITEST_VERBOSE),),
                   "env": (("NODE_OPTIONS", f"--require {WORK}/{preload}"),)}
    selection = js_selection.read(runner, command, text_of)
    if selection is not None and not (js_selection.runs_file(selection, path)
                                      and js_selection.keeps_name(selection, name)):
        # The command's files or name filter leave a file of the rig's out: none is
        # planted (vitest still lists every test).
        if runner != "vitest":
            return None
        return Canary(runner, token, "", b"", "", None, files=((preload, VITEST_VERBOSE),),
                      env=(("NODE_OPTIONS", f"--require {WORK}/{preload}"),))
    return Canary(runner, token, path, body.encode(), "", name, notes=(
        f"{runner} lists no passing test: only a must-fail canary, in a process of its "
        "own (a filter that spares its name, or code that forces only the protected "
        "tests, goes unseen outside the success criterion's check by id)",),
        **listing)  # type: ignore[arg-type]


# vitest's default reporter collapses a file whose tests all passed into one line: the
# rig reads the protected tests by id, so the vitest CLI (and only it: not its workers,
# not npm or tsc) lists every test, as `--reporter=verbose` does, unless the command
# names a reporter of its own (then what it lists is what the base's listed too).
VITEST_VERBOSE = rb"""'use strict';
(function () {
  const argv = process.argv;
  if (!/(^|[\/])vitest(\.mjs)?$/.test(String(argv[1] || ''))) return;
  const args = argv.slice(2);
  if (args.some((a) => a === '--reporter' || a.startsWith('--reporter='))) return;
  const sub = args.find((a) => !a.startsWith('-'));
  if (['bench', 'init', 'list'].includes(sub)) return;
  argv.push('--reporter=verbose');
})();
"""


def _js_import(runner: str, source: str) -> str:
    """How the model test file gets `test`: the same import, else the globals."""
    module = "vitest" if runner == "vitest" else "@jest/globals"
    if re.search(rf"""from\s+["']{re.escape(module)}["']""", source):
        return f"import {{ test }} from '{module}';\n\n"
    if re.search(rf"""require\(\s*["']{re.escape(module)}["']\s*\)""", source):
        return f"const {{ test }} = require('{module}');\n\n"
    return ""
