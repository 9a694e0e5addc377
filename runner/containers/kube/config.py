"""Which cluster, as `kubectl` would pick it (issue 36): the kubeconfig files of
`KUBECONFIG` (or ~/.kube/config), a context (named, else the current one), its cluster's
server and CA, its user's token or client certificate, its namespace unless one is named.

Merged as kubectl merges several files: the first file to name a context, cluster or user
(or the current context) wins. Inline certificate data (`*-data`) is written to files of
this process's own (mode 0600) in a directory the caller owns: `requests` reads paths. A
user that authenticates through a plugin (`exec`, `auth-provider`) is refused with what to
use instead: the tool runs the plugin nowhere.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runner.errors import BadInputError

DEFAULT = Path("~/.kube/config")
TOKEN_HINT = ("give the context's user a token (`kubectl create token SERVICE-ACCOUNT`) or a "
              "client certificate")


@dataclass(frozen=True)
class KubeTarget:
    """The chosen context's cluster and user, and the namespace the tool works in."""

    context: str
    server: str
    namespace: str
    token: str | None = None
    ca_file: str | None = None       # None: the system's CAs
    verify: bool = True              # False only when the kubeconfig says insecure
    client_cert: str | None = None
    client_key: str | None = None


def files(environ: Mapping[str, str]) -> list[Path]:
    """The kubeconfig files, in `KUBECONFIG`'s order (those that exist), else the default."""
    listed = [Path(p).expanduser() for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    found = [p for p in listed if p.is_file()]
    if listed:
        if not found:
            raise BadInputError(f"KUBECONFIG names no file that exists: "
                                f"{environ['KUBECONFIG']}", hint="point it at a kubeconfig")
        return found
    default = DEFAULT.expanduser()
    if not default.is_file():
        raise BadInputError(f"no kubeconfig: KUBECONFIG is not set and {default} does not exist",
                            hint="set KUBECONFIG, or write ~/.kube/config")
    return [default]


def merged(paths: list[Path]) -> dict[str, Any]:
    """The files as one config, the first file's entry winning for each name."""
    config: dict[str, Any] = {"contexts": {}, "clusters": {}, "users": {},
                              "current-context": ""}
    for path in paths:
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as error:
            raise BadInputError(f"cannot read the kubeconfig {path}: {error}",
                                hint="check the file") from error
        if not isinstance(loaded, dict):
            raise BadInputError(f"the kubeconfig {path} is not a mapping", hint="check the file")
        for section, key in (("contexts", "context"), ("clusters", "cluster"),
                             ("users", "user")):
            for entry in loaded.get(section) or []:
                if isinstance(entry, dict) and "name" in entry:
                    config[section].setdefault(str(entry["name"]), entry.get(key) or {})
        config["current-context"] = (config["current-context"]
                                     or str(loaded.get("current-context") or ""))
    return config


def target(environ: Mapping[str, str], secrets_dir: Path, *, context: str | None = None,
           namespace: str | None = None) -> KubeTarget:
    """The cluster to use: `context` (else the current one), its namespace unless
    `namespace` is given (else "default")."""
    config = merged(files(environ))
    name = context or config["current-context"]
    if not name:
        raise BadInputError("the kubeconfig names no current context and none was given",
                            hint=f"name one of: {', '.join(sorted(config['contexts'])) or '-'}")
    if name not in config["contexts"]:
        raise BadInputError(f"no context {name!r} in the kubeconfig",
                            hint=f"name one of: {', '.join(sorted(config['contexts'])) or '-'}")
    chosen = config["contexts"][name]
    cluster = config["clusters"].get(str(chosen.get("cluster")))
    if not cluster or not cluster.get("server"):
        raise BadInputError(f"context {name!r}: its cluster {chosen.get('cluster')!r} has no "
                            "server in the kubeconfig", hint="check the kubeconfig")
    user = config["users"].get(str(chosen.get("user")), {})
    plugin = next((key for key in ("exec", "auth-provider") if key in user), None)
    if plugin is not None:
        raise BadInputError(f"context {name!r}: its user authenticates through an {plugin} "
                            "plugin, which the tool does not run", hint=TOKEN_HINT)
    token = user.get("token")
    if token is None and user.get("tokenFile"):
        token = Path(str(user["tokenFile"])).expanduser().read_text().strip()
    secrets_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return KubeTarget(
        context=name, server=str(cluster["server"]).rstrip("/"),
        namespace=namespace or str(chosen.get("namespace") or "default"),
        token=None if token is None else str(token),
        ca_file=_file(cluster, "certificate-authority", secrets_dir, f"{name}-ca.crt"),
        verify=not cluster.get("insecure-skip-tls-verify", False),
        client_cert=_file(user, "client-certificate", secrets_dir, f"{name}-client.crt"),
        client_key=_file(user, "client-key", secrets_dir, f"{name}-client.key"))


def _file(entry: Mapping[str, Any], key: str, secrets_dir: Path, name: str) -> str | None:
    """`key`'s path, or `key-data` decoded into a file of ours (0600); None for neither."""
    if entry.get(key):
        return str(Path(str(entry[key])).expanduser())
    data = entry.get(f"{key}-data")
    if not data:
        return None
    path = secrets_dir / name
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(base64.b64decode(str(data)))
    return str(path)
