"""Prepared images: `setup` runs at build time (a sample never has the network), keyed by
the dependency files, so a code-only commit reuses the image and a dependency change
builds its own; what setup generated in /work survives, stale tracked files do not."""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path

import pytest

from rig.verdict import Verdict
from runner.commands import score as score_mod
from runner.containers import host_trust, images, prepared, sandbox
from runner.containers.engine import LABEL_EXPERIMENT, Engine, Labels
from runner.errors import InfraError
from runner.manifest import load_manifest
from tests.integration.helpers import cleanup, git, make_target

TEST = '''from pathlib import Path


def test_setup_output_is_there_and_stale_files_are_not():
    assert Path("generated/deps.copy").read_text() == Path("requirements.txt").read_text()
    assert not Path("old.py").exists()
'''
SETUP = 'setup = ["mkdir -p generated && cp requirements.txt generated/deps.copy"]'


def test_prepared_image_is_reused_for_code_changes_and_rebuilt_for_dependency_changes(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage]) -> None:
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    repo = manifest.parent
    manifest.write_text(manifest.read_text().replace(
        'requires = ["python3", "pytest", "git"]', f'requires = ["python3", "pytest"]\n{SETUP}'))
    (repo / "tests" / "test_app.py").write_text(TEST)
    (repo / "requirements.txt").write_text("dependency v1\n")
    (repo / "old.py").write_text("STALE = True\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "deps v1, a test of setup's output")
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "rm", "-q", "old.py")
    git(repo, "commit", "-qm", "code only: delete old.py")
    code_only = git(repo, "rev-parse", "HEAD")
    loaded = load_manifest(manifest)
    toolchain = built_images["python"]
    made: list[images.BuiltImage] = []
    try:
        made.append(prepared.prepare(engine, repo, first, toolchain, loaded.manifest.toolchain
                                     .setup, print))
        made.append(prepared.prepare(engine, repo, code_only, toolchain,
                                     loaded.manifest.toolchain.setup, print))
        assert [m.cached for m in made] == [False, True]
        assert made[0].image_id == made[1].image_id
        records, _, _ = score_mod.oracle(engine, loaded, "HEAD", "success", 1, None, print)
        assert (records[0].verdict, records[0].image_id) == (Verdict.PASS, made[0].image_id)

        (repo / "requirements.txt").write_text("dependency v2\n")
        git(repo, "commit", "-qam", "deps v2")
        records, _, _ = score_mod.oracle(engine, loaded, "HEAD", "success", 1, None, print)
        assert records[0].verdict is Verdict.PASS, records[0].detail
        assert records[0].image_id != made[0].image_id
        assert records[0].image_identity != made[0].identity
        made.append(images.resolve(engine, f"bakeoff/prepared:{records[0].image_identity[7:23]}"))
    finally:
        for image in {m.tag for m in made}:
            engine.client.images.remove(image, force=True)
        cleanup(engine, loaded)


SEEN = ('printf "%s|%s\\n" "$HTTPS_PROXY" "$no_proxy" > seen-proxy && '
        'for v in SSL_CERT_FILE NODE_EXTRA_CA_CERTS PIP_CERT GIT_SSL_CAINFO; do '
        'eval f=\\$$v; sha256sum < "$f" | cut -d" " -f1; done > seen-ca')


