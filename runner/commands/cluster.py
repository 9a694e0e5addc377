"""A manifest with ``engine = "kubernetes"`` (issue 36): the cluster as the commands' engine,
what `doctor` checks of it, and the cluster as `gc` sweeps it.

`engine` makes the `KubeEngine` of the manifest's `[kubernetes]`: this machine's docker
engine builds the images and pushes them to the registry (`images.registry.Registered`),
and a Pod names each by the digest the registry gave it. `prepare` proves the cluster
before a command runs anything there (the same proofs as doctor's, on the command's own
engine): one stream of a log given alone, NetworkPolicies enforced, a claim's size held;
a cluster that fails one is refused by the proof's words, never run on as if isolated.
What a cluster cannot run (a compose stack, a shell attached to this terminal) is refused
by name (`refuse`).

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
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

import requests

from runner.commands.doctor import DoctorCheck, version_of
from runner.containers import images
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.images import registry, reporters
from runner.containers.kube import config, objects, preflight
from runner.containers.kube.api import KubeApi
from runner.containers.kube.config import KubeTarget
from runner.containers.kube.engine import KubeEngine
from runner.errors import BadInputError, EngineError, InfraError, RunnerError
from runner.manifest import LoadedManifest
from runner.manifest.models import KubernetesSection

MIN_VERSION = (1, 30)  # the v5 channel protocol (stdin closed, output still read)
REGISTRY_TIMEOUT_S = 10.0
PROBE_LABELS = Labels(experiment="doctor", role="cluster-probe")
PROBE_IMAGE = "python"  # the proofs' Pods run python3
NAMES = ("kubeconfig", "kubernetes", "registry", "log-streams", "policies", "volumes")
PIDS_FIX = ("set accept_node_pids_limit = true in [kubernetes] to run with the nodes' own "
            "limit (every record says so), or run on a docker engine")


def refuse(loaded: LoadedManifest, what: str | None = None) -> None:
    """What a cluster cannot run, refused by name: a compose stack (compose runs against a
    docker engine), or `what` (a command that needs this machine's docker, e.g. a shell
    attached to this terminal). A docker manifest runs both."""
    if loaded.manifest.kubernetes is None:
        return
    path = loaded.path
    stacks = [key for key, value in (
        ("toolchain.stack", loaded.manifest.toolchain.stack),
        *((f"changes[{index}].success.stack", change.success.stack)
          for index, change in enumerate(loaded.manifest.changes))) if value]
    if what is None and not stacks:
        return
    said = what or (f"{', '.join(stacks)} names a compose stack, and compose runs on a "
                    "docker engine only")
    raise BadInputError(f'{path}: engine = "kubernetes": {said}',
                        hint='run it with engine = "docker" (DOCKER_HOST may name a remote '
                             "engine); docs/scale-out.md says what a cluster runs")


def engine(section: KubernetesSection, environ: Mapping[str, str], secrets_dir: Path,
           registered: registry.Registered | None = None,
           store: Callable[[], object] | None = None) -> KubeEngine:
    """The manifest's cluster as an engine: its context and namespace, its CPUs per
    container, its parallelism, the nodes' pids limit as the manifest accepts it, its
    volumes' class and size; its images pushed by `registered` (this machine's docker
    engine, `store`, builds them) and run by the registry's digest (without it, an image
    must be named by digest already: `gc` runs none)."""
    target = config.target(environ, secrets_dir, context=section.context,
                           namespace=section.namespace)
    return KubeEngine(KubeApi(target), cpus=section.cpus, parallelism=section.parallelism,
                      accept_node_pids=section.accept_node_pids_limit,
                      volume_mb=section.volume_mb, storage_class=section.storage_class,
                      image_ref=objects.by_digest if registered is None else registered,
                      user_of=None if registered is None else registered.user,
                      image_store=store)


def probe_image(on: KubeEngine) -> str:
    """The proofs' image (`bakeoff/python`: python3), built by the cluster's image store if
    it is not, pushed, by the registry's digest."""
    built = images.build(on, [PROBE_IMAGE], reporters.current_reporter())  # shown, if built
    return on.image_ref(built[-1].image_id)


def prepare(on: KubeEngine, loaded: LoadedManifest, say: Callable[[str], None]) -> None:
    """Before a command runs anything on the cluster: the nodes' pids limit accepted, and
    the three proofs passed on this very engine (`split_proved` is set by the first), by
    Pods of the experiment's labels and a run of their own; else refused with the failed
    line's words. Nothing of the proofs stays."""
    section = loaded.manifest.kubernetes
    assert section is not None
    pids = pids_check(section)
    if pids.status != "ok":
        raise BadInputError(f"{pids.found}: refused, never degraded", hint=pids.fix)
    say(f"proving the cluster at {on.address}: one log stream, policies, volume size")
    labels = Labels(loaded.manifest.experiment.name, PROBE_LABELS.role,
                    run=f"probe-{secrets.token_hex(4)}")
    for check in proofs(on, probe_image(on), section.volume_mb, labels):
        if check.status != "ok":
            raise InfraError(f"the cluster at {on.address} failed its {check.name} proof: "
                             f"{check.found}", hint=check.fix or None)


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
    return [*found, *proofs(engine, image, section.volume_mb)]


def proofs(engine: KubeEngine, image: str, volume_mb: int,
           labels: Labels = PROBE_LABELS) -> list[DoctorCheck]:
    """The preflight proofs by Pods of `image` (python3 in it), labelled `labels`: one line
    each; the probes, their deny-all and claim removed after, whatever happened."""
    try:
        return [
            _proved("log-streams", lambda: preflight.prove_split(engine, image, labels),
                    "one stream of a log is given alone"),
            _proved("policies", lambda: preflight.prove_isolation(
                engine, image, labels), "NetworkPolicies are enforced (a denied "
                                              "connection failed, the allowed one connected)"),
            _proved("volumes", lambda: preflight.prove_sized(
                engine, image, labels, volume_mb), f"a claim of {volume_mb} MiB holds "
                "that much and no more (its class caps it)")]
    finally:  # nothing of the proofs stays
        with contextlib.suppress(EngineError):
            engine.remove_labelled(labels.as_dict() if labels.run else {
                LABEL_EXPERIMENT: labels.experiment})


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
