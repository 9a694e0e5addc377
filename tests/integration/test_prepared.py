"""Prepared images: `setup` runs at build time (a sample never has the network), keyed by
the dependency files, so a code-only commit reuses the image and a dependency change
builds its own; what setup generated in /work survives, stale tracked files do not."""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path

import pytest

from rig.sample.verdict import Verdict
from runner.commands import score as score_mod
from runner.containers import images, sandbox
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.engine import Engine
from runner.containers.images import host_trust, prepared
from runner.errors import InfraError
from runner.manifest import load_manifest
from tests.integration.helpers import cleanup, git, make_target

TEST = '''from pathlib import Path


def test_setup_output_is_there_and_stale_files_are_not():
    assert Path("generated/deps.copy").read_text() == Path("requirements.txt").read_text()
    assert not Path("old.py").exists()
'''
SETUP = ('setup = ["mkdir -p generated && cp requirements.txt generated/deps.copy"]\n'
         'keep = ["generated"]')


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
        setup = prepared.Setup.of(loaded.manifest.toolchain)
        made.append(prepared.prepare(engine, repo, first, toolchain, setup, print))
        made.append(prepared.prepare(engine, repo, code_only, toolchain, setup, print))
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
                             built_images["python"],
                             prepared.Setup((SEEN,), keep=("seen-*",)), print)
    try:
        labels = Labels(loaded.manifest.experiment.name, "prepared-check")
        seen = sandbox.check_image(engine, image.image_id, [
            "sh", "-c", "cat /opt/bakeoff/prepared/copy/seen-proxy "
            "/opt/bakeoff/prepared/copy/seen-ca; ls /tmp/bakeoff-host-ca.crt 2>&1"], labels)
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
                             built_images["python"], prepared.Setup((failing,)), print)
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
    image = prepared.prepare(engine, repo, git(repo, "rev-parse", "HEAD"), node,
                             prepared.Setup(("npm ci",)), print)
    experiment = f"it-{secrets.token_hex(3)}"
    try:
        found = sandbox.check_image(engine, image.image_id, [
            "node", "-p", "require('/opt/bakeoff/prepared/deps/node_modules/is-number/"
            "package.json').version"], Labels(experiment, "prepared-check"))
        assert found.strip() == "7.0.0"
    finally:
        engine.client.images.remove(image.tag, force=True)
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})


PYPROJECT = '''[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "layoutpkg"
version = "1.0"

[tool.setuptools.packages.find]
where = ["src"]
'''
LAYOUT_TEST = '''import os
import subprocess
from pathlib import Path


def test_a_sample_holds_the_arms_tree_and_the_dependencies_setup_installed():
    venv = Path(".venv")
    assert venv.is_symlink() and os.readlink(venv) == "/opt/bakeoff/prepared/deps/.venv"
    found = subprocess.run([".venv/bin/python", "-c", "import layoutpkg; print(layoutpkg.WHO, "
                            "layoutpkg.__file__)"], capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["arm", "/work/src/layoutpkg/__init__.py"]
    assert not Path("build").exists() and not Path("src/layoutpkg/generated.py").exists()
    Path("cache/x").write_text("written by the sample")  # a kept copy: writable
    assert Path("cache/x").read_text() == "written by the sample"
'''


