"""The Kubernetes backend's objects (issue 36), checked two ways: equal to golden files
reviewed once (tests/fixtures/kube/), and valid, strictly (no unknown field), against the
Kubernetes 1.37 schemas that `kubernetes-validate` bundles (offline). What a Pod cannot
carry as the docker backend would is refused with its reason."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from runner.containers.backend import Bind, ContainerSpec, Labels, Resources, Tmpfs, Volume
from runner.containers.kube import objects
from runner.containers.kube.objects import KubeRefusal
from runner.containers.sandbox import SandboxLimits, SandboxSpec, container_spec
from tests.unit import kube_schema

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "kube"
VERSION = kube_schema.VERSION
NS = "bakeoff"
IMAGE = "registry.example.invalid/bakeoff/python@sha256:" + "ab" * 32
BROWSER = "registry.example.invalid/bakeoff/browser@sha256:" + "cd" * 32
SAMPLE = Labels("horizon", "sample", "fixer", "r1a2b3")
OWNER = Labels("horizon", "network-policy", "", "r1a2b3")


def driver(**changes: Any) -> ContainerSpec:
    """A sample's driver, as `SampleContainers.container_spec` makes it."""
    found: dict[str, Any] = dict(
        image="sha256:local", command=("sh", "-c", "exec sh /bakeoff/in/driver.sh", "run"),
        labels=SAMPLE, resources=Resources(1.0, 1024, 256), user="0:0",
        purpose="sample cap-ui/fixer/success/1", cap_add=("CHOWN", "SETUID", "SETGID", "KILL"),
        tmpfs=(Tmpfs("/tmp", 512), Tmpfs("/work", 512, "0755"),
               Tmpfs("/bakeoff/run", 256, "0700", executable=False)),
        env={"DATABASE_URL": "postgresql://u@db/x", "HOME": "/home/sandbox"},
        working_dir="/work", stdin=True, resolve_outside=False)
    found.update(changes)
    return ContainerSpec(**found)


def browser() -> ContainerSpec:
    """A browser criterion's browser: the sandbox user, a read-only root, no capability."""
    return ContainerSpec(
        image="sha256:browser", command=("sh", "-c", "pytest"), labels=Labels(
            "horizon", "sample-browser", "fixer", "r1a2b3"),
        resources=Resources(2.0, 1536, 512), user="1000:1000",
        purpose="the browser of cap-ui/fixer/success/1", read_only=True,
        tmpfs=(Tmpfs("/tmp", 512),), stdin=True, resolve_outside=False)


