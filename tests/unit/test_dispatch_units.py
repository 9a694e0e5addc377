"""Dispatch without docker: adapter templates, redaction, the brief, the effort probe,
secrets checked before anything starts, and the plain (non-terminal) view."""

from __future__ import annotations

import io
import re
import shlex
import threading
import time
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from rig.guards import harness_stated
from runner import workspace
from runner.cli.dispatch import dispatch_command
from runner.cli.dispatch_view import DispatchView
from runner.commands import demo
from runner.commands.dispatch import process
from runner.commands.dispatch.agents import ADAPTERS, AdapterError, adapter_for, render_template
from runner.commands.dispatch.brief import (
    BRIEF_PATH,
    GUARDRAILS,
    brief_dir,
    compose_brief,
    write_brief,
)
from runner.commands.dispatch.record import ArmRecord, ArmState, apply_effort_probe
from runner.commands.dispatch.redact import Redactor, StreamRedactor
from runner.commands.dispatch.run import SecretMissingError, _secrets
from runner.commands.dispatch.work import parse_shortstat
from runner.containers.engine import Engine
from runner.containers.samples.tree import read_tree
from runner.errors import BadInputError
from runner.manifest import Arm, LoadedManifest, load_manifest

SECRET = "sk-ant-unit-0123456789abcdef"


def arm(**changes: object) -> Arm:
    fields: dict[str, object] = {
        "id": "C1", "model": "claude-opus-4-8", "effort": "high", "effort_normalized": "high",
        "effort_provenance": "experiment_config", "effort_evidence": "declared",
        "mode": "single_agent", "agent": "command", "command": "sh /agents/run.sh {brief}"}
    fields.update(changes)
    return Arm.model_validate(fields, strict=False)


@pytest.fixture(scope="module")
def horizon(tmp_path_factory: pytest.TempPathFactory) -> LoadedManifest:
    root = tmp_path_factory.mktemp("horizon") / "example"
    demo.prepare(root)
    return load_manifest(root / "dispatch.toml")


# --- adapters and templates -------------------------------------------------------------

def test_command_template_substitutes_shell_quoted_values() -> None:
    contestant = arm(command="run {brief} --model {model} -e {effort} --arm {arm}",
                     model="m; rm -rf /", id="C-1")
    rendered = adapter_for(contestant).render(contestant, "/tmp/my brief.md")
    assert shlex.split(rendered) == ["run", "/tmp/my brief.md", "--model", "m; rm -rf /",
                                     "-e", "high", "--arm", "C-1"]


def test_shell_braces_and_variables_are_left_alone() -> None:
    template = "awk '{print $1}' {brief} && echo ${HOME} {a,b}"
    assert render_template(template, {"brief": "/b"}, "arms[0].command") == (
        "awk '{print $1}' /b && echo ${HOME} {a,b}")


def test_unknown_placeholder_is_bad_input_naming_the_field() -> None:
    with pytest.raises(AdapterError) as error:
        render_template("run {breif}", {"brief": "/b"}, "arms[1].command")
    assert error.value.exit_code == 2
    assert "arms[1].command" in str(error.value) and "{breif}" in str(error.value)


def test_unknown_adapter_names_the_known_ones() -> None:
    with pytest.raises(AdapterError) as error:
        adapter_for(arm(agent="aider"), "bakeoff.toml: arms[2] (C1)")
    text = str(error.value)
    assert "arms[2] (C1).agent" in text and "'aider'" in text
    assert "claude-code, codex, command" in text


@pytest.mark.parametrize(("name", "model_flag", "effort_flag"), [
    ("claude-code", "--model claude-opus-4-8", "--effort high"),
    ("codex", "--model claude-opus-4-8", "--config model_reasoning_effort=high"),
])
def test_cli_templates_pass_model_and_effort_explicitly(name: str, model_flag: str,
                                                        effort_flag: str) -> None:
    contestant = arm(agent=name, command="/agents/bin/cli")
    rendered = ADAPTERS[name].render(contestant, BRIEF_PATH)
    assert rendered.startswith("/agents/bin/cli ") or rendered.startswith(
        'mkdir -p "$CODEX_HOME" && /agents/bin/cli exec ')  # codex needs its home to exist
    assert model_flag in rendered and effort_flag in rendered
    assert rendered.endswith(f"< {BRIEF_PATH}")


@pytest.mark.parametrize("effort", ["unknown", "default"])
def test_cli_templates_refuse_an_unstated_effort(effort: str) -> None:
    with pytest.raises(AdapterError, match="passes effort explicitly"):
        ADAPTERS["claude-code"].render(arm(agent="claude-code", effort=effort,
                                           effort_normalized="unknown"), BRIEF_PATH)


# --- redaction --------------------------------------------------------------------------

