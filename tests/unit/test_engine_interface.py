"""The engine interface is real (issue 35): the wing asks `ContainerEngine` for what it
needs and gets ids and typed results back; docker-py's objects never leave the docker
backend, so a second backend (Kubernetes, issue 36) touches no room but its own."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.commands.dispatch import process
from runner.containers import backend, database, engine, sandbox
from runner.containers.samples import container as sample_container
from runner.errors import InfraError

ROOT = Path(__file__).resolve().parents[2]
# The docker backend: the engine, its held exec (docker's stdin framing) and its image
# store (builds, tags, imports: docker's own; not behind the interface yet).
BACKEND = ("runner/containers/engine.py", "runner/containers/dockerclient.py",
           "runner/containers/dockerspec.py",
           "runner/containers/sweep.py", "runner/containers/held_exec.py",
           "runner/containers/hijack.py", "runner/containers/images/")
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


def test_the_host_deadline_is_timeouts_kill_then_the_callers_grace() -> None:
    """One computation for every caller (a one-shot job, an exec, a sample, an agent):
    each keeps its own grace, so every deadline is what it was."""
    assert sandbox.host_deadline(100) == 100 + 5 + 30
    assert sandbox.host_deadline(100, sample_container.HOST_GRACE_S) == 100 + 5 + 60
    assert sandbox.host_deadline(100, process.HOST_GRACE_S) == 100 + 5 + 15


def test_the_pools_follow_the_engine_s_cpus_never_this_machine_s() -> None:
    """A remote engine with 64 CPUs runs 64 samples at once, and its Postgres has room
    for them, whatever this machine has."""
    assert sandbox.workers(SimpleNamespace(workers=64)) == 64  # type: ignore[arg-type]
    assert sandbox.workers(SimpleNamespace(workers=0)) == 1  # type: ignore[arg-type]
    assert database.sample_databases(SimpleNamespace(workers=64)) == 256  # type: ignore[arg-type]
    assert database.sample_databases(SimpleNamespace(workers=1)) == 8  # type: ignore[arg-type]


HOST_COUNT = re.compile(r"os\.cpu_count\(")
DEADLINE_SUM = re.compile(r"timeout_s \+ (5|KILL_GRACE_S)\b")


def test_the_deadline_and_the_pool_are_computed_in_one_place_each() -> None:
    """Pins: the host deadline was summed in 5 places and the sample pool sized by
    `os.cpu_count()` (this machine, not the engine) in 3. Only the judges that run on
    this machine (a judge command) count its CPUs."""
    counted = [hit for hit in outside_the_backend(HOST_COUNT) if "# on this machine" not in hit]
    summed = [hit for hit in outside_the_backend(DEADLINE_SUM)
              if not hit.startswith("runner/containers/sandbox.py")]
    assert (counted, summed) == ([], [])


def test_the_image_store_is_docker_s_and_another_backend_is_refused_saying_so() -> None:
    """Images are built, tagged and listed through docker's API: the image store's entry
    points narrow a `ContainerEngine` to the docker `Engine`, and refuse another backend
    with a message that names the engine and what to do (never an AttributeError)."""
    other = SimpleNamespace(address="https://k8s.example:6443")
    with pytest.raises(InfraError, match=r"^the engine at https://k8s\.example:6443 has no "
                                         r"docker image store"):
        engine.docker_engine(other)  # type: ignore[arg-type]
    docker_one = engine.Engine(SimpleNamespace())  # type: ignore[arg-type]
    assert engine.docker_engine(docker_one) is docker_one
