"""The browser's container and image (issue 22), without docker: what the choke point is
asked for, the command's plugin order, the inputs, the outputs line, and the image's
recipe (every Python distribution pinned by version and hash, the host's CA only in the
stage that fetches)."""

from __future__ import annotations

import base64
import io
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
from docker.types import Mount

from rig.guards.insample import browser_plugin
from runner.containers import browser
from runner.containers.backend import Labels
from runner.containers.dockerspec import container_args

ROOT = Path(__file__).resolve().parents[2]
IMAGE_DIR = ROOT / "images" / "browser"
LABELS = Labels("it-abc", "browser", "A", "r1")


def test_the_browser_container_joins_the_app_as_the_sandbox_user_with_nothing_writable_but_tmpfs(
        tmp_path: Path) -> None:
    args = container_args(browser.container_spec(
        "sha256:img", "app-id", ("sh", "-c", "true"), LABELS, tmp_path))
    assert {key: args[key] for key in ("user", "cap_drop", "security_opt", "read_only",
                                       "network_mode", "pids_limit", "mem_limit",
                                       "working_dir", "tmpfs")} == {
        "user": "1000:1000", "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"],
        "read_only": True, "network_mode": "container:app-id", "pids_limit": 512,
        "mem_limit": "1536m", "working_dir": "/bakeoff/in/criterion",
        "tmpfs": {"/tmp": "size=512m,exec,mode=1777",
                  "/home/agent": "size=64m,exec,mode=0700,uid=1000,gid=1000",
                  "/bakeoff/browser-out": "size=96m,mode=0700,uid=1000,gid=1000"}}
    assert "cap_add" not in args and "network" not in args
    assert args["mounts"] == [Mount("/bakeoff/in", str(tmp_path.resolve()), type="bind",
                                    read_only=True)]
    assert args["environment"] == {
        "HOME": "/home/agent", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONPATH": "/bakeoff/in/plugin", "PYTHONDONTWRITEBYTECODE": "1",
        "BAKEOFF_BROWSER_OUT": "/bakeoff/browser-out", "BAKEOFF_BROWSER_TEST_TIMEOUT_S": "60"}


class _Engine:
    def __init__(self, cpus: int) -> None:
        self.cpus = cpus


def test_a_browser_gets_two_cpus_or_every_cpu_of_a_smaller_engine() -> None:
    """One CPU made the same test 1.5x as slow (docs/benchmarks.md); an engine refuses a
    CPU limit past its own count, so a one-CPU engine's browser gets that one."""
    assert container_args(browser.container_spec(
        "sha256:img", "app", ("true",), LABELS, None,
        limits=browser.BrowserLimits().on(_Engine(8))))["nano_cpus"] == 2 * 10**9  # type: ignore[arg-type]
    one = browser.BrowserLimits().on(_Engine(1))  # type: ignore[arg-type]
    assert one.as_record() == {"cpus": 1.0, "memory_mb": 1536, "pids": 512, "tmp_mb": 512,
                               "out_mb": 96, "home_mb": 64}
    assert container_args(browser.container_spec(
        "sha256:img", "app", ("true",), LABELS, None, limits=one))["nano_cpus"] == 10**9


def test_a_browser_is_never_given_fewer_than_256_processes() -> None:
    """Pins the field note: with --pids-limit 64 the browser hung for minutes."""
    with pytest.raises(ValueError, match="at least 256, not 128"):
        browser.BrowserLimits(pids=128)


def test_the_rigs_plugin_loads_last_and_nothing_autoloads() -> None:
    """pytest uses the fixture of the plugin registered last: the rig's must follow
    pytest-playwright's, and no other installed plugin may load at all."""
    argv = browser.pytest_argv("ui/test_cap.py", "http://localhost:4321")
    plugins = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-p"]
    assert plugins == ["no:cacheprovider", "pytest_base_url.plugin",
                       "pytest_playwright.pytest_playwright", "bakeoff_browser"]
    assert argv[-1] == "/bakeoff/in/criterion/ui/test_cap.py"
    assert argv[argv.index("--base-url") + 1] == "http://localhost:4321"
    assert argv[argv.index("-c") + 1] == "/dev/null"
    assert browser.environment(30)["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"


def test_the_inputs_hold_the_rigs_plugin_and_the_criterion_read_only(tmp_path: Path) -> None:
    browser.write_inputs(tmp_path, {"ui/test_cap.py": b"def test(): pass\n"})
    plugin = tmp_path / "plugin" / "bakeoff_browser.py"
    source = ROOT / "rig" / "guards" / "insample" / "browser_plugin.py"
    assert plugin.read_bytes() == source.read_bytes()
    assert (tmp_path / "criterion" / "ui" / "test_cap.py").read_bytes() == b"def test(): pass\n"
    assert {oct(p.stat().st_mode & 0o777) for p in tmp_path.rglob("*") if p.is_file()} == {
        "0o644"}


@pytest.mark.parametrize("name", ["../escape.py", "ui/../../escape.py", "/etc/escape.py", ""])
def test_a_criterion_file_outside_its_directory_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="outside its directory"):
        browser.write_inputs(tmp_path, {name: b""})
    with pytest.raises(ValueError, match="outside its directory"):
        browser.inputs_archive({name: b""})
    assert not (tmp_path / "escape.py").exists()


