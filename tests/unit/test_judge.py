"""The judge adapter: strict answers (four dims, 0..5, evidence), the command runner, and
the bundled scripted judge (examples/horizon/judge.py) run end to end through it."""

from __future__ import annotations

import json
import shlex
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from rig.judge import (
    JudgeError,
    agent_answer,
    judge_input,
    judge_prompt,
    parse_judgement,
    render_command,
    run_judge,
)
from rig.rubric import JudgeScores

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "horizon"
BRIEF = (EXAMPLE / "briefs" / "cap-horizon.md").read_text(encoding="utf-8")
PROTECTED = ["tests/test_horizon.py", "tests/test_units.py"]

FIX_DIFF = """\
diff --git a/src/horizon/app.py b/src/horizon/app.py
--- a/src/horizon/app.py
+++ b/src/horizon/app.py
@@ -60,3 +60,5 @@ def parse_request(payload: object) -> ForecastRequest:
+    if not 1 <= time_horizon_days <= 90:
+        raise ValidationError("time_horizon_days", "must be between 1 and 90")
diff --git a/tests/test_app.py b/tests/test_app.py
--- a/tests/test_app.py
+++ b/tests/test_app.py
@@ -1,1 +1,3 @@
+def test_a_horizon_above_90_is_a_validation_error():
+    assert post({"series": [1, 2], "time_horizon_days": 91}).status == 422
"""
LOG_LINE_DIFF = """\
diff --git a/src/horizon/app.py b/src/horizon/app.py
--- a/src/horizon/app.py
+++ b/src/horizon/app.py
@@ -60,3 +60,4 @@ def parse_request(payload: object) -> ForecastRequest:
+    log.info("forecast requested")
"""


def answer(**dims: Any) -> str:
    base: dict[str, Any] = {d: {"score": 4, "evidence": f"{d}: cites the diff"}
                            for d in ("diagnosis", "plan", "code_quality", "intent")}
    base.update(dims)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def scores_of(judgement: JudgeScores) -> dict[str, float]:
    return {dim: value.score for dim, value in judgement.dims().items()}


# --- the answer ------------------------------------------------------------------------


def test_a_well_formed_answer_parses_to_the_four_dims() -> None:
    judgement = parse_judgement(answer(plan={"score": 2.5, "evidence": "no test"}))
    assert scores_of(judgement) == {"diagnosis": 4.0, "plan": 2.5, "code_quality": 4.0,
                                    "intent": 4.0}
    assert judgement.plan.evidence == "no test"


def test_a_judge_scoring_an_objective_dim_is_refused() -> None:
    """The judge is confined to diagnosis, plan, code_quality and intent."""
    with pytest.raises(JudgeError, match=r"outside its remit \(success\).*confined") as caught:
        parse_judgement(answer(success={"score": 5, "evidence": "tests pass"}))
    assert caught.value.exit_code == 3


def test_a_missing_dim_is_refused_by_name() -> None:
    with pytest.raises(JudgeError, match="missing dim\\(s\\) intent"):
        parse_judgement(answer(intent=None))


@pytest.mark.parametrize(("dim", "problem"), [
    ({"score": 6, "evidence": "x"}, "plan.score 6 is outside 0..5"),
    ({"score": -1, "evidence": "x"}, "plan.score -1 is outside 0..5"),
    ({"score": "5", "evidence": "x"}, 'plan.score must be a number 0..5, not "5"'),
    ({"score": True, "evidence": "x"}, "plan.score must be a number 0..5, not true"),
    ({"score": 3, "evidence": " "}, "plan.evidence must be a non-empty text"),
    ({"score": 3}, "plan.evidence must be a non-empty text"),
    ({"evidence": "x"}, "plan.score is missing"),
    ({"score": 3, "evidence": "x", "weight": 2}, "plan has unexpected key(s) weight"),
    (3, "plan must be an object"),
])
def test_a_malformed_dim_is_refused_naming_what_is_wrong(dim: object, problem: str) -> None:
    with pytest.raises(JudgeError) as caught:
        parse_judgement(answer(plan=dim))
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(JudgeError) as caught:
        parse_judgement(json.dumps({"diagnosis": {"score": 9, "evidence": ""}, "extra": 1}))
    assert len(caught.value.problems) == 4  # remit, missing dims, score, evidence


@pytest.mark.parametrize("text", ["", "scores: 5", "[1, 2]", '"five"'])
def test_an_answer_that_is_not_a_json_object_is_refused(text: str) -> None:
    with pytest.raises(JudgeError, match=r"not JSON|must be a JSON object"):
        parse_judgement(text)


# --- the manifest string and the input --------------------------------------------------


def test_an_agent_judge_reads_the_rubric_then_the_whole_document() -> None:
    doc = judge_input("cap-horizon", "fixer", BRIEF, FIX_DIFF, PROTECTED, {"tests": "ok"})
    prompt = judge_prompt(doc)
    rubric, document = prompt.split("The document (JSON: change, arm, brief, diff, protected, "
                                    "outputs):\n\n")
    assert json.loads(document) == doc
    assert all(dim in rubric for dim in ("diagnosis", "plan", "code_quality", "intent"))
    assert "never instructions to\nyou" in rubric


def test_claude_code_s_result_line_is_the_judge_s_answer() -> None:
    """`--output-format json` prints one result object; a fence around the JSON is dropped."""
    out = json.dumps({"type": "result", "is_error": False,
                      "result": "Here it is:\n```json\n" + answer() + "\n```"}) + "\n"
    assert parse_judgement(agent_answer("claude-code", out)).diagnosis.score == 4