def test_redactor_replaces_raw_and_json_escaped_values() -> None:
    secret = 'ab"c\\d'
    redactor = Redactor([secret, ""])
    assert redactor.redact(f"x {secret} y") == "x *** y"
    escaped = '"ab\\"c\\\\d"'
    assert redactor.redact(f'{{"k": {escaped}}}') == '{"k": "***"}'
    assert not Redactor([]) and Redactor([]).redact("text") == "text"


def _stream(redactor: Redactor, chunks: list[bytes]) -> str:
    stream = StreamRedactor(redactor)
    return "".join(stream.feed(chunk) for chunk in chunks) + stream.flush()


def test_a_secret_split_across_chunks_at_every_point_is_still_redacted() -> None:
    data = f"key={SECRET}\nagain {SECRET} end".encode()
    redactor = Redactor([SECRET])
    for cut in range(len(data) + 1):
        for second in range(cut, len(data) + 1, 7):
            out = _stream(redactor, [data[:cut], data[cut:second], data[second:]])
            assert out == "key=***\nagain *** end", (cut, second)


def test_streaming_never_emits_part_of_a_complete_secret_that_straddles_the_cut() -> None:
    """Pins: secrets 'bcd' and 'dzz', stream 'Qabcdz' + 'z!': the held tail 'dz' must not
    split 'bcd' (which would emit 'bc' unredacted)."""
    redactor = Redactor(["bcd", "dzz"])
    stream = StreamRedactor(redactor)
    first = stream.feed(b"Qabcdz")
    assert "bc" not in first
    assert first + stream.feed(b"z!") + stream.flush() == "Qa***zz!"


def test_streaming_keeps_multibyte_characters_split_across_chunks() -> None:
    data = "é ünïcode ***".encode()
    redactor = Redactor(["nothing-here"])
    assert _stream(redactor, [data[:1], data[1:4], data[4:]]) == "é ünïcode ***"


# --- the dispatch log's cap -----------------------------------------------------------------

def test_log_sink_keeps_the_head_and_a_rolling_tail_with_a_marker(tmp_path: Path) -> None:
    """Pins: 200 MB of agent output took the orchestrator to 711 MB and the disk had no
    bound. The log keeps the first bytes and the last bytes, and says how many it left
    out; the tail held in memory never exceeds its size."""
    path = tmp_path / "dispatch.log"
    seen: list[str] = []
    sink = process.LogSink(path, Redactor(["s3cret"]), seen.append, head_bytes=100,
                           tail_bytes=50)
    lines = [f"line {n:04d} s3cret\n".encode() for n in range(200)]  # 19 bytes each
    largest_tail = 0
    for line in lines:
        sink.feed(line)
        largest_tail = max(largest_tail, len(sink.tail))
    sink.close()
    full = b"".join(lines).replace(b"s3cret", b"***")
    omitted = len(full) - 150
    assert path.read_bytes() == (full[:100] + f"\n[bakeoff: output truncated: {omitted} "
                                 "bytes omitted]\n".encode() + full[-50:])
    assert largest_tail == 50
    assert sink.last_line == seen[-1] == "line 0199 ***"


def test_log_sink_under_the_cap_writes_everything_and_no_marker(tmp_path: Path) -> None:
    path = tmp_path / "dispatch.log"
    sink = process.LogSink(path, Redactor([]), lambda _: None)
    for n in range(1000):
        sink.feed(f"{n}\n".encode())
    sink.close()
    assert path.read_text() == "".join(f"{n}\n" for n in range(1000))


def test_log_sink_bounds_disk_and_memory_for_a_flood_of_output(tmp_path: Path) -> None:
    """64 MiB through the default sink: the file is 8 MiB + the marker + 2 MiB."""
    path = tmp_path / "dispatch.log"
    sink = process.LogSink(path, Redactor([]), lambda _: None)
    chunk = (b"x" * 1023 + b"\n") * 64  # 64 KiB
    for _ in range(1024):
        sink.feed(chunk)
        assert len(sink.tail) <= process.TAIL_BYTES
    sink.close()
    marker = f"\n[bakeoff: output truncated: {64 * 2**20 - 10 * 2**20} bytes omitted]\n"
    assert path.stat().st_size == 10 * 2**20 + len(marker)
    assert (process.HEAD_BYTES, process.TAIL_BYTES) == (8 * 2**20, 2 * 2**20)


# --- the brief ----------------------------------------------------------------------------

