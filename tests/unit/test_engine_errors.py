"""docker's exceptions end in the wing (issue 24, "an engine interface"): `Engine.call`
raises the project's own errors, each naming the engine, the request and its answer, and
the docker `Engine` is a `ContainerEngine` whose `Capabilities` refuse what it cannot
enforce. No docker needed: the client is a stand-in that raises what docker-py raises."""

from __future__ import annotations

from types import SimpleNamespace

import docker
import docker.errors
import pytest
import requests

from runner.containers import backend, dockerclient, engine
from runner.containers.backend import Labels, Resources
from runner.containers.engine import Engine
from runner.errors import (
    ConflictError,
    EngineError,
    EngineFailedError,
    EngineRefusedError,
    EngineUnreachableError,
    InfraError,
    NotFoundError,
    SandboxUnavailableError,
)


def api_error(status: int, explanation: str) -> docker.errors.APIError:
    """What docker-py raises for an HTTP error of the engine."""
    response = requests.Response()
    response.status_code = status
    kind = docker.errors.NotFound if status == 404 else docker.errors.APIError
    return kind(f"{status} Client Error", response=response, explanation=explanation)


def raising(error: Exception, calls: list[int] | None = None) -> object:
    def fn(*_: object, **__: object) -> None:
        if calls is not None:
            calls.append(1)
        raise error
    return fn


def call(error: Exception, *, retry: bool = False) -> Exception:
    with pytest.raises(EngineError) as caught:
        Engine(SimpleNamespace()).call("inspect sandbox", raising(error),  # type: ignore[arg-type]
                                       retry=retry)
    return caught.value


def test_a_missing_resource_is_not_found_naming_the_engine_the_request_and_its_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.2:2375")
    error = call(api_error(404, "No such container: abc"))
    assert isinstance(error, NotFoundError) and error.status == 404
    assert str(error) == ("the engine at tcp://10.0.0.2:2375 refused to inspect sandbox "
                          "(404): No such container: abc")
    assert isinstance(error.__cause__, docker.errors.NotFound)


def test_an_engine_handed_a_remote_client_names_that_engine_not_the_environment_s(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins: the second engine of the tests (a client of tcp://IP:2375 handed in) would be
    named as the local socket in its errors and its identity."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    remote = Engine(SimpleNamespace(api=SimpleNamespace(  # type: ignore[arg-type]
        base_url="http://172.30.0.2:2375")))
    assert remote.address == "tcp://172.30.0.2:2375"
    with pytest.raises(NotFoundError, match=r"^the engine at tcp://172\.30\.0\.2:2375 "):
        remote.call("find network n", raising(api_error(404, "network n not found")))
    assert Engine(SimpleNamespace(api=SimpleNamespace(  # type: ignore[arg-type]
        base_url="http+docker://localhost"))).address == dockerclient.LOCAL_ENGINE


def test_a_conflict_and_another_refusal_keep_their_status() -> None:
    conflict = call(api_error(409, "container is paused"))
    assert type(conflict) is ConflictError and conflict.status == 409
    refused = call(api_error(400, "invalid mount config"))
    assert type(refused) is EngineRefusedError and refused.answer == "invalid mount config"


@pytest.mark.parametrize("error", [api_error(500, "driver failed"),
                                   requests.exceptions.ConnectionError("reset by peer"),
                                   docker.errors.DockerException("bad response")])
def test_a_broken_engine_is_a_sandbox_unavailable_error_with_the_fix(error: Exception) -> None:
    """A failed command is a value; a broken engine is an exception that says what to do,
    and an outage (`EngineFailedError`: a sample it cuts runs again), never a refusal."""
    found = call(error)
    assert type(found) is EngineFailedError and isinstance(found, SandboxUnavailableError)
    assert isinstance(found, InfraError) and not isinstance(found, EngineRefusedError)
    assert found.hint is not None and "docker info" in found.hint
    assert found.exit_code == 3


def test_only_a_transient_failure_of_a_repeatable_call_is_retried(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "RETRY_BACKOFF_S", 0)
    calls: list[int] = []
    with pytest.raises(SandboxUnavailableError):
        Engine(SimpleNamespace()).call(  # type: ignore[arg-type]
            "list containers", raising(api_error(503, "busy"), calls), retry=True)
    assert len(calls) == 1 + engine.RETRIES
    calls.clear()
    with pytest.raises(NotFoundError):
        Engine(SimpleNamespace()).call(  # type: ignore[arg-type]
            "list containers", raising(api_error(404, "gone"), calls), retry=True)
    assert len(calls) == 1