def test_codex_s_last_agent_message_is_the_judge_s_answer() -> None:
    events = [{"type": "thread.started"},
              {"type": "item.completed", "item": {"type": "agent_message", "text": "thinking"}},
              {"type": "item.completed", "item": {"type": "agent_message", "text": answer()}},
              {"type": "turn.completed", "usage": {"input_tokens": 10}}]
    out = "\n".join(json.dumps(e) for e in events) + "\n"
    assert parse_judgement(agent_answer("codex", out)).plan.score == 4


@pytest.mark.parametrize(("cli", "out"), [
    ("claude-code", json.dumps({"type": "result", "is_error": True, "result": "API Error: 400"})),
    ("claude-code", "not json at all"),
    ("codex", json.dumps({"type": "turn.failed", "error": {"message": "quota"}})),
])
def test_an_agent_judge_without_a_final_message_is_a_judge_error(cli: str, out: str) -> None:
    with pytest.raises(JudgeError, match=f"the {cli} judge ended without a final message"):
        agent_answer(cli, out)


def test_judge_input_has_the_keys_the_scripted_judge_reads() -> None:
    doc = judge_input("cap-horizon", "fixer", BRIEF, FIX_DIFF, PROTECTED, {"tests": "ok"})
    assert doc == {"change": "cap-horizon", "arm": "fixer", "brief": BRIEF, "diff": FIX_DIFF,
                   "protected": PROTECTED, "outputs": {"tests": "ok"}}
    json.dumps(doc)  # it is JSON


def test_the_input_path_is_shell_quoted() -> None:
    assert render_command("cat {input}", Path("/tmp/a b/in.json")) == "cat '/tmp/a b/in.json'"


# --- running the judge -------------------------------------------------------------------


def manifest_judge() -> str:
    with (EXAMPLE / "bakeoff.toml").open("rb") as handle:
        judge = str(tomllib.load(handle)["contract"]["judge"])
    assert judge.startswith("command:")
    return judge.removeprefix("command:").strip()


def test_the_scripted_judge_scores_a_fix_with_a_test_five_everywhere() -> None:
    doc = judge_input("cap-horizon", "fixer", BRIEF, FIX_DIFF, PROTECTED, {"tests": ""})
    judgement = run_judge(manifest_judge(), doc, EXAMPLE, timeout_s=60)
    assert scores_of(judgement) == {"diagnosis": 5, "plan": 5, "code_quality": 5, "intent": 5}
    assert judgement.diagnosis.evidence.startswith("[cap-horizon/fixer] ")


def test_the_scripted_judge_scores_a_log_line_as_the_control() -> None:
    """README: control 0/1/2/2 (diagnosis/plan/code_quality/intent); input on stdin."""
    doc = judge_input("cap-horizon", "control", BRIEF, LOG_LINE_DIFF, PROTECTED, {})
    template = manifest_judge().replace(" {input}", "")  # no placeholder: JSON on stdin
    judgement = run_judge(template, doc, EXAMPLE, timeout_s=60)
    assert scores_of(judgement) == {"diagnosis": 0, "plan": 1, "code_quality": 2, "intent": 2}


def script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "judge_stub.py"
    path.write_text(body, encoding="utf-8")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))} {{input}}"


def test_a_judge_that_answers_other_dims_is_refused_with_its_command(tmp_path: Path) -> None:
    stub = script(tmp_path, f"print({answer(success={'score': 5, 'evidence': 'x'})!r})\n")
    with pytest.raises(JudgeError, match="outside its remit") as caught:
        run_judge(stub, {"brief": "", "diff": ""}, tmp_path, timeout_s=30)
    assert caught.value.command is not None and "judge_stub.py" in caught.value.command


def test_a_failing_judge_is_a_rig_error_with_its_stderr(tmp_path: Path) -> None:
    stub = script(tmp_path, "import sys\nsys.exit('judge: no input')\n")
    with pytest.raises(JudgeError, match="exited 1") as caught:
        run_judge(stub, {"brief": "", "diff": ""}, tmp_path, timeout_s=30)
    assert "judge: no input" in str(caught.value)
    with pytest.raises(JudgeError, match="command not found"):
        run_judge("no-such-judge-program {input}", {}, tmp_path, timeout_s=30)


def test_a_judge_past_its_time_limit_is_killed(tmp_path: Path) -> None:
    stub = script(tmp_path, "import time\ntime.sleep(30)\n")
    started = time.monotonic()
    with pytest.raises(JudgeError, match=r"timed out after 0\.5s"):
        run_judge(stub, {}, tmp_path, timeout_s=0.5)
    assert time.monotonic() - started < 10


def test_the_judge_reads_the_document_it_is_given(tmp_path: Path) -> None:
    body = ("import json, sys\n"
            "doc = json.load(open(sys.argv[1]))\n"
            "print(json.dumps({d: {'score': len(doc['arm']), 'evidence': doc['brief']}\n"
            "                  for d in ('diagnosis', 'plan', 'code_quality', 'intent')}))\n")
    judgement = run_judge(script(tmp_path, body), {"arm": "abc", "brief": "it's \"quoted\""},
                          tmp_path, timeout_s=30)
    assert judgement.intent.score == 3.0 and judgement.intent.evidence == 'it\'s "quoted"'
