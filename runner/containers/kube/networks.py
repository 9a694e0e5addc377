"""The Kubernetes backend's networks (issue 36): NetworkPolicies, not bridges. A network
is a policy over the Pods labelled with it (`objects.network`) under the experiment's
deny-all (`objects.deny_all`, made once, never assumed); a Pod that joins a network once
made (the database, the gateway: `connect`) is opened to it by two policies
(`objects.joined`), and its aliases name its address in the hosts (`hostAliases`) of the
network's Pods made from then on: a Pod of ours resolves no name through the cluster's
DNS (deny-all leaves it no way there), and a Pod's hosts are fixed when it is made."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence

from runner.containers.backend import LABEL_NETWORK, Labels, require_labels
from runner.containers.kube import objects
from runner.containers.kube.api import KubeApi
from runner.errors import ConflictError, EngineRefusedError, NotFoundError


class PodNetworks:
    """The networks of one engine: what it made, and who joined which, in this process."""

    def __init__(self, api: KubeApi, refused: Callable[[str, str], EngineRefusedError]
                 ) -> None:
        self.api, self.refused = api, refused
        self._denied: set[str] = set()  # experiments whose deny-all policy is made
        self._hosts: dict[str, dict[str, str]] = {}  # network -> alias -> address
        self._joined: dict[str, dict[str, str]] = {}  # pod -> network -> its address
        self._lock = threading.Lock()

    def deny_all(self, labels: Labels) -> None:
        """The experiment's deny-all policy, made once (one already there is fine)."""
        if labels.experiment in self._denied:
            return
        with contextlib.suppress(ConflictError):
            self.api.create(objects.deny_all(self.api.cluster.namespace,
                                             Labels(labels.experiment, "network-policy")))
        self._denied.add(labels.experiment)

    def undenied(self) -> None:
        """A removal by label took the deny-alls: each is made again at the next start."""
        self._denied.clear()

    def create(self, name: str, labels: Labels, *, egress: bool) -> str:
        require_labels(labels, f"network {name}")
        self.deny_all(labels)
        try:
            self.api.create(objects.network(name, self.api.cluster.namespace, labels,
                                            egress=egress))
        except objects.KubeRefusal as refusal:
            raise self.refused(f"create network {name}", str(refusal)) from refusal
        return name

    def find(self, name: str, what: str) -> str:
        found = self.api.get("NetworkPolicy", name)
        if LABEL_NETWORK not in found["spec"]["podSelector"].get("matchLabels", {}):
            raise NotFoundError(self.api.cluster.server, what,
                                f"{name} is not a network of ours", status=None)
        return name

    def hosts(self, network: str) -> dict[str, str]:
        """The names a Pod made now on `network` resolves (alias -> address)."""
        with self._lock:
            return dict(self._hosts.get(network, {}))

    def joined(self, pod: str) -> dict[str, str]:
        """The networks `pod` joined once made, with its address there."""
        with self._lock:
            return dict(self._joined.get(pod, {}))

    def address(self, pod: str, network: str, aliases: Sequence[str], what: str) -> str:
        """Whether `pod` may join `network` as `aliases` (the network is ours, each alias a
        host name), and its address (it runs)."""
        self.find(network, what)
        for alias in aliases:
            if not objects.is_name(alias):
                raise self.refused(what, f"{alias!r} is not a host name (RFC 1123 label)")
        address = str((self.api.get("Pod", pod).get("status") or {}).get("podIP") or "")
        if not address:
            raise self.refused(what, f"the Pod {pod} has no address yet")
        return address

    def record(self, pod: str, network: str, aliases: Sequence[str], address: str, *,
               early: Sequence[str], what: str) -> None:
        """`pod` on `network` as `aliases` from now on (the engine holds its lock over this
        and over a Pod's making: no Pod is made between the check and the record);
        `early`: the network's Pods of ours already made, refused (they would not resolve
        the names), as is an alias another Pod has there."""
        if early:
            raise self.refused(what, f"Pods already made on {network} ({', '.join(early)}) "
                               "would not resolve its names (a Pod's hosts are fixed when "
                               "it is made: connect before starting them)")
        with self._lock:
            hosts = self._hosts.setdefault(network, {})
            taken = sorted(a for a in set(aliases) & set(hosts) if hosts[a] != address)
            if taken:
                raise self.refused(what, f"{', '.join(taken)} already names another Pod on "
                                   f"{network}")
            hosts.update(dict.fromkeys(aliases, address))
            self._joined.setdefault(pod, {})[network] = address

    def open(self, pod: str, network: str, owner: Labels) -> None:
        """The two policies of `pod` on `network` (recorded first: until they exist the
        names lead nowhere, never anywhere else); on a failure the record is undone."""
        try:
            for policy in objects.joined(pod, network, self.api.cluster.namespace, owner):
                with contextlib.suppress(ConflictError):  # joined before: the same policy
                    self.api.create(policy)
        except BaseException:
            self.leave(pod, network)
            raise

    def leave(self, pod: str, only: str | None = None) -> None:
        """`pod` off the networks it joined (`only` that one: known here or not): their
        policies deleted, its names dropped from their hosts (a Pod made with one keeps
        it, and it leads nowhere now)."""
        left = self.forget(pod, only)
        for network in left if only is None else [only]:
            for name in objects.joined_names(pod, network):
                self.api.delete("NetworkPolicy", name)

    def forget(self, pod: str, only: str | None = None) -> list[str]:
        """`pod`'s names on the networks it joined (`only` that one) dropped here, its
        policies left as they are (a removal by label takes them); those networks."""
        with self._lock:
            joined = self._joined.get(pod, {})
            left = {network: joined.pop(network) for network in list(joined)
                    if only in (None, network)}
            for network, address in left.items():
                hosts = self._hosts.get(network, {})
                for alias in [alias for alias, ip in hosts.items() if ip == address]:
                    del hosts[alias]
        return list(left)
