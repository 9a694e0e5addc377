"""The manifest: pydantic models of bakeoff.toml, its loader, `init` and `schema`.

`load_manifest(path)` returns a `LoadedManifest` or raises ONE `ManifestError` (exit
code 2) naming the file, the key path (``arms[2].effort_normalized``), what was found
and the fix. The reference manifest is docs/bakeoff.example.toml (docs/design.md).
"""

from runner.manifest.arms import AGENT_CLIS, Arm, ArmIdentity, key_provider
from runner.manifest.criteria import Change, Check, Server, Success
from runner.manifest.document import Manifest
from runner.manifest.gateway import Gateway, Price
from runner.manifest.loader import DEFAULT_MANIFEST, LoadedManifest, load_manifest, parse_manifest
from runner.manifest.models import (
    MAX_FILES,
    MIN_SAMPLES,
    PARSER_NAMES,
    ContractSection,
    Database,
    EffortNormalized,
    EffortProvenance,
    Experiment,
    Limits,
    Mode,
    ParserName,
    Toolchain,
    Weights,
)
from runner.manifest.scaffold import json_schema, write_init

__all__ = [
    "AGENT_CLIS",
    "DEFAULT_MANIFEST",
    "MAX_FILES",
    "MIN_SAMPLES",
    "PARSER_NAMES",
    "Arm",
    "ArmIdentity",
    "Change",
    "Check",
    "ContractSection",
    "Database",
    "EffortNormalized",
    "EffortProvenance",
    "Experiment",
    "Gateway",
    "Limits",
    "LoadedManifest",
    "Manifest",
    "Mode",
    "ParserName",
    "Price",
    "Server",
    "Success",
    "Toolchain",
    "Weights",
    "json_schema",
    "key_provider",
    "load_manifest",
    "parse_manifest",
    "write_init",
]
