"""The contract's content: what grading means, built from a manifest, canonical and hashed.

`build_contract` turns a loaded manifest, plus what only the runner can see (the base
commit, the image identity, files at the base, resolved refs), into a `Contract`;
`contract_sha256` hashes its `canonical_json`. No git and no docker here: the runner
passes `read_at_base` and `resolve_reference`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from rig.errors import RigError
from runner.manifest import MAX_FILES, Change, Check, LoadedManifest

ABSENT: Final = "absent"  # the hash of a protected path that does not exist at the base

ReadAtBase = Callable[[str], bytes | None]  # repo-relative path -> bytes at the base, or None
ProtectedFiles = Callable[[Change], Sequence[str]]  # a change -> the files `protected` names
ResolveReference = Callable[[str], str | None]  # a ref -> its commit id, or None


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ContractWeights(_Part):
    """The rubric weights."""

    success: int
    checks: int
    diagnosis: int
    plan: int
    code_quality: int
    intent: int


class ContractCheck(_Part):
    """One objective check, every key that changes what it measures."""

    name: str
    run: str
    parser: str | None
    kind: str
    metric: str | None
    better: str | None
    tolerance: float
    junit: str | None
    build: bool = True  # runs [toolchain] build first

    @model_serializer(mode="wrap")
    def _without_default_build(self, handler: SerializerFunctionWrapHandler
                               ) -> dict[str, object]:
        return _without_defaults(handler(self), {"build": True})


class ContractServer(_Part):
    """The server started fresh for every sample of a success criterion."""

    run: str
    health: str
    port_env: str
    startup_timeout_s: float


class ContractStack(_Part):
    """The compose file started fresh for every sample, by its path and its bytes' hash,
    and the content identity of each service's image (the runner resolves them at `up`
    and at every later verify: an image rebuilt to other content is a changed contract)."""

    file: str  # as the manifest names it, relative to the manifest
    sha256: str
    timeout_s: float
    images: dict[str, str] = Field(default_factory=dict)  # service -> image identity


def _no_absent_stack(dumped: dict[str, object]) -> dict[str, object]:
    """A criterion or a toolchain without a stack hashes as it did before stacks existed:
    contracts frozen then still verify."""
    return _without_defaults(dumped, {"stack": None})


def _without_defaults(dumped: dict[str, object],
                      defaults: dict[str, object]) -> dict[str, object]:
    """A key added later hashes as before it existed while it holds its default value."""
    for key, default in defaults.items():
        if key in dumped and dumped[key] == default:
            dumped.pop(key)
    return dumped


class ContractBrowser(_Part):
    """A browser criterion: its pytest-playwright file by path and hash, the endpoints its
    flow must reach, and the browser that runs it (its image identity, Chromium's and
    Playwright's versions: the runner resolves them at `up` and at every later verify)."""

    file: str  # as the manifest names it, relative to the manifest
    sha256: str
    expect_requests: list[str]
    image: dict[str, str] = Field(default_factory=dict)  # identity, chromium, playwright


class ContractSuccess(_Part):
    """A change's success criterion."""

    run: str
    parser: str
    server: ContractServer | None
    stack: ContractStack | None = None
    build: bool = True
    browser: ContractBrowser | None = None

    @model_serializer(mode="wrap")
    def _without_absent_stack(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return _without_defaults(handler(self), {"stack": None, "build": True, "browser": None})


class ContractChange(_Part):
    """One change: its success criterion and the hashes of what defines it."""

    id: str
    success: ContractSuccess
    brief_sha256: str  # of the brief file's bytes
    protected: dict[str, str]  # repo path -> sha256 of its content at the base, or "absent"
    reference: str  # as the manifest names it ("" when unset)
    reference_sha256: str  # of the patch file's bytes, or the resolved commit id; "" when unset


class ContractToolchain(_Part):
    """The image every container runs, by name and by identity; the arms' own stack
    during dispatch (`[toolchain] stack`), when there is one; the Node it runs and where
    that came from (a node toolchain); what samples keep of setup's output, and the build
    each sample runs on the arm's tree."""

    image: str
    image_identity: str
    setup: list[str]
    requires: list[str]
    stack: ContractStack | None = None
    node: str | None = None  # "Node 22.20.0 (.nvmrc: 22)"
    keep: list[str] = Field(default_factory=list)
    build: list[str] = Field(default_factory=list)
    browser: bool = False  # the criteria's browser in the arms' sandboxes

    @model_serializer(mode="wrap")
    def _without_absent_stack(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return _without_defaults(handler(self), {"stack": None, "node": None, "keep": [],
                                                 "build": [], "browser": False})


class ContractLimits(_Part):
    """Per-container limits, the same for every arm."""

    cpus: float
    memory_mb: int
    pids: int
    dispatch_timeout_s: float
    check_timeout_s: float
    disk_mb: int
    max_files: int = MAX_FILES

    @model_serializer(mode="wrap")
    def _without_default_max_files(self, handler: SerializerFunctionWrapHandler
                                   ) -> dict[str, object]:
        """The default `max_files` hashes as before the limit existed: contracts frozen
        then still verify."""
        dumped: dict[str, object] = handler(self)
        if dumped.get("max_files") == MAX_FILES:
            dumped.pop("max_files", None)
        return dumped


class Contract(_Part):
    """The canonical grading content; its `contract_sha256` is what `verify` compares."""

    metric: str
    threshold: float
    samples: int
    allow_fewer_samples: bool
    weights: ContractWeights
    judge: str
    checks: list[ContractCheck]
    changes: list[ContractChange]
    toolchain: ContractToolchain
    limits: ContractLimits
    base_commit: str
    ratchet_baselines: dict[str, float] = Field(default_factory=dict)  # check -> base value


def build_contract(
    loaded: LoadedManifest,
    *,
    base_commit: str,
    image_identity: str,
    read_at_base: ReadAtBase,
    resolve_reference: ResolveReference,
    protected_files: ProtectedFiles | None = None,
    node: str | None = None,
) -> Contract:
    """The contract of `loaded` at `base_commit`, with `image_identity` for its toolchain
    (and `node`, the Node it runs, described, for a node toolchain).

    `protected_files` gives the files each change's `protected` entries name at the base
    (the runner expands globs and directories there); by default the entries as written."""
    files = protected_files or (lambda change: change.protected)
    manifest = loaded.manifest
    terms = manifest.contract
    toolchain = manifest.toolchain
    return Contract(
        metric=terms.metric, threshold=terms.threshold, samples=terms.samples,
        allow_fewer_samples=terms.allow_fewer_samples,
        weights=ContractWeights(**terms.weights.model_dump()),
        # An agent judge's pinned version is part of who grades (folded into the text, so
        # the contracts of every other judge keep the hash they had).
        judge=(terms.judge if terms.judge_version is None
               else f"{terms.judge} (version {terms.judge_version})"),
        checks=[_check(check) for check in manifest.checks],
        changes=[
            _change(loaded, change, read_at_base, resolve_reference, files(change))
            for change in manifest.changes
        ],
        toolchain=ContractToolchain(
            image=toolchain.image, image_identity=image_identity,
            setup=list(toolchain.setup), requires=list(toolchain.requires),
            stack=_toolchain_stack(loaded), node=node, keep=list(toolchain.keep),
            build=list(toolchain.build), browser=toolchain.browser,
        ),
        limits=ContractLimits(**manifest.limits.model_dump()),
        base_commit=base_commit,
    )


def canonical_json(contract: Contract) -> str:
    """Sorted keys, no whitespace, floats as repr: equal contracts give equal text."""
    return json.dumps(contract.model_dump(mode="json"), sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)


def contract_sha256(contract: Contract) -> str:
    """The sha256 (hex) of `canonical_json`."""
    return _sha256(canonical_json(contract).encode("utf-8"))


def reference_file(loaded: LoadedManifest, reference: str) -> Path | None:
    """The patch file a reference names (relative to the manifest, then the repository).

    A file wins over a ref of the same name; None when no such file exists.
    """
    if not reference:
        return None
    for base in (loaded.root, loaded.repo_path):
        path = (base / Path(reference).expanduser()).resolve()
        if path.is_file():
            return path
    return None


def _check(check: Check) -> ContractCheck:
    return ContractCheck(
        name=check.name, run=check.run, parser=check.parser, kind=check.kind,
        metric=check.metric, better=check.better, tolerance=check.tolerance, junit=check.junit,
        build=check.build,
    )


def _change(
    loaded: LoadedManifest, change: Change, read_at_base: ReadAtBase,
    resolve_reference: ResolveReference, protected: Sequence[str],
) -> ContractChange:
    success = change.success
    server = None if success.server is None else ContractServer(**success.server.model_dump())
    return ContractChange(
        id=change.id,
        success=ContractSuccess(run=success.run or "", parser=success.parser, server=server,
                                stack=_stack(loaded, change), build=success.build,
                                browser=_browser(loaded, change)),
        brief_sha256=_brief_sha256(loaded, change),
        protected={path: _sha256_or_absent(read_at_base(path)) for path in protected},
        reference=change.reference,
        reference_sha256=_reference_sha256(loaded, change, resolve_reference),
    )


def _stack(loaded: LoadedManifest, change: Change) -> ContractStack | None:
    path = loaded.stack_path(change)
    if path is None or change.success.stack is None:
        return None
    return ContractStack(file=change.success.stack,
                         sha256=_stack_sha256(loaded, path, f"change {change.id!r}",
                                              "changes[].success.stack"),
                         timeout_s=change.success.stack_timeout_s)


def _toolchain_stack(loaded: LoadedManifest) -> ContractStack | None:
    toolchain = loaded.manifest.toolchain
    path = loaded.toolchain_stack_path
    if path is None or toolchain.stack is None:
        return None
    return ContractStack(file=toolchain.stack,
                         sha256=_stack_sha256(loaded, path, "the toolchain", "toolchain.stack"),
                         timeout_s=toolchain.stack_timeout_s)


def _browser(loaded: LoadedManifest, change: Change) -> ContractBrowser | None:
    path = loaded.browser_path(change)
    if path is None or change.success.browser is None:
        return None
    try:
        digest = _sha256(path.read_bytes())
    except OSError as exc:
        raise RigError(f"{loaded.path}: cannot read the browser criterion of change "
                       f"{change.id!r} ({path}): {exc.strerror or exc}",
                       hint="write the file at that path, or correct "
                            "changes[].success.browser") from None
    return ContractBrowser(file=change.success.browser, sha256=digest,
                           expect_requests=list(change.success.expect_requests))


def _stack_sha256(loaded: LoadedManifest, path: Path, whose: str, key: str) -> str:
    try:
        return _sha256(path.read_bytes())
    except OSError as exc:
        raise RigError(
            f"{loaded.path}: cannot read the stack of {whose} ({path}): {exc.strerror or exc}",
            hint=f"write the compose file at that path, or correct {key}",
        ) from None


def _brief_sha256(loaded: LoadedManifest, change: Change) -> str:
    path = loaded.brief_path(change)
    try:
        return _sha256(path.read_bytes())
    except OSError as exc:
        raise RigError(
            f"{loaded.path}: cannot read the brief of change {change.id!r} ({path}): "
            f"{exc.strerror or exc}",
            hint="write the brief at that path, or correct changes[].brief",
        ) from None


def _reference_sha256(
    loaded: LoadedManifest, change: Change, resolve_reference: ResolveReference
) -> str:
    if not change.reference:
        return ""
    patch = reference_file(loaded, change.reference)
    if patch is not None:
        return _sha256(patch.read_bytes())
    commit = resolve_reference(change.reference)
    if commit is None:
        raise RigError(
            f"{loaded.path}: changes[{change.id}].reference {change.reference!r} is neither "
            "a patch file nor a commit of the repository",
            hint='name a commit, or a patch file relative to the manifest, or set reference = ""',
        )
    return commit


def _sha256_or_absent(content: bytes | None) -> str:
    return ABSENT if content is None else _sha256(content)


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()

