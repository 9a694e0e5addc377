"""What resume does with each of the experiment's services (issue 31, item 2), without
docker: the engine's state of a recorded container -> kept, started or refused; the
refusal's line; an arm whose dispatch the outage cut is never scored."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from runner.commands import demo, services
from runner.commands.dispatch.brief import BRIEF_PATH
from runner.commands.dispatch.record import ArmRecord, ArmState, save_record
from runner.commands.dispatch.redact import Redactor
from runner.commands.services import ServiceState, Step
from runner.containers.engine import Engine
from runner.errors import EngineUnreachableError, InfraError
from runner.manifest import LoadedManifest, load_manifest
from runner.store import layout
from runner.store.state import ArmSandbox, DbState, ExperimentState, GatewayState


@pytest.mark.parametrize(("engine_state", "expected"), [
    ("running", ServiceState.RUNNING), ("paused", ServiceState.RUNNING),
    ("restarting", ServiceState.RUNNING),
    ("created", ServiceState.STOPPED), ("exited", ServiceState.STOPPED),
    ("dead", ServiceState.GONE), ("removing", ServiceState.GONE), ("missing", ServiceState.GONE),
    ("something-new", ServiceState.GONE)])
def test_each_engine_state_of_a_container_is_running_stopped_or_gone(
        engine_state: str, expected: ServiceState) -> None:
    assert services.found(engine_state) is expected


def test_running_is_kept_stopped_is_started_gone_is_refused_unless_nothing_needs_it() -> None:
    assert [services.decide(state) for state in ServiceState] == [
        Step.KEEP, Step.START, Step.REFUSE]
    assert [services.decide(state, needed=False) for state in ServiceState] == [
        Step.KEEP, Step.START, Step.SPARE]


def state(*, db: bool = True, gateway: bool = True) -> ExperimentState:
    arms = [ArmSandbox(arm=arm, container_id=f"{arm.lower()}" * 64, container_name=arm,
                       network="n", egress=False, checkout="w", home="h",
                       schema_name=f"bk_e_{arm.lower()}", schema_password="pw")
            for arm in ("A", "B")]
    return ExperimentState(
        experiment="e", run="r1", change="first", phase="up", base_commit="0" * 40,
        image="i", image_id="sha256:i", image_identity="x", limits={}, arms=arms,
        db=DbState(container_id="d" * 64, admin_password="p", network="n",
                   url_env="DATABASE_URL") if db else None,
        gateway=GatewayState(container_id="e" * 64, container_name="g", network="n",
                             state_dir="s") if gateway else None)


def test_the_services_are_the_postgres_then_the_gateway_then_each_arms_sandbox() -> None:
    shown = [str(s) for s in services.services(state())]
    assert shown == ["the experiment's Postgres (container dddddddddddd)",
                     "the model gateway (container eeeeeeeeeeee)",
                     "arm A's sandbox (container aaaaaaaaaaaa)",
                     "arm B's sandbox (container bbbbbbbbbbbb)"]
    assert [s.kind for s in services.services(state(db=False, gateway=False))] == [
        services.SANDBOX, services.SANDBOX]


def test_an_engine_restart_starts_every_stopped_service_and_keeps_the_running_ones() -> None:
    """What a daemon restart leaves: every container exited; one already started again."""
    current = state()
    states = {"d" * 64: "exited", "e" * 64: "exited", "a" * 64: "running", "b" * 64: "created"}
    chosen = services.plan(current, states, done={"B"})
    assert [(s.kind, s.arm, step) for s, step in chosen.steps] == [
        ("postgres", "", Step.START), ("gateway", "", Step.START),
        ("sandbox", "A", Step.KEEP), ("sandbox", "B", Step.START)]
    assert chosen.gone == []
    assert [s.arm for s in chosen.to_start] == ["", "", "B"]


def test_a_container_the_engine_lost_that_an_arm_still_needs_is_refused_with_the_fix() -> None:
    current = state()
    states = {"e" * 64: "running", "a" * 64: "running", "b" * 64: "dead"}  # no Postgres
    chosen = services.plan(current, states, done=set())
    assert [str(s) for s in chosen.gone] == [
        "the experiment's Postgres (container dddddddddddd)",
        "arm B's sandbox (container bbbbbbbbbbbb)"]
    error = services.gone_error(chosen.gone, "tcp://10.0.0.2:2375", Path("/r/bakeoff.toml"))
    assert isinstance(error, InfraError) and error.exit_code == 3
    assert str(error) == (
        "the engine at tcp://10.0.0.2:2375 no longer has the experiment's Postgres "
        "(container dddddddddddd), arm B's sandbox (container bbbbbbbbbbbb): the "
        "experiment cannot resume on it\n"
        "  fix: run `bakeoff-sandbox down -f /r/bakeoff.toml`, then `bakeoff-sandbox run -f "
        "/r/bakeoff.toml` (an arm whose work is kept is not dispatched again)")


def test_a_container_lost_that_no_arm_still_to_dispatch_needs_is_spared() -> None:
    """Every arm dispatched: neither the Postgres (score makes a server of its own), nor
    the gateway, nor a sandbox is needed; A still to dispatch needs its sandbox and the
    Postgres (its database), not the gateway (A is no gateway arm) nor B's sandbox."""
    current = state()
    current = current.model_copy(update={"arms": [
        current.arms[0], current.arms[1].model_copy(update={"gateway_token": "t"})]})
    lost: dict[str, str] = {}
    assert {step for _, step in services.plan(current, lost, {"A", "B"}).steps} == {
        Step.SPARE}
    assert [(s.kind, s.arm, step) for s, step in services.plan(current, lost, {"B"}).steps] == [
        ("postgres", "", Step.REFUSE), ("gateway", "", Step.SPARE),
        ("sandbox", "A", Step.REFUSE), ("sandbox", "B", Step.SPARE)]
    assert [step for _, step in services.plan(current, lost, {"A"}).steps] == [
        Step.REFUSE, Step.REFUSE, Step.SPARE, Step.REFUSE]  # B, a gateway arm, still to go