def made() -> dict[str, Any]:
    """Every object the tests pin, by its golden file's name."""
    server = driver(purpose="the server of cap-ui/fixer/success/1",
                    labels=Labels("horizon", "sample-server", "fixer", "r1a2b3"))
    # The tool's own sandbox (`sandbox.container_spec`): root's keeper, exec'd into as the
    # sandbox user.
    sandbox = container_spec(SandboxSpec(
        name="horizon-fixer-sandbox", image_id="sha256:agent",
        labels=Labels("horizon", "arm", "fixer", "r1a2b3"), checkout="horizon-fixer-work",
        network="horizon-fixer-net", limits=SandboxLimits(2.0, 4096, 512, 1024),
        env={"OPENAI_BASE_URL": "http://model-gateway:8080/v1"}, home="horizon-fixer-home",
        hostname="fixer", read_only=(("horizon-brief", "/bakeoff/brief"),)))
    claims = {"horizon-fixer-work": 1000, "horizon-fixer-home": 1000, "horizon-brief": 0}
    db = {"io.bakeoff.experiment": "horizon"}
    gateway = ContainerSpec(
        image="sha256:gateway", command=("python3", "-m", "gateway", "--state", "/state"),
        labels=Labels("horizon", "gateway", "", "r1a2b3"), resources=Resources(1.0, 512, 128),
        user="1000:1000", purpose="model gateway horizon-gw", read_only=True,
        env={"PYTHONUNBUFFERED": "1"}, secret_env={"OPENAI_API_KEY": "sk-test-not-a-key"})
    return {
        "gateway-pod": [objects.pod("horizon-gw", NS, [("main", gateway, IMAGE)], deadline_s=60),
                        *objects.env_secrets("horizon-gw", NS, [("main", gateway)])],
        "sample-pod": objects.pod("horizon-cap-ui-fixer-success-1", NS, [
            ("server", server, IMAGE), ("browser", browser(), BROWSER)],
            deadline_s=240.5, hosts={"db": "10.96.0.17"}),
        "sandbox-pod": objects.pod("horizon-fixer-sandbox", NS, [("sandbox", sandbox, IMAGE)],
                                   deadline_s=7200, claims=claims, node="node-b"),
        "claim": objects.claim("horizon-fixer-work", NS, Labels("horizon", "arm-checkout",
                                                                "fixer", "r1a2b3"),
                               size_mb=2048, uid=1000, storage_class="fast-ssd"),
        "policies": [objects.deny_all(NS, OWNER), *objects.allow(
            "horizon-fixer-gateway", NS, OWNER, {"io.bakeoff.arm": "fixer"},
            {"io.bakeoff.role": "gateway", **db}, 8080)],
        "service": objects.service("horizon-db", NS, Labels("horizon", "database"),
                                   {"io.bakeoff.role": "database", **db}, 5432),
        "secret": objects.secret("horizon-gateway-keys", NS, Labels("horizon", "gateway"),
                                 {"OPENAI_API_KEY": "sk-test-not-a-key"}),
        "role": objects.role(NS, Labels("horizon", "rbac")),
        "joined": objects.joined("bakeoff-horizon-scoredb-r1a2b3",
                                 "bakeoff-horizon-fixer-samples-r1a2b3", NS,
                                 Labels("horizon", "score-database", "", "r1a2b3")),
    }


def flat(found: Any) -> list[dict[str, Any]]:
    return found if isinstance(found, list) else [found]


@pytest.mark.parametrize("name", ["sample-pod", "sandbox-pod", "claim", "policies", "service",
                                  "secret", "role", "joined", "gateway-pod"])
def test_each_object_is_its_golden_file_and_valid_against_the_1_37_schemas(name: str) -> None:
    found = made()[name]
    path = GOLDEN / f"{name}.json"
    if os.environ.get("BAKEOFF_WRITE_GOLDEN"):  # to review by hand, once, then commit
        path.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    assert found == json.loads(path.read_text())
    for one in flat(found):
        kube_schema.validate(one)


def test_the_validation_is_strict_an_unknown_field_fails() -> None:
    pod = made()["sandbox-pod"]
    pod["spec"]["containers"][0]["pidsLimit"] = 64  # no such field: the kubelet's, node-wide
    said = r"Additional properties are not allowed \('pidsLimit' was unexpected\)"
    with pytest.raises(kubernetes_validate.ValidationError, match=said):
        kubernetes_validate.validate(pod, VERSION, strict=True)
    with pytest.raises(kubernetes_validate.ValidationError, match=said):  # as the emulator
        kube_schema.validate(pod)  # checks, each schema read once


def test_the_emulator_s_check_agrees_with_the_library_on_every_kind() -> None:
    for one in (o for found in made().values() for o in flat(found)):
        assert kubernetes_validate.validate(one, VERSION, strict=True) == "1.37"
        kube_schema.validate(one)
        broken = ({**one, "spec": {**one["spec"], "nope": 1}} if "spec" in one
                  else {**one, "nope": 1})
        with pytest.raises(kubernetes_validate.ValidationError, match="'nope' was unexpected"):
            kube_schema.validate(broken)


