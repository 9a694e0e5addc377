"""The gateway's state: config.json re-read when it changes, budget counters rebuilt
from the records after a restart, and no secret in any record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway import records as gateway_records
from gateway.config import ConfigSource
from tests.unit.gateway.harness import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    TOKEN_A,
    TOKEN_B,
    Reply,
    Upstream,
    call,
    records,
    running_gateway,
    write_config,
)
from tests.unit.gateway.streams import ANTHROPIC_JSON, ANTHROPIC_STREAM

HEADERS = {"x-api-key": TOKEN_A}


def test_config_change_is_seen_by_the_next_request(tmp_path: Path) -> None:
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = Reply(json_body=ANTHROPIC_JSON)
        write_config(tmp_path, upstream.url, models=["claude-x"])
        with running_gateway(tmp_path) as port:
            before = call(port, "/anthropic/v1/messages", {"model": "claude-haiku"},
                          headers=HEADERS)
            write_config(tmp_path, upstream.url, models=["claude-x", "claude-haiku"])
            after = call(port, "/anthropic/v1/messages", {"model": "claude-haiku"},
                         headers=HEADERS)
    assert (before.status, after.status) == (404, 200)


def test_a_broken_config_keeps_the_last_good_one_in_force(tmp_path: Path) -> None:
    write_config(tmp_path, "http://upstream.invalid", models=["claude-x"])
    source = ConfigSource(tmp_path / "config.json")
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    assert source.current().tokens[TOKEN_A].models == ("claude-x",)


def test_counters_and_seq_survive_a_restart(tmp_path: Path) -> None:
    """Pins: a restarted gateway must not hand an arm a fresh budget."""
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = Reply(json_body=ANTHROPIC_JSON)
        write_config(tmp_path, upstream.url, max_requests=2, max_tokens=1000)
        with running_gateway(tmp_path) as port:
            first = call(port, "/anthropic/v1/messages", {"model": "claude-x"},
                         headers=HEADERS)
        with running_gateway(tmp_path) as port:
            second = call(port, "/anthropic/v1/messages", {"model": "claude-x"},
                          headers=HEADERS)
            third = call(port, "/anthropic/v1/messages", {"model": "claude-x"},
                         headers=HEADERS)
    assert [first.status, second.status, third.status] == [200, 200, 400]
    assert third.json()["error"]["message"] == (
        "bakeoff gateway: budget exhausted (max_requests_per_arm=2)")
    assert [(line["seq"], line["refused"]) for line in records(tmp_path)] == [
        (1, None), (2, None), (3, "budget_exhausted")]


def test_a_new_up_of_the_stage_gives_the_arm_a_fresh_budget(tmp_path: Path) -> None:
    """A token re-issued for the same arm by another `up` (its `run` differs) counts
    afresh; the previous run's requests stay in the records, under that run."""
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = Reply(json_body=ANTHROPIC_JSON)
        write_config(tmp_path, upstream.url, max_requests=1)
        with running_gateway(tmp_path) as port:
            first = call(port, "/anthropic/v1/messages", {"model": "claude-x"},
                         headers=HEADERS)
            spent = call(port, "/anthropic/v1/messages", {"model": "claude-x"},
                         headers=HEADERS)
        config = json.loads((tmp_path / "config.json").read_text())
        config["tokens"][TOKEN_A]["run"] = "second-up"
        (tmp_path / "config.json").write_text(json.dumps(config))
        with running_gateway(tmp_path) as port:
            again = call(port, "/anthropic/v1/messages", {"model": "claude-x"},
                         headers=HEADERS)
    assert [first.status, spent.status, again.status] == [200, 400, 200]
    assert [(line.get("run", ""), line["refused"]) for line in records(tmp_path)] == [
        ("", None), ("", "budget_exhausted"), ("second-up", None)]


def test_the_line_is_on_disk_before_the_client_has_the_whole_response(tmp_path: Path) -> None:
    """Pins: the runner reads the records as soon as the agent exits; the last response's
    line must not still be on its way."""
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = Reply(chunks=ANTHROPIC_STREAM)
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            for _ in range(20):
                call(port, "/anthropic/v1/messages", {"model": "claude-x", "stream": True},
                     headers=HEADERS)
                assert records(tmp_path)[-1]["usage"]["output"] == 57
            assert len(records(tmp_path)) == 20


def test_no_token_or_real_key_is_written_anywhere_under_records(tmp_path: Path) -> None:
    leaky = {"model": "claude-x", "messages": [
        {"role": "user", "content": f"my token {TOKEN_A}, {TOKEN_B}, keys {ANTHROPIC_KEY} "
                                    f"{OPENAI_KEY}"}]}
    echo = dict(ANTHROPIC_JSON, content=[{"type": "text", "text": f"echo {ANTHROPIC_KEY}"}])
    with Upstream() as upstream:
        upstream.replies["/v1/messages"] = Reply(json_body=echo)
        write_config(tmp_path, upstream.url)
        with running_gateway(tmp_path) as port:
            answer = call(port, "/anthropic/v1/messages?k=" + TOKEN_A, leaky, headers=HEADERS)
            call(port, "/anthropic/v1/messages", leaky, headers={"x-api-key": ANTHROPIC_KEY})
    assert answer.status == 200 and upstream.seen[0].body == json.dumps(leaky).encode()
    written = {p.relative_to(tmp_path).as_posix(): p.read_text(encoding="utf-8")
               for p in sorted((tmp_path / "records").rglob("*")) if p.is_file()}
    assert sorted(written) == ["records/_refused.jsonl", "records/s1/bodies/a-1.request.json",
                               "records/s1/bodies/a-1.response", "records/s1/requests.jsonl"]
    for text in written.values():
        for secret in (TOKEN_A, TOKEN_B, ANTHROPIC_KEY, OPENAI_KEY):
            assert secret not in text
    assert json.loads(written["records/s1/bodies/a-1.request.json"])["messages"][0][
        "content"] == "my token [REDACTED], [REDACTED], keys [REDACTED] [REDACTED]"
    assert records(tmp_path)[0]["path"] == "/anthropic/v1/messages?k=[REDACTED]"


def test_an_arm_s_kept_bodies_stop_at_its_cap_and_its_lines_go_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins: a contestant that loops large requests (refused ones too) filled the host's
    disk through the stored bodies; past MAX_STORED_BYTES only its lines are written,
    and a restarted gateway knows what is already kept."""
    monkeypatch.setattr(gateway_records, "MAX_STORED_BYTES", 250_000)
    big = {"model": "claude-not-allowed", "padding": "x" * 100_000}
    write_config(tmp_path, "http://upstream.invalid", models=["claude-x"])
    with running_gateway(tmp_path) as port:
        statuses = [call(port, "/anthropic/v1/messages", big, headers=HEADERS).status
                    for _ in range(3)]
    with running_gateway(tmp_path) as port:
        statuses.append(call(port, "/anthropic/v1/messages", big, headers=HEADERS).status)
    assert statuses == [404] * 4
    kept = [(line["refused"], line["request_body"] is not None, line["response_body"]
             is not None) for line in records(tmp_path)]
    assert kept == [("model_not_allowed", True, True)] * 2 + [
        ("model_not_allowed", False, False)] * 2
    stored = sum(p.stat().st_size for p in (tmp_path / "records").rglob("bodies/*"))
    assert 200_000 < stored <= 250_000
