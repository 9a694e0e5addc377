"""An agent judge (issue 13, item 6): `[contract] judge = "claude-code:<model>@<effort>"`
runs the pinned Claude Code in a container of its own, through a gateway of its own that
holds the judge's key, against the scripted provider (tests/fakes/, on an internal
network the test makes: nothing here reaches outside this machine's containers).

The full flow with a codex judge (up, dispatch, score, report) is in test_real_agents.py.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from docker.models.containers import ContainerCollection

from rig import judge as judge_mod
from rig.errors import RigError
from runner.commands import demo, judges
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.images.prepared import ResolvedImages
from runner.manifest import LoadedManifest, load_manifest
from runner.store import layout
from runner.store.layout import experiment_dir, stage_dir
from tests.integration.helpers import git
from tests.integration.provider_lab import (
    JUDGE_ANSWER,
    JUDGE_SCORES,
    Upstream,
    scripted_provider,
)

pytestmark = pytest.mark.docker
T = TypeVar("T")

CHANGE = "cap-horizon"
MODEL = "claude-judge-5"
KEY = "sk-ant-judge-real-" + "q7" * 12
SCRIPT = {"steps": [{"say": "not a judgement"}],
          "models": {MODEL: {"steps": [{"say": JUDGE_ANSWER}],
                             "usage": {"input": 2500, "output": 400}}}}


@pytest.fixture
def upstream(engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path
             ) -> Iterator[Upstream]:
    with scripted_provider(engine, tmp_path, SCRIPT) as found:
        yield found


def _manifest(tmp_path: Path, upstream: Upstream, model: str) -> LoadedManifest:
    path = demo.prepare(tmp_path / "example")
    text = path.read_text().replace('"horizon"', f'"aj-{secrets.token_hex(3)}"', 1)
    text = text.replace('judge = "command:python3 judge.py {input}"',
                        f'judge = "claude-code:{model}@high"\njudge_version = "2.1.328"')
    text += (f'\n[gateway]\nanthropic = "{upstream.url}"\nopenai = "{upstream.url}"\n'
             f'upstream_network = "{upstream.network}"\n'
             f'[gateway.prices]\n"{MODEL}" = {{ input = 3.0, output = 15.0 }}\n')
    path.write_text(text)
    return load_manifest(path)


def _commits(loaded: LoadedManifest) -> tuple[str, dict[str, str]]:
    """The base, and a fix (the example's reference patch) for two arms."""
    repo = loaded.repo_path
    base = git(repo, "rev-parse", "main")
    git(repo, "checkout", "-q", "-b", "judged")
    git(repo, "apply", str(loaded.root / "reference" / "cap-horizon.patch"))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@bakeoff.invalid", "commit", "-qam", "fix")
    fix = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    return base, {"fixer": fix, "control": base}


def _judge(engine: Engine, loaded: LoadedManifest, monkeypatch: pytest.MonkeyPatch
           ) -> tuple[Path, dict[str, str], list[str]]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    base, commits = _commits(loaded)
    name = loaded.manifest.experiment.name
    stage = stage_dir(experiment_dir(loaded.repo_path, name), CHANGE)
    said: list[str] = []
    try:
        judges.run_judges(ResolvedImages(engine, loaded), CHANGE, commits, base, stage,
                          ["success"], said.append)
    finally:
        left = [c.name for c in engine.labelled("container", {LABEL_EXPERIMENT: name})]
        left += [n.name for n in engine.labelled("network", {LABEL_EXPERIMENT: name})]
        engine.remove_labelled({LABEL_EXPERIMENT: name})
    assert left == []  # the judges' gateway, its networks and the judge containers: gone
    return stage, commits, said


def test_a_claude_code_judge_scores_through_its_gateway_and_reports_its_own_usage(
        engine: Engine, upstream: Upstream, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = _manifest(tmp_path, upstream, MODEL)
    stage, commits, said = _judge(engine, loaded, monkeypatch)
    for arm in commits:
        answer = judge_mod.parse_judgement(layout.judge_answer(stage, arm).read_text())
        assert {d: s.score for d, s in answer.dims().items()} == JUDGE_SCORES
        wire = json.loads(layout.judge_wire(stage, arm).read_text())
        assert (wire["model_observed"], wire["effort_observed"], wire["marks"]) == (
            MODEL, "high", [])
        assert wire["evidence"] == (f"gateway: 1 request to {MODEL}, "
                                    "output_config.effort=high in 1/1")
        assert wire["usage"]["cost_usd"] == pytest.approx((2500 * 3.0 + 400 * 15.0) / 1e6)
    assert said[0] == f"judge: claude-code {MODEL}@high through its gateway, 2 arm(s)"
    seen = [r for r in upstream.requests() if r["path"].startswith("/v1/messages")]
    assert len(seen) == 2 and {r["headers"]["x-api-key"] for r in seen} == {KEY}
    assert all(not r["body"].get("tools") for r in seen)  # the judge runs no tools
    prompts = {json.dumps(r["body"]["messages"]) for r in seen}
    fixed = [p for p in prompts if "MAX_HORIZON_DAYS = len(SEASONAL_PROFILE)" in p]
    assert len(fixed) == 1  # the fixer's diff reached its judge, and only its judge
    keys = [str(p) for p in stage.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert keys == []


def test_a_judge_that_answers_no_judgement_is_a_rig_error_naming_the_arm(
        engine: Engine, upstream: Upstream, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider's default script says "not a judgement": the judge's failure is the
    rig's (exit 3), never a score against the arm; nothing is kept as its answer."""
    loaded = _manifest(tmp_path, upstream, "claude-judge-unscripted")
    with pytest.raises(RigError, match="its answer is not JSON") as caught:
        _judge(engine, loaded, monkeypatch)
    assert caught.value.exit_code == 3
    stage = stage_dir(experiment_dir(loaded.repo_path, loaded.manifest.experiment.name), CHANGE)
    kept = {p.name for p in layout.judge_dir(stage).glob("*.json")}
    assert kept == {"fixer.wire.json", "control.wire.json"}  # its requests, for the post-mortem


class RecordingEngine(Engine):
    """The choke point, keeping what the engine said of every container created through
    it (`containers.create` returns the container as inspected once made)."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine.client)
        self.created: list[dict[str, Any]] = []

    def call(self, what: str, fn: Callable[..., T], *args: Any, retry: bool = False,
             **kwargs: Any) -> T:
        result = super().call(what, fn, *args, retry=retry, **kwargs)
        if isinstance(getattr(fn, "__self__", None), ContainerCollection) and getattr(
                fn, "__name__", "") == "create":
            made: Any = result
            self.created.append(made.attrs)
        return result


def test_the_judge_and_its_gateway_get_nothing_through_a_host_path(
        engine: Engine, upstream: Upstream, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24, the judge's rows: every container a judging session runs (its gateway,
    each judge) has no bind of a path of this machine; the gateway's one mount is its
    state volume, a judge has none (its prompt came on its stdin), and the judge's records
    were read back into the stage all the same."""
    recording = RecordingEngine(engine)
    stage, commits, _ = _judge(recording, _manifest(tmp_path, upstream, MODEL), monkeypatch)
    roles = sorted(c["Config"]["Labels"]["io.bakeoff.role"] for c in recording.created)
    # The gateway, and the filler that put its state into its volume (never started).
    assert roles == ["judge"] * len(commits) + ["judge-gateway"] * 2
    started = [c for c in recording.created if c["Config"]["Cmd"][:3] == ["python3", "-m",
                                                                          "gateway"]]
    assert len(started) == 1 and started[0]["Config"]["Labels"]["io.bakeoff.role"] == \
        "judge-gateway"
    for created in recording.created:
        host = created["HostConfig"]
        assert not host["Binds"], created["Name"]
        assert [m["Type"] for m in host.get("Mounts") or []] == (
            ["volume"] if created["Config"]["Labels"]["io.bakeoff.role"] == "judge-gateway"
            else [])
        assert "bind" not in [m["Type"] for m in created["Mounts"]]
    judges = [c for c in recording.created if c["Config"]["Labels"]["io.bakeoff.role"] == "judge"]
    assert all(c["Config"]["OpenStdin"] and c["Config"]["StdinOnce"] for c in judges)
    records = layout.gateway_requests(layout.judge_dir(stage), CHANGE).read_text()
    assert sorted(json.loads(line)["arm"] for line in records.splitlines()) == sorted(commits)
