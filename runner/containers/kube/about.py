"""What a Kubernetes engine says of itself (issue 36): whether the API answers, its
identity for the records, its facts for `doctor`. The API server's version is asked once;
what is the nodes' (cgroups, storage) is said to be per node, never guessed."""

from __future__ import annotations

from typing import Any

from runner.containers.backend import EngineFacts, EngineIdentity
from runner.containers.kube.api import KubeApi
from runner.errors import EngineError, EngineUnreachableError

# What a record says of a pids limit on a cluster whose nodes' own the manifest accepted.
ACCEPTED_PIDS = ("the nodes' podPidsLimit, not the container's own: the cluster sets no "
                 "per-Pod limit, and the manifest accepted it (accept_node_pids_limit)")
KUBE_HINT = "check the cluster (kubectl get pods -n NAMESPACE) and the context's access"


class About:
    """The engine on `api` at `address`; `accept_node_pids`: the manifest accepted the
    nodes' pids limit (the records say so)."""

    def __init__(self, api: KubeApi, address: str, accept_node_pids: bool) -> None:
        self.api, self.address, self.accept_node_pids = api, address, accept_node_pids
        self._version: dict[str, Any] | None = None

    def asked(self) -> dict[str, Any]:
        if self._version is None:
            self._version = self.api.version()
        return self._version

    def identity(self) -> EngineIdentity:
        cluster = self.api.cluster
        return EngineIdentity(self.address, f"{cluster.context}/{cluster.namespace}",
                              f"Kubernetes {self.asked().get('gitVersion', '?')}",
                              accepted=(("pids", ACCEPTED_PIDS),) if self.accept_node_pids
                              else ())

    def down(self) -> str | None:
        """Why the API does not answer now; None when it does."""
        try:
            self.api.version()
        except EngineError as error:
            return str(error).splitlines()[0]
        return None

    def ping(self) -> None:
        reason = self.down()
        if reason is not None:
            raise EngineUnreachableError(f"no Kubernetes API answers at {self.address}: "
                                         f"{reason}", hint=KUBE_HINT)

    def facts(self) -> EngineFacts:
        """The API server's version; what is the nodes' (cgroups, storage) is said so."""
        version = self.asked()
        return EngineFacts(
            server_version=str(version.get("gitVersion", "")),
            api_version=f"{version.get('major', '')}.{version.get('minor', '')}",
            cgroup_version="per node", cgroup_driver="per node",
            limits={"memory": True, "swap": True, "cpu": True,
                    "pids": self.accept_node_pids},
            storage_driver="per node", backing_filesystem="per node")
