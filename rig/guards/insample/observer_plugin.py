"""bakeoff-sandbox's pytest plugin (written by the rig; PYTEST_DONT_REWRITE).

It holds no secret and decides nothing: it tells the rig's audit hook (`sitecustomize`)
what pytest does, through `sys.audit("bakeoff.*", ...)` events the hook accepts only from
this file's own code (verified by its sha256 when it was compiled). It calls each plain
test function itself, so the hook sees the call start and whether it returned; adds the
rig's canaries to the collection; keeps pytest from reading cached bytecode of a test; and
imports the pinned files (protected tests, the base's conftests, the canaries) without
assertion rewriting, so the hook can check their code against the pinned bytes.
"""

import inspect
import json
import os
import pathlib
import sys

import pytest

_CONFIG = "/bakeoff/in/observe/config.json"
try:
    with open(_CONFIG, "rb") as _handle:
        _SETTINGS = json.loads(_handle.read().decode("utf-8"))
except (OSError, ValueError):
    _SETTINGS = {}
_PLAIN = frozenset(p for p in _SETTINGS.get("pinned", {}) if p.endswith(".py"))
_CANARY = _SETTINGS.get("canary_path")
# Set by the run's own session once it collected: a pytest that a test starts in a
# child process (pytester, a plugin's self-test) inherits it and collects no canary, so its
# output is what a bare run prints (its session is read as nested in that test). Whether
# it was inherited is read at configure, before any code of the tree runs.
_OUTER = "BAKEOFF_OUTER_SESSION"
_NESTED = []
_WORKER = []


def _no_bytecode_from_disk():
    """pytest rewrites every test module from its source, never from a cached pyc."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return None
    if hasattr(rewrite, "_read_pyc"):
        rewrite._read_pyc = lambda *args, **kwargs: None
    hook = getattr(rewrite, "AssertionRewritingHook", None)
    original = getattr(hook, "_should_rewrite", None)
    if original is None:
        return None

    def _should_rewrite(self, name, fn, state):
        if str(fn) in _PLAIN:  # imported as it is: its code is checked against its bytes
            return False
        return original(self, name, fn, state)

    hook._should_rewrite = _should_rewrite
    return None


_no_bytecode_from_disk()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    worker = hasattr(config, "workerinput")
    if worker:
        _WORKER.append(True)
    if _OUTER in os.environ:
        _NESTED.append(True)
    sys.audit("bakeoff.session", {"pytest": pytest.__version__, "worker": worker,
                                  "argv": [str(a)[:300] for a in sys.argv[:50]]})
    inipath = getattr(config, "inipath", None)
    plugins = sorted({str(name) for name, _ in config.pluginmanager.list_name_plugin()
                      if name and not str(name).isdigit()})
    sys.audit("bakeoff.config", {"inipath": None if inipath is None else str(inipath),
                                 "rootdir": str(config.rootpath),
                                 "plugins": plugins},
              [(str(name), _source(plugin))
               for name, plugin in config.pluginmanager.list_name_plugin()])


def _source(plugin):
    """The file a plugin's code comes from (a module's, or its class's module's)."""
    found = getattr(plugin, "__file__", None)
    if found is None:
        module = sys.modules.get(getattr(type(plugin), "__module__", ""), None)
        found = getattr(module, "__file__", None)
    return None if found is None else str(found)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """The canaries join whatever the command collected, after its own selection."""
    seen = set()
    for item in list(items):
        if item.nodeid in seen:
            items.remove(item)
        seen.add(item.nodeid)
    if _CANARY and not _NESTED:
        module = pytest.Module.from_parent(session, path=pathlib.Path(_CANARY))
        items.extend(item for item in module.collect() if item.nodeid not in seen)
    os.environ.setdefault(_OUTER, str(os.getpid()))
    sys.audit("bakeoff.collected", tuple(items))


def pytest_collectreport(report):
    if report.outcome != "passed":
        sys.audit("bakeoff.collectreport", report.nodeid, report.outcome)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Call a plain test function as pytest's own implementation does, between the two
    events the hook attests it by; anything else (a coroutine, a wrapper some plugin
    runs) is left to pytest and its plugins, and said to be unattested."""
    testfunction = pyfuncitem.obj
    if (inspect.iscoroutinefunction(testfunction) or inspect.isasyncgenfunction(testfunction)
            or not (inspect.isfunction(testfunction) or inspect.ismethod(testfunction))):
        sys.audit("bakeoff.unattested", pyfuncitem.nodeid, "not a plain function")
        return None
    funcargs = pyfuncitem.funcargs
    testargs = {arg: funcargs[arg] for arg in pyfuncitem._fixtureinfo.argnames}
    sys.audit("bakeoff.start", pyfuncitem, testfunction)
    returned = False
    try:
        result = testfunction(**testargs)
        returned = True
    finally:
        sys.audit("bakeoff.end", pyfuncitem, returned)
    if hasattr(result, "__await__") or hasattr(result, "__aiter__"):
        pytest.fail(f"{pyfuncitem.nodeid} returned an awaitable: async tests need a plugin")
    return True


def pytest_runtest_logreport(report):
    """The call's report always; setup's and teardown's when they did not pass."""
    if report.when == "call" or report.outcome != "passed":
        sys.audit("bakeoff.report", report.nodeid, report.when, report.outcome,
                  hasattr(report, "wasxfail"))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    sys.audit("bakeoff.finish", int(exitstatus))
