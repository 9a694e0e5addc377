"""The scripted provider (tests/fakes/scripted_provider.py) as a container on an internal
network of the test's own: the `[gateway] upstream_network` of the tests that run the
real CLIs, so nothing resolves or reaches an address outside this machine's containers."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.containers import sandbox
from runner.containers.backend import LABEL_EXPERIMENT, Bind, ContainerSpec, Labels, Resources
from runner.containers.engine import Engine
from tests.integration.helpers import created

PROVIDER = Path(__file__).resolve().parents[1] / "fakes" / "scripted_provider.py"
PORT = 8000
# What a scripted judge model answers: exactly the four dims (rig.judge.parse_judgement).
JUDGE_SCORES = {"diagnosis": 4, "plan": 3, "code_quality": 5, "intent": 2}
JUDGE_ANSWER = "```json\n" + json.dumps(
    {dim: {"score": score, "evidence": f"scripted judge: {dim}"}
     for dim, score in JUDGE_SCORES.items()}) + "\n```"


@dataclass
class Upstream:
    network: str
    provider: str
    state: Path

    @property
    def url(self) -> str:
        return f"http://{self.provider}:{PORT}"

    def requests(self) -> list[dict[str, Any]]:
        text = (self.state / "requests.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines()]


@contextmanager
def scripted_provider(engine: Engine, tmp_path: Path, script: dict[str, Any]
                      ) -> Iterator[Upstream]:
    """The provider answering `script`, on its own internal network (its own label:
    `down` of an experiment leaves it alone); removed at the end."""
    lab = f"it-{secrets.token_hex(3)}-upstream"
    state = tmp_path / "provider"
    state.mkdir()
    state.chmod(0o777)
    (state / "script.json").write_text(json.dumps(script))
    found = Upstream(f"{lab}-net", f"{lab}-provider", state)
    labels = Labels(experiment=lab, role="provider")
    try:
        engine.create_network(found.network, labels, egress=False)
        spec = ContainerSpec(
            image="bakeoff/python", labels=labels, resources=Resources(1.0, 256, 128),
            user=f"{sandbox.SANDBOX_UID}:{sandbox.SANDBOX_UID}", purpose="scripted provider",
            name=found.provider, network=found.network,
            command=("python3", "/provider/scripted_provider.py", "--script",
                     "/state/script.json", "--log", "/state/requests.jsonl", "--port",
                     str(PORT)),
            mounts=(Bind(PROVIDER.parent, "/provider"), Bind(state, "/state", False)))
        container: Any = created(engine, spec)
        container.start()
        deadline = time.monotonic() + 30
        while b"scripted provider on" not in container.logs():
            assert time.monotonic() < deadline, container.logs()[-2000:]
            time.sleep(0.2)
        yield found
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: lab})
