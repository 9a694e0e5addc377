"""Every parser is linear-time, whatever the code under test prints (issue 11, limits).

Regression: one line of `a::` x 34,000 (100 KB) took 23 s in the pytest parser (the
verbose regex `\\S+::.+?` before a status is quadratic). The inputs here are written in
the test, not captured: adversarial lines of up to 1 MB, each parsed by EVERY parser, and
a 20 MB ordinary log per format. The bound is the algorithm's, not a benchmark: the
parser's CPU time (`time.process_time`, this process only, so other work on the machine
does not count) on the input at its full size against the same input a quarter that
size, in the same process. Linear work grows about 4x; a quadratic parser 16x. A parser
fails when the full size costs more than GROWTH times the quarter plus a floor (for
inputs parsed in microseconds), or more than CEILING_S at all (a hang). The quarter is
the fastest of REPEATS runs; the full size is run again, up to REPEATS times, only while
it looks too slow (one run slowed by the machine is not the parser's). Also here: a capped
log (head, the rig's truncation marker, tail) still parses to the summary in its tail.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rig.parsers import PARSERS, get_parser
from rig.parsers.base import QUALIFIER_MAX, Counts, ParseResult

FIXTURES = Path(__file__).parent / "parsers" / "fixtures"
MB = 1_000_000
SCALE = 4        # the full input against one SCALE times smaller
GROWTH = 8.0     # allowed growth of the CPU time: linear is about 4, quadratic 16
FLOOR_S = 0.05   # CPU seconds added to the bound: timer noise on inputs parsed in microseconds
CEILING_S = 30.0  # CPU seconds: past this, one parse is a hang whatever the ratio says
REPEATS = 3

Parse = Callable[[str], ParseResult]


def cpu_seconds(parse: Parse, text: str, what: str) -> tuple[ParseResult, float]:
    """What `parse(text)` returns, and the CPU time this process spent on it (the cyclic
    garbage collector off meanwhile: a collection of earlier garbage is not the parser's);
    past CEILING_S the test fails at once."""
    gc.disable()
    try:
        start = time.process_time()
        result = parse(text)
        seconds = time.process_time() - start
    finally:
        gc.enable()
    assert seconds < CEILING_S, f"{what}: {seconds:.1f} s of CPU on {len(text):,} characters"
    return result, seconds


def linear(parse: Parse, build: Callable[[int], str], full: int, what: str) -> ParseResult:
    """`parse` on `build(full)` (the input at its full size) costs at most GROWTH times
    `build(full // SCALE)` plus FLOOR_S, and under CEILING_S; the full size's result."""
    small_text, text = build(full // SCALE), build(full)
    small = min(cpu_seconds(parse, small_text, what)[1] for _ in range(REPEATS))
    bound = GROWTH * small + FLOOR_S
    for _ in range(REPEATS):
        result, seconds = cpu_seconds(parse, text, what)
        if seconds <= bound:
            return result
    raise AssertionError(
        f"{what}: super-linear: {small:.3f} s of CPU on {len(small_text):,} characters, "
        f"{seconds:.3f} s on {len(text):,} ({seconds / max(small, 1e-9):.1f}x for "
        f"{len(text) / max(len(small_text), 1):.1f}x the input; allowed {bound:.3f} s)")


def _nested_json(depth: int) -> str:
    return '{"Action":' * depth + '"pass"' + "}" * depth


# Each adversarial line by its size (what its repeated part is long), 1 MB as the cases
# were first written (`ADVERSARIAL[name](MB)` is that line): the counts of 5,000 digits are
# size // 200, the JSON nested 200,000 deep is size // 5 deep.
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "a:: repeated (the 23 s incident, 10x longer)": lambda n: "a::" * (n // 3),
    "x and a space repeated": lambda n: "x " * (n // 2),
    "test result: prefix then 1 MB of digits": lambda n: "test result: ok. " + "1" * n,
    "test result: with a 5,000-digit count": lambda n: (
        "test result: ok. " + "9" * (n // 200) + " passed; 0 failed; 0 ignored; 0 measured;"
    ),
    "running header with a 5,000-digit count": lambda n: "running " + "9" * (n // 200)
    + " tests",
    "--- PASS: then 1 MB": lambda n: "--- PASS: " + "x" * n,
    "Tests: then 1 passed, repeated": lambda n: "Tests: " + "1 passed, " * (n // 10),
    "Tests: with a 5,000-digit count": lambda n: "Tests:       " + "9" * (n // 200)
    + " passed, 1 total",
    "a line of =": lambda n: "=" * n,
    "pytest summary with a 1 MB count": lambda n: "1" * n + " passed in 0.01s",
    "pytest summary parts repeated": lambda n: "1 passed, " * (n // 10) + "x",
    "JSON-looking line for go test": lambda n: '{"Action":"pass","Package":"' + "p" * n + '"}',
    "JSON nested 200,000 deep": lambda n: _nested_json(n // 5),
    "<testcase repeated": lambda n: "<testsuite>" + "<testcase " * (n // 10),
    "<testsuite with a 1 MB tests= count": lambda n: (
        f'<testsuite tests="{"1" * n}"><testcase/></testsuite>'),
    "check marks repeated": lambda n: "\u2713 " * (n // 2),
    "indented check mark then duration look-alikes": lambda n: "  \u2713 x" + " (1" * (n // 3),
    "verbose id then status look-alikes": lambda n: "a::b" + " PASSED (" * (n // 9),
    "short summary status then colons": lambda n: "PASSED " + ":" * n + " x",
    "Running then open parentheses": lambda n: "     Running a" + " (b" * (n // 3),
    "node summary with a 1 MB count": lambda n: "# tests " + "1" * n,
    "node summary with a malformed number": lambda n: "# tests 1.2.3",
    "vitest file-count look-alikes": lambda n: "   \u2713 x " + "(1 test |" * (n // 9),
    "vitest Tests then counts repeated": lambda n: "      Tests  " + "1 passed | " * (n // 11),
    "spaces": lambda n: " " * n,
    "ANSI escape never closed": lambda n: "\x1b[" + ";" * n,
    "missing-module look-alikes": lambda n: "ModuleNotFoundError: No module named '" * (n // 38),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_one_adversarial_line_of_1_mb_parses_in_linear_time_in_every_parser(name: str) -> None:
    """No parser raises on it either: a parser that crashes is a rig fault the code
    under test could trigger at will (`int()` of 5,000 digits, `float('1.2.3')`, json
    nested past the recursion limit)."""
    for parser in PARSERS.values():
        linear(parser.parse, ADVERSARIAL[name], MB, f"{parser.name} on {name!r}")


def test_the_adversarial_lines_are_not_read_as_summaries() -> None:
    """Absurd numbers (more than 9 digits) are nobody's test count."""
    for name in ("pytest summary with a 1 MB count", "test result: with a 5,000-digit count",
                 "Tests: with a 5,000-digit count", "node summary with a 1 MB count"):
        for parser in ("pytest", "cargo", "jest", "node-test"):
            assert get_parser(parser).parse(ADVERSARIAL[name](MB)).summaries == 0, (
                name, parser)


def _longest_id(result: ParseResult) -> int:
    return max(len(case.id) for case in result.tests)


def _cargo_label_log(size: int) -> str:
    """A `Running` line of `size` characters above `size // 10` passing tests."""
    tests = "".join(f"test t{i} ... ok\n" for i in range(size // 10))
    return f"     Running {'L' * size}\n\nrunning {size // 10} tests\n{tests}\n" + (
        f"test result: ok. {size // 10} passed; 0 failed; 0 ignored; 0 measured; "
        "0 filtered out\n")


def test_a_1_mb_cargo_binary_label_does_not_copy_into_every_test_id() -> None:
    """Regression: each test id was `label::name`, so one 1 MB `Running` line before
    100,000 test lines built 100 GB of ids. The label is bounded, ids stay distinct."""
    result = linear(get_parser("cargo").parse, _cargo_label_log, MB, "cargo")
    assert result.counts is not None and result.counts.passed == 100_000
    assert _longest_id(result) <= QUALIFIER_MAX + 32
    assert len({case.id for case in result.tests}) == 100_000


def _go_package_log(size: int) -> str:
    """`size // 10` passing tests, then the package line of a `size`-character name."""
    tests = "".join(f"=== RUN   TestT{i}\n--- PASS: TestT{i} (0.00s)\n"
                    for i in range(size // 10))
    return f"{tests}ok  \t{'p' * size}\t0.1s\n"


def test_a_1_mb_go_package_name_does_not_copy_into_every_test_id() -> None:
    """Plain `go test -v`: the package line comes after its tests and names them all."""
    result = linear(get_parser("go-test").parse, _go_package_log, MB, "go-test")
    assert result.counts is not None and result.counts.passed == 100_000
    assert _longest_id(result) <= QUALIFIER_MAX + 32


def _jest_describes_log(size: int) -> str:
    """Ten describe lines of `size // 10` characters above `size // 10` tests."""
    describes = "".join(f"{'  ' * (depth + 1)}{'d' * (size // 10)}\n" for depth in range(10))
    tests = "".join(f"{'  ' * 11}\u2713 t{i} (1 ms)\n" for i in range(size // 10))
    return (f"PASS test/x.test.js\n{describes}{tests}\n"
            f"Tests:       {size // 10} passed, {size // 10} total\n")


def test_deep_and_long_jest_describe_paths_cost_linear_time() -> None:
    """Regression: each test id joined every enclosing describe name again; ten 100 KB
    describe lines above 100,000 tests built 100 GB of ids."""
    result = linear(get_parser("jest").parse, _jest_describes_log, MB, "jest")
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
        return json.dumps({**event, "Action": "run"}) + "\n" + json.dumps(event) + "\n"
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
def test_a_20_mb_ordinary_log_parses_in_linear_time(parser: str) -> None:
    """Many short lines, as a large honest suite prints them; every test is counted."""
    tests: dict[int, int] = {}

    def build(size: int) -> str:
        text, tests[size] = ORDINARY[parser](size)
        return text

    result = linear(get_parser(parser).parse, build, 20 * MB, parser)
    assert result.counts is not None and result.counts.passed == tests[20 * MB] > 100_000


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
