"""The engine's own failures, named (issue 31, item 4): a full engine disk, no engine
answering at its address, and an engine that stopped or restarted under a call are each
one line naming the engine and the fix, exit 3, through the one mapping of docker's
errors (`runner.containers.dockerclient.translated`). Each exception here is the one docker-py
really raises: made by a real client against a loopback socket that refuses, never
answers, or cuts the connection, or (the engine's answers) with the words the tests'
second engine gave (tests/integration/remote_engine.py, measured)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import docker
import docker.errors
import pytest
import requests

from runner.containers import backend, dockerclient, engine, sweep
from runner.containers.engine import Engine
from runner.errors import (
    EngineDiskFullError,
    EngineError,
    EngineFailedError,
    EngineNetworksExhaustedError,
    EngineNotAnsweringError,
    EngineRestartedError,
    EngineUnreachableError,
    InfraError,
)

# What the second engine answered, its store full (POST /containers/create, then /start).
FULL_CREATE = ("write /var/lib/docker/overlay2/d6719c8773791a3746951261f39b16bce52d1b772a5acd7"
               "44bf8755eba53ea80-init/link: no space left on device")
FULL_START = ("write /var/lib/docker/containers/cf736a49ad797af328974ba3ea59f0d0729d44c963ce7e"
              "c5ac1d10dca4b715fe/hash297962514: no space left on device")
# ... and to a start under way as dockerd went down (containerd already gone).
GOING_DOWN = "transport is closing: unavailable"


def server_error(explanation: str, status: int = 500) -> docker.errors.APIError:
    """docker-py's exception for an engine's HTTP error, as `APIClient._raise_for_status`
    makes it."""
    response = requests.Response()
    response.status_code = status
    response.url = "http://10.0.0.2:2375/v1.41/containers/create"
    return docker.errors.APIError(requests.exceptions.HTTPError(response=response),
                                  response=response, explanation=explanation)


def raised(fn: Callable[[], object]) -> Exception:
    try:
        fn()
    except Exception as error:  # the client's own exception, whatever it is
        return error
    raise AssertionError("no exception")


@contextlib.contextmanager
def loopback(serve: Callable[[socket.socket], None]) -> Iterator[str]:
    """A tcp server on 127.0.0.1 that does `serve(connection)` for each client; its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                serve(connection)
    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def client(url: str, timeout: float = 5) -> docker.APIClient:
    return docker.APIClient(base_url=url, version="1.41", timeout=timeout)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def mapped(error: Exception, what: str = "create the container",
           where: str = "tcp://10.0.0.2:2375") -> EngineError:
    return dockerclient.translated(error, what, where)


def test_a_full_engine_disk_is_named_with_the_engine_and_the_fix() -> None:
    for answer in (FULL_CREATE, FULL_START):
        found = mapped(server_error(answer))
        assert type(found) is EngineDiskFullError and found.exit_code == 3
        assert str(found) == (
            "the engine at tcp://10.0.0.2:2375 has no space left on its disk, so it could "
            f"not create the container: {answer}\n"
            "  fix: free space on that engine's data root (`docker system df` there shows "
            "what holds it; or give it a larger disk), then run the same command again: the "
            "run resumes where it stopped")


NO_POOL_ANSWER = ("could not find an available, non-overlapping IPv4 address pool among the "
                  "defaults to assign to the network")  # dockerd's words, seen here under load


def test_an_engine_with_no_address_pool_left_is_an_outage_named_with_its_fix() -> None:
    """Its networks used every pool (several suites at once on one engine did it here):
    the engine's capacity, not an arm's doing, so a sample it cuts runs again."""
    for status in (400, 403, 500):
        found = mapped(server_error(NO_POOL_ANSWER, status), "create a sample network")
        assert type(found) is EngineNetworksExhaustedError
        assert isinstance(found, EngineFailedError) and found.exit_code == 3
        assert str(found) == (
            "the engine at tcp://10.0.0.2:2375 has no address pool left for another network, "
            f"so it could not create a sample network: {NO_POOL_ANSWER}\n"
            "  fix: remove networks nothing uses (`bakeoff-sandbox gc` for ours, `docker "
            "network ls` for the rest), or give the engine more pools "
            "(`default-address-pools` in its daemon.json), then run the same command again: "
            "the run resumes where it stopped")


