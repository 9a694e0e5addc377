"""What the command line prints, and the one redactor everything printed goes through.

The two consoles (`out` for results, `err` for progress and errors) write through
`RedactedStream`s: every write is redacted with `SECRETS` before it reaches the terminal,
so no command can forget it. `load` fills `SECRETS` with the environment values of every
`secrets = [...]` name of the manifest's arms, read from the raw TOML before the manifest
is validated: an error about the manifest itself (a `base` ref that holds the value, say)
is redacted too.
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TextIO, cast

from rich.console import Console

from runner.commands import cluster
from runner.commands.dispatch.redact import Redactor
from runner.containers.backend import ContainerEngine
from runner.containers.engine import Engine
from runner.containers.images import registry
from runner.install.engine import state_dir
from runner.manifest import LoadedManifest, load_manifest


class Secrets:
    """The secret values known so far; `redactor` masks every one of them."""

    def __init__(self) -> None:
        self.redactor = Redactor([])

    def add(self, values: Iterable[str]) -> None:
        known = set(self.redactor.values)
        more = {value for value in values if value} - known
        if more:
            self.redactor = Redactor(known | more)

    def add_names(self, names: Iterable[str], environ: Mapping[str, str]) -> None:
        """The values the environment holds for `names` (unset names have none to hide)."""
        self.add(environ[name] for name in names if name in environ)

    def redact(self, text: str) -> str:
        return self.redactor.redact(text)


SECRETS = Secrets()


class RedactedStream:
    """A text stream that redacts each write, then passes it to the stream `target` names
    now (looked up on every write: tests and rich's live display swap sys.stdout/stderr)."""

    def __init__(self, target: Callable[[], TextIO], secrets: Secrets) -> None:
        self.target, self.secrets = target, secrets

    def _stream(self) -> TextIO:
        stream = self.target()
        # rich's Live proxies sys.stdout/stderr through the console: write to the real one.
        return getattr(stream, "rich_proxied_file", stream)

    def write(self, text: str) -> int:
        self._stream().write(self.secrets.redact(text))
        return len(text)

    def flush(self) -> None:
        self._stream().flush()

    def isatty(self) -> bool:
        return self._stream().isatty()

    def fileno(self) -> int:
        return self._stream().fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream(), "encoding", None) or "utf-8"

    def as_text_io(self) -> TextIO:
        """Itself, typed as the stream it stands in for (rich and click take an IO)."""
        return cast(TextIO, self)


def _console(target: Callable[[], TextIO], width: int | None = None) -> Console:
    stream = RedactedStream(target, SECRETS).as_text_io()
    return Console(file=stream, highlight=False, soft_wrap=True, width=width)


# Not a terminal (a pipe, CI): wide enough that tables never truncate ids.
out = _console(lambda: sys.stdout, None if sys.stdout.isatty() else 200)
err = _console(lambda: sys.stderr)


def say(text: str) -> None:
    """One progress line on stderr."""
    err.print(text, markup=False)


def redact(text: str) -> str:
    return SECRETS.redact(text)


def load(path: Path, environ: Mapping[str, str] | None = None) -> LoadedManifest:
    """`load_manifest`, with the arms' secret values added to `SECRETS` first."""
    env = os.environ if environ is None else environ
    SECRETS.add_names(declared_secrets(path), env)
    loaded = load_manifest(path)
    SECRETS.add_names((name for arm in loaded.manifest.arms for name in arm.secrets), env)
    return loaded


def engine(loaded: LoadedManifest, *, proved: bool = True) -> ContainerEngine:
    """A command's engine: this machine's docker engine (or DOCKER_HOST's), else the
    manifest's cluster: refused for what it cannot run (`cluster.refuse`), its images built
    by this machine's docker engine and pushed to its registry, and, when the command runs
    containers there (`proved`), proved first (`cluster.prepare`, its progress on stderr)."""
    section = loaded.manifest.kubernetes
    if section is None:
        return Engine()
    cluster.refuse(loaded)
    docker = Engine()  # lazy: asked at the first image
    on = cluster.engine(section, os.environ, state_dir() / "kube",
                        registry.Registered(docker, section.registry), lambda: docker)
    if proved:
        cluster.prepare(on, loaded, say)
    return on


def declared_secrets(path: Path) -> list[str]:
    """Every `secrets` name under `[[arms]]` of the raw TOML; [] when it cannot be read
    (the manifest loader then reports why)."""
    try:
        data = tomllib.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    arms = data.get("arms")
    names = [arm.get("secrets") for arm in arms if isinstance(arm, dict)] if isinstance(
        arms, list) else []
    return [name for found in names if isinstance(found, list)
            for name in found if isinstance(name, str)]