def test_with_no_app_the_browser_has_no_network_and_its_inputs_come_in_a_volume() -> None:
    """No host path: the inputs volume is ours (tmpfs), writable because the engine puts
    files only into a writable volume."""
    args = container_args(browser.container_spec(
        "sha256:img", None, ("sh", "-c", "true"), LABELS, "bakeoff-it-abc-in"))
    assert (args["network_mode"], args["read_only"], args["user"]) == ("none", True, "1000:1000")
    assert args["mounts"] == [Mount("/bakeoff/in", "bakeoff-it-abc-in", type="volume",
                                    read_only=False, no_copy=True)]


def test_the_inputs_archive_holds_the_same_files_and_says_ready_last() -> None:
    archive = browser.inputs_archive({"ui/test_cap.py": b"def test(): pass\n"})
    with tarfile.open(fileobj=io.BytesIO(archive.data)) as tar:
        members = [(m.name, m.mode, m.uid, tar.extractfile(m).read())  # type: ignore[union-attr]
                   for m in tar]
    assert archive.path == "/bakeoff/in"
    assert members == [
        ("plugin/bakeoff_browser.py", 0o644, 0, browser.plugin_source()),
        ("criterion/ui/test_cap.py", 0o644, 0, b"def test(): pass\n"),
        (".ready", 0o644, 0, b"")]


def test_a_container_whose_inputs_never_come_gives_up_with_125() -> None:
    """The wait for the inputs is bounded (here 0 s: /bakeoff/in/.ready is not on this
    machine); the command never runs without them."""
    done = subprocess.run(browser.after_inputs(["echo", "ran"], wait_s=0),
                          capture_output=True, text=True, timeout=30, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (
        125, "", "bakeoff: no inputs in /bakeoff/in\n")


def test_the_outputs_line_is_read_back_whole() -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in {"./requests.jsonl": b"{}\n", "./screenshots/001-t-end.png": b"png"
                           }.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    stdout = b"noise\nbakeoff-out:" + base64.b64encode(out.getvalue()) + b"\n"
    assert browser.read_outputs(stdout).files == {"requests.jsonl": b"{}\n",
                                                  "screenshots/001-t-end.png": b"png"}


def test_every_python_distribution_of_the_image_is_pinned_by_version_and_hash() -> None:
    text = (IMAGE_DIR / "requirements.txt").read_text()
    entries = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})$", text,
                         flags=re.MULTILINE)
    named = {name for name, _, _ in entries}
    assert {"playwright", "pytest-playwright", "pytest-base-url", "pytest"} <= named
    requirement_lines = [line for line in text.splitlines()
                         if line and not line.startswith(("#", " "))]
    assert len(requirement_lines) == len(entries)


def test_the_hosts_ca_is_used_only_in_the_stage_that_fetches() -> None:
    """The image keeps neither the CA file nor a CA variable: the bundle is copied into
    the `fetch` stage only, named on its pip line and removed; the final stage takes the
    virtualenv alone."""
    stages = re.split(r"^FROM ", (IMAGE_DIR / "Dockerfile").read_text(), flags=re.MULTILINE)
    fetch = next(s for s in stages if s.startswith("py AS fetch"))
    final = stages[-1]
    assert "COPY host-ca.crt /tmp/bakeoff-host-ca.crt" in fetch
    assert "rm -f /tmp/bakeoff-host-ca.crt" in fetch
    assert "host-ca" not in final and "CERT" not in final and "CA_" not in final
    assert "COPY --from=fetch /opt/browser /opt/browser" in final


def test_the_plugin_and_the_runner_name_the_same_directory_module_and_deadline() -> None:
    assert (browser_plugin.OUT_ENV, browser_plugin.DEADLINE_ENV) == (browser.OUT_ENV,
                                                                     browser.DEADLINE_ENV)
    assert Path(browser_plugin.__file__).name == browser.PLUGIN_SOURCE
