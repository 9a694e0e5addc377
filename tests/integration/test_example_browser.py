"""examples/horizon-ui by hand (issue 22, phase 1): each scripted contestant's tree, its
server started fresh with its own Postgres database on an internal network, and the
example's browser criterion run against it in the browser's container. What phase 2's
verdicts will read is pinned here: pytest's outcome, and `expect_requests` decided on the
plugin's records (`rig.real_path`). One sample each (phase 2 runs three through `score`).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rig import real_path
from rig.parsers import get_parser
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.sample_network import SampleNetworks
from tests.integration.browser_lab import BASE_URL, PORT, App, BrowserLab, browser_lab
from tests.unit.test_example_browser import EXAMPLE, contestant_tree

EXPECT = {"cap-ui": ["POST /api/horizon"],
          "passkeys": ["POST /api/passkeys/register/finish", "POST /api/passkeys/login/finish"]}
CRITERION = {"cap-ui": "test_cap.py", "passkeys": "test_passkeys.py"}


@dataclass(frozen=True)
class Outcome:
    summary: str             # pytest's, without its time
    real_path: tuple[bool, ...]  # each expectation met


# change, arm ("base": the untouched repo) -> what its one sample comes to.
EXPECTED = {
    ("cap-ui", "base"): Outcome("1 failed, 2 passed", (True,)),
    ("cap-ui", "control"): Outcome("1 failed, 2 passed", (True,)),
    ("cap-ui", "fixer"): Outcome("3 passed", (True,)),
    ("cap-ui", "skipper"): Outcome("3 passed", (True,)),
    ("cap-ui", "client-only"): Outcome("3 passed", (False,)),   # not_real_path
    ("cap-ui", "breaker"): Outcome("3 failed", (False,)),
    ("passkeys", "base"): Outcome("2 failed", (False, False)),
    ("passkeys", "fixer"): Outcome("2 passed", (True, True)),
    ("passkeys", "skipper"): Outcome("1 failed, 1 passed", (True, True)),
    ("passkeys", "client-only"): Outcome("1 failed, 1 passed", (False, False)),
    ("passkeys", "breaker"): Outcome("2 failed", (False, False)),
}


@pytest.fixture(scope="module")
def lab(engine: Engine, built_images: dict[str, BuiltImage], browser_image: BuiltImage,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserLab]:
    with browser_lab(engine, built_images["python"], browser_image,
                     tmp_path_factory.mktemp("example")) as found:
        yield found


@pytest.fixture(scope="module")
def databases(engine: Engine, built_images: dict[str, BuiltImage],
              lab: BrowserLab) -> Iterator[SampleNetworks]:
    """The samples' Postgres and internal network, as `score` makes them."""
    networks = SampleNetworks(engine, lab.experiment, "r1", built_images["postgres"])
    networks.start()
    yield networks
    networks.detach()


@pytest.mark.parametrize(("change", "arm"), sorted(EXPECTED))
def test_each_contestant_comes_to_its_exact_outcome(
        change: str, arm: str, lab: BrowserLab, databases: SampleNetworks,
        tmp_path: Path) -> None:
    files = contestant_tree(change, None if arm == "base" else arm, tmp_path)
    shutil.rmtree(files / ".git")
    criterion = (EXAMPLE / "ui" / CRITERION[change]).read_text()
    with databases.fresh_database() as schema:
        assert schema is not None
        app = App(files, ("python3", "-m", "horizonui", "--port", str(PORT)),
                  {"DATABASE_URL": schema.url(), "PYTHONDONTWRITEBYTECODE": "1"},
                  network=databases.network("A"), health="/healthz")
        run = lab.run({CRITERION[change]: criterion}, CRITERION[change], app=app)
    parsed = get_parser("pytest").parse(run.log)
    assert parsed.summaries == 1, run.log
    found = real_path.check([real_path.parse_expectation(e) for e in EXPECT[change]],
                            run.requests(), BASE_URL)
    outcome = Outcome(re.sub(r" in [\d.]+s.*", "", run.log.strip().splitlines()[-1]),
                      tuple(f.met for f in found))
    assert outcome == EXPECTED[(change, arm)], (run.log, [f.detail for f in found],
                                                run.app_log[-2000:])
    assert run.exit_code == (0 if outcome.summary.endswith("passed")
                             and "failed" not in outcome.summary else 1)
    assert run.artifacts()["trace"]["file"] == "trace.zip"