def test_a_full_engine_disk_through_the_choke_point_is_never_retried_as_transient(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "RETRY_BACKOFF_S", 0)
    calls: list[int] = []

    def full() -> None:
        calls.append(1)
        raise server_error(FULL_CREATE)
    with pytest.raises(EngineDiskFullError, match=r"^the engine at tcp://10\.0\.0\.9:2375 has "
                                                   r"no space left on its disk, so it could "
                                                   r"not create sample c/A/success/1: write "):
        Engine(SimpleNamespace(api=SimpleNamespace(  # type: ignore[arg-type]
            base_url="http://10.0.0.9:2375"))).call("create sample c/A/success/1", full)
    assert len(calls) == 1  # a create is never repeated


def test_a_refused_connection_is_no_engine_answering_at_that_address() -> None:
    url = f"tcp://127.0.0.1:{closed_port()}"
    error = raised(lambda: client(url).containers())
    assert isinstance(error, requests.exceptions.ConnectionError)
    found = mapped(error, "list containers", url)
    assert type(found) is EngineNotAnsweringError and isinstance(found, EngineUnreachableError)
    assert str(found) == (
        f"no Docker engine answers at {url} (connection refused), so it could not list "
        "containers\n  fix: start that engine, or restore the network to it, until `docker "
        "info` answers there, then run the same command again: the run resumes where it "
        "stopped")