def test_a_sample_pod_holds_the_hardening_of_the_conformance_list() -> None:
    """What the docker backend gives every container, field by field."""
    pod = made()["sample-pod"]
    server, viewer = pod["spec"]["containers"]
    assert (server["securityContext"], viewer["securityContext"]) == (
        {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False,
         "allowPrivilegeEscalation": False, "privileged": False, "procMount": "Default",
         "readOnlyRootFilesystem": False,
         "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "KILL", "SETGID", "SETUID"]}},
        {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True,
         "allowPrivilegeEscalation": False, "privileged": False, "procMount": "Default",
         "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}})
    spec = pod["spec"]
    assert (spec["restartPolicy"], spec["activeDeadlineSeconds"],
            spec["automountServiceAccountToken"], spec["securityContext"]) == (
        "Never", 241, False, {"seccompProfile": {"type": "RuntimeDefault"}})
    assert [v["emptyDir"] for v in spec["volumes"]] == [
        {"medium": "Memory", "sizeLimit": size} for size in ("512Mi", "512Mi", "256Mi", "512Mi")]
    assert (server["resources"]["limits"], viewer["resources"]["limits"]) == (
        {"cpu": "1000m", "memory": "1024Mi"}, {"cpu": "2000m", "memory": "1536Mi"})
    assert all((c["stdin"], c["stdinOnce"]) == (True, True) for c in (server, viewer))
    # Names: only the database's, by address; every other lookup to its own loopback.
    assert (spec["dnsPolicy"], spec["dnsConfig"], spec["hostAliases"]) == (
        "None", {"nameservers": ["127.0.0.1"]}, [{"ip": "10.96.0.17", "hostnames": ["db"]}])
    assert "dnsPolicy" not in made()["sandbox-pod"]["spec"]  # resolves outside: the cluster's
    aliased = objects.pod("p", NS, [("main", driver(resolve_outside=True), IMAGE)],
                          deadline_s=1, hosts={"gateway": "10.96.0.9"})
    assert "dnsPolicy" not in aliased["spec"]
    assert aliased["spec"]["hostAliases"] == [{"ip": "10.96.0.9", "hostnames": ["gateway"]}]
    named = [objects.pod("p", NS, [("main", driver(hostname=name), IMAGE)], deadline_s=1)
             ["spec"].get("hostname") for name in ("fixer", "Claude_Code", None)]
    assert named == ["fixer", None, None]  # a name a Pod cannot take: the Pod's own
    mixed = objects.pod("p", NS, [("a", driver(resolve_outside=True), IMAGE),
                                  ("b", browser(), BROWSER)], deadline_s=1)
    assert mixed["spec"]["dnsPolicy"] == "None"  # one container's rule is the Pod's


@pytest.mark.parametrize(("pod", "reason"), [
    (lambda: [("main", driver(), "bakeoff/python:latest")],
     "sample cap-ui/fixer/success/1: the image 'bakeoff/python:latest' is not named by digest "
     "(repo@sha256:...): a tag can move under a run"),
    (lambda: [("main", driver(mounts=(Bind(Path("/etc"), "/host"),)), IMAGE)],
     "sample cap-ui/fixer/success/1: a Pod gets no host path (/host)"),
    (lambda: [("main", driver(mounts=(Volume("elsewhere", "/work"),)), IMAGE)],
     "sample cap-ui/fixer/success/1: the volume 'elsewhere' is no claim of ours "
     "(create_volume makes one)"),
    (lambda: [("main", driver(mounts=(Volume("work", "/work"),)), IMAGE),
              ("c1", driver(mounts=(Volume("out", "/out"),)), IMAGE)],
     "sample cap-ui/fixer/success/1: it writes to volumes of owners [1000, 1001]: a Pod "
     "has one fsGroup"),
    (lambda: [("main", driver(cap_add=("SYS_ADMIN", "CHOWN")), IMAGE)],
     "sample cap-ui/fixer/success/1: capabilities ['SYS_ADMIN'] may not be added (only "
     "['CHOWN', 'KILL', 'SETGID', 'SETUID'])"),
    # FOWNER is the archive filler's alone (`FILLER_CAPS`, a Pod made holding), never a spec's.
    (lambda: [("main", driver(cap_add=("CHOWN", "FOWNER")), IMAGE)],
     "sample cap-ui/fixer/success/1: capabilities ['FOWNER'] may not be added (only "
     "['CHOWN', 'KILL', 'SETGID', 'SETUID'])"),
    (lambda: [("Main", driver(), IMAGE)],
     "'Main' is not a Kubernetes object name (at most 63 of [a-z0-9-], alphanumeric at both "
     "ends)"),
    (lambda: [("main", driver(labels=Labels("x" * 64, "sample")), IMAGE)],
     f"label io.bakeoff.experiment={'x' * 64!r} is not a Kubernetes label value (at most 63 "
     "of [A-Za-z0-9_.-], alphanumeric at both ends)"),
    (lambda: [], "pod p: no container"),
    (lambda: [("main", driver(user="postgres", purpose="Postgres pg"), IMAGE)],
     "Postgres pg: the user 'postgres' is not uid:gid: a Pod runs as numbers (runAsUser), "
     "never a name its image resolves"),  # the experiment's Postgres, as Docker runs it
    (lambda: [("main", driver(user="1000:staff"), IMAGE)],
     "sample cap-ui/fixer/success/1: the user '1000:staff' is not uid:gid: a Pod runs as "
     "numbers (runAsUser), never a name its image resolves"),
])
def test_what_a_pod_cannot_carry_is_refused_with_its_reason(pod: Any, reason: str) -> None:
    with pytest.raises(KubeRefusal) as refused:
        objects.pod("p", NS, pod(), deadline_s=60, claims={"work": 1000, "out": 1001})
    assert str(refused.value) == reason


def test_a_sandbox_pod_mounts_its_claims_as_their_owners_group_on_their_node() -> None:
    """A named volume is its claim, mounted read-only when the spec says so; the Pod's
    fsGroup is the owner of what it writes to (root's brief, read-only, does not count);
    the node is where its claims are held."""
    spec = made()["sandbox-pod"]["spec"]
    assert [(v["name"], v.get("persistentVolumeClaim")) for v in spec["volumes"]] == [
        ("sandbox-tmp-0", None), ("sandbox-tmp-1", None),
        ("claim-2", {"claimName": "horizon-fixer-work"}),
        ("claim-3", {"claimName": "horizon-fixer-home"}),
        ("claim-4", {"claimName": "horizon-brief"})]
    assert spec["containers"][0]["volumeMounts"][2:] == [
        {"name": "claim-2", "mountPath": "/work", "readOnly": False},
        {"name": "claim-3", "mountPath": "/home/agent", "readOnly": False},
        {"name": "claim-4", "mountPath": "/bakeoff/brief", "readOnly": True}]
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"},
                                       "fsGroup": 1000, "fsGroupChangePolicy": "OnRootMismatch"}
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] \
        == {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]}
    # Two containers of one Pod mounting one claim: one volume; only root's: no fsGroup.
    shared = objects.pod("p", NS, [
        ("main", driver(mounts=(Volume("inputs", "/in", read_only=True),)), IMAGE),
        ("c1", driver(mounts=(Volume("inputs", "/in"),)), IMAGE)],
        deadline_s=60, claims={"inputs": 0})["spec"]
    assert [v["name"] for v in shared["volumes"] if "persistentVolumeClaim" in v] == ["claim-3"]
    assert "fsGroup" not in shared["securityContext"] and "affinity" not in shared


