"""up / down / gc / exec through the real command line, with a real engine."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.commands import down as down_mod
from runner.commands import up as up_mod
from runner.commands.dispatch.record import RECORD_FILE, ArmState, record_dir, save_record
from runner.commands.dispatch.redact import Redactor
from runner.containers import database, images, sandbox
from runner.containers.backend import LABEL_EXPERIMENT, LABEL_RUN, Labels
from runner.containers.engine import Engine
from runner.errors import ImageMissingError, SandboxUnavailableError
from runner.manifest import LoadedManifest, load_manifest
from runner.store import state as state_mod
from runner.store.layout import experiment_dir
from tests.integration.helpers import CORE, PlainReporter, cleanup, cli, git, make_target
from tests.unit.test_dispatch_units import record as arm_record


def ours(engine: Engine, experiment: str) -> dict[str, int]:
    flt = {LABEL_EXPERIMENT: experiment}
    return {kind: len(engine.labelled(kind, flt)) for kind in ("container", "network", "volume")}


def test_up_down_up_leaves_nothing_behind(engine: Engine, target: LoadedManifest) -> None:
    name = target.manifest.experiment.name
    first = up_mod.up(engine, target, options=CORE)
    # Per arm: its container, network, checkout volume and HOME volume; plus Postgres,
    # and the brief's volume every sandbox reads (through the engine, not a host path).
    assert ours(engine, name) == {"container": 3, "network": 3, "volume": 5}
    assert first.db is not None
    server = database.find_server(engine, first.db.container_id)
    prefix = database.role_name(name, "")
    admin = database.Admin(engine, server)
    assert database.list_owned(admin, prefix) == ([f"{prefix}a", f"{prefix}b"],
                                                  [f"{prefix}a", f"{prefix}b"])
    report = down_mod.down(engine, target)
    assert report.dropped == [f"{prefix}a", f"{prefix}b"]
    assert (report.databases_left, report.roles_left) == ([], [])
    assert report.removed == {"container": 3, "network": 3, "volume": 5}
    assert ours(engine, name) == {"container": 0, "network": 0, "volume": 0}
    second = up_mod.up(engine, target, options=CORE)
    assert second.run != first.run
    assert down_mod.exec_arm(engine, target, "B", ["echo", "again"]).stdout == "again\n"


def test_cli_status_exec_and_exit_codes(engine: Engine, target: LoadedManifest) -> None:
    repo = target.repo_path
    up = cli(repo, "up", timeout=300)
    assert up.returncode == 0, up.stderr
    rows = json.loads(cli(repo, "status", "--json", timeout=300).stdout)
    head = git(repo, "rev-parse", "main")
    assert [(r["arm"], r["state"], r["dispatch"], r["commit"]) for r in rows] == [
        ("A", "running", "not dispatched", head), ("B", "running", "not dispatched", head)]
    assert {r["schema"] for r in rows} == {database.role_name(target.manifest.experiment.name, a)
                                           for a in ("a", "b")}
    # Issue 24: the engine the work runs on, by its address and its own ID.
    info = engine.client.info()
    assert {json.dumps(r["engine"], sort_keys=True) for r in rows} == {json.dumps(
        {"host": "unix:///var/run/docker.sock", "id": info["ID"], "name": info["Name"]},
        sort_keys=True)}
    table = cli(repo, "status", timeout=300)
    assert f"engine: unix:///var/run/docker.sock ({info['Name']}, ID {info['ID'][:12]})" \
        in table.stdout
    ran = cli(repo, "exec", "A", "--", "sh", "-c", "echo $BAKEOFF_ARM; id -u; exit 7", timeout=300)
    assert (ran.returncode, ran.stdout) == (7, "A\n1000\n")
    unknown = cli(repo, "exec", "Z", "--", "true", timeout=300)
    assert unknown.returncode == 2
    assert "no arm 'Z'" in unknown.stderr and "Traceback" not in unknown.stderr
    again = cli(repo, "up", timeout=300)
    assert again.returncode == 2 and "already up" in again.stderr


def test_status_shows_each_arms_dispatch_state_from_the_record_of_this_run(
        engine: Engine, target: LoadedManifest) -> None:
    """Beside the sandbox state, the state of the arm record of the run that is up; a
    record left by an earlier `up` is not this run's: "not dispatched"."""
    made = up_mod.up(engine, target, options=CORE)
    directory = experiment_dir(target.repo_path, target.manifest.experiment.name)
    for arm, run, state in (("A", made.run, ArmState.FAILED),
                            ("B", "an-earlier-up", ArmState.FINISHED)):
        folder = record_dir(directory, made.change, arm)
        folder.mkdir(parents=True, exist_ok=True)
        save_record(folder / RECORD_FILE, arm_record(arm=arm, run=run, state=state,
                                                     change=made.change, commit="f" * 40),
                    Redactor([]))
    rows = down_mod.status_rows(engine, target)
    assert [(r["arm"], r["state"], r["dispatch"], r["commit"]) for r in rows] == [
        ("A", "running", "failed", "f" * 40), ("B", "running", "not dispatched", made.base_commit)]
    table = cli(target.repo_path, "status", timeout=300)
    assert table.returncode == 0, table.stderr
    assert re.search(r"^ A .*\brunning +failed +sha256:", table.stdout, re.MULTILINE)
    assert re.search(r"^ B .*\brunning +not dispatched +sha256:", table.stdout, re.MULTILINE)


