"""The browser's container (issue 22): what `images/browser` holds, and how one browser
criterion runs beside the app it drives.

The image (`images/browser/Dockerfile`) is Debian's chromium plus a virtualenv at
/opt/browser with Playwright, pytest and pytest-playwright pinned by hash; its build
writes `/opt/browser/identity.json` (Chromium's `--version`, the package, the Python
distributions' versions), which `installed` reads back for the contract and the records.

A browser criterion runs in a container of its own that **joins the app's network
namespace** (`ContainerSpec.joins`): it opens `http://localhost:PORT` (a secure context,
so WebAuthn works, and no HSTS-preloaded TLD), reaches nothing the app's network does not,
and nothing of the rig listens there (Playwright talks to Chromium over a pipe). It runs
as the sandbox user with no capability, a read-only root, size-capped tmpfs for /tmp,
HOME and the plugin's output directory, and a pids limit a browser can live in. Its
command (`SCRIPT`) waits for the app's health, runs pytest with the rig's plugin (the
package `rig/guards/insample/browser_plugin/`, shipped and loaded as `bakeoff_browser`,
after pytest-base-url and pytest-playwright and with no other plugin autoloaded) under a
deadline, keeps the output's head and tail, and hands the output directory back as one
`bakeoff-out:` line on its stdout, read with `read_outputs`, as the sample driver does.

With no app (`container_spec(..., app=None, ...)`) the browser has no network at all,
and its inputs need no host path: a tmpfs volume of ours at IN that the engine fills once
the container runs (`inputs_archive`, put in by `sandbox.run_to_end`), the command
waiting for the archive's last file (`after_inputs`). REPORT.html's browser tests open
the page that way (tests/integration/report_browser.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath

from rig.guards import plant
from rig.guards.canary import Canary
from rig.sample.record import BrowserAsked, BrowserRan
from runner.containers import images, sandbox
from runner.containers.backend import (
    Bind,
    ContainerEngine,
    ContainerSpec,
    Labels,
    Resources,
    Tmpfs,
    Volume,
)
from runner.containers.images import BuiltImage
from runner.containers.images.identity import tar_of
from runner.containers.images.reporters import BuildReporter
from runner.containers.samples import driver
from runner.containers.samples.driver import Outputs
from runner.containers.sandbox import Archive
from runner.errors import SandboxUnavailableError

IMAGE = "browser"
ROOT = "/opt/browser"
IDENTITY = f"{ROOT}/identity.json"
PLUGIN_MODULE = "bakeoff_browser"
PLUGIN_SOURCE = "browser_plugin"  # a package of rig/guards/insample
IN = "/bakeoff/in"                   # the rig's inputs: a read-only bind, or a volume
PLUGIN_DIR = f"{IN}/plugin"
CRITERION_DIR = f"{IN}/criterion"
READY = ".ready"                     # the inputs archive's last file
OUT = "/bakeoff/browser-out"         # the plugin's records, screenshots, trace
OUT_ENV = "BAKEOFF_BROWSER_OUT"
DEADLINE_ENV = "BAKEOFF_BROWSER_TEST_TIMEOUT_S"  # one test's, fixtures included
TEST_TIMEOUT_S = 60
HOME = "/home/agent"
PLAYWRIGHT_OUTPUT = "/tmp/playwright-output"  # pytest-playwright's own (unused) folder
HEAD_BYTES = TAIL_BYTES = 1024 * 1024  # of pytest's output, kept
# What the plugin may write (its own caps) plus the log and markers: a longer line is not
# the script's (driver.read_outputs drops it).
OUTPUTS_LIMIT = 72 * 1024 * 1024


@dataclass(frozen=True)
class BrowserLimits:
    """The browser container's own limits, the same for every arm: a browser needs more
    processes than a test run (about 125 tasks per page; with 64 it hung for minutes
    instead of failing), and more than one CPU: pytest, Playwright's driver, Chromium's
    browser and its renderer all work at once, and on one CPU the same test took 1.5x as
    long (docs/benchmarks.md). `on(engine)` keeps the CPUs within the engine's."""

    cpus: float = 2.0
    memory_mb: int = 1536
    pids: int = 512
    tmp_mb: int = 512
    out_mb: int = 96
    home_mb: int = 64

    def __post_init__(self) -> None:
        if self.pids < 256:
            raise ValueError(f"a browser needs a pids limit of at least 256, not {self.pids}")

    def on(self, engine: ContainerEngine) -> BrowserLimits:
        """These limits on `engine`: no more CPUs than it has (it refuses more)."""
        return dataclasses.replace(self, cpus=min(self.cpus, float(engine.cpus)))

    def as_record(self) -> dict[str, float | int]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class BrowserIdentity:
    """What the browser image holds, as its build recorded it."""

    chromium: str
    chromium_package: str
    playwright: str
    pytest_playwright: str
    pytest_base_url: str
    pytest: str
    python: str

    def as_record(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def installed(engine: ContainerEngine, image: BuiltImage, labels: Labels) -> BrowserIdentity:
    """The identity of the browser image `image` (its `identity.json`)."""
    return BrowserIdentity(**sandbox.identity_file(
        engine, image.image_id, IDENTITY, tuple(BrowserIdentity.__dataclass_fields__), labels,
        what=f"image {image.tag}"))


def pytest_argv(criterion: str, base_url: str, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """pytest on `criterion` (a path under CRITERION_DIR; then `extra`, the rig's canaries)
    against the app at `base_url`: every test's outcome on a line of its own (the protected
    tests are read by id), the plugins named in their order (the rig's last, so its
    fixtures win), no cache, no ini file read from anywhere."""
    return ("python", "-m", "pytest", "--rootdir", CRITERION_DIR, *PYTEST_FLAGS,
            "--base-url", base_url, *(f"{CRITERION_DIR}/{name}" for name in (criterion, *extra)))


# pytest as the rig runs a browser criterion: verbose, no ini file, no cache, the plugins
# named in their order (the rig's last, so its fixtures win; autoload is off).
PYTEST_FLAGS = ("-v", "-c", "/dev/null", "-p", "no:cacheprovider",
                "-p", "pytest_base_url.plugin", "-p", "pytest_playwright.pytest_playwright",
                "-p", PLUGIN_MODULE, "--output", PLAYWRIGHT_OUTPUT)
VERIFY = "bakeoff-browser-test"  # in an arm's browser layer: `VERIFY URL FILE...`


def verify_script() -> str:
    """An arm's `bakeoff-browser-test URL FILE...`: its own browser test, run as the rig
    runs a browser criterion."""
    flags = " ".join(PYTEST_FLAGS)
    return ("#!/bin/sh\n# bakeoff-sandbox: a browser test, run as the rig runs a browser "
            "criterion\nurl=\"$1\"; shift\nexport PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "
            f"PYTHONDONTWRITEBYTECODE=1\nexec python -m pytest {flags} --base-url \"$url\" "
            '"$@"\n')


def environment(test_timeout_s: float = TEST_TIMEOUT_S) -> dict[str, str]:
    """The browser container's env: the rig's plugins only, the output directory, the
    deadline of one test (past it the plugin kills the browser: a failure, not a hang)."""
    return {"HOME": HOME, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": PLUGIN_DIR,
            "PYTHONDONTWRITEBYTECODE": "1", OUT_ENV: OUT,
            DEADLINE_ENV: str(max(1, int(test_timeout_s)))}


# $1 base URL  $2 health path  $3 seconds to wait for it  $4 pytest's deadline (seconds)
# then pytest's argv. Exit status: pytest's (125 when the app never got healthy).
SCRIPT = r'''
url="$1"; health="$2"; wait_s="$3"; t="$4"; shift 4
out="$BAKEOFF_BROWSER_OUT"; log=/tmp/bakeoff-browser.log
finish() {
  usage > "$out/cgroup" 2>/dev/null
  printf 'bakeoff-out:'; (cd "$out" && tar -cf - .) | base64 -w 0; printf '\n'
  exit "$1"
}
py='import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)'
tries=$(( wait_s * 5 )); state=unhealthy
while [ "$tries" -gt 0 ]; do
  if python -I -c "$py" "$url$health" >/dev/null 2>&1; then state=healthy; break; fi
  sleep 0.2; tries=$(( tries - 1 ))
done
echo "$state" > "$out/server"
if [ "$state" != healthy ]; then finish 125; fi
timeout -k 5 "$t" "$@" > "$log" 2>&1 < /dev/null
code=$?
size=$(wc -c < "$log")
if [ "$size" -gt $(( HEAD + TAIL )) ]; then
  { head -c "$HEAD" "$log"; printf '\n[bakeoff: output truncated: %s bytes omitted]\n' \
      $(( size - HEAD - TAIL )); tail -c "$TAIL" "$log"; } > "$out/log"
else
  cat "$log" > "$out/log"
fi
finish "$code"
'''


# $1 seconds to wait for the inputs, then the command (the engine puts the inputs archive
# in IN after the container starts; its last file, READY, says the rest is in place).
AWAIT_INPUTS = rf'''
tries=$(( $1 * 10 )); shift
until [ -e "{IN}/{READY}" ]; do
  if [ "$tries" -le 0 ]; then echo "bakeoff: no inputs in {IN}" >&2; exit 125; fi
  sleep 0.1; tries=$(( tries - 1 ))
done
exec "$@"
'''


def script() -> str:
    return f"HEAD={HEAD_BYTES}; TAIL={TAIL_BYTES}\n" + driver.usage_script() + SCRIPT


def command(criterion: str, base_url: str, *, health: str = "/", wait_s: int = 30,
            timeout_s: int = 120, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The container's command: `script` with the criterion's pytest."""
    return ("sh", "-c", script(), "bakeoff-browser", base_url, health, str(wait_s),
            str(timeout_s), *pytest_argv(criterion, base_url, extra))


def plugin_files() -> dict[str, bytes]:
    """The rig's browser plugin, a package (it runs inside the browser's container, never
    here): each module's bytes by its name in `PLUGIN_MODULE/`. Read as files, never
    imported (the package imports pytest)."""
    package = resources.files("rig.guards.insample").joinpath(PLUGIN_SOURCE)
    return {f"{PLUGIN_MODULE}/{f.name}": f.read_bytes()
            for f in sorted(package.iterdir(), key=lambda f: f.name)
            if f.is_file() and f.name.endswith(".py")}


def input_files(criterion: Mapping[str, bytes]) -> dict[str, bytes]:
    """The browser container's inputs by their path under IN: the rig's plugin and the
    criterion's files (relative paths under CRITERION_DIR; one that leaves it is refused)."""
    files = {f"plugin/{name}": data for name, data in plugin_files().items()}
    for name, data in criterion.items():
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            raise ValueError(f"a criterion file outside its directory: {name!r}")
        files[f"criterion/{path}"] = data
    return files


def write_inputs(directory: Path, criterion: Mapping[str, bytes]) -> None:
    """`input_files` in `directory` (bound read-only at IN)."""
    for name, data in input_files(criterion).items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for path in [directory, *directory.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def inputs_archive(criterion: Mapping[str, bytes]) -> Archive:
    """`input_files` as the tar the engine puts at IN once the container runs (no host
    path: `container_spec` with a volume), READY its last file."""
    return Archive(IN, tar_of(input_files(criterion) | {READY: b""}))


def after_inputs(argv: Iterable[str], wait_s: int = 30) -> tuple[str, ...]:
    """`argv`, once the inputs' READY file is in IN (at most `wait_s` seconds; else exit
    125): the command of a container whose inputs the engine puts in after its start."""
    return ("sh", "-c", AWAIT_INPUTS, "bakeoff-inputs", str(wait_s), *argv)


def container_spec(image_id: str, app: str | None, argv: Iterable[str], labels: Labels,
                   inputs: Path | str | None, *, limits: BrowserLimits | None = None,
                   test_timeout_s: float = TEST_TIMEOUT_S,
                   purpose: str = "the browser") -> ContainerSpec:
    """The browser's container beside `app` (a container id whose network namespace it
    joins; None: no network at all): the sandbox user, no capability, a read-only root,
    tmpfs for what Chromium and the plugin write. The rig's inputs at IN: None, they come
    on its stdin into a tmpfs (`from_stdin`: a sample's); the name of a tmpfs volume of
    ours that the engine fills once the container runs (`inputs_archive`, `after_inputs`;
    writable, as the engine puts files only into a writable volume); or a host directory
    (`write_inputs`) bound read-only, for a test on this machine's engine."""
    chosen = limits or BrowserLimits()
    uid = sandbox.SANDBOX_UID
    mounts: tuple[Bind | Volume, ...] = ()
    if isinstance(inputs, Path):
        mounts = (Bind(inputs, IN),)
    elif inputs is not None:
        mounts = (Volume(inputs, IN),)
    return ContainerSpec(
        image=image_id, command=tuple(argv), labels=labels, purpose=purpose,
        resources=Resources(chosen.cpus, chosen.memory_mb, chosen.pids),
        user=sandbox.SANDBOX_USER, joins=app, read_only=True,
        env=environment(test_timeout_s),
        tmpfs=(Tmpfs("/tmp", chosen.tmp_mb), Tmpfs(HOME, chosen.home_mb, "0700", owner=uid),
               Tmpfs(OUT, chosen.out_mb, "0700", executable=False, owner=uid),
               *((Tmpfs(IN, IN_MB, "0755", executable=False, owner=uid),)
                 if inputs is None else ())),
        # With inputs on stdin, IN is an empty tmpfs at the start: a working directory
        # in it would be made root's before the inputs arrive.
        mounts=mounts, working_dir="/tmp" if inputs is None else CRITERION_DIR,
        stdin=inputs is None)


IN_MB = 32  # the browser's inputs when they come on its stdin
# A size line, then a tar of that many bytes, into IN; then the command, in the
# criterion's directory (as when the inputs are mounted: test ids relative to it).
FROM_STDIN = (f'read n && head -c "$n" | tar -x -f - -C {IN} && cd {CRITERION_DIR} '
              '&& exec "$@"; exit 125')


def from_stdin(argv: Iterable[str]) -> tuple[str, ...]:
    """`argv`, once the inputs on its stdin are in IN (the form of
    `runner.containers.samples.inputs.stream`)."""
    return ("sh", "-c", FROM_STDIN, "bakeoff-inputs", *argv)


def read_outputs(stdout: bytes) -> Outputs:
    """The output directory the script handed back on its stdout."""
    return driver.read_outputs([stdout], limit=OUTPUTS_LIMIT)


# -- a browser sample --------------------------------------------------------------------

# The script's own outputs, and the server's (merged in by the executor): the rest is the
# plugin's.
OWN = ("log", "server", "server.log", "build", "build.log", "cgroup")
_KEPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}(/[A-Za-z0-9][A-Za-z0-9._-]{0,200})?")
FILES = {"requests": "requests.jsonl", "console": "console.jsonl", "events": "events.jsonl",
         "tests": "tests.jsonl", "artifacts": "artifacts.json"}
TRACE = "trace.zip"


def criterion_name(asked: BrowserAsked) -> str:
    """The criterion's file name in the browser's container (under CRITERION_DIR)."""
    return Path(asked.file).name


def prepare(asked: BrowserAsked, directory: Path, token: str) -> Canary:
    """The browser container's inputs in `directory`: the rig's plugin, the criterion as
    the contract froze it (a file changed since is the rig's error, never run), and the
    canaries' file, whose tests run after the criterion's; the canaries."""
    try:
        data = Path(asked.file).read_bytes()
    except OSError as error:
        raise SandboxUnavailableError(f"the browser criterion {asked.file} cannot be read: "
                                      f"{error.strerror or error}",
                                      hint="restore the file the contract froze") from error
    if hashlib.sha256(data).hexdigest() != asked.sha256:
        raise SandboxUnavailableError(
            f"the browser criterion {asked.file} changed since the contract froze it",
            hint="restore it, or `up --refreeze` to grade with the new one")
    found = canary(token)
    write_inputs(directory, {criterion_name(asked): data, found.path: found.content})
    return found


def canary(token: str) -> Canary:
    """The canaries of a browser sample with `token` (what `prepare` plants)."""
    return plant.browser(token)


def kept(outputs: Outputs) -> dict[str, bytes]:
    """The plugin's files a sample keeps beside its log, by a name safe to write there
    (the browser's container wrote them: a name that could leave the folder is dropped)."""
    return {name: data for name, data in outputs.files.items()
            if name not in OWN and _KEPT_NAME.fullmatch(name) and ".." not in name}


def facts(files: Mapping[str, bytes], image: BuiltImage, identity: BrowserIdentity | None,
          base_url: str, limits: BrowserLimits, image_ref: str = "") -> BrowserRan:
    """What the record says of a browser sample's browser (its files' names relative to
    the sample's folder for them, `rig.sample.oracle.browser_folder`); `image_ref`: the
    image as the engine ran it, when not by its ID (a cluster's digest)."""
    def lines(name: str, kinds: tuple[str, ...]) -> int:
        count = 0
        for line in files.get(name, b"").decode("utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError, AttributeError):
                count += json.loads(line).get("kind") in kinds
        return count
    return BrowserRan(
        image=image.tag, image_id=image.image_id, image_ref=image_ref or None,
        base_url=base_url,
        identity={} if identity is None else identity.as_record(),
        limits=limits.as_record(),
        requests=lines(FILES["requests"], ("request",)),
        console_errors=lines(FILES["console"], ("console", "pageerror")),
        files={what: name for what, name in FILES.items() if name in files},
        screenshots=sorted(n for n in files if n.startswith("screenshots/")),
        trace=TRACE if TRACE in files else None)


# -- the arm's own browser (`[toolchain] browser = true`) ----------------------------------

LAYER = "arm-browser"
LAYER_FORMAT = 1
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def layer(engine: ContainerEngine, base: BuiltImage, reporter: BuildReporter) -> BuiltImage:
    """`base` (an arm's image) with the browser the samples use: Debian's chromium at the
    browser image's own version, its fonts, python3, the image's Playwright, pytest and
    pytest-playwright (/opt/browser, on PATH), the rig's plugin and `bakeoff-browser-test`
    (the rig's way to run a browser test), so an agent can verify its work as the
    criterion will. Keyed by both identities and the recipe."""
    image = images.resolve(engine, IMAGE, reporter)
    found = installed(engine, image, Labels("bakeoff", "tool-check"))
    attrs = images.inspect(engine, base.image_id) or {}
    config = attrs.get("Config") or {}
    path = next((e.split("=", 1)[1] for e in config.get("Env") or []
                 if e.startswith("PATH=")), DEFAULT_PATH)
    dockerfile = (
        f"FROM {base.image_id}\nUSER root\n"
        "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
        f"--no-install-recommends chromium={found.chromium_package} fonts-dejavu-core "
        "fonts-liberation libatomic1 python3 && rm -rf /var/lib/apt/lists/*\n"
        f"COPY --from={image.image_id} {ROOT} {ROOT}\n"
        f"COPY {PLUGIN_MODULE} {ROOT}/rig/{PLUGIN_MODULE}\n"
        f"COPY {VERIFY} {ROOT}/bin/{VERIFY}\n"
        f"RUN chmod 0755 {ROOT}/bin/{VERIFY}\n"
        f"ENV PATH={ROOT}/bin:{path} PYTHONPATH={ROOT}/rig {OUT_ENV}=/tmp/bakeoff-browser\n"
        f"USER {config.get('User') or sandbox.SANDBOX_UID}\n")
    context = {"Dockerfile": dockerfile.encode(), **plugin_files(),
               VERIFY: verify_script().encode()}
    identity = "sha256:" + hashlib.sha256(json.dumps(
        {"base": base.identity, "browser": image.identity, "format": LAYER_FORMAT,
         "recipe": {name: hashlib.sha256(data).hexdigest() for name, data in context.items()}},
        sort_keys=True).encode()).hexdigest()
    tag = f"bakeoff/{LAYER}:{identity.removeprefix('sha256:')[:16]}"
    with images.build_lock(tag):
        cached = images.cached(engine, tag, identity)
        if cached is not None:
            return cached
        return images.build_context(
            engine, f"{LAYER} on {base.tag}", tag, identity, tar_of(context), reporter,
            hint=f"the arm's browser is its image plus Debian's chromium "
                 f"{found.chromium_package} and {IMAGE}'s {ROOT}: check the Debian mirror "
                 "still has that version, or rebuild the browser image")
