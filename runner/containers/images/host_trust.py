"""The host's trust and proxy settings, for the image builds that fetch packages.

A build that runs a package manager (`[toolchain] setup`, an agent CLI's install) must
reach the registry the way the host's own clients do: on many company networks through
a TLS-intercepting proxy whose CA the host trusts, and through `HTTP(S)_PROXY`. The
build gets them, and nothing else does:

- the host's CA bundle (the files `SSL_CERT_FILE`, `NODE_EXTRA_CA_CERTS`,
  `REQUESTS_CA_BUNDLE`, `PIP_CERT`, `CURL_CA_BUNDLE` name, then the system bundle) is one
  file of the build context, named to every client's variable on the RUN line only;
- the proxy variables are Docker's predefined build arguments, which RUN sees and the
  image's history and config never keep.

So a sample or an arm's sandbox started from the image has neither (their networks are
the rig's; `tests/integration/test_prepared.py` checks the image's config).
"""

from __future__ import annotations

import os
from pathlib import Path

SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CA_VARIABLES = ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "PIP_CERT",
                "CURL_CA_BUNDLE")
# Docker's predefined build arguments: usable by RUN without an ARG, never in the image.
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY",
                   "http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy")
CA_IN_BUILD = "/tmp/bakeoff-host-ca.crt"
# What each client reads for its CA file, set to the host's bundle for the setup's RUN.
CLIENT_CA_VARIABLES = ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
                       "PIP_CERT", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "CARGO_HTTP_CAINFO")


def ca_sources() -> list[Path]:
    """The CA files the host's clients use, each once, in the order they are read."""
    named = [os.environ.get(variable, "") for variable in CA_VARIABLES]
    found: list[Path] = []
    for candidate in [*(Path(n) for n in named if n), SYSTEM_BUNDLE]:
        if candidate.is_file() and candidate.resolve() not in {f.resolve() for f in found}:
            found.append(candidate)
    return found


def ca_bundle() -> bytes:
    """The host's CA certificates as one PEM file (empty when the host has none)."""
    parts = []
    for source in ca_sources():
        try:
            parts.append(source.read_bytes().rstrip(b"\n") + b"\n")
        except OSError:
            continue
    return b"".join(parts)


def proxy_args() -> dict[str, str]:
    """The host's proxy variables that are set, as build arguments."""
    return {name: value for name in PROXY_VARIABLES if (value := os.environ.get(name))}


def run_prefix() -> str:
    """`export ...` of every client's CA variable naming the bundle, for one RUN line."""
    return "export " + " ".join(f"{name}={CA_IN_BUILD}" for name in CLIENT_CA_VARIABLES)


def described() -> str:
    """What the build was given, for an error's hint."""
    sources = ", ".join(str(s) for s in ca_sources()) or "none found"
    proxies = ", ".join(sorted(proxy_args())) or "none set"
    return f"the host's CA files ({sources}) and proxy variables ({proxies})"