def test_a_missing_engine_socket_is_no_engine_answering(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/docker.sock"
    error = raised(lambda: client(url).containers())
    found = mapped(error, "list containers", url)
    assert type(found) is EngineNotAnsweringError
    assert found.message == (f"no Docker engine answers at {url} (no such file or directory), "
                             "so it could not list containers")


def test_an_engine_that_never_answers_is_no_engine_answering_in_time() -> None:
    held: list[socket.socket] = []
    with loopback(held.append) as url:  # accepted, never answered
        error = raised(lambda: client(url, timeout=0.3).containers())
    assert isinstance(error, requests.exceptions.ReadTimeout)
    found = mapped(error, "list containers", url)
    assert type(found) is EngineNotAnsweringError
    assert found.message.startswith(f"no Docker engine answers at {url} (no answer in time)")


def hang_up(connection: socket.socket) -> None:
    connection.recv(65536)
    connection.close()


def reset(connection: socket.socket) -> None:
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.recv(65536)
    connection.close()


@pytest.mark.parametrize(("serve", "why"), [
    (hang_up, "remote end closed connection without response"),
    (reset, "connection reset by peer")])
def test_a_connection_cut_before_the_answer_is_an_engine_that_stopped_under_the_call(
        serve: Callable[[socket.socket], None], why: str) -> None:
    with loopback(serve) as url:
        error = raised(lambda: client(url).containers())
    found = mapped(error, "list containers", url)
    assert type(found) is EngineRestartedError and found.exit_code == 3
    assert str(found) == (
        f"the engine at {url} stopped or restarted while it was asked to list containers "
        f"(the connection was cut: {why})\n"
        "  fix: once `docker info` answers there again, run the same command again: "
        "the run resumes where it stopped")


def test_a_stream_cut_in_the_middle_is_an_engine_that_stopped_under_the_call() -> None:
    """A log or archive streamed back when dockerd goes down: chunks, then nothing."""
    def half(connection: socket.socket) -> None:
        connection.recv(65536)
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n8\r\nsec")
        connection.close()
    with loopback(half) as url:
        got = client(url).get(f"{url.replace('tcp', 'http')}/v1.41/containers/x/archive",
                              stream=True)
        chunks = dockerclient.iter_stream(got.iter_content(5), "get the archive of /out", url)
        assert next(chunks) == b"first"
        with pytest.raises(EngineRestartedError) as cut:
            list(chunks)
    assert cut.value.message.startswith(
        f"the engine at {url} stopped or restarted while it was asked to get the archive of "
        "/out (the connection was cut: ")


def test_an_engine_going_down_under_a_call_is_named_so() -> None:
    found = mapped(server_error(GOING_DOWN), "start sample c/A/success/1")
    assert type(found) is EngineRestartedError
    assert found.message == ("the engine at tcp://10.0.0.2:2375 stopped or restarted while it "
                             "was asked to start sample c/A/success/1 (it answered: transport "
                             "is closing: unavailable)")


@pytest.mark.parametrize("error", [server_error("driver failed programming external "
                                                "connectivity"),
                                   requests.exceptions.ConnectionError("reset by peer"),
                                   docker.errors.DockerException("bad response")])
def test_other_breakage_is_not_named_as_one_of_these(error: Exception) -> None:
    """A failure the rules above do not recognise keeps the general class and hint."""
    found = mapped(error)
    assert found.hint is not None and "docker info" in found.hint
    assert type(found) is EngineFailedError and isinstance(found, InfraError)
    assert not isinstance(found, EngineDiskFullError | EngineNotAnsweringError
                          | EngineRestartedError)


def test_a_sweep_the_engine_failed_under_says_so_not_that_resources_are_left(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins: `up` failing as dockerd went down cleaned up, and every volume's removal got
    "get VOLUME: database not open" (the daemon's volume store already closed): the run
    ended on "5 of our resources are still there after removal", hiding why."""
    monkeypatch.setattr(engine, "RETRY_BACKOFF_S", 0)
    monkeypatch.setattr(sweep, "SWEEP_PAUSE_S", 0)

    def closed() -> None:
        raise server_error("get bakeoff-x-brief: database not open")
    volume = SimpleNamespace(name="bakeoff-x-brief", attrs={"Labels": {
        "io.bakeoff.experiment": "x"}}, remove=closed)
    volumes = SimpleNamespace(list=lambda **query: [volume])
    nothing = SimpleNamespace(list=lambda **query: [])
    stand_in = SimpleNamespace(containers=nothing, networks=nothing, volumes=volumes,
                               api=SimpleNamespace(base_url="http://10.0.0.2:2375"))
    with pytest.raises(EngineRestartedError) as said:
        Engine(stand_in).remove_labelled(  # type: ignore[arg-type]
            {"io.bakeoff.experiment": "x"})
    assert said.value.message == (
        "the engine at tcp://10.0.0.2:2375 stopped or restarted while it was asked to remove "
        "volume (it answered: get bakeoff-x-brief: database not open)")


@pytest.mark.parametrize("error", [
    server_error(FULL_CREATE), server_error(GOING_DOWN),
    requests.exceptions.ConnectionError(ConnectionResetError(104, "Connection reset by peer"))])
def test_the_engine_s_own_failures_are_outages_a_sample_runs_again_after(
        error: Exception) -> None:
    """The executor tells an outage by `EngineFailedError | EngineUnreachableError`
    (runner.containers.samples.executor): a full engine disk and an engine that stopped
    under a sample are outages, so the sample is cut and run again, never graded."""
    assert isinstance(mapped(error), EngineFailedError | EngineUnreachableError)


def test_the_engine_s_disk_is_asked_in_its_own_words_by_a_container_never_started() -> None:
    """When a sample's log comes back empty, the executor asks whether the engine's disk
    is full (it writes the log there, and a full disk loses it without an error): a
    probe container created, never started, and removed; the engine's refusal is the
    answer."""
    made: list[dict[str, object]] = []
    removed: list[str] = []

    def create(**args: object) -> object:
        made.append(args)
        return SimpleNamespace(id="c0ffee")
    roomy = Engine(SimpleNamespace(  # type: ignore[arg-type]
        containers=SimpleNamespace(create=create),
        api=SimpleNamespace(base_url="http://10.0.0.2:2375",
                            remove_container=lambda cid, **kw: removed.append(cid))))
    labels = backend.Labels("it-x", "disk-probe", "A", "r1")
    assert engine.disk_full(roomy, "sha256:img", labels) is None
    assert removed == ["c0ffee"] and made[0]["command"] == ["true"]
    assert made[0]["labels"] == labels.as_dict()

    def full(**args: object) -> object:
        raise server_error(FULL_CREATE)
    crammed = Engine(SimpleNamespace(  # type: ignore[arg-type]
        containers=SimpleNamespace(create=full),
        api=SimpleNamespace(base_url="http://10.0.0.2:2375")))
    said = engine.disk_full(crammed, "sha256:img", labels)
    assert isinstance(said, EngineDiskFullError) and said.answer == FULL_CREATE


# -- a sample whose log the engine lost ---------------------------------------------------

class LostLog:
    """A stand-in engine for `SampleContainers._require_engine`: the container's log
    as given, the probe's create as given (`full`: the measured refusal)."""

    address = "tcp://10.0.0.2:2375"
    capabilities = engine.DOCKER_CAPABILITIES

    def __init__(self, log: bytes, full: bool) -> None:
        self.log, self.full = log, full
        self.removed: list[str] = []

    def logs(self, container_id: str, **query: object) -> bytes:
        return self.log

    def create(self, spec: backend.ContainerSpec) -> str:
        if self.full:
            raise dockerclient.translated(server_error(FULL_CREATE), f"create {spec.purpose}",
                                    self.address)
        return "probe"

    def remove(self, container_id: str) -> bool:
        self.removed.append(container_id)
        return True


def lost(log: bytes, code: int, *, full: bool = False) -> Exception | None:
    from runner.containers.samples.container import SampleContainers
    containers = SampleContainers.__new__(SampleContainers)
    containers.engine = LostLog(log, full)  # type: ignore[assignment]
    containers.image = SimpleNamespace(image_id="sha256:img")  # type: ignore[assignment]
    containers.experiment, containers.run = "it-x", "r1"
    spec = SimpleNamespace(sample="c/A/success/1", arm="A")
    try:
        containers._require_engine(spec, "c1", code)  # type: ignore[arg-type]
    except EngineError as error:
        return error
    return None


def test_a_sample_log_lost_to_a_full_engine_disk_is_an_outage_never_the_arms_fail() -> None:
    """Pins: the engine's disk filled while a sample ran: the container exited 0, its log
    (written on that disk) came back empty, and the sample was FAIL broke_harness by the
    differential rule ("the sample's tree could not be laid out (exit 0)")."""
    said = lost(b"", 0, full=True)
    assert isinstance(said, EngineDiskFullError) and said.message == (
        "the engine at tcp://10.0.0.2:2375 has no space left on its disk, so it could not "
        f"keep the output of sample c/A/success/1: {FULL_CREATE}")


def test_a_sample_the_engine_stopped_is_an_outage() -> None:
    """Pins: dockerd going down stopped a baseline sample (exit 143, empty log): it was
    RIG_ERROR infra, kept as the baseline's result, and every resume's `up` refused it."""
    said = lost(b"", 143)
    assert isinstance(said, EngineRestartedError) and said.message == (
        "the engine at tcp://10.0.0.2:2375 stopped or restarted while it was asked to run "
        "sample c/A/success/1 (its container was stopped from outside (exit 143) before it "
        "handed its output back)")
    other = lost(b"", 0)
    assert type(other) is EngineFailedError and other.message == (
        "the engine at tcp://10.0.0.2:2375 kept no log of sample c/A/success/1 (exit 0): the "
        "driver's output is lost")


@pytest.mark.parametrize(("log", "code"), [(b"", 125), (b"bakeoff-out:\n", 143),
                                           (b"tar: short read\n", 0)])
def test_a_log_with_the_driver_s_own_words_is_its_account_not_an_outage(
        log: bytes, code: int) -> None:
    """The driver's refusal of a layout (exit 125), or any line in the log: as before,
    the differential rule's to judge (an arm cannot make its own sample an outage)."""
    assert lost(log, code, full=True) is None


def test_a_teardown_that_fails_after_an_outage_never_hides_the_outage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins: dockerd stopped under `score`; the samples' executor then failed to remove a
    network the engine, just back, still held ("has active endpoints"), and the run ended
    on "1 of our resources are still there after removal" instead of the samples the
    outage cut. A teardown's failure is still raised when nothing else is."""
    from runner.containers.samples.executor import DockerSampleExecutor
    from runner.errors import LeftoverError, OutageError
    left = LeftoverError(["network n"], {"network n": "has active endpoints"})

    def teardown(self: DockerSampleExecutor) -> None:
        raise left
    monkeypatch.setattr(DockerSampleExecutor, "teardown", teardown)
    monkeypatch.setattr(DockerSampleExecutor, "setup", lambda self: None)
    executor = DockerSampleExecutor.__new__(DockerSampleExecutor)
    cut = OutageError(["c/A/success/3"], "no Docker engine answers at tcp://10.0.0.2:2375")
    with pytest.raises(OutageError) as said, executor:
        raise cut
    assert said.value is cut
    with pytest.raises(LeftoverError), executor:
        pass


def test_samples_a_full_engine_disk_cut_are_named_with_the_disk_s_fix() -> None:
    """The run's one line after a full disk cut samples: its fix is the disk's, not
    "once `docker info` answers again" (it answers all along)."""
    from runner.errors import OutageError
    full = mapped(server_error(FULL_CREATE), "create sample c/A/success/3")
    said = OutageError(["c/A/success/3"], str(full).splitlines()[0])
    assert said.hint == (
        "free space on that engine's data root (`docker system df` there shows what holds "
        "it; or give it a larger disk), then run the same command again (`bakeoff-sandbox "
        "run` resumes where it stopped): those samples run again; their cut attempts are "
        "kept under samples/<arm>/<check>/retried/")
    down = OutageError(["c/A/success/3"], "no Docker engine answers at tcp://10.0.0.2:2375")
    assert down.hint is not None and down.hint.startswith("once `docker info` answers again, ")


def test_a_database_failure_waits_to_see_its_server_stopped_under_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins: dockerd going down killed the admin's psql in the experiment's Postgres (exit
    137) while the container still showed `running`; the sample was RIG_ERROR infra, kept
    as a result, and `run` stopped at a round of rig errors. The server asked again until
    it stopped makes it an outage."""
    from runner.containers import database
    from runner.containers.samples import network
    from runner.errors import DatabaseError
    monkeypatch.setattr(network, "DOWN_POLL_S", 0)
    answers = iter([None, None, "exited"])

    def find_server(engine: object, container_id: str) -> object:
        status = next(answers)
        if status is not None:
            raise DatabaseError(f"the experiment's Postgres (container {container_id[:12]}) "
                                f"is {status}")
        return object()
    monkeypatch.setattr(database, "find_server", find_server)
    networks = network.SampleNetworks.__new__(network.SampleNetworks)
    networks.engine = None  # type: ignore[assignment]
    networks.server = SimpleNamespace(container_id="b77f738070ae")  # type: ignore[assignment]
    assert networks.server_down() is None  # asked once: still running
    assert networks.server_down(within_s=5) == (
        "the experiment's Postgres (container b77f738070ae) is exited")