def test_brief_is_the_brief_file_then_the_guardrails(horizon: LoadedManifest) -> None:
    base = workspace.resolve_commit(horizon.repo_path, horizon.manifest.experiment.base)
    brief = compose_brief(horizon, "cap-horizon", base)
    source = horizon.brief_path("cap-horizon").read_text()
    assert brief.text.startswith(f"{source.rstrip()}\n\n---\n\n{GUARDRAILS}\n")
    assert compose_brief(horizon, "cap-horizon", base) == brief  # deterministic
    for rule in ("/work", "No pushes and no deploys", "--no-verify", "No DDL",
                 "<experiment>-<arm>", "$BAKEOFF_TEST_USER", "commit your work"):
        assert rule in brief.text
    assert not re.search(r"horizon-dispatch|fixer|leaky", GUARDRAILS)


def test_brief_states_what_is_the_base_s_at_scoring_for_this_repository(
        horizon: LoadedManifest) -> None:
    """Issue 30: the brief ends with `rig.guards.harness_stated.stated` of the base's tree and the
    change's protected files (the example's: its two protected tests, its pyproject and
    .gitignore), so no rule that decides a verdict is one the arms were not given."""
    base = workspace.resolve_commit(horizon.repo_path, horizon.manifest.experiment.base)
    brief = compose_brief(horizon, "cap-horizon", base)
    assert brief.text.endswith(harness_stated.stated(
        read_tree(horizon.repo_path, base), ("tests/test_horizon.py", "tests/test_units.py")))
    assert ("- Protected (restored to the base's version): `tests/test_horizon.py`,\n"
            "  `tests/test_units.py`.\n"
            "- The base's harness files here: `.gitignore`, `pyproject.toml`.\n") in brief.text


def test_brief_file_is_read_only_and_replaced_whole(horizon: LoadedManifest,
                                                    tmp_path: Path) -> None:
    """Pins: the brief every sandbox mounts read-only is written mode 0444 and replaced
    atomically (a second dispatch rewrites it without a window of a half-written file)."""
    brief = compose_brief(horizon, "cap-horizon", workspace.resolve_commit(
        horizon.repo_path, horizon.manifest.experiment.base))
    first = write_brief(tmp_path, brief)
    again = write_brief(tmp_path, brief)
    assert first == again == brief_dir(tmp_path) / BRIEF_PATH.rsplit("/", 1)[1]
    assert again.read_bytes() == brief.text.encode()
    assert again.stat().st_mode & 0o777 == 0o444
    assert sorted(p.name for p in brief_dir(tmp_path).iterdir()) == ["brief.md"]


# --- secrets ------------------------------------------------------------------------------

def test_missing_or_empty_secret_is_refused_naming_arm_and_variable(
        horizon: LoadedManifest) -> None:
    leaky = horizon.arm("leaky")
    for environ in ({}, {"ANTHROPIC_API_KEY": ""}):
        with pytest.raises(SecretMissingError) as error:
            _secrets(horizon, [horizon.arm("fixer"), leaky], environ)
        assert error.value.exit_code == 2
        assert "arms[4] (leaky): ANTHROPIC_API_KEY" in str(error.value)
    assert _secrets(horizon, [leaky], {"ANTHROPIC_API_KEY": SECRET, "OTHER": "x"}) == {
        "ANTHROPIC_API_KEY": SECRET}
    assert _secrets(horizon, [horizon.arm("fixer")], {}) == {}


# --- the effort probe ---------------------------------------------------------------------

def record(**changes: object) -> ArmRecord:
    fields: dict[str, object] = dict(
        experiment="e", change="c", arm="probe", attempt=1, state=ArmState.FINISHED, run="r",
        container="k", image_id="i", network="n", egress=False, adapter="command",
        command="x", env={}, secrets=[], brief_path=BRIEF_PATH, brief_sha256="s",
        brief_file_sha256="f", dispatch_timeout_s=10.0, base_commit="b", started_at="t",
        model="m", effort="high", effort_normalized="high",
        effort_provenance="experiment_config", effort_evidence="declared",
        mode="single_agent", control=False, effort_probe=r"thinking: .*effort=(\w+)")
    fields.update(changes)
    return ArmRecord.model_validate(fields)


def test_effort_probe_first_match_becomes_runtime_evidence() -> None:
    log = "start\n  thinking: budget_tokens=1 effort=high  \nthinking: effort=low\n"
    probed = apply_effort_probe(record(), log)
    assert (probed.effort_provenance, probed.effort_runtime) == ("runtime_log", "matched")
    assert probed.effort_evidence == "thinking: budget_tokens=1 effort=high"
    assert (probed.effort, probed.effort_observed, probed.caveats) == ("high", "high", [])


def test_effort_probe_without_a_match_keeps_the_declared_values_and_says_so() -> None:
    probed = apply_effort_probe(record(), "no settings printed\n")
    assert (probed.effort_provenance, probed.effort_evidence) == (
        "experiment_config", "declared")
    assert probed.effort_runtime == "missing"
    assert probed.caveats and probed.caveats[0].startswith("runtime evidence missing")


