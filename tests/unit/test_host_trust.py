"""What an image build that fetches packages gets of the host's network settings, and
what a failed setup says (issue 21 item 1: `npm ci` behind a TLS-intercepting proxy
failed with SELF_SIGNED_CERT_IN_CHAIN, raw escapes, and a log inside a gone container)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.containers.images import buildlog, host_trust, prepared
from runner.errors import InfraError

PEM = "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n"


@pytest.fixture
def no_host_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in (*host_trust.CA_VARIABLES, *host_trust.PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    system = tmp_path / "system.pem"
    system.write_text(PEM.format("system"))
    monkeypatch.setattr(host_trust, "SYSTEM_BUNDLE", system)
    return system


def test_the_bundle_is_every_ca_file_the_host_s_clients_name_once_then_the_system_s(
        no_host_settings: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy_ca = tmp_path / "proxy-ca.pem"
    proxy_ca.write_text(PEM.format("proxy"))
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(proxy_ca))
    monkeypatch.setenv("SSL_CERT_FILE", str(no_host_settings))  # the system one, named
    monkeypatch.setenv("PIP_CERT", str(tmp_path / "missing.pem"))
    assert host_trust.ca_sources() == [no_host_settings, proxy_ca]
    assert host_trust.ca_bundle() == (PEM.format("system") + PEM.format("proxy")).encode()


def test_no_ca_file_at_all_is_an_empty_bundle(no_host_settings: Path) -> None:
    no_host_settings.unlink()
    assert (host_trust.ca_sources(), host_trust.ca_bundle()) == ([], b"")
    assert "none found" in host_trust.described()


def test_only_the_proxy_variables_that_are_set_are_build_arguments(
        no_host_settings: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("no_proxy", "localhost,.corp")
    monkeypatch.setenv("HTTP_PROXY", "")
    assert host_trust.proxy_args() == {"HTTPS_PROXY": "http://proxy.corp:3128",
                                       "no_proxy": "localhost,.corp"}
    assert "proxy variables (HTTPS_PROXY, no_proxy)" in host_trust.described()


def test_every_client_s_ca_variable_names_the_bundle_on_the_setup_run_line() -> None:
    prefix = host_trust.run_prefix()
    for name in ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "PIP_CERT", "REQUESTS_CA_BUNDLE",
                 "GIT_SSL_CAINFO", "CARGO_HTTP_CAINFO", "CURL_CA_BUNDLE"):
        assert f"{name}={host_trust.CA_IN_BUILD}" in prefix


NPM_TLS = ["npm error code SELF_SIGNED_CERT_IN_CHAIN",
           "npm error errno SELF_SIGNED_CERT_IN_CHAIN",
           "npm error request to https://registry.npmjs.org/vitest failed, reason: "
           "self-signed certificate in certificate chain"]


@pytest.mark.parametrize(("lines", "cause"), [
    (NPM_TLS, "TLS certificate is not trusted"),
    (["pip._vendor.urllib3.exceptions.SSLError: [SSL: CERTIFICATE_VERIFY_FAILED]"],
     "TLS certificate is not trusted"),
    (["npm error code ENOTFOUND", "npm error getaddrinfo ENOTFOUND registry.npmjs.org"],
     "could not reach a registry"),
    (["npm error `npm ci` can only install packages when your package.json and "
      "package-lock.json or npm-shrinkwrap.json are in sync."], "lockfile does not match"),
    (["sh: 1: make: not found"], "fix [toolchain].setup"),
    (["Error: No compatible signature found in package metadata",
      "    at async Engine.ensurePackageManager (corepack.cjs:22851:32)"],
     "put COREPACK_INTEGRITY_KEYS=0 before the command"),
    (["bakeoff-setup: setup installed the project itself from /work, not editable: "
      "x-1.0.dist-info"], "install the project editable (pip install -e .)"),
], ids=["npm tls", "pip tls", "dns", "npm ci lockfile", "anything else",
        "corepack: a registry without signatures", "the project installed, not editable"])
def test_a_failed_setup_names_the_input_that_is_the_likely_cause(lines: list[str],
                                                                 cause: str) -> None:
    assert cause in prepared.likely_cause(lines)


def test_a_failed_setup_shows_its_last_lines_without_escapes_and_keeps_its_log(
        tmp_path: Path, no_host_settings: Path) -> None:
    stream = [{"stream": "Step 7/11 : RUN npm ci\n"},
              *({"stream": f"\x1b[91m{line}\n\x1b[0m"} for line in NPM_TLS),
              {"error": "The command '/bin/sh -c npm ci' returned a non-zero code: 1"}]
    with buildlog.BuildLog("prepared-test", tmp_path) as log, \
            pytest.raises(InfraError) as failed:
        prepared._built(None, "c" * 40, "bakeoff/prepared:x", stream, log)  # type: ignore[arg-type]
    message, hint = str(failed.value), failed.value.hint or ""
    assert "\x1b" not in message and "\x1b" not in log.path.read_text()
    assert message.startswith("toolchain setup failed for cccccccccccc: The command "
                              "'/bin/sh -c npm ci' returned a non-zero code: 1")
    assert f"    {NPM_TLS[-1]}" in message and f"full log: {log.path}" in message
    assert log.path.read_text().splitlines() == [
        "Step 7/11 : RUN npm ci", *NPM_TLS,
        "error: toolchain setup failed for cccccccccccc: The command '/bin/sh -c npm ci' "
        "returned a non-zero code: 1"]
    assert "TLS certificate is not trusted" in hint and str(no_host_settings) in hint
