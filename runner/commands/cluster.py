"""A manifest with ``engine = "kubernetes"`` (issue 36): what `doctor` checks of the cluster,
the cluster as `gc` sweeps it, and the refusal of every command the backend does not run
yet.

`doctor` checks, one line each, every one after the last that failed said "not checked":
- `kubeconfig`: the context resolves (`KUBECONFIG`, else ~/.kube/config): its server, its
  namespace, how its user authenticates (a plugin is refused: the tool runs none);
- `kubernetes`: the API answers, 1.30 or later (exec and attach need the v5 channel);
- `registry`: the registry answers its `/v2/` (200, or 401: it asks for credentials);
- `log-streams`, `policies` and `volumes`: the preflight proofs (`kube.preflight`), by
  Pods of their own running the probe image by digest: one stream of a log is given
  alone, a NetworkPolicy is enforced (a control that connects, a denied client that does
  not), a claim of `volume_mb` holds that much and no more.

This machine's engine still builds the images and pushes them: `doctor`'s other lines.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path

import requests

from runner.commands.doctor import DoctorCheck, version_of
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.kube import config, preflight
from runner.containers.kube.api import KubeApi
from runner.containers.kube.config import KubeTarget
from runner.containers.kube.engine import KubeEngine
from runner.errors import BadInputError, EngineError, InfraError, RunnerError
from runner.manifest.models import KubernetesSection

MIN_VERSION = (1, 30)  # the v5 channel protocol (stdin closed, output still read)
REGISTRY_TIMEOUT_S = 10.0
PROBE_LABELS = Labels(experiment="doctor", role="cluster-probe")
PROBE_IMAGE = "python"  # the proofs' Pods run python3
NOT_YET = ("the Kubernetes backend's engine, images, volumes, proofs, the arms' "
           "sandboxes, the database and the gateway are built; the commands that run them "
           "on a cluster are not yet (docs/scale-out.md)")
NAMES = ("kubeconfig", "kubernetes", "registry", "log-streams", "policies", "volumes")
PIDS_FIX = ("set accept_node_pids_limit = true in [kubernetes] to run with the nodes' own "
            "limit (every record says so), or run on a docker engine")


def refuse(manifest: Path) -> None:
    """A command on a Kubernetes manifest (all but `doctor`, `gc` and `report`): refused,
    saying what is left."""
    raise BadInputError(f'{manifest}: engine = "kubernetes": only `doctor`, `gc` and `report` '
                        f"run with a cluster yet: {NOT_YET}",
                        hint=f"check the cluster with `bakeoff-sandbox doctor -f {manifest}`; "
                             'run the bake-off with engine = "docker"')


def engine(section: KubernetesSection, environ: Mapping[str, str],
           secrets_dir: Path) -> KubeEngine:
    """The manifest's cluster as an engine: its context and namespace, its CPUs per
    container, its parallelism, the nodes' pids limit as the manifest accepts it, its
    volumes' class and size."""
    target = config.target(environ, secrets_dir, context=section.context,
                           namespace=section.namespace)
    return KubeEngine(KubeApi(target), cpus=section.cpus, parallelism=section.parallelism,
                      accept_node_pids=section.accept_node_pids_limit,
                      volume_mb=section.volume_mb, storage_class=section.storage_class)


def checks(section: KubernetesSection, environ: Mapping[str, str], secrets_dir: Path,
           probe_image: Callable[[], str]) -> list[DoctorCheck]:
    """The cluster's lines (the pids line is the manifest's choice); `probe_image()` the
    probes' image by digest (pushed to the registry: python3 in it), asked only when the
    proofs run."""
    return [pids_check(section), *_cluster(section, environ, secrets_dir, probe_image)]


def pids_check(section: KubernetesSection) -> DoctorCheck:
    """A Pod has no pids limit of its own: run only when the manifest accepts the nodes'."""
    if section.accept_node_pids_limit:
        return DoctorCheck("pids", "ok", "a Pod has no pids limit of its own: the nodes' "
                           "podPidsLimit accepted (accept_node_pids_limit), every record "
                           "says so")
    return DoctorCheck("pids", "wrong", "a Pod has no pids limit of its own (the kubelet's "
                       "podPidsLimit is node-wide) and the manifest does not accept it",
                       PIDS_FIX)


