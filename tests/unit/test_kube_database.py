"""The experiment's Postgres on a cluster (issue 36), the real `database` functions against
the emulator of the API (tests/unit/kube_emulator.py: every object validated against the
1.37 schemas): its Pod as the image's postgres user with no capability, its data in a
memory `emptyDir` of its size, the admin's password in a Secret and nowhere in the Pod
or an exec's command, its readiness and its administration by exec as postgres, and a
server that never answers removed with its Secret."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from runner.containers import database, psql
from runner.containers.backend import Labels
from runner.containers.kube.api import KubeApi
from runner.containers.kube.config import KubeTarget
from runner.containers.kube.engine import KubeEngine
from runner.errors import DatabaseError
from tests.unit.kube_emulator import Emulator, emulated

NS = "bakeoff"
SECRETS = f"/api/v1/namespaces/{NS}/secrets"
IMAGE_ID = "sha256:" + "cd" * 32  # as built here; pushed, the Pod runs it by digest
IMAGE = "registry.example.invalid/bakeoff/postgres@sha256:" + "ef" * 32
LABELS = Labels("horizon", "database", "", "r1")
NETWORK = "horizon-db"


@pytest.fixture()
def emulator() -> Iterator[Emulator]:
    with emulated() as found:
        found.autorun = True
        yield found


@pytest.fixture()
def engine(emulator: Emulator) -> KubeEngine:
    made = KubeEngine(KubeApi(KubeTarget("test", emulator.url, NS)), cpus=2,
                      accept_node_pids=True, user_of=lambda image, user: "999:999",
                      image_ref={IMAGE_ID: IMAGE}.__getitem__)
    made.create_network(NETWORK, Labels("horizon", "network"), egress=False)
    return made


def ready(seen: list[list[str]], code: int = 0) -> object:
    """The readiness script's shell: what it was asked, and `code`."""
    def run(em: Emulator, pod: str, container: str, argv: list[str],
            stdin: bytes) -> tuple[bytes, bytes, int]:
        seen.append(argv)
        return b"", b"psql: error: connection refused\n" if code else b"", code
    return run


def test_postgres_is_a_pod_of_its_image_s_user_its_password_a_secret_s_only(
        engine: KubeEngine, emulator: Emulator) -> None:
    asked: list[list[str]] = []
    scripts: list[bytes] = []
    emulator.programs["sh"] = ready(asked)  # type: ignore[assignment]
    emulator.programs["psql"] = lambda em, pod, c, argv, stdin: (
        scripts.append(stdin), (b"", b"", 0))[1]
    policy = database.DbPolicy(connection_limit=7)
    server = database.start_server(engine, IMAGE_ID, LABELS, NETWORK, "horizon-db-r1",
                                   policy=policy, databases=4)
    pod = emulator.pod("horizon-db-r1")
    container = pod["spec"]["containers"][0]
    assert container["image"] == IMAGE
    security = container["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"], security["capabilities"]) == (
        999, 999, {"drop": ["ALL"]})
    # Its command the arguments of its image's entrypoint (which initialises the data),
    # and read back as docker's `Cmd` by every command that finds the server.
    assert (container["args"], "command" in container) == (
        database.server_command(policy, 4), False)
    assert database.find_server(engine, server.container_id).policy == policy
    data = next(m for m in container["volumeMounts"] if m["mountPath"] == database.DATA)
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == data["name"])
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{database.DATA_MB}Mi"}
    env = {e["name"]: e for e in container["env"]}
    assert env[database.PASSWORD_ENV] == {"name": database.PASSWORD_ENV, "valueFrom": {
        "secretKeyRef": {"name": "horizon-db-r1-main-env", "key": database.PASSWORD_ENV}}}
    assert env["PGDATA"]["value"] == database.PGDATA
    secret = emulator.objects[(SECRETS, "horizon-db-r1-main-env")]
    assert secret["data"] == {database.PASSWORD_ENV: base64.b64encode(
        server.admin_password.encode()).decode()}
    assert secret["immutable"] is True
    # Ready once psql logs in, the password read from the container's own variable.
    assert [argv[:2] for argv in asked] == [["sh", "-c"]]
    assert f'PGPASSWORD="${database.PASSWORD_ENV}"' in asked[0][2]
    assert emulator.exec_env == [{"PGCONNECT_TIMEOUT": "5"}]  # on its stdin, first
    database.Admin(engine, server).run(psql.lock_down())
    assert scripts == [psql.lock_down().encode()]
    assert emulator.execs[-1][2][-len(psql.ARGV):] == list(psql.ARGV)
    assert not any("setpriv" in command for _, _, command in emulator.execs)  # as postgres
    sent = json.dumps([pod, emulator.execs])
    assert server.admin_password not in sent
    assert engine.remove(server.container_id) is True
    assert [name for (kind, name) in emulator.objects if kind == SECRETS] == []


def test_a_server_that_never_answers_is_refused_and_nothing_of_it_is_left(
        engine: KubeEngine, emulator: Emulator) -> None:
    emulator.programs["sh"] = ready([], code=2)  # type: ignore[assignment]
    with pytest.raises(DatabaseError) as refused:
        database.start_server(engine, IMAGE_ID, LABELS, NETWORK, "horizon-db-r1", databases=4)
    assert (refused.value.message, refused.value.hint) == (
        "Postgres (sha256:cdcdcdcdcdcd) did not start: no answer within 60s: psql: error: "
        "connection refused", "check `bakeoff-sandbox images build postgres` succeeded")
    assert [name for (kind, name) in emulator.objects
            if kind in (SECRETS, f"/api/v1/namespaces/{NS}/pods")] == []