@pytest.fixture
def horizon(tmp_path: Path) -> LoadedManifest:
    root = tmp_path / "example"
    demo.prepare(root)
    return load_manifest(root / "bakeoff.toml")


def write_record(loaded: LoadedManifest, change: str, arm: str, **changes: object) -> None:
    fields: dict[str, object] = dict(
        experiment=loaded.manifest.experiment.name, change=change, arm=arm, attempt=1,
        state=ArmState.FINISHED, run="r1", container="k", image_id="i", network="n",
        egress=False, adapter="command", command="x", env={}, secrets=[],
        brief_path=BRIEF_PATH, brief_sha256="s", brief_file_sha256="f",
        dispatch_timeout_s=10.0, base_commit="b", started_at="t", model="m",
        effort="high", effort_normalized="high", effort_provenance="experiment_config",
        effort_evidence="declared", mode="single_agent", control=False)
    fields.update(changes)
    directory = layout.experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    save_record(layout.arm_record(directory, change, arm), ArmRecord.model_validate(fields),
                Redactor([]))


def test_an_arm_whose_dispatch_the_outage_cut_is_never_scored(
        horizon: LoadedManifest) -> None:
    change = horizon.manifest.changes[0].id
    first, second, *rest = [arm.id for arm in horizon.manifest.arms]
    services.require_dispatched(horizon, change)  # no record yet: score's to judge
    write_record(horizon, change, first, state=ArmState.FAILED, exit_code=1)
    for arm in rest:
        write_record(horizon, change, arm, state=ArmState.TIMED_OUT)
    write_record(horizon, change, second, state=ArmState.RIG_ERROR, attempt=2,
                 error="the sandbox stopped under the agent (it is exited)")
    with pytest.raises(services.DispatchCutError) as raised:
        services.require_dispatched(horizon, change)
    assert raised.value.exit_code == 3
    assert str(raised.value) == (
        f"{change}: the dispatch of arm {second} (attempt 2, rig_error: the sandbox stopped "
        "under the agent (it is exited)) did not finish: not scored\n"
        f"  fix: run `bakeoff-sandbox run -f {horizon.path}` (or `dispatch`): it dispatches "
        "that arm again from the base")
    write_record(horizon, change, second, state=ArmState.RUNNING)  # the orchestrator died
    with pytest.raises(services.DispatchCutError, match=rf"arm {second} \(attempt 1, running\)"):
        services.require_dispatched(horizon, change)
    write_record(horizon, change, second, state=ArmState.FINISHED, exit_code=0)
    services.require_dispatched(horizon, change)  # every one done: scored


def test_no_engine_answering_is_one_line_naming_its_address() -> None:
    """A closed port: the ping `restore` starts with is `EngineUnreachableError`, exit 3."""
    engine = Engine(docker.DockerClient(base_url="tcp://127.0.0.1:9", version="1.41",
                                        timeout=5))
    with pytest.raises(EngineUnreachableError) as raised:
        engine.ping()
    assert raised.value.exit_code == 3
    assert raised.value.message.startswith("no Docker engine answers at tcp://127.0.0.1:9")