def _cluster(section: KubernetesSection, environ: Mapping[str, str], secrets_dir: Path,
             probe_image: Callable[[], str]) -> list[DoctorCheck]:
    found: list[DoctorCheck] = []
    try:
        target = config.target(environ, secrets_dir, context=section.context,
                               namespace=section.namespace)
    except RunnerError as error:
        return [DoctorCheck("kubeconfig", "missing", error.message, error.hint or ""),
                *skipped(NAMES[1:], "kubeconfig")]
    found.append(DoctorCheck("kubeconfig", "ok", described(target)))
    # The probes' own Pods: a handful of processes each, whatever the nodes' limit is.
    engine = KubeEngine(KubeApi(target), cpus=section.cpus, image_ref=lambda image: image,
                        accept_node_pids=True, volume_mb=section.volume_mb,
                        storage_class=section.storage_class)
    found.append(api_check(engine))
    found.append(registry_check(section.registry))
    if any(check.status != "ok" for check in found):
        failed = next(check.name for check in found if check.status != "ok")
        return [*found, *skipped(NAMES[3:], failed)]
    try:
        image = probe_image()
    except RunnerError as error:
        return [*found, *(DoctorCheck(name, "missing", f"not checked: no probe image "
                                      f"({error.message})", error.hint or "")
                          for name in NAMES[3:])]
    try:
        found.append(_proved("log-streams", lambda: preflight.prove_split(
            engine, image, PROBE_LABELS), "one stream of a log is given alone"))
        found.append(_proved("policies", lambda: preflight.prove_isolation(
            engine, image, PROBE_LABELS), "NetworkPolicies are enforced (a denied "
                                          "connection failed, the allowed one connected)"))
        found.append(_proved("volumes", lambda: preflight.prove_sized(
            engine, image, PROBE_LABELS, section.volume_mb), f"a claim of "
            f"{section.volume_mb} MiB holds that much and no more (its class caps it)"))
    finally:  # the probes' deny-all and claim too: nothing of doctor's stays
        with contextlib.suppress(EngineError):
            engine.remove_labelled({LABEL_EXPERIMENT: PROBE_LABELS.experiment})
    return found


def skipped(names: tuple[str, ...], after: str) -> list[DoctorCheck]:
    return [DoctorCheck(name, "missing", f"not checked: {after} is not ok (fix it first)")
            for name in names]


def described(target: KubeTarget) -> str:
    how = ("a token" if target.token else "a client certificate" if target.client_cert
           else "no credentials")
    return (f"context {target.context}: {target.server}, namespace {target.namespace}, "
            f"{how}")


def api_check(engine: KubeEngine) -> DoctorCheck:
    try:
        facts = engine.facts()
    except EngineError as error:
        return DoctorCheck("kubernetes", "missing", str(error).splitlines()[0],
                           "check the context's server and credentials (kubectl version)")
    needed = ".".join(map(str, MIN_VERSION))
    if version_of(facts.api_version) >= MIN_VERSION:
        return DoctorCheck("kubernetes", "ok", f"Kubernetes {facts.server_version} answers "
                           f"at {engine.api.cluster.server} (needs {needed} or later)")
    return DoctorCheck("kubernetes", "wrong", f"Kubernetes {facts.server_version or '?'}, "
                       f"older than {needed}: exec and attach need the v5 channel protocol",
                       f"use a cluster of Kubernetes {needed} or later")


def registry_check(registry: str) -> DoctorCheck:
    """The registry's `/v2/` answers (HTTPS; HTTP only on loopback, as an engine trusts)."""
    host = registry.split("/", 1)[0]
    loopback = host.split(":", 1)[0] in ("localhost", "127.0.0.1", "[::1]")
    url = f"{'http' if loopback else 'https'}://{host}/v2/"
    try:
        answer = requests.get(url, timeout=REGISTRY_TIMEOUT_S)
    except requests.RequestException as error:
        return DoctorCheck("registry", "missing", f"no registry answers at {url}: "
                           f"{type(error).__name__}", f"check {host} (a registry the engine "
                                                      "here pushes to and the nodes pull from)")
    if answer.status_code in (200, 401):
        asks = " (asks for credentials: docker login " + host + ")" if (
            answer.status_code == 401) else ""
        return DoctorCheck("registry", "ok", f"{url} answers{asks}")
    return DoctorCheck("registry", "wrong", f"{url} answered {answer.status_code}, not a "
                       "registry's 200 or 401", f"check {host}")


def _proved(name: str, proof: Callable[[], None], said: str) -> DoctorCheck:
    try:
        proof()
    except InfraError as error:
        return DoctorCheck(name, "wrong", error.message, error.hint or "")
    return DoctorCheck(name, "ok", said)
