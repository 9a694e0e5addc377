"""Every parser is linear-time, whatever the code under test prints (issue 11, limits).

Regression: one line of `a::` x 34,000 (100 KB) took 23 s in the pytest parser (the
verbose regex `\\S+::.+?` before a status is quadratic). The inputs here are written in
the test, not captured: 1 MB adversarial lines, each parsed by EVERY parser in under a
second (a generous bound for linear work on 1 MB; a quadratic parser takes minutes), and
a 20 MB ordinary log per format in well under 10 s. The bounds are properties of the
algorithms, not benchmarks. Also here: a capped log (head, the rig's truncation marker,
tail) still parses to the summary in its tail.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rig.parsers import PARSERS, get_parser
from rig.parsers.base import QUALIFIER_MAX, Counts, ParseResult

FIXTURES = Path(__file__).parent / "parsers" / "fixtures"
MB = 1_000_000
LINE_LIMIT_S = 1.0
LOG_LIMIT_S = 10.0
# 100,000 test lines above a 1 MB name: linear work is ~0.5 s here, the quadratic copy
# each bound stops is 100 GB (minutes, and the id-length assertion fails at once).
MANY_TESTS_LIMIT_S = 5.0


def _nested_json(depth: int) -> str:
    return '{"Action":' * depth + '"pass"' + "}" * depth


ADVERSARIAL: dict[str, str] = {
    "a:: repeated (the 23 s incident, 10x longer)": "a::" * (MB // 3),
    "x and a space repeated": "x " * (MB // 2),
    "test result: prefix then 1 MB of digits": "test result: ok. " + "1" * MB,
    "test result: with a 5,000-digit count": (
        "test result: ok. " + "9" * 5000 + " passed; 0 failed; 0 ignored; 0 measured;"
    ),
    "running header with a 5,000-digit count": "running " + "9" * 5000 + " tests",
    "--- PASS: then 1 MB": "--- PASS: " + "x" * MB,
    "Tests: then 1 passed, repeated": "Tests: " + "1 passed, " * (MB // 10),
    "Tests: with a 5,000-digit count": "Tests:       " + "9" * 5000 + " passed, 1 total",
    "a line of =": "=" * MB,
    "pytest summary with a 1 MB count": "1" * MB + " passed in 0.01s",
    "pytest summary parts repeated": "1 passed, " * (MB // 10) + "x",
    "JSON-looking line for go test": '{"Action":"pass","Package":"' + "p" * MB + '"}',
    "JSON nested 200,000 deep": _nested_json(200_000),
    "<testcase repeated": "<testsuite>" + "<testcase " * (MB // 10),
    "<testsuite with a 1 MB tests= count": f'<testsuite tests="{"1" * MB}"><testcase/></testsuite>',
    "check marks repeated": "\u2713 " * (MB // 2),
    "indented check mark then duration look-alikes": "  \u2713 x" + " (1" * (MB // 3),
    "verbose id then status look-alikes": "a::b" + " PASSED (" * (MB // 9),
    "short summary status then colons": "PASSED " + ":" * MB + " x",
    "Running then open parentheses": "     Running a" + " (b" * (MB // 3),
    "node summary with a 1 MB count": "# tests " + "1" * MB,
    "node summary with a malformed number": "# tests 1.2.3",
    "vitest file-count look-alikes": "   \u2713 x " + "(1 test |" * (MB // 9),
    "vitest Tests then counts repeated": "      Tests  " + "1 passed | " * (MB // 11),
    "spaces": " " * MB,
    "ANSI escape never closed": "\x1b[" + ";" * MB,
    "missing-module look-alikes": "ModuleNotFoundError: No module named '" * (MB // 38),
}


def timed(parse: Callable[[str], ParseResult], text: str) -> tuple[ParseResult, float]:
    start = time.perf_counter()
    result = parse(text)
    return result, time.perf_counter() - start


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_one_adversarial_line_of_1_mb_parses_in_under_a_second_in_every_parser(
    name: str,
) -> None:
    """No parser raises on it either: a parser that crashes is a rig fault the code
    under test could trigger at will (`int()` of 5,000 digits, `float('1.2.3')`, json
    nested past the recursion limit)."""
    text = ADVERSARIAL[name]
    for parser in PARSERS.values():
        _, seconds = timed(parser.parse, text)
        assert seconds < LINE_LIMIT_S, f"{parser.name} took {seconds:.2f}s on {name!r}"


def test_the_adversarial_lines_are_not_read_as_summaries() -> None:
    """Absurd numbers (more than 9 digits) are nobody's test count."""
    for name in ("pytest summary with a 1 MB count", "test result: with a 5,000-digit count",
                 "Tests: with a 5,000-digit count", "node summary with a 1 MB count"):
        for parser in ("pytest", "cargo", "jest", "node-test"):
            assert get_parser(parser).parse(ADVERSARIAL[name]).summaries == 0, (name, parser)