def test_up_refuses_a_dirty_tree_including_untracked_files(engine: Engine,
                                                           target: LoadedManifest) -> None:
    repo = target.repo_path
    (repo / "scratch.txt").write_text("not committed\n")
    refused = cli(repo, "up", timeout=300)
    assert refused.returncode == 2
    assert "untracked files: scratch.txt" in refused.stderr
    assert "git stash -u" in refused.stderr and "Traceback" not in refused.stderr
    assert ours(engine, target.manifest.experiment.name)["container"] == 0


def test_second_concurrent_up_is_refused(engine: Engine, target: LoadedManifest) -> None:
    repo = target.repo_path
    first = subprocess.Popen([sys.executable, "-m", "runner.cli", "up"], cwd=repo,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = repo / ".bakeoff" / target.manifest.experiment.name / "lock"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "(up)" not in (lock.read_text() if lock.exists() else ""):
        time.sleep(0.02)
    second = cli(repo, "up", timeout=300)
    assert first.wait(timeout=120) == 0
    assert second.returncode == 2
    assert f"experiment '{target.manifest.experiment.name}' is busy" in second.stderr
    assert f"pid {first.pid} (up)" in second.stderr


def test_gc_after_sigkill_mid_up_removes_only_labelled_leftovers(
        engine: Engine, target: LoadedManifest, built_images: dict[str, images.BuiltImage]
        ) -> None:
    repo = target.repo_path
    name = target.manifest.experiment.name
    foreign = engine.client.containers.run(built_images["python"].image_id, ["sleep", "300"],
                                           detach=True, labels={"test.foreign": name})
    try:
        up = subprocess.Popen([sys.executable, "-m", "runner.cli", "up"], cwd=repo,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and ours(engine, name)["container"] == 0:
            time.sleep(0.05)
        os.kill(up.pid, signal.SIGKILL)
        up.wait()
        assert up.returncode == -signal.SIGKILL
        left = ours(engine, name)
        assert left["container"] + left["network"] > 0
        swept = cli(repo, "gc", timeout=300)
        assert swept.returncode == 0, swept.stderr
        assert ours(engine, name) == {"container": 0, "network": 0, "volume": 0}
        foreign.reload()
        assert foreign.status == "running"
        assert up_mod.up(engine, target, options=CORE).phase == "up"
    finally:
        foreign.remove(force=True)


def test_gc_keeps_a_live_experiment_and_removes_an_orphan_run(
        engine: Engine, target: LoadedManifest, built_images: dict[str, images.BuiltImage]
        ) -> None:
    name = target.manifest.experiment.name
    live = up_mod.up(engine, target, options=CORE)
    orphan_labels = Labels(name, "arm", "A", run="deadbe").as_dict()
    engine.client.containers.run(built_images["python"].image_id, ["sleep", "300"],
                                 detach=True, labels=orphan_labels)
    removed = down_mod.gc(engine, target)
    assert removed == {"container": 1, "network": 0, "volume": 0}
    runs = {c.labels[LABEL_RUN] for c in engine.labelled("container", {LABEL_EXPERIMENT: name})}
    assert runs == {live.run}


def test_gc_after_run_killed_in_scoring_removes_a_sample_network_the_live_db_is_on(
        engine: Engine, target: LoadedManifest) -> None:
    """Regression (issue 11): `run` SIGKILLed during scoring left its sample network with the
    experiment's Postgres (kept: it belongs to the live run) still attached, and `gc` crashed
    with `APIError: 403 ... has active endpoints`. Now gc disconnects it and removes only the
    network: exit 0, the network gone, the Postgres still running and answering."""
    name = target.manifest.experiment.name
    live = up_mod.up(engine, target, options=CORE)
    assert live.db is not None
    orphan = sandbox.network_name(name, "A-samples", "deadbe")
    engine.create_network(orphan, Labels(name, "sample-network", "A", "deadbe"),
                           egress=False)
    engine.client.networks.get(orphan).connect(live.db.container_id,
                                               aliases=[database.DB_ALIAS])
    swept = cli(target.repo_path, "gc", timeout=300)
    assert swept.returncode == 0, swept.stderr
    assert swept.stderr == "gc: removed 0 containers, 1 networks, 0 volumes\n"
    assert engine.client.networks.list(names=[orphan]) == []
    db = engine.client.containers.get(live.db.container_id)
    assert db.status == "running"
    assert orphan not in db.attrs["NetworkSettings"]["Networks"]
    server = database.find_server(engine, live.db.container_id)
    prefix = database.role_name(name, "")
    admin = database.Admin(engine, server)
    assert database.list_owned(admin, prefix)[0] == [f"{prefix}a", f"{prefix}b"]


def test_gc_goes_on_past_a_refused_resource_and_names_it_when_it_stays(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage]) -> None:
    """One resource the engine refuses (an orphan volume a kept container still uses) does
    not stop the sweep: the orphan network after it is removed; `gc` then exits 3 naming
    the volume and the engine's answer, never a traceback; the kept container runs on."""
    loaded = load_manifest(make_target(tmp_path / "repo", ["A"], database=False))
    name = loaded.manifest.experiment.name
    try:
        live = up_mod.up(engine, loaded, options=CORE)
        volume = engine.client.volumes.create(
            name=f"{name}-scratch-deadbe", labels=Labels(name, "scratch", "", "deadbe").as_dict())
        kept = engine.client.containers.run(
            built_images["python"].image_id, ["sleep", "300"], detach=True,
            labels=Labels(name, "arm", "A", live.run).as_dict(),
            volumes={volume.name: {"bind": "/scratch", "mode": "rw"}})
        orphan = sandbox.network_name(name, "A-samples", "deadbe")
        engine.create_network(orphan, Labels(name, "sample-network", "A", "deadbe"),
                               egress=False)
        swept = cli(loaded.repo_path, "gc", timeout=300)
        assert swept.returncode == 3
        assert (f"1 of our resources are still there after removal: volume {volume.name} ("
                in swept.stderr)
        assert "volume is in use" in swept.stderr and "Traceback" not in swept.stderr
        assert engine.client.networks.list(names=[orphan]) == []
        kept.reload()
        assert kept.status == "running"
    finally:
        cleanup(engine, loaded)


def test_missing_image_is_a_clear_error_never_a_pull(engine: Engine, tmp_path: Path) -> None:
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    text = manifest.read_text().replace('image = "python"', 'image = "nosuchtool"')
    manifest.write_text(text)
    git(manifest.parent, "commit", "-qam", "use a toolchain image that was never built")
    refused = cli(manifest.parent, "up", timeout=300)
    assert refused.returncode == 3
    assert "image bakeoff/nosuchtool:latest is not present locally" in refused.stderr
    assert "bakeoff-sandbox images build nosuchtool" in refused.stderr
    cleanup(engine, load_manifest(manifest))


def test_second_images_build_is_all_cache_hits(engine: Engine,
                                               built_images: dict[str, images.BuiltImage]
                                               ) -> None:
    again = images.build(engine, ["base", "python", "postgres"], PlainReporter())
    assert sorted((b.name, b.cached) for b in again) == [
        ("base", True), ("postgres", True), ("python", True)]
    assert {b.name: b.image_id for b in again} == {
        n: built_images[n].image_id for n in ("base", "python", "postgres")}
    base = built_images["base"]
    attrs = engine.client.images.get(base.image_id).attrs
    assert base.identity == attrs["RootFS"]["Layers"][0]


@pytest.mark.parametrize("arms", [["A"]])
def test_up_without_database_has_no_schema(engine: Engine, tmp_path: Path,
                                           arms: list[str]) -> None:
    loaded = load_manifest(make_target(tmp_path / "repo", arms, database=False))
    try:
        made = up_mod.up(engine, loaded, options=CORE)
        assert made.db is None and made.arms[0].schema_name is None
        env = down_mod.exec_arm(engine, loaded, "A", ["sh", "-c", "echo ${DATABASE_URL:-none}"])
        assert env.stdout == "none\n"
    finally:
        cleanup(engine, loaded)


def test_changed_dockerfile_rebuilds_and_unchanged_is_a_cache_hit(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage]) -> None:
    context = tmp_path / "images" / "tiny"
    context.mkdir(parents=True)
    dockerfile = "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN echo {word} > /word\n"
    (context / "Dockerfile").write_text(dockerfile.replace("{word}", "one"))
    base = built_images["base"]
    build = [images.build_image(engine, "tiny", base, PlainReporter(), directory=context.parent)
             for _ in range(2)]
    (context / "Dockerfile").write_text(dockerfile.replace("{word}", "two"))
    changed = images.build_image(engine, "tiny", base, PlainReporter(), directory=context.parent)
    try:
        assert [b.cached for b in build] == [False, True]
        assert build[0].image_id == build[1].image_id
        assert changed.cached is False and changed.identity != build[0].identity
        word = engine.client.containers.run(changed.image_id, ["cat", "/word"], remove=True)
        assert word == b"two\n"
    finally:
        engine.client.images.remove(changed.tag, force=True)
        for image_id in {build[0].image_id}:
            engine.client.images.remove(image_id, force=True)


def test_exec_reports_a_timeout_as_a_value_and_a_vanished_sandbox_as_an_error(
        engine: Engine, target: LoadedManifest) -> None:
    up_mod.up(engine, target, options=CORE)
    _, current = state_mod.require_up(target)
    a = current.arm("A")
    assert a is not None
    slow = sandbox.exec_in(engine, a.container_id, "sleep 30", timeout_s=2)
    assert (slow.timed_out, slow.exit_code) == (True, 124)
    assert 2 <= slow.duration_s < 10
    engine.client.containers.get(a.container_id).remove(force=True)
    with pytest.raises(SandboxUnavailableError, match="has vanished"):
        sandbox.exec_in(engine, a.container_id, "true", timeout_s=5)


def test_user_base_image_must_exist_locally(engine: Engine) -> None:
    with pytest.raises(ImageMissingError, match="bakeoff/no-such-base:1 is not present"):
        images.build_base(engine, PlainReporter(), "bakeoff/no-such-base:1")
