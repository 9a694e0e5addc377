"""Two Anthropic-compatible upstreams in one experiment (issue 32), through `up` ->
`dispatch` with the real, pinned Claude Code: arm `claude-high` names upstream `vendor`,
`claude-low` names `moonshot`, each a scripted provider container with a key of its own
(tests/fakes/scripted_provider.py, on the test's internal network, the gateway's
`upstream_network`). Each arm's requests reach its own provider only, with its own key;
neither key is ever seen by the other provider or inside a sandbox; the records name the
upstream of every request. (The bundled example's other arms, its database and its judge
are left out: test_real_agents.py runs those.)"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.commands import demo
from runner.commands import down as down_mod
from runner.commands import up as up_mod
from runner.commands.dispatch import run as dispatch_mod
from runner.containers.backend import LABEL_EXPERIMENT
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import LoadedManifest, load_manifest
from runner.store import layout
from runner.store import state as state_mod
from tests.integration.provider_lab import Upstream, scripted_provider

FIX = "sh /agents/fixer.sh /tmp/bakeoff/brief.md"
SCRIPT = {"steps": [{"shell": FIX}, {"say": "fixed and committed"}],
          "usage": {"input": 1000, "output": 200, "cache_read": 0, "cache_write": 0,
                    "reasoning": 0}}
KEYS = {"vendor": ("VENDOR_API_KEY", "sk-ant-vendor-" + "v3n" * 8),
        "moonshot": ("MOONSHOT_API_KEY", "sk-moonshot-" + "m00" * 8)}
ARMS = {"claude-high": "vendor", "claude-low": "moonshot"}
CHANGE = "cap-horizon"

pytestmark = pytest.mark.docker


@pytest.fixture
def providers(engine: Engine, built_images: dict[str, BuiltImage], tmp_path: Path
              ) -> Iterator[dict[str, Upstream]]:
    """Two scripted providers; the second joins the first's network (the gateway's)."""
    with contextlib.ExitStack() as stack:
        found = {}
        for name in KEYS:
            (tmp_path / name).mkdir()
            found[name] = stack.enter_context(scripted_provider(engine, tmp_path / name,
                                                                SCRIPT))
        engine.client.networks.get(found["vendor"].network).connect(found["moonshot"].provider)
        yield found


def _manifest(tmp_path: Path, providers: dict[str, Upstream]) -> LoadedManifest:
    path = demo.prepare(tmp_path / "example").parent / "agents.toml"
    text = path.read_text().replace('"horizon-agents"', f'"up-{secrets.token_hex(3)}"')
    text = text.replace('[database]\nimage = "postgres"\n', "")
    text = re.sub(r'judge = "codex:[^\n]*\njudge_version = [^\n]*\n', 'judge = "none"\n', text)
    text = text.replace("max_requests_per_arm = 6",
                        f'max_requests_per_arm = 6\nupstream_network = '
                        f'"{providers["vendor"].network}"')
    head, *arms = text.split("[[arms]]")
    text = head + "".join(  # claude-high on vendor, claude-low on moonshot
        "[[arms]]" + re.sub(r'secrets = \["ANTHROPIC_API_KEY"\][^\n]*', f'upstream = "{name}"',
                            block) for block, name in zip(arms, ARMS.values(), strict=False))
    for name, (variable, _) in KEYS.items():
        text += (f'\n[[gateway.upstreams]]\nname = "{name}"\nprotocol = "anthropic"\n'
                 f'base_url = "{providers[name].url}"\nkey = "{variable}"\n')
    path.write_text(text)
    return load_manifest(path)


def _arm(directory: Path, arm: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(
        (directory / "stages" / CHANGE / "arms" / arm / "arm.json").read_text())
    return record


def test_two_anthropic_upstreams_each_arm_reaches_its_own_with_its_own_key(
        engine: Engine, providers: dict[str, Upstream], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for variable, value in KEYS.values():
        monkeypatch.setenv(variable, value)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    loaded = _manifest(tmp_path, providers)
    assert {a.id: a.upstream for a in loaded.manifest.arms} == ARMS
    try:
        up_mod.up(engine, loaded)
        dispatched = dispatch_mod.dispatch(engine, loaded)
        assert {o.record.arm: o.record.state for o in dispatched.outcomes} == dict.fromkeys(
            ARMS, "finished"), [o.record.error for o in dispatched.outcomes]
        directory, current = state_mod.require_up(loaded)
        for arm in current.arms:  # no key in any sandbox's environment
            env = "\n".join(engine.client.containers.get(arm.container_id)
                            .attrs["Config"]["Env"])
            assert not [v for _, v in KEYS.values() if v in env]
    finally:
        with contextlib.suppress(Exception):
            down_mod.down(engine, loaded)
        engine.remove_labelled({LABEL_EXPERIMENT: loaded.manifest.experiment.name})
    records = [json.loads(line) for line in layout.gateway_requests(
        layout.stage_dir(directory, CHANGE), CHANGE).read_text().splitlines()]
    forwarded = [r for r in records if r["refused"] is None]
    assert {(r["arm"], r["upstream"]) for r in forwarded} == set(ARMS.items())
    for arm, upstream in ARMS.items():
        seen = providers[upstream].requests()
        mine = [r for r in forwarded if r["arm"] == arm]
        # The provider saw exactly the arm's forwarded requests, each with its own key.
        assert len(seen) == len(mine) == 2, (arm, seen, mine)
        assert {r["headers"]["x-api-key"] for r in seen} == {KEYS[upstream][1]}
        other = next(v for n, (_, v) in KEYS.items() if n != upstream)
        assert other not in json.dumps(seen)
        record = _arm(directory, arm)
        assert record["marks"] == [] and record["commits"] == 1
        assert record["effort_evidence"].startswith("gateway: 2 requests to claude-opus-4-8, ")
