"""`make test`'s two workers start the longest integration modules first (issue 35 item 5):
xdist's default queue (`--loadscope-reorder`) puts the modules with the fewest tests
last, and the longest here hold one to five tests, so a long one could start late. These
pin the order and what keeps it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.integration.longest import LONGEST_FIRST, rank

ROOT = Path(__file__).resolve().parents[2]
INTEGRATION = ROOT / "tests" / "integration"


def test_every_listed_module_exists_and_the_list_is_longest_first() -> None:
    missing = [name for name in LONGEST_FIRST if not (INTEGRATION / name).is_file()]
    assert not missing, f"tests/integration/longest.py lists modules that are gone: {missing}"
    seconds = list(LONGEST_FIRST.values())
    assert seconds == sorted(seconds, reverse=True), "LONGEST_FIRST: longest first"


def test_a_listed_module_ranks_at_its_place_and_every_other_file_after() -> None:
    first, second = list(LONGEST_FIRST)[:2]
    assert rank(f"{INTEGRATION}/{first}") == 0 and rank(f"{INTEGRATION}/{second}") == 1
    assert rank(f"{INTEGRATION}/test_oracle.py") == len(LONGEST_FIRST)
    # A unit module of the same name is not the integration module.
    assert rank(f"{ROOT}/tests/unit/{first}") == len(LONGEST_FIRST)


def test_make_test_keeps_the_collection_s_order_across_its_workers() -> None:
    workers = re.search(r"^WORKERS :?= (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert workers is not None
    assert "--dist loadfile" in workers.group(1)
    assert "--no-loadscope-reorder" in workers.group(1)
