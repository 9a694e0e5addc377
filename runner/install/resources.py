"""What the tool ships besides its code: the images' build contexts, the bundled examples,
the compose template, the engine check, and the gateway package, found through the
installed package's own resources (`importlib.resources`), never through a source
checkout's paths.

In the repository they stay where a reader looks for them (images/, examples/, compose/,
scripts/ at the top); `runner/install/_bundle/` holds a symlink to each, and the wheel carries
their files under `runner/install/_bundle/`. One path, installed or editable.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from runner.errors import InfraError

BUNDLE = "_bundle"
HINT = "reinstall bakeoff-sandbox (`pipx install --force bakeoff-sandbox`)"


def bundled(name: str) -> Path:
    """`images`, `examples`, `compose` or `scripts` of the installed package, as a path."""
    path = Path(str(resources.files("runner.install").joinpath(BUNDLE, name)))
    if not path.is_dir():
        raise InfraError(f"the installed bakeoff-sandbox is missing its {name}/ at {path}",
                         hint=HINT)
    return path


def images_dir() -> Path:
    return bundled("images")


def examples_dir() -> Path:
    return bundled("examples")


def compose_dir() -> Path:
    return bundled("compose")


def engine_script() -> Path:
    """The engine check and start (`ensure-engine.sh`): starts dockerd only when none
    answers."""
    return bundled("scripts") / "ensure-engine.sh"


def gateway_dir() -> Path:
    """The gateway package (installed beside `runner`), whose files the gateway image gets."""
    return Path(str(resources.files("gateway")))