def test_setup_gets_the_host_s_ca_and_proxy_and_the_image_keeps_neither(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21 item 1: `npm ci` behind a TLS-intercepting proxy failed in the prepared
    image's build (SELF_SIGNED_CERT_IN_CHAIN) while the host's npm trusted its CA. The
    build's RUN now sees the host's CA bundle under every client's variable and the
    host's proxy variables; the image (what samples and sandboxes start from) has no
    proxy variable in its config or history and no copy of the bundle. The proxy named
    here is never connected to: the setup only prints what it was given."""
    ca = tmp_path / "corp-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\ncorp\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("no_proxy", "localhost,.corp")
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    loaded = load_manifest(manifest)
    image = prepared.prepare(engine, manifest.parent, git(manifest.parent, "rev-parse", "HEAD"),
                             built_images["python"], [SEEN], print)
    try:
        labels = Labels(loaded.manifest.experiment.name, "prepared-check")
        seen = sandbox.check_image(engine, image.image_id, [
            "sh", "-c", "cat /opt/bakeoff/prepared/work/seen-proxy "
            "/opt/bakeoff/prepared/work/seen-ca; ls /tmp/bakeoff-host-ca.crt 2>&1"], labels)
        bundle = hashlib.sha256(host_trust.ca_bundle()).hexdigest()
        assert b"corp" in host_trust.ca_bundle()
        assert seen.splitlines()[:5] == ["http://proxy.invalid:3128|localhost,.corp",
                                         bundle, bundle, bundle, bundle]
        assert "No such file or directory" in seen.splitlines()[5]
        attrs = engine.client.api.inspect_image(image.image_id)
        env = attrs["Config"]["Env"] or []
        assert not [e for e in env if "proxy" in e.lower() or "CERT" in e or "CAINFO" in e]
        history = json.dumps(engine.client.api.history(image.image_id))
        assert "proxy.invalid" not in history
    finally:
        engine.client.images.remove(image.tag, force=True)
        cleanup(engine, loaded)


def test_a_failed_setup_keeps_its_log_on_the_host_and_names_the_cause(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A setup that fails in colour (as npm does): the error has its last lines without
    escapes, and the path of a log on the host that holds the whole output."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    loaded = load_manifest(manifest)
    failing = ("printf '\\033[91mnpm error code SELF_SIGNED_CERT_IN_CHAIN\\033[0m\\n'; "
               "echo step two of the output; exit 1")
    try:
        with pytest.raises(InfraError) as failed:
            prepared.prepare(engine, manifest.parent, git(manifest.parent, "rev-parse", "HEAD"),
                             built_images["python"], [failing], print)
        message = str(failed.value)
        assert "\x1b" not in message
        assert "    npm error code SELF_SIGNED_CERT_IN_CHAIN\n" in message
        log = Path(message.split("full log: ", 1)[1].splitlines()[0])
        assert log.parent == tmp_path / "cache" / "bakeoff-sandbox" / "logs"
        text = log.read_text()
        assert "npm error code SELF_SIGNED_CERT_IN_CHAIN\nstep two of the output\n" in text
        assert "\x1b" not in text
        assert "TLS certificate is not trusted" in (failed.value.hint or "")
    finally:
        cleanup(engine, loaded)


PACKAGE = '{"name": "uses-is-number", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}\n'
LOCK = '''{
  "name": "uses-is-number",
  "version": "1.0.0",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {"name": "uses-is-number", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}},
    "node_modules/is-number": {
      "version": "7.0.0",
      "resolved": "https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz",
      "integrity": "INTEGRITY",
      "engines": {"node": ">=0.12.0"}
    }
  }
}
'''.replace("INTEGRITY", "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDl"
            "K9cGvNp6NZWZUBlbGXYxxng==")


def test_plain_npm_ci_as_setup_installs_from_the_registry_as_the_host_does(
        engine: Engine, tmp_path: Path) -> None:
    """Issue 21 item 1, the user's own command: `npm ci` on a lockfile, nothing else.
    On a network whose registry traffic passes a TLS-intercepting proxy (this machine's)
    it failed after ~75 s with SELF_SIGNED_CERT_IN_CHAIN; with the host's CA bundle in
    the build it installs the locked version."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "test")
    (repo / "package.json").write_text(PACKAGE)
    (repo / "package-lock.json").write_text(LOCK)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a locked dependency")
    node = images.resolve(engine, "node")
    image = prepared.prepare(engine, repo, git(repo, "rev-parse", "HEAD"), node, ["npm ci"],
                             print)
    experiment = f"it-{secrets.token_hex(3)}"
    try:
        found = sandbox.check_image(engine, image.image_id, [
            "node", "-p", "require('/opt/bakeoff/prepared/work/node_modules/is-number/"
            "package.json').version"], Labels(experiment, "prepared-check"))
        assert found.strip() == "7.0.0"
    finally:
        engine.client.images.remove(image.tag, force=True)
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})
