"""Which cluster the Kubernetes backend talks to (issue 36): `KUBECONFIG` honoured as
kubectl reads it (several files, the first to name a thing wins), a context by name or
the current one, its namespace unless one is given, a token, a CA and a client
certificate from paths or inline data (written 0600 to a directory of ours), and a
plugin-authenticated user refused with what to use instead."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from runner.containers.kube.config import KubeTarget, target
from runner.errors import BadInputError

FIRST = """
apiVersion: v1
kind: Config
current-context: lab
contexts:
- name: lab
  context: {cluster: lab-cluster, user: lab-user, namespace: bakeoff}
- name: prod
  context: {cluster: prod-cluster, user: prod-user}
clusters:
- name: lab-cluster
  cluster: {server: "https://10.0.0.1:6443/", certificate-authority-data: Q0EgYnl0ZXM=}
- name: prod-cluster
  cluster: {server: "https://prod.example.invalid", insecure-skip-tls-verify: true}
users:
- name: lab-user
  user: {token: lab-token}
- name: prod-user
  user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}
"""
SECOND = """
current-context: prod
contexts:
- name: lab
  context: {cluster: prod-cluster, user: prod-user}
- name: cloud
  context: {cluster: lab-cluster, user: cloud-user}
users:
- name: cloud-user
  user:
    exec: {command: gke-gcloud-auth-plugin, apiVersion: client.authentication.k8s.io/v1}
"""


@pytest.fixture()
def configs(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "first").write_text(FIRST)
    (tmp_path / "second").write_text(SECOND)
    return {"KUBECONFIG": f"{tmp_path / 'first'}:{tmp_path / 'missing'}:{tmp_path / 'second'}"}


def test_the_current_context_of_the_first_file_wins_with_its_namespace_token_and_ca(
        configs: dict[str, str], tmp_path: Path) -> None:
    found = target(configs, tmp_path / "secrets")
    ca = tmp_path / "secrets" / "lab-ca.crt"
    assert found == KubeTarget("lab", "https://10.0.0.1:6443", "bakeoff", token="lab-token",
                               ca_file=str(ca))
    assert ca.read_bytes() == b"CA bytes"
    assert stat.S_IMODE(ca.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "secrets").stat().st_mode) == 0o700


def test_a_named_context_and_namespace_with_a_client_certificate(
        configs: dict[str, str], tmp_path: Path) -> None:
    found = target(configs, tmp_path / "s", context="prod", namespace="team-a")
    assert found == KubeTarget(
        "prod", "https://prod.example.invalid", "team-a", verify=False,
        client_cert=str(tmp_path / "s" / "prod-client.crt"),
        client_key=str(tmp_path / "s" / "prod-client.key"))
    assert [Path(p).read_bytes() for p in (found.client_cert or "", found.client_key or "")] == [
        b"cert", b"key"]


def test_a_context_only_a_later_file_names_is_found_there(configs: dict[str, str],
                                                          tmp_path: Path) -> None:
    with pytest.raises(BadInputError) as refused:
        target(configs, tmp_path / "s", context="cloud")
    assert refused.value.message == ("context 'cloud': its user authenticates through an exec "
                                  "plugin, which the tool does not run")
    assert refused.value.hint == ("give the context's user a token (`kubectl create token "
                                  "SERVICE-ACCOUNT`) or a client certificate")


@pytest.mark.parametrize(("environ", "context", "message"), [
    ({"KUBECONFIG": "/nowhere/a:/nowhere/b"}, None,
     "KUBECONFIG names no file that exists: /nowhere/a:/nowhere/b"),
    (None, "staging", "no context 'staging' in the kubeconfig"),
])
def test_what_names_no_cluster_is_refused_with_its_reason(
        configs: dict[str, str], tmp_path: Path, environ: dict[str, str] | None,
        context: str | None, message: str) -> None:
    with pytest.raises(BadInputError) as refused:
        target(environ or configs, tmp_path / "s", context=context)
    assert refused.value.message == message
    if context:
        assert refused.value.hint == "name one of: cloud, lab, prod"


def test_without_kubeconfig_the_default_file_is_read(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(BadInputError) as refused:
        target({}, tmp_path / "s")
    assert refused.value.message == (f"no kubeconfig: KUBECONFIG is not set and {tmp_path}/"
                                     ".kube/config does not exist")
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(FIRST)
    assert target({}, tmp_path / "s").context == "lab"


def test_a_token_file_is_read_and_trimmed(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    (tmp_path / "config").write_text(
        "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        f"users: [{{name: u, user: {{tokenFile: '{tmp_path / 'token'}'}}}}]\n")
    found = target({"KUBECONFIG": str(tmp_path / "config")}, tmp_path / "s")
    assert (found.token, found.namespace, found.ca_file) == ("from-file", "default", None)