def test_setup_output_is_sorted_dependencies_linked_kept_copied_the_rest_dropped(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage]) -> None:
    """Issue 21 item 2 for Python: a venv with the project installed editable is a
    dependency (shared by a link, read-only), its editable finder pointing at the arm's
    sources; a `keep` glob is copied (writable); what else setup made in the tree (a
    build/ directory, a generated module) is the base's build: gone, listed."""
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    repo = manifest.parent
    setup = ('setup = ["python3 -m venv --system-site-packages .venv", '
             '".venv/bin/pip install -q --no-build-isolation --no-deps -e .", '
             '"mkdir -p build cache && echo base > build/out.txt && echo base > cache/x", '
             '"echo GENERATED = 1 > src/layoutpkg/generated.py"]\nkeep = ["cach?"]')
    manifest.write_text(manifest.read_text().replace(
        'requires = ["python3", "pytest", "git"]', f'requires = ["python3", "pytest"]\n{setup}')
        .replace("tests/test_app.py", "tests/test_layout.py"))
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "src" / "layoutpkg").mkdir(parents=True)
    (repo / "src" / "layoutpkg" / "__init__.py").write_text('WHO = "base"\n')
    (repo / "tests" / "test_layout.py").write_text(LAYOUT_TEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a package installed editable into a venv by setup")
    (repo / "src" / "layoutpkg" / "__init__.py").write_text('WHO = "arm"\n')
    git(repo, "commit", "-qam", "the arm's change")
    loaded = load_manifest(manifest)
    try:
        records, _, _ = score_mod.oracle(engine, loaded, "HEAD", "success", 1, None, print)
        assert (records[0].verdict, records[0].reason) == (Verdict.PASS, None), \
            records[0].detail
        seen = sandbox.check_image(engine, records[0].image_id, ["sh", "-c", (
            "cd /opt/bakeoff/prepared && cat kept.txt dropped.txt && ls -a work 2>&1 | wc -l")],
            Labels(loaded.manifest.experiment.name, "prepared-check"))
        assert seen.splitlines() == [
            "deps\t.venv", "copy\tcache", "build/out.txt", "src/layoutpkg/generated.py", "1"]
    finally:
        cleanup(engine, loaded)


def test_setup_that_installs_the_project_itself_not_editable_is_refused(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage]) -> None:
    """`pip install .` copies the base's code into site-packages: every sample would import
    it, never the arm's. The build is refused, naming the distribution and the fix."""
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    repo = manifest.parent
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "src" / "layoutpkg").mkdir(parents=True)
    (repo / "src" / "layoutpkg" / "__init__.py").write_text('WHO = "base"\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a package")
    loaded = load_manifest(manifest)
    try:
        with pytest.raises(InfraError) as refused:
            prepared.prepare(engine, repo, git(repo, "rev-parse", "HEAD"),
                             built_images["python"], prepared.Setup((
                                 "pip install -q --user --no-build-isolation --no-deps .",)),
                             print)
        assert ("bakeoff-setup: setup installed the project itself from /work, not editable: "
                "layoutpkg-1.0.dist-info") in str(refused.value)
        assert refused.value.hint == (
            "fix [toolchain].setup: install the project editable (pip install -e .) or only "
            "its dependencies, so samples import the arm's code, never the base's")
    finally:
        cleanup(engine, loaded)


PNPM_PACKAGE = ('{"name": "uses-is-number", "version": "1.0.0", "private": true, '
                '"packageManager": "pnpm@9.15.9", "dependencies": {"is-number": "7.0.0"}}\n')
PNPM_LOCK = """lockfileVersion: '9.0'

settings:
  autoInstallPeers: true
  excludeLinksFromLockfile: false

importers:

  .:
    dependencies:
      is-number:
        specifier: 7.0.0
        version: 7.0.0

packages:

  is-number@7.0.0:
    resolution: {integrity: INTEGRITY}
    engines: {node: '>=0.12.0'}

snapshots:

  is-number@7.0.0: {}
""".replace("INTEGRITY", "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL4"
            "3QKPDlK9cGvNp6NZWZUBlbGXYxxng==")


def test_a_pnpm_lockfile_installs_frozen_in_a_pinned_node_and_samples_run_offline(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage]) -> None:
    """Issue 21 item 4: `[toolchain] node = "22"` runs the wheel's Node 22; corepack
    fetches the pinned pnpm while setup has the network, `pnpm install --frozen-lockfile`
    lays out pnpm's symlinked node_modules, and a sample (no network) resolves the package
    through the shared links and runs the cached pnpm. (This machine's registry mirror
    serves no signatures: corepack checks the tarball's integrity only, as the user chose
    with COREPACK_INTEGRITY_KEYS=0; without it setup fails naming that.)"""
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    repo = manifest.parent
    check = ('\n[[checks]]\nname = "deps"\nparser = "exit-code"\nrun = "node -p '
             '\\"process.version + \' \' + require(\'is-number\')(5)\\" && pnpm --version"\n')
    manifest.write_text(manifest.read_text().replace(
        'image = "python"\nrequires = ["python3", "pytest", "git"]',
        'image = "node"\nnode = "22"\nsetup = ["COREPACK_INTEGRITY_KEYS=0 pnpm install '
        '--frozen-lockfile"]\n'
        'requires = ["node"]') + check)
    (repo / "package.json").write_text(PNPM_PACKAGE)
    (repo / "pnpm-lock.yaml").write_text(PNPM_LOCK)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a pnpm project")
    loaded = load_manifest(manifest)
    try:
        records, _, stage = score_mod.oracle(engine, loaded, "HEAD", "deps", 1, None, print)
        assert (records[0].verdict, records[0].reason) == (Verdict.PASS, None), \
            records[0].detail
        (log,) = stage.rglob(f"deps/{records[0].log}")
        assert log.read_text().splitlines() == ["v22.20.0 true", "9.15.9"]
    finally:
        cleanup(engine, loaded)


