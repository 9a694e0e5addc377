"""An object checked strictly (no unknown field) against the Kubernetes 1.37 schemas that
`kubernetes-validate` bundles (offline), as `kubernetes_validate.validate(obj, "1.37.0",
strict=True)` checks it, with each kind's validator made once per process: the library
parses its 1.8 MB of definitions and builds a validator on every call, which was the
emulator's largest cost in the demo on the node (docs/benchmarks.md)."""

from __future__ import annotations

import functools
import re
from typing import Any

import jsonschema
import kubernetes_validate
from kubernetes_validate import utils
from referencing import Registry, Resource

VERSION = "1.37.0"
STRICT = f"kubernetes-json-schema/v{VERSION}-local-strict"


@functools.cache
def _definitions() -> Resource[Any]:
    return Resource.from_contents(utils.schema_contents(f"{STRICT}/_definitions.json",
                                                        VERSION))


@functools.cache
def _validator(kind: str, api_version: str) -> jsonschema.Draft202012Validator:
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)  # apps/v1 -> apps-v1
    try:
        schema = utils.schema_contents(f"{STRICT}/{kind.lower()}-{group}.json", VERSION)
    except FileNotFoundError:
        raise utils.SchemaNotFoundError(version=utils.major_minor(VERSION), kind=kind,
                                        api_version=api_version) from None
    registry = _definitions() @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def validate(obj: dict[str, Any]) -> None:
    """Nothing when `obj` is valid; else `kubernetes_validate.ValidationError`, the
    library's own error with its message."""
    try:
        _validator(obj["kind"], obj["apiVersion"]).validate(obj)
    except jsonschema.ValidationError as error:
        raise kubernetes_validate.ValidationError(
            error, version=utils.major_minor(VERSION)) from None
