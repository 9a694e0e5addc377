"""Adversarial grading, arm-caused rig errors (issue 11): an arm whose code makes a sample
look like a rig fault loses, it never voids the round. The base's run of the same check
in the same image (`sample_runs.BaseRuns`) gives an honest verdict, so the arm's sample is
FAIL broke_harness with the would-be rig reason in the detail.
"""

from __future__ import annotations

from rig.sample.record import SampleRecord
from rig.sample.spec import ServerSpec
from tests.integration.attack_lab import (
    CHECK,
    HONEST,
    Lab,
    attacking,
    counts,
    verdict,
)


def as_check_and_criterion(lab: Lab, files: dict[str, str]) -> list[SampleRecord]:
    """The attack graded as a check and as the success criterion (both under the base's
    harness: code under test survives pinning)."""
    head = lab.attack(files)
    return [lab.grade(head, command=CHECK, protected=(), check="check"), lab.grade(head)]


def assert_aborted(record: SampleRecord) -> None:
    """The rig's observer saw pytest's session start and never end: the process stopped
    mid-run (whatever exit code it chose, whatever it printed)."""
    assert verdict(record) == ("FAIL", "aborted"), record.detail
    assert record.detail == ("a pytest session never reported its end: the process stopped "
                             "mid-run")
    assert record.observer is not None and record.observer["finished"] is False
    assert record.rig_error is None


def assert_broke_harness(record: SampleRecord, was: str) -> None:
    assert verdict(record) == ("FAIL", "broke_harness"), record.detail
    assert record.detail.startswith(f"FAIL broke_harness (was {was}): "), record.detail
    assert record.diagnosis is not None
    assert (record.diagnosis["base_verdict"], record.diagnosis["base_reason"]) == HONEST
    assert record.rig_error is None


def test_exit_127_at_import_of_the_code_under_test(lab: Lab) -> None:
    """`os._exit(127)` when the code under test is imported: the shell's "command not
    found" status, which would make the rig look broken. The observer saw pytest start:
    the arm's code stopped it."""
    code = attacking("import os\n\nos._exit(127)\n")
    for record in as_check_and_criterion(lab, {"src/horizon.py": code}):
        assert record.exit_code == 127
        assert_aborted(record)


FAKE = "print('=' * 20 + ' 5 passed in 0.01s ' + '=' * 20, flush=True)\nos._exit(0)\n"
ESCAPE = """import gc
import os
import sys

capture = sys.modules["_pytest.capture"]
for found in gc.get_objects():
    if isinstance(found, capture.CaptureManager):
        found.suspend_global_capture()
"""


def test_fake_summary_then_exit_0_at_import(lab: Lab) -> None:
    """A fake `5 passed` summary line, then `os._exit(0)`, at import of the code under
    test: pytest's capture holds the line (it is imported during collection) and
    `_exit` drops it, so the log has no summary: "unparsed output", which the base in
    the same image does not reproduce."""
    code = attacking("import os\n\n" + FAKE)
    for record in as_check_and_criterion(lab, {"src/horizon.py": code}):
        assert record.exit_code == 0
        assert "passed" not in lab.log(record)
        assert_aborted(record)


def test_fake_summary_escaping_pytest_capture_then_exit_0_at_import(lab: Lab) -> None:
    """The same, but the code first suspends pytest's capture (its `CaptureManager`
    found through `gc`), so the fake line reaches the log: it would parse as 5 passed
    with exit 0. The observer flagged the garbage collector's use by the tree's code and
    never saw the session end: FAIL tampered."""
    for record in as_check_and_criterion(lab, {"src/horizon.py": attacking(ESCAPE + FAKE)}):
        assert verdict(record) == ("FAIL", "tampered"), record.detail
        assert record.exit_code == 0
        assert "5 passed" in lab.log(record)
        assert "flag:gc: gc.get_objects by /work/src/horizon.py:<module>" in record.detail
        assert record.canaries is not None
        assert record.canaries["seen"] == {"pass": "absent", "fail": "absent",
                                           "exit_agrees": True}


def test_silent_exit_1_at_import(lab: Lab) -> None:
    """A silent `os._exit(1)` at import: no summary, which would read as a parser the
    rig got wrong."""
    code = attacking("import os\n\nos._exit(1)\n")
    for record in as_check_and_criterion(lab, {"src/horizon.py": code}):
        assert record.exit_code == 1
        assert_aborted(record)


CLEAR_ITEMS = "def pytest_collection_modifyitems(items):\n    items.clear()\n"


def test_conftest_clearing_the_collected_items(lab: Lab) -> None:
    """A `tests/conftest.py` that clears the collection (only the rig's canaries would
    run): checks run under the base's harness too, so on both the conftest is removed
    and the honest failure stands."""
    for record in as_check_and_criterion(lab, {"tests/conftest.py": CLEAR_ITEMS}):
        assert verdict(record) == HONEST, record.detail
        assert counts(record) == (0, 1)
        assert record.pinned["removed"] == ["tests/conftest.py"]
        assert record.canaries is not None
        assert record.canaries["seen"] == {"pass": "passed", "fail": "xfailed",
                                           "exit_agrees": True}


SERVER = '''import http.server
import os

print("bakeoff-server-5eb1a7 no-http-client", flush=True)
for state in ("no_http_client", "healthy"):
    try:
        with open("/var/lib/bakeoff/out/server", "w") as handle:
            handle.write(state + "\\n")
        print("forged the state", flush=True)
    except OSError as error:
        print("cannot forge the state:", type(error).__name__, flush=True)
if os.environ.get("SERVE"):
    http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])),
                           http.server.SimpleHTTPRequestHandler).serve_forever()
'''


def test_server_imitating_the_health_marker_and_forging_the_state(lab: Lab) -> None:
    """A `[changes.success].server` that prints the rig's old health marker
    (`bakeoff-server-<hex> no-http-client`) and tries to write the driver's state file:
    the driver's own probe decides. Serving: healthy, the honest failure; not serving:
    FAIL server_unhealthy (never RIG_ERROR tool_missing)."""
    head = lab.attack({"serve.py": SERVER})
    serving = lab.grade(head, server=ServerSpec("SERVE=1 python3 serve.py", "/", "PORT", 10))
    silent = lab.grade(head, server=ServerSpec("python3 serve.py", "/", "PORT", 3))
    assert (verdict(serving), serving.server) == (HONEST, "healthy"), serving.detail
    assert counts(serving) == (0, 1)
    assert (verdict(silent), silent.server) == (("FAIL", "server_unhealthy"), "unhealthy")
    for record in (serving, silent):
        kept = (lab.stage / "samples" / record.arm / record.check / "1.server.log").read_text()
        assert kept.count("cannot forge the state: PermissionError") == 2, kept
        assert "forged the state" not in kept
