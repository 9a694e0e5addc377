"""A sample's container writes nothing on the engine's disk: every directory its driver or
its command writes is a tmpfs, the driver's outputs included (`driver.OUT`). On the
container's layer, an engine whose disk was full lost the observer's records while the
command ran, and an honest pass was judged `tampered` (test_engine_outage.py measured it:
"the observer heard nothing", the command's own log saying `2 passed, 1 xfailed`)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.containers import browser, sandbox
from runner.containers.backend import ContainerSpec, Tmpfs
from runner.containers.images import BuiltImage
from runner.containers.samples import driver
from runner.containers.samples.container import OUT_TMPFS_MB, SampleContainers
from runner.containers.samples.setting import SettingMaker


def sample_spec(env: dict[str, str], secrets: frozenset[str] = frozenset()) -> ContainerSpec:
    facts = SimpleNamespace(writable_dirs=lambda: ("/var/cache/app",))
    containers = SampleContainers(
        None, "horizon", "r1", BuiltImage("bakeoff/python", "bakeoff/python:x", "sha256:i",
                                          "sha256:d", cached=True),
        sandbox.SandboxLimits(disk_mb=512), facts, None)  # type: ignore[arg-type]
    return containers.container_spec(
        SimpleNamespace(arm="fixer"),  # type: ignore[arg-type]
        SimpleNamespace(network="net", env=env, secrets=secrets),  # type: ignore[arg-type]
        ["true"], purpose="sample c/fixer/success/1")


def test_the_driver_s_outputs_are_in_memory_root_s_alone_and_hold_the_most_read_back(
        ) -> None:
    made = sample_spec({})
    mounted = {t.target: t for t in made.tmpfs}
    assert mounted[driver.OUT] == Tmpfs(driver.OUT, OUT_TMPFS_MB, "0700", executable=False)
    assert max(driver.OUTPUTS_LIMIT, browser.OUTPUTS_LIMIT) < OUT_TMPFS_MB * 1024 * 1024
    # At its fullest: everything read back, and one more file written whole before it is
    # weighed against what is left (the driver's collect loop); a file cut short there
    # by a full tmpfs would be read back as if it were whole.
    assert driver.OUTPUTS_LIMIT + driver.FILE_LIMIT + 1 < OUT_TMPFS_MB * 1024 * 1024
    # Every directory the driver writes: its outputs, the run's output, the observer's
    # socket, its inputs; and the command's: /work, HOME, /tmp and the image's own.
    assert {driver.OUT, driver.RUN, driver.OBS, driver.IN, sandbox.WORKDIR, "/tmp",
            "/var/tmp", "/run/lock", "/var/cache/app"} <= set(mounted)
    assert made.read_only is False and made.mounts == ()


def test_a_sample_s_database_url_is_a_secret_variable_and_the_rest_plain() -> None:
    """The sample's role's password never goes into a Pod's spec on a cluster (a Secret's
    there, `secret_env`); the same variables on docker (`dockerspec`: env and secret_env
    merged)."""
    url = "postgresql://s_1a2b:pw-of-the-sample@db:5432/horizon"
    made = sample_spec({"HOME": "/home/agent", "DATABASE_URL": url, "PYTHONSAFEPATH": "1"},
                       frozenset({"DATABASE_URL"}))
    assert (dict(made.env), dict(made.secret_env)) == (
        {"HOME": "/home/agent", "PYTHONSAFEPATH": "1"}, {"DATABASE_URL": url})
    plain = sample_spec({"HOME": "/home/agent", "DATABASE_URL": "not a secret here"})
    assert (dict(plain.env), dict(plain.secret_env)) == (
        {"HOME": "/home/agent", "DATABASE_URL": "not a secret here"}, {})


def test_the_setting_marks_the_database_url_and_nothing_else_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`SettingMaker.setting`: the manifest's `url_env`, set to the sample's fresh schema's
    URL, is the setting's one secret; a manifest with no database has none."""
    url = "postgresql://s_1a2b:pw-of-the-sample@db:5432/horizon"
    networks = SimpleNamespace(network=lambda arm: f"{arm}-net", fresh_database=lambda: (
        contextlib.nullcontext(SimpleNamespace(url=lambda: url))))
    spec = SimpleNamespace(stack=None, arm="fixer", sample="c/fixer/success/1",
                           parser="pytest", ratchet=None, browser=None)
    tree = SimpleNamespace(go_work=False, canary=None)
    found = {}
    for url_env in ("DATABASE_URL", None):
        maker = SettingMaker(tmp_path, sandbox.SandboxLimits(), url_env,
                             networks, None, None, tmp_path)  # type: ignore[arg-type]
        monkeypatch.setattr(maker, "_tree", lambda spec, inputs: (tree, None))
        with maker.setting(spec) as setting:  # type: ignore[arg-type]
            found[url_env] = (setting.secrets, setting.env.get("DATABASE_URL"))
    assert found == {"DATABASE_URL": (frozenset({"DATABASE_URL"}), url),
                     None: (frozenset(), None)}