def _longest_id(result: ParseResult) -> int:
    return max(len(case.id) for case in result.tests)


def test_a_1_mb_cargo_binary_label_does_not_copy_into_every_test_id() -> None:
    """Regression: each test id was `label::name`, so one 1 MB `Running` line before
    100,000 test lines built 100 GB of ids. The label is bounded, ids stay distinct."""
    tests = "".join(f"test t{i} ... ok\n" for i in range(100_000))
    text = f"     Running {'L' * MB}\n\nrunning 100000 tests\n{tests}\n" + (
        "test result: ok. 100000 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n"
    )
    result, seconds = timed(get_parser("cargo").parse, text)
    assert seconds < MANY_TESTS_LIMIT_S
    assert result.counts is not None and result.counts.passed == 100_000
    assert _longest_id(result) <= QUALIFIER_MAX + 32
    assert len({case.id for case in result.tests}) == 100_000


def test_a_1_mb_go_package_name_does_not_copy_into_every_test_id() -> None:
    """Plain `go test -v`: the package line comes after its tests and names them all."""
    tests = "".join(f"--- PASS: TestT{i} (0.00s)\n" for i in range(100_000))
    result, seconds = timed(get_parser("go-test").parse, f"{tests}ok  \t{'p' * MB}\t0.1s\n")
    assert seconds < MANY_TESTS_LIMIT_S
    assert result.counts is not None and result.counts.passed == 100_000
    assert _longest_id(result) <= QUALIFIER_MAX + 32


def test_deep_and_long_jest_describe_paths_cost_linear_time() -> None:
    """Regression: each test id joined every enclosing describe name again; ten 100 KB
    describe lines above 100,000 tests built 100 GB of ids."""
    describes = "".join(f"{'  ' * (depth + 1)}{'d' * 100_000}\n" for depth in range(10))
    tests = "".join(f"{'  ' * 11}\u2713 t{i} (1 ms)\n" for i in range(100_000))
    text = f"PASS test/x.test.js\n{describes}{tests}\nTests:       100000 passed, 100000 total\n"
    result, seconds = timed(get_parser("jest").parse, text)
    assert seconds < MANY_TESTS_LIMIT_S
    assert len(result.tests) == 100_000
    assert _longest_id(result) <= QUALIFIER_MAX + 32


def test_jest_describe_paths_under_the_bound_are_kept_whole() -> None:
    text = "PASS test/x.test.js\n  outer\n    inner\n      \u2713 works (1 ms)\n"
    (case,) = get_parser("jest").parse(text).tests
    assert case.id == "test/x.test.js \u203a outer \u203a inner \u203a works"


def _repeat_to(size: int, unit: Callable[[int], str]) -> tuple[str, int]:
    """`unit(0) + unit(1) + ...` until `size` characters; the text and the unit count."""
    parts, length, n = [], 0, 0
    while length < size:
        part = unit(n)
        parts.append(part)
        length += len(part)
        n += 1
    return "".join(parts), n


def _pytest_log(size: int) -> tuple[str, int]:
    body, n = _repeat_to(size, lambda i: f"tests/test_m{i % 97}.py::test_case_{i} PASSED"
                         f"{' ' * 20}[ {i % 100:2d}%]\n")
    return body + f"===== {n} passed in 12.34s =====\n", n


def _cargo_log(size: int) -> tuple[str, int]:
    body, n = _repeat_to(size, lambda i: f"test module_{i % 31}::case_{i} ... ok\n")
    return (f"     Running unittests src/lib.rs (target/debug/deps/big-0123456789abcdef)\n\n"
            f"running {n} tests\n{body}\ntest result: ok. {n} passed; 0 failed; 0 ignored; "
            "0 measured; 0 filtered out; finished in 1.00s\n"), n


def _go_log(size: int) -> tuple[str, int]:
    def unit(i: int) -> str:
        event = {"Action": "pass", "Package": "example.com/big", "Test": f"TestCase{i}",
                 "Elapsed": 0}
        return json.dumps(event) + "\n"
    body, n = _repeat_to(size, unit)
    return body + '{"Action":"pass","Package":"example.com/big","Elapsed":1}\n', n


