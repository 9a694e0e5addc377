"""The engine interface is real (issue 35): the wing asks `ContainerEngine` for what it
needs and gets ids and typed results back; docker-py's objects never leave the docker
backend, so a second backend (Kubernetes, issue 36) touches no room but its own."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path

from runner.containers import backend, engine

ROOT = Path(__file__).resolve().parents[2]
# The docker backend: the engine, its held exec (docker's stdin framing) and its image
# store (builds, tags, imports: docker's own; not behind the interface yet).
BACKEND = ("runner/containers/engine.py", "runner/containers/held_exec.py",
           "runner/containers/images/")
# A docker client reached through an engine, or one of the backend's docker-level helpers.
CLIENT = re.compile(r"\.client\.|\b(engine|self\.engine)\.(call|labelled)\(")


def outside_the_backend(pattern: re.Pattern[str], roots: tuple[str, ...] = ("runner", "rig")
                        ) -> list[str]:
    found = []
    for root in roots:
        for path in sorted((ROOT / root).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            if where.startswith(BACKEND):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line.replace("http.client.", "")):
                    found.append(f"{where}:{number}: {line.strip()}")
    return found


def test_no_module_outside_the_docker_backend_reaches_the_docker_client() -> None:
    """`engine.client.*` and `engine.call(...)` (a docker-py call through the choke point)
    only in the backend: anywhere else they tie the wing to docker."""
    wrong = outside_the_backend(CLIENT)
    assert not wrong, ("the docker client reached outside the backend: ask the engine "
                       "interface (runner.containers.backend.ContainerEngine) instead:\n"
                       + "\n".join(wrong))


def test_the_client_scan_sees_what_it_must_refuse() -> None:
    assert CLIENT.search("x = engine.client.containers.get(i)")
    assert CLIENT.search('engine.call("start", container.start)')
    assert CLIENT.search("self.engine.labelled('container', f)")
    assert not CLIENT.search("engine.create(spec)")


def test_the_interface_hands_out_ids_and_typed_results_never_any() -> None:
    """Every method and property of `ContainerEngine`, and the docker `Engine`'s own
    implementation of it, is typed without `Any`: no docker-py object crosses it."""
    names = [name for name, _ in inspect.getmembers(backend.ContainerEngine)
             if not name.startswith("_")]
    assert {"create", "start", "wait", "inspect", "exec", "hold_exec", "put_archive",
            "get_archive", "connect", "create_network", "remove_labelled"} <= set(names)
    for owner in (backend.ContainerEngine, engine.Engine):
        for name in names:
            member = inspect.getattr_static(owner, name)
            function = member.fget if isinstance(member, property) else member
            hints = typing.get_type_hints(function, vars(backend) | vars(engine))
            assert "Any" not in {str(hint) for hint in hints.values()}, (owner, name, hints)
            assert all("typing.Any" not in str(hint) for hint in hints.values()), (owner, name)


def test_the_module_level_duplicates_of_the_engine_are_gone() -> None:
    """`create_container` returned docker-py's container as `Any`; `start_with`,
    `put_archive` and `get_archive` took one: the engine's methods, by id, replace them."""
    for gone in ("create_container", "start_with", "put_archive", "get_archive",
                 "create_network", "create_volume"):
        assert not hasattr(engine, gone), gone


DOCKER_ENGINE = re.compile(r"(?<![\w.])Engine\b")


def test_every_command_and_room_is_typed_against_the_interface_and_only_the_cli_builds() -> None:
    """The docker `Engine` is named only where it is built (the CLI) and inside its own
    backend: the commands, the executor and every room take a `ContainerEngine`."""
    wrong = [hit for hit in outside_the_backend(DOCKER_ENGINE)
             if not hit.startswith("runner/cli/")
             and not re.search(r'^\S+:\d+: (#|""")', hit)]
    assert not wrong, ("the docker Engine named outside the CLI and the backend: type it "
                       "as runner.containers.backend.ContainerEngine:\n" + "\n".join(wrong))
    assert DOCKER_ENGINE.search("def f(engine: Engine) -> None:")
    assert not DOCKER_ENGINE.search("def f(engine: ContainerEngine) -> None:")
