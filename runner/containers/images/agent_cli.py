"""Real agent CLIs, pinned: installed from the npm registry into an agent layer (a native
binary: Claude Code, Codex, OpenCode; or a JavaScript bundle with the Node it needs:
Gemini CLI, Qwen Code), or from PyPI into a venv (mini-swe-agent).

Two images per CLI version, both built here, never pulled:

- the **dist** image (`bakeoff/agent-dist:<cli>-<version>`): a build stage FROM the node
  toolchain runs `npm install --ignore-scripts <package>@<version>` (no install script of
  the package runs), and only the native binaries (and `identity.json`: package, version,
  the binary's sha256, its `--version`) land in a `FROM scratch` image. Built once per
  version: the npm install is the expensive step, so this is its cache.
- the **agent layer** (`bakeoff/agent:<key>`): the arm's own image (the toolchain, or the
  prepared image of the commit) plus `COPY --from` the dist, root-owned under
  /opt/bakeoff/agent, its `bin/` first on PATH. Keyed by both identities.

The host's CA bundle goes into the build stage only (a TLS-intercepting proxy between
the machine and the registry is common); it never reaches the agent layer.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from runner.containers import images, sandbox
from runner.containers.backend import ContainerEngine, Labels
from runner.containers.engine import Engine, docker_engine
from runner.containers.images import BuiltImage, host_trust, inspect
from runner.containers.images.identity import HOST_CA, tar_of
from runner.containers.images.reporters import BuildReporter, QuietBuildReporter
from runner.errors import InfraError

FORMAT = 1  # of the recipe below
AGENT_ROOT = "/opt/bakeoff/agent"
DEFAULT_REGISTRY = "https://registry.npmjs.org/"
REGISTRY_ENV = "BAKEOFF_NPM_REGISTRY"
DEFAULT_PYPI = "https://pypi.org/simple"
PYPI_ENV = "BAKEOFF_PYPI_INDEX"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DIST, LAYER = "agent-dist", "agent"


@dataclass(frozen=True)
class AgentCli:
    """One CLI: its npm package, the program it installs, and how its files are found in
    node_modules (a shell step run in /opt/npm, writing under /opt/agent). A JavaScript
    CLI (`node` = the Node major it needs) brings that Node along: its program is a
    launcher, and the file whose sha256 identifies it is its bundle (`hashed`)."""

    name: str
    package: str
    program: str
    collect: str
    path: tuple[str, ...] = ()  # more directories for PATH, under AGENT_ROOT
    node: str | None = None     # the bakeoff/node variant of the build stage (and runtime)
    hashed: str = ""            # under /opt/agent; default bin/<program>
    pypi: bool = False          # a Python package from PyPI, in a venv (python_cli)

    def program_path(self) -> str:
        return f"{AGENT_ROOT}/bin/{self.program}"

    def hashed_path(self) -> str:
        return f"/opt/agent/{self.hashed or 'bin/' + self.program}"


def node_cli(name: str, package: str, program: str, entry: str, node: str) -> AgentCli:
    """A JavaScript CLI: its node_modules and the build stage's Node under /opt/agent, and
    a launcher that finds both beside itself (the same in the build and in the layer)."""
    launcher = ("printf '%s\\n' '#!/bin/sh' 'd=$(dirname \"$(readlink -f \"$0\")\")/..' "
                f"'exec \"$d/node/bin/node\" \"$d/node_modules/{package}/{entry}\" \"$@\"' "
                f"> /opt/agent/bin/{program} && chmod 0755 /opt/agent/bin/{program}")
    collect = ("cp -a node_modules /opt/agent/node_modules && mkdir -p /opt/agent/node/bin "
               f"&& cp /opt/node/bin/node /opt/agent/node/bin/node && {launcher}")
    return AgentCli(name, package, program, collect, node=node,
                    hashed=f"node_modules/{package}/{entry}")


def python_cli(name: str, package: str, program: str, module: str) -> AgentCli:
    """A Python CLI from PyPI: a venv of the python toolchain's interpreter under
    /opt/agent, run by a launcher as `python -m module`. The venv's interpreter is the
    arm image's own /usr/bin/python3.11 (the python toolchain and images FROM it): the
    launcher says so when the arm's image has none. Identified by its RECORD (the sha256
    of every file the package installed)."""
    need = ("[ -x /usr/bin/python3.11 ] || { echo \"NAME: its agent layer needs "
            "/usr/bin/python3.11 in the arm image (the python toolchain)\" >&2; exit 127; }")
    launcher = ("printf '%s\\n' '#!/bin/sh' 'd=$(dirname \"$(readlink -f \"$0\")\")/..' "
                f"'{need.replace('NAME', name)}' "
                f"'exec \"$d/venv/bin/python\" -m {module} \"$@\"' "
                f"> /opt/agent/bin/{program} && chmod 0755 /opt/agent/bin/{program}")
    dist_info = package.replace("-", "_")
    return AgentCli(name, package, program, launcher, pypi=True,
                    hashed=f"venv/lib/python3.11/site-packages/{dist_info}-{{version}}"
                           ".dist-info/RECORD")


CLIS: dict[str, AgentCli] = {cli.name: cli for cli in (
    AgentCli("claude-code", "@anthropic-ai/claude-code", "claude",
             # The platform package holds the native binary (the postinstall would copy it).
             "cp node_modules/@anthropic-ai/claude-code-linux-x64/claude /opt/agent/bin/claude"),
    AgentCli("codex", "@openai/codex", "codex",
             # The static musl build, with the helpers it runs from beside itself.
             "cp -a node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl "
             "/opt/agent/codex && ln -s ../codex/bin/codex /opt/agent/bin/codex",
             path=("codex/codex-path",)),
    AgentCli("opencode", "opencode-ai", "opencode",
             # One native binary in the platform package (the postinstall would link it).
             "cp node_modules/opencode-linux-x64/bin/opencode /opt/agent/bin/opencode"),
    node_cli("gemini-cli", "@google/gemini-cli", "gemini", "bundle/gemini.js", "22"),
    node_cli("qwen-code", "@qwen-code/qwen-code", "qwen", "cli-entry.js", "22"),
    python_cli("mini-swe-agent", "mini-swe-agent", "mini", "minisweagent.run.mini"),
)}


@dataclass(frozen=True)
class InstalledCli:
    """What the arm record says of the CLI an arm ran."""

    cli: str
    package: str
    version: str
    program: str
    sha256: str
    version_output: str

    def as_record(self) -> dict[str, str]:
        return {"cli": self.cli, "package": self.package, "version": self.version,
                "program": self.program, "sha256": self.sha256,
                "version_output": self.version_output}


def cli_for(name: str) -> AgentCli:
    found = CLIS.get(name)
    if found is None:
        raise InfraError(f"no installable agent CLI {name!r}",
                         hint=f"use one of: {', '.join(sorted(CLIS))}")
    return found


def _registry() -> str:
    return os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY


def _index() -> str:
    return os.environ.get(PYPI_ENV) or DEFAULT_PYPI


def dist_identity(cli: AgentCli, version: str) -> str:
    node = {"node": cli.node, "hashed": cli.hashed} if cli.node else {}
    pypi = {"pypi": _index(), "hashed": cli.hashed} if cli.pypi else {}
    blob = json.dumps({"cli": cli.name, "package": cli.package, "version": version,
                       "collect": cli.collect, "registry": _registry(), "format": FORMAT,
                       **node, **pypi})
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def _dist_dockerfile(cli: AgentCli, version: str, node: BuiltImage) -> str:
    spec = f"{cli.package}@{version}"
    identity = ("node -e 'const fs=require(\"fs\"),c=require(\"crypto\");"
                f"const b=fs.readFileSync(\"{cli.hashed_path()}\");"
                "fs.writeFileSync(\"/opt/agent/identity.json\",JSON.stringify({"
                f"cli:\"{cli.name}\",package:\"{cli.package}\",version:\"{version}\","
                f"program:\"{cli.program_path()}\","
                "sha256:c.createHash(\"sha256\").update(b).digest(\"hex\"),"
                "version_output:fs.readFileSync(\"/tmp/version.txt\",\"utf8\").trim()}))'")
    return (
        f"FROM {node.image_id} AS fetch\nUSER root\n"
        f"COPY {HOST_CA} {host_trust.CA_IN_BUILD}\n"
        f"ENV NODE_EXTRA_CA_CERTS={host_trust.CA_IN_BUILD} npm_config_update_notifier=false "
        "npm_config_fund=false npm_config_audit=false\n"
        f"RUN mkdir -p /opt/npm /opt/agent/bin && cd /opt/npm && npm install --no-save "
        f"--ignore-scripts --registry {_registry()} {spec}\n"
        f"RUN cd /opt/npm && {cli.collect} && chmod -R a+rX,go-w /opt/agent "
        f"&& /opt/agent/bin/{cli.program} --version > /tmp/version.txt 2>&1 && {identity}\n"
        "FROM scratch\nCOPY --from=fetch /opt/agent /opt/agent\n")


def _pypi_dockerfile(cli: AgentCli, version: str, python: BuiltImage) -> str:
    hashed = cli.hashed_path().format(version=version)
    identity = ("/opt/agent/venv/bin/python -c 'import hashlib,json,pathlib;"
                f"b=pathlib.Path(\"{hashed}\").read_bytes();"
                "v=pathlib.Path(\"/tmp/version.txt\").read_text().strip();"
                "pathlib.Path(\"/opt/agent/identity.json\").write_text(json.dumps({"
                f"\"cli\":\"{cli.name}\",\"package\":\"{cli.package}\","
                f"\"version\":\"{version}\",\"program\":\"{cli.program_path()}\","
                "\"sha256\":hashlib.sha256(b).hexdigest(),\"version_output\":v}))'")
    module = cli.package.replace("-", "_")
    return (
        f"FROM {python.image_id} AS fetch\nUSER root\n"
        f"COPY {HOST_CA} {host_trust.CA_IN_BUILD}\n"
        f"ENV PIP_CERT={host_trust.CA_IN_BUILD} PIP_DISABLE_PIP_VERSION_CHECK=1 "
        "PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=\n"
        "RUN mkdir -p /opt/agent/bin && python3 -m venv /opt/agent/venv && "
        f"/opt/agent/venv/bin/pip install --index-url {_index()} {cli.package}=={version}\n"
        f"RUN {cli.collect} && chmod -R a+rX,go-w /opt/agent && /opt/agent/venv/bin/python -c "
        f"'import importlib.metadata as m; print(m.version(\"{module}\"))' > /tmp/version.txt "
        f"&& {identity}\n"
        "FROM scratch\nCOPY --from=fetch /opt/agent /opt/agent\n")


def dist(engine: Engine, cli: AgentCli, version: str, reporter: BuildReporter) -> BuiltImage:
    """The dist image of `cli` at `version` (a cache hit when its identity matches)."""
    def context() -> bytes:
        if cli.pypi:
            python = images.resolve(engine, "python", reporter)
            dockerfile = _pypi_dockerfile(cli, version, python)
        else:
            node = images.resolve(engine, "node", reporter, variant=cli.node)
            dockerfile = _dist_dockerfile(cli, version, node)
        return tar_of({"Dockerfile": dockerfile.encode(), HOST_CA: host_trust.ca_bundle()})

    return images.cached_or_built(
        engine, f"{DIST} {cli.name}@{version}", f"bakeoff/{DIST}:{cli.name}-{version}",
        dist_identity(cli, version), context, reporter,
        hint=(f"check that {cli.package}=={version} exists on {_index()} (set {PYPI_ENV} "
              "for a mirror)") if cli.pypi else
             (f"check that {cli.package}@{version} exists on {_registry()} (set "
              f"{REGISTRY_ENV} for a mirror)"))


def layer_identity(base: BuiltImage, dist_image: BuiltImage) -> str:
    blob = json.dumps({"base": base.identity, "dist": dist_image.identity, "format": FORMAT})
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def layer(engine: ContainerEngine, base: BuiltImage, cli: AgentCli, version: str,
          reporter: BuildReporter | None = None) -> BuiltImage:
    """The arm's image with the CLI added: `base` + the dist's files, on PATH."""
    engine = docker_engine(engine)
    chosen = reporter or QuietBuildReporter()
    dist_image = dist(engine, cli, version, chosen)
    identity = layer_identity(base, dist_image)

    def context() -> bytes:
        attrs = inspect(engine, base.image_id) or {}
        env = (attrs.get("Config") or {}).get("Env") or []
        path = next((e.split("=", 1)[1] for e in env if e.startswith("PATH=")), DEFAULT_PATH)
        extra = ":".join([f"{AGENT_ROOT}/bin", *(f"{AGENT_ROOT}/{p}" for p in cli.path)])
        dockerfile = (f"FROM {base.image_id}\nUSER root\n"
                      f"COPY --from={dist_image.tag} /opt/agent {AGENT_ROOT}\n"
                      f"ENV PATH={extra}:{path}\nUSER {sandbox.SANDBOX_UID}\n")
        return tar_of({"Dockerfile": dockerfile.encode()})

    return images.cached_or_built(
        engine, f"{LAYER} {cli.name}@{version}",
        f"bakeoff/{LAYER}:{identity.removeprefix('sha256:')[:16]}", identity, context, chosen,
        hint="the agent layer is the arm's image plus the CLI's files")


def installed(engine: ContainerEngine, image: BuiltImage, labels: Labels) -> InstalledCli:
    """The identity of the CLI in an agent layer, as its build recorded it."""
    engine = docker_engine(engine)
    return InstalledCli(**sandbox.identity_file(
        engine, image.image_id, f"{AGENT_ROOT}/identity.json",
        tuple(InstalledCli.__dataclass_fields__), labels, what=f"image {image.tag}"))


