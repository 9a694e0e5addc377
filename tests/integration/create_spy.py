"""`python -m tests.integration.create_spy LOG ARGS...`: the real command line
(`runner.cli`, ARGS) with every container-create request it sends to the engine written
to LOG, one JSON line each (the engine's address, the name, the whole request body:
its HostConfig holds the binds and mounts). For the second engine's test (issue 24): an
inspection of every container the run made, even those it removed a moment later.

The docker SDK sends every create through `APIClient.create_container_from_config`; the
spy writes the request and then sends it unchanged."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from docker.api.client import APIClient


def install(log: Path) -> None:
    original = APIClient.create_container_from_config

    def recorded(self: APIClient, config: dict[str, Any], name: str | None = None,
                 platform: str | None = None) -> Any:
        with log.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"engine": self.base_url, "name": name, "config": config})
                      + "\n")
        return original(self, config, name, platform)

    APIClient.create_container_from_config = recorded  # type: ignore[method-assign]


def read(log: Path) -> list[dict[str, Any]]:
    """The requests written to LOG, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def host_paths(request: dict[str, Any]) -> list[str]:
    """Every path of the engine's host a create request would put into its container:
    `Binds` (`SRC:DST[:MODE]` with an absolute SRC; a volume's name is not a path) and
    `Mounts` of type bind."""
    host = request["config"].get("HostConfig") or {}
    binds = [b.split(":", 1)[0] for b in host.get("Binds") or []]
    found = [b for b in binds if b.startswith("/")]
    found += [m.get("Source", "") for m in host.get("Mounts") or [] if m.get("Type") == "bind"]
    return found


if __name__ == "__main__":
    install(Path(sys.argv[1]))
    from runner.cli.app import main  # after the spy is in place

    raise SystemExit(main(sys.argv[2:]))
