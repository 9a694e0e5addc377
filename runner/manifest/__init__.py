"""The manifest: pydantic models of bakeoff.toml, its loader, `init` and `schema`.

`load_manifest(path)` returns a `LoadedManifest` or raises ONE `ManifestError` (exit
code 2) naming the file, the key path (``arms[2].effort_normalized``), what was found
and the fix. The reference manifest is docs/bakeoff.example.toml (docs/design.md).
"""

from runner.manifest.document import Manifest
from runner.manifest.loader import DEFAULT_MANIFEST, LoadedManifest, load_manifest, parse_manifest
from runner.manifest.models import (
    MIN_SAMPLES,
    PARSER_NAMES,
    Arm,
    ArmIdentity,
    Change,
    Check,
    Contract,
    Database,
    EffortNormalized,
    EffortProvenance,
    Experiment,
    Limits,
    Mode,
    ParserName,
    Server,
    Success,
    Toolchain,
    Weights,
)
from runner.manifest.scaffold import json_schema, write_init

__all__ = [
    "DEFAULT_MANIFEST",
    "MIN_SAMPLES",
    "PARSER_NAMES",
    "Arm",
    "ArmIdentity",
    "Change",
    "Check",
    "Contract",
    "Database",
    "EffortNormalized",
    "EffortProvenance",
    "Experiment",
    "Limits",
    "LoadedManifest",
    "Manifest",
    "Mode",
    "ParserName",
    "Server",
    "Success",
    "Toolchain",
    "Weights",
    "json_schema",
    "load_manifest",
    "parse_manifest",
    "write_init",
]