FREEZE_FAILED = ("Cannot pause container 177e: OCI runtime pause failed: unable to "
                 "freeze: unknown")


def pausing(answers: list[Exception | None], calls: list[str]) -> Engine:
    """An engine whose client answers each pause with the next of `answers` (None: done)."""
    def pause(container_id: str) -> None:
        calls.append(container_id)
        answer = answers.pop(0)
        if answer is not None:
            raise answer
    return Engine(SimpleNamespace(api=SimpleNamespace(  # type: ignore[arg-type]
        base_url="http+docker://localhost", pause=pause)))


def test_a_pause_runc_could_not_freeze_is_asked_again_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins the CI run that failed a whole module: a sandbox whose processes a sweep had
    just killed could not be frozen at once (cgroup v1), and the arm's dispatch was cut
    as the engine's failure."""
    slept: list[float] = []
    monkeypatch.setattr(engine.time, "sleep", slept.append)
    calls: list[str] = []
    twice = [api_error(500, FREEZE_FAILED), api_error(500, FREEZE_FAILED), None]
    pausing(twice, calls).pause("177e", what="sandbox")
    assert calls == ["177e"] * 3 and slept == [0.5, 1.0]


def test_a_pause_that_never_freezes_fails_after_its_last_try_with_the_engine_s_words(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    slept: list[float] = []
    monkeypatch.setattr(engine.time, "sleep", slept.append)
    calls: list[str] = []
    never = [api_error(500, FREEZE_FAILED) for _ in range(5)]
    with pytest.raises(EngineFailedError) as caught:
        pausing(never, calls).pause("177e", what="sandbox")
    assert len(calls) == 5 and slept == [0.5, 1.0, 2.0, 4.0]
    assert str(caught.value).startswith(
        f"the engine at {dockerclient.LOCAL_ENGINE} failed to pause sandbox: ")
    assert "unable to freeze: unknown" in str(caught.value)


@pytest.mark.parametrize(("answer", "raised"), [
    (api_error(500, "Cannot pause container 177e: OCI runtime pause failed: no such "
                    "process"), EngineFailedError),
    (api_error(409, "Container 177e is already paused"), ConflictError),
    (api_error(404, "No such container: 177e"), NotFoundError)])
def test_any_other_failed_pause_is_not_asked_again(
        monkeypatch: pytest.MonkeyPatch, answer: Exception, raised: type[Exception]) -> None:
    """Twin: only runc's "unable to freeze" is repeated; another failure, a container that
    is already paused or gone, is said at once."""
    monkeypatch.setattr(engine.time, "sleep", pytest.fail)
    calls: list[str] = []
    with pytest.raises(raised):
        pausing([answer], calls).pause("177e", what="sandbox")
    assert calls == ["177e"]


def test_no_engine_at_the_address_is_engine_unreachable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # discard: nothing answers
    with pytest.raises(EngineUnreachableError, match=r"no Docker engine answers at "
                                                     r"tcp://127\.0\.0\.1:9"):
        _ = Engine().client


def test_a_broken_stream_ends_as_the_project_s_error() -> None:
    def stream() -> object:
        yield b"first"
        raise requests.exceptions.ChunkedEncodingError("connection broken")
    chunks = dockerclient.iter_stream(stream(), "read the sample's outputs")  # type: ignore[arg-type]
    assert next(chunks) == b"first"
    with pytest.raises(SandboxUnavailableError, match="read the sample's outputs"):
        next(chunks)


def test_the_docker_engine_reports_the_isolation_it_enforces() -> None:
    capabilities = Engine(SimpleNamespace()).capabilities  # type: ignore[arg-type]
    assert capabilities == backend.Capabilities(
        no_egress=True, shared_network_namespace=True, pids_limit=True,
        no_new_privileges=True, sized_volumes=True, freeze=True)


def test_a_spec_the_engine_cannot_enforce_is_refused_before_anything_is_created(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend without a shared network namespace (a browser beside its app) must refuse
    the browser's container, never run it with a network of its own instead."""
    lacking = backend.Capabilities(no_egress=True, shared_network_namespace=False,
                                   pids_limit=True, no_new_privileges=True,
                                   sized_volumes=True)
    monkeypatch.setattr(engine, "DOCKER_CAPABILITIES", lacking)
    spec = backend.ContainerSpec(image="sha256:img", command=("true",),
                                labels=Labels("it-x", "sample-browser"),
                                resources=Resources(1, 256, 64), user="1000:1000",
                                purpose="the browser of c/A/success/1", joins="abc123")
    client = SimpleNamespace(containers=SimpleNamespace(create=None))
    with pytest.raises(InfraError, match=r"^the browser of c/A/success/1 needs "
                                         r"shared_network_namespace, which the engine at"):
        Engine(client).create(spec)  # type: ignore[arg-type]
    assert lacking.unmet(backend.ContainerSpec(**{**spec.__dict__, "joins": None})) == []


# --- how the SDK reaches DOCKER_HOST ---------------------------------------------------

def test_an_ssh_docker_host_goes_through_this_machines_ssh_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert dockerclient.client_options({"DOCKER_HOST": "ssh://me@box:2222"}) == {
        "use_ssh_client": True}
    assert dockerclient.client_options({"DOCKER_HOST": "tcp://10.0.0.2:2375"}) == {}
    assert dockerclient.client_options({}) == {}
    monkeypatch.setattr(dockerclient.shutil, "which", lambda name: None)
    with pytest.raises(EngineUnreachableError) as refused:
        dockerclient.client_options({"DOCKER_HOST": "ssh://me@box"})
    assert refused.value.message == "DOCKER_HOST is ssh://me@box, but there is no ssh client here"


def test_an_ssh_client_for_an_ssh_docker_host_shells_out_to_ssh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's client for ssh:// runs this machine's `ssh` (the adapter's `shell_out`),
    and only when it first connects (an API version given: nothing is asked here)."""
    monkeypatch.setenv("DOCKER_HOST", "ssh://me@127.0.0.1:1")
    made = docker.from_env(version="1.41", **dockerclient.client_options())
    adapter = made.api.get_adapter("http+docker://ssh")
    assert (made.api.base_url, type(adapter).__name__) == ("http+docker://ssh", "SSHHTTPAdapter")
    assert adapter.ssh_client is None and adapter.ssh_host == "me@127.0.0.1:1"
    made.close()


def test_the_end_of_a_containers_stdin_over_ssh_keeps_what_is_in_flight() -> None:
    """Over ssh:// the SDK's socket is an `ssh` process: the end of input is its stdin
    closed, and the process is left to finish (terminating it, as its close() does while
    its stdin is open, lost the tail of a sample's tree: the boot's exit 125). A real
    socket is half-closed."""
    import subprocess

    proc = subprocess.Popen(["sh", "-c", "cat > /dev/null; echo done"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    ssh_like = SimpleNamespace(proc=proc)
    proc.stdin.write(b"x" * 65536)
    dockerclient.end_of_input(ssh_like)
    assert proc.stdin.closed
    assert proc.stdout.read() == b"done\n" and proc.wait(timeout=10) == 0

    ends: list[int] = []
    dockerclient.end_of_input(SimpleNamespace(shutdown=ends.append))
    assert ends == [dockerclient.socket.SHUT_WR]


READ_TIMEOUT = requests.exceptions.ConnectionError(
    "UnixHTTPConnectionPool(host='localhost', port=None): Read timed out.")  # as docker-py says it


def waiting(error: Exception, *, answers: bool = True) -> Engine:
    """An engine whose container wait raises `error`, and whose ping answers or not."""
    def ping() -> bool:
        if not answers:
            raise requests.exceptions.ConnectionError("connection refused")
        return True
    client = SimpleNamespace(api=SimpleNamespace(wait=raising(error), base_url="http://e:2375"),
                             ping=ping)
    return Engine(client)  # type: ignore[arg-type]


def test_a_wait_that_reached_its_deadline_is_the_deadline() -> None:
    assert waiting(READ_TIMEOUT).wait("c0ffee", deadline_s=0.5) is None


def test_a_wait_cut_before_its_deadline_is_the_engine_s_failure_not_a_timeout() -> None:
    """A cut connection reads like a read timeout to the client: a sample whose wait broke
    at once did not outlive its time; the engine failed (an outage: the sample runs again)."""
    cut = requests.exceptions.ConnectionError("Connection aborted: RemoteDisconnected")
    with pytest.raises(EngineFailedError) as raised:
        waiting(cut).wait("c0ffee", deadline_s=60)
    assert str(raised.value).startswith("the engine at tcp://e:2375 failed to wait for a "
                                        "container: Connection aborted")


def test_a_wait_at_its_deadline_from_an_engine_that_went_away_is_its_failure() -> None:
    with pytest.raises(EngineFailedError):
        waiting(READ_TIMEOUT, answers=False).wait("c0ffee", deadline_s=0.5)