YARN_LOCK = """# This file is generated by running "yarn install" inside your project.
# Manual changes might be lost - proceed with caution!

__metadata:
  version: 8
  cacheKey: 10c0

"is-number@npm:7.0.0":
  version: 7.0.0
  resolution: "is-number@npm:7.0.0"
  checksum: 10c0/b4686d0d3053146095ccd45346461bc8e53b80aeb7671cc52a4de02dbbf7dc0d1d2a986e2fe4ae\
206984b4d34ef37e8b795ebc4f4295c978373e6575e295d811
  languageName: node
  linkType: hard

"uses-is-number@workspace:.":
  version: 0.0.0-use.local
  resolution: "uses-is-number@workspace:."
  dependencies:
    is-number: "npm:7.0.0"
  languageName: unknown
  linkType: soft
"""


def test_a_yarn_berry_lockfile_installs_immutable_with_plug_n_play_and_runs_offline(
        engine: Engine, tmp_path: Path, built_images: dict[str, images.BuiltImage]) -> None:
    """Yarn 4 (corepack, from the npm registry: repo.yarnpkg.com is not this network's)
    installs `--immutable`; its PnP map (`.pnp.cjs`, which finds the project from where it
    sits) is copied into the sample, its cache kept in HOME: `yarn node` resolves the
    package with no network."""
    manifest = make_target(tmp_path / "repo", ["A"], database=False)
    repo = manifest.parent
    check = ('\n[[checks]]\nname = "deps"\nparser = "exit-code"\nrun = "yarn node -p '
             '\\"require(\'is-number\')(5)\\" && ls -l .pnp.cjs | cut -c1"\n')
    env = "COREPACK_INTEGRITY_KEYS=0 COREPACK_NPM_REGISTRY=https://registry.npmjs.org"
    manifest.write_text(manifest.read_text().replace(
        'image = "python"\nrequires = ["python3", "pytest", "git"]',
        f'image = "node"\nnode = "22"\nsetup = ["{env} yarn install --immutable"]\n'
        'requires = ["node"]') + check)
    (repo / "package.json").write_text(PNPM_PACKAGE.replace("pnpm@9.15.9", "yarn@4.9.2"))
    (repo / "yarn.lock").write_text(YARN_LOCK)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a yarn project")
    loaded = load_manifest(manifest)
    try:
        records, _, stage = score_mod.oracle(engine, loaded, "HEAD", "deps", 1, None, print)
        assert (records[0].verdict, records[0].reason) == (Verdict.PASS, None), \
            records[0].detail
        (log,) = stage.rglob(f"deps/{records[0].log}")
        assert log.read_text().splitlines() == ["true", "-"]
    finally:
        cleanup(engine, loaded)