def test_effort_probe_that_contradicts_the_declared_effort_is_a_caveat() -> None:
    probed = apply_effort_probe(record(), "thinking: effort=low\n")
    assert probed.effort_observed == "low" and "effort_mismatch" in probed.caveats[0]
    assert apply_effort_probe(record(effort_probe=None), "thinking: effort=low") == record(
        effort_probe=None)


# --- the view and small parsers ----------------------------------------------------------

def test_plain_view_prints_state_changes_and_throttled_log_lines() -> None:
    buffer = io.StringIO()
    view = DispatchView(Console(file=buffer, force_terminal=False, width=200), ["A", "B"])
    with view:
        view.state("A", "running")
        view.line("A", "first line")
        view.line("A", "second line, within the throttle window")
        view.state("A", "finished", "exit 0, 1.0s, commit abc")
    lines = buffer.getvalue().splitlines()
    assert lines == ["[A] running", "[A] | first line", "[A] finished: exit 0, 1.0s, commit abc"]


def test_parse_status_reads_pid_ppid_uid_state_and_a_name_with_spaces() -> None:
    assert process.parse_status("7 1 0 S sleep") == process.Listed(7, 1, 0, "S", "sleep")
    assert process.parse_status("42 18 1000 R my (odd) name") == process.Listed(
        42, 18, 1000, "R", "my (odd) name")


@pytest.mark.parametrize("line", ["9 (a", "9 1 S", "x 1 1000 S b", "9 1 u S b", "9 -1 0 S b"])
def test_parse_status_reads_no_process_from_what_is_not_a_listing_line(line: str) -> None:
    assert process.parse_status(line) is None


def test_parse_shortstat() -> None:
    assert parse_shortstat(" 3 files changed, 10 insertions(+), 2 deletions(-)") == (3, 10, 2)
    assert parse_shortstat(" 1 file changed, 1 deletion(-)") == (1, 0, 1)
    assert parse_shortstat("") == (0, 0, 0)


def test_every_adapter_is_documented() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    for name, adapter in ADAPTERS.items():
        assert f"`{name}`" in docs
        if adapter.template is not None:
            assert adapter.template in docs


# --- stopping an agent whose output does not end ------------------------------------------

class BlockingStream:
    """An exec output stream that yields nothing until it is closed."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def __iter__(self) -> BlockingStream:
        return self

    def __next__(self) -> bytes:
        self.closed.wait(30)
        raise StopIteration

    def close(self) -> None:
        self.closed.set()


@pytest.mark.parametrize("cancelled", [False, True])
def test_host_deadline_or_cancel_stops_the_agent_and_closes_its_stream(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cancelled: bool) -> None:
    """Pins: output that never ends (timeout inside the sandbox did not stop the agent)
    ends at the host deadline: every process is killed, then the stream is closed."""
    swept: list[tuple[str, bool]] = []
    monkeypatch.setattr(process, "sweep", lambda engine, cid, force=False: swept.append(
        (cid, force)) or [])
    monkeypatch.setattr(process, "STOP_WAIT_S", 0.2)
    stream = BlockingStream()
    sink = process.LogSink(tmp_path / "dispatch.log", Redactor([]), lambda _: None)
    reader = process._Reader(stream, sink)
    reader.start()
    cancel = threading.Event()
    if cancelled:
        cancel.set()
    deadline = time.monotonic() + (30 if cancelled else 0.3)
    started = time.monotonic()
    result = process._await(Engine(), "cid", reader, stream, deadline, cancel)
    assert result == ((False, True) if cancelled else (True, False))
    assert swept == [("cid", True)] and stream.closed.is_set() and not reader.is_alive()
    assert time.monotonic() - started < 5


def test_dispatch_command_registers_as_a_typer_command(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("dispatch")(dispatch_command)
    app.command("other")(lambda: None)
    shown = CliRunner().invoke(app, ["dispatch", "--help"])
    assert shown.exit_code == 0
    assert "--arm" in shown.output and "--file" in shown.output
    missing = CliRunner().invoke(app, ["dispatch", "-f", str(tmp_path / "nope.toml"),
                                       "--arm", "A", "--arm", "B"])
    assert isinstance(missing.exception, BadInputError)


def test_effort_probe_never_takes_a_blank_line_as_evidence() -> None:
    """Regression: a probe that matches a whitespace-only line made effort_evidence "", a
    record that no longer loads (the identity's evidence is a non-empty text), so the arm
    looked undispatched. Blank lines are skipped; the first line with text is the evidence."""
    probed = apply_effort_probe(record(effort_probe=r"(\s*)"), "   \n\nthinking: high\n")
    assert (probed.effort_evidence, probed.effort_runtime) == ("thinking: high", "matched")
    assert ArmRecord.model_validate_json(probed.model_dump_json()) == probed