def _node_log(size: int) -> tuple[str, int]:
    body, n = _repeat_to(size, lambda i: f"    ok {i + 1} - case {i}\n      ---\n"
                         "      duration_ms: 0.1\n      ...\n")
    summary = f"# tests {n}\n# pass {n}\n# fail 0\n# cancelled 0\n# skipped 0\n# todo 0\n"
    return f"# Subtest: /w/test/big.test.js\n{body}ok 1 - /w/test/big.test.js\n{summary}", n


def _jest_log(size: int) -> tuple[str, int]:
    body, n = _repeat_to(size, lambda i: f"    \u2713 case {i} (1 ms)\n")
    return f"PASS test/big.test.js\n  big\n{body}\nTests:       {n} passed, {n} total\n", n


def _vitest_log(size: int) -> tuple[str, int]:
    body, n = _repeat_to(size, lambda i: f"   \u2713 big > case {i} 1ms\n")
    return f"{body}\n      Tests  {n} passed ({n})\n", n


def _junit_log(size: int) -> tuple[str, int]:
    body, n = _repeat_to(size, lambda i: f'<testcase classname="big" name="case_{i}" '
                         'time="0.001"/>\n')
    return f'<?xml version="1.0"?>\n<testsuite name="big" tests="{n}">\n{body}</testsuite>\n', n


ORDINARY: dict[str, Callable[[int], tuple[str, int]]] = {
    "pytest": _pytest_log, "cargo": _cargo_log, "go-test": _go_log, "node-test": _node_log,
    "jest": _jest_log, "vitest": _vitest_log, "junit": _junit_log,
}


@pytest.mark.parametrize("parser", sorted(ORDINARY))
def test_a_20_mb_ordinary_log_parses_in_well_under_10_seconds(parser: str) -> None:
    """Many short lines, as a large honest suite prints them; every test is counted."""
    text, tests = ORDINARY[parser](20 * MB)
    result, seconds = timed(get_parser(parser).parse, text)
    assert seconds < LOG_LIMIT_S, f"{parser}: {seconds:.2f}s on {len(text) / MB:.0f} MB"
    assert result.counts is not None and result.counts.passed == tests > 100_000


# A capped log: head, the marker the rig writes where it cut, tail


def capped(text: str, head: int, tail: int) -> str:
    """`text` cut as the rig caps a log: its first `head` and last `tail` characters
    (cuts may fall mid-line) around a marker line."""
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[bakeoff: output truncated: {omitted} bytes omitted]\n{text[-tail:]}"


def flooded(fmt: str, name: str, after: str) -> str:
    """A real capture with 1 MB of a test's own output inserted after the line `after`."""
    lines = (FIXTURES / fmt / f"{name}.txt").read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.rstrip() == after) + 1
    flood = "".join(f"debug line {i} from the code under test\n" for i in range(30_000))
    return "".join(lines[:at]) + flood + "".join(lines[at:])


def test_capped_pytest_log_still_parses_to_the_summary_in_its_tail() -> None:
    """1 MB printed in a failing test's report, cut from the middle: the marker line is
    ignored and pytest's last line (in the tail) is the summary read."""
    text = flooded("pytest", "proj-fail", "_" * 35 + " test_sub " + "_" * 35)
    result = get_parser("pytest").parse(capped(text, head=4096, tail=4096))
    assert result.counts == Counts(passed=3, failed=3, skipped=1)
    assert (result.summaries, result.spoof_evidence, result.incomplete) == (1, (), ())
    assert result.summary_sequence == (Counts(passed=3, failed=3, skipped=1),)


def test_capped_cargo_log_still_sums_the_result_lines_around_the_cut() -> None:
    """The cut falls inside a failing test's captured stdout (tests/api.rs): every
    binary's header and result line survive in head or tail, so the sum is whole and
    neither the marker nor the cut reads as a spoof or a crash."""
    text = flooded("cargo", "ws-fail", "---- same_name stdout ----")
    head = text.index("debug line 10 ")
    tail = len(text) - text.index("debug line 29990 ")
    result = get_parser("cargo").parse(capped(text, head=head, tail=tail))
    assert result.counts == Counts(passed=8, failed=1, skipped=1)
    assert (result.summaries, result.spoof_evidence, result.incomplete) == (7, (), ())


@pytest.mark.parametrize("parser", sorted(set(PARSERS) - {"exit-code", "junit"}))
def test_the_truncation_marker_alone_is_not_output(parser: str) -> None:
    marker = "[bakeoff: output truncated: 12345 bytes omitted]\n"
    assert get_parser(parser).parse(marker) == get_parser(parser).parse("")