def test_a_claim_a_pod_writes_to_is_given_to_its_owner_at_its_root_first() -> None:
    """A provisioner gives a claim's root to root and fsGroup only its group: git, as the
    sandbox user, refused such a checkout (found by the bake-off on a node of docker,
    tests/integration/test_kube_commands.py). An init container, root with CHOWN alone,
    gives the root directory of each claim the Pod writes to its owner, unless it is
    already; what it only reads, or root's, is left alone."""
    sandbox = made()["sandbox-pod"]["spec"]
    owners = sandbox["initContainers"]
    assert [o["name"] for o in owners] == [objects.OWNED]
    assert owners[0]["command"] == ["sh", "-c", objects.OWN_SCRIPT, "owners",
                                    "/bakeoff/claims/claim-3=1000",
                                    "/bakeoff/claims/claim-2=1000"]
    assert owners[0]["volumeMounts"] == [  # the home and the work claims; not the brief
        {"name": "claim-3", "mountPath": "/bakeoff/claims/claim-3"},
        {"name": "claim-2", "mountPath": "/bakeoff/claims/claim-2"}]
    assert owners[0]["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert owners[0]["image"] == sandbox["containers"][0]["image"]
    reads = objects.pod("p", NS, [("main", driver(mounts=(
        Volume("work", "/work", read_only=True),)), IMAGE)], deadline_s=60,
        claims={"work": 1000})["spec"]
    roots = objects.pod("p", NS, [("main", driver(mounts=(Volume("inputs", "/in"),)),
                                   IMAGE)], deadline_s=60, claims={"inputs": 0})["spec"]
    assert "initContainers" not in reads and "initContainers" not in roots


def test_the_owners_script_gives_a_root_to_its_owner_only_when_it_is_not(
        tmp_path: Path) -> None:
    """The script itself, run here by sh: `chown` is asked only where the owner differs
    (a stand-in that records what it was asked, first on PATH)."""
    import subprocess
    bin_dir, asked = tmp_path / "bin", tmp_path / "asked"
    bin_dir.mkdir()
    (bin_dir / "chown").write_text(f'#!/bin/sh\necho "$@" >> {asked}\n')
    (bin_dir / "chown").chmod(0o755)
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir()
    other.mkdir()
    uid = os.getuid()
    done = subprocess.run(["sh", "-c", objects.OWN_SCRIPT, "owners", f"{mine}={uid}",
                           f"{other}={uid + 1}"], env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
                          capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert asked.read_text() == f"{uid + 1}:{uid + 1} {other}\n"


def test_a_claim_is_its_size_its_owner_and_its_class() -> None:
    claim = made()["claim"]
    assert (claim["metadata"]["labels"]["io.bakeoff.owner"], claim["spec"]) == ("1000", {
        "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
        "resources": {"requests": {"storage": "2048Mi"}}, "storageClassName": "fast-ssd"})
    default = objects.claim("v", NS, OWNER, size_mb=1024, uid=0, storage_class=None)
    assert "storageClassName" not in default["spec"]  # the cluster's default class
    with pytest.raises(KubeRefusal, match="'Work_1' is not a Kubernetes object name"):
        objects.claim("Work_1", NS, OWNER, size_mb=1, uid=0, storage_class=None)


def test_a_key_is_read_from_its_secret_never_written_in_the_pod() -> None:
    """`secret_env` (the gateway's real keys): the Pod names the Secret and the key, the
    value is only in the Secret (immutable, labelled with the Pod: removed with it)."""
    pod, secret = made()["gateway-pod"]
    (container,) = pod["spec"]["containers"]
    assert container["env"] == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {
            "name": "horizon-gw-main-env", "key": "OPENAI_API_KEY"}}}]
    assert "sk-test-not-a-key" not in json.dumps(pod)
    assert (secret["metadata"]["name"], secret["metadata"]["labels"]["io.bakeoff.pod"],
            secret["immutable"], secret["data"]) == (
        "horizon-gw-main-env", "horizon-gw", True,
        {"OPENAI_API_KEY": "c2stdGVzdC1ub3QtYS1rZXk="})
    assert objects.env_secrets("p", NS, [("main", driver())]) == []  # no key, no Secret
