"""Read bakeoff.toml: TOML, then the models, then the files and git refs it names.

Whatever is wrong comes back as ONE `ManifestError` (exit code 2) naming the file, the
key path (``arms[2].effort_normalized``), what was found and the fix; never a traceback.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runner.errors import BadInputError, ManifestError, UnknownArmError
from runner.manifest.arms import Arm
from runner.manifest.criteria import Change
from runner.manifest.document import Manifest
from runner.manifest.issues import Issue, manifest_error, validation_issues

DEFAULT_MANIFEST = "bakeoff.toml"


@dataclass(frozen=True)
class LoadedManifest:
    """A validated manifest and where it came from (relative paths resolve against `root`)."""

    manifest: Manifest
    path: Path  # the manifest file, absolute
    root: Path  # the directory holding it, absolute

    @property
    def repo_path(self) -> Path:
        """The target repository, absolute."""
        return _resolve(self.root, self.manifest.experiment.repo)

    @property
    def agents_path(self) -> Path | None:
        """`[experiment].agents_dir`, absolute (mounted read-only at /agents), if set."""
        agents = self.manifest.experiment.agents_dir
        return None if agents is None else _resolve(self.root, agents)

    @property
    def control_arms(self) -> list[Arm]:
        """The arms marked ``control = true``."""
        return self.manifest.control_arms

    @property
    def caveats(self) -> list[str]:
        """What weakens every measurement of this manifest."""
        return self.manifest.caveats

    def brief_path(self, change: Change | str) -> Path:
        """The brief file of a change (or change id), absolute."""
        found = self.change(change) if isinstance(change, str) else change
        return _resolve(self.root, found.brief)

    def stack_path(self, change: Change | str) -> Path | None:
        """The compose file of a change's success criterion, absolute; None without one."""
        found = self.change(change) if isinstance(change, str) else change
        stack = found.success.stack
        return None if stack is None else _resolve(self.root, stack)

    def browser_path(self, change: Change | str) -> Path | None:
        """The pytest-playwright file of a change's browser criterion, absolute; None
        without one."""
        found = self.change(change) if isinstance(change, str) else change
        browser = found.success.browser
        return None if browser is None else _resolve(self.root, browser)

    @property
    def toolchain_stack_path(self) -> Path | None:
        """`[toolchain] stack` (each arm's own stack during dispatch), absolute; None
        without one."""
        stack = self.manifest.toolchain.stack
        return None if stack is None else _resolve(self.root, stack)

    def change(self, change_id: str) -> Change:
        """The change with this id; `BadInputError` naming the known ids otherwise."""
        for change in self.manifest.changes:
            if change.id == change_id:
                return change
        known = ", ".join(change.id for change in self.manifest.changes)
        raise BadInputError(f"{self.path}: no change {change_id!r}", hint=f"use one of: {known}")

    def where(self, arm: Arm) -> str:
        """Where an arm is declared, for errors: ``<file>: arms[2] (C1)``."""
        return f"{self.path}: arms[{self.manifest.arms.index(arm)}] ({arm.id})"

    def secret_values(self, arms: list[Arm], environ: Mapping[str, str]
                      ) -> tuple[dict[str, str], list[str]]:
        """The values of every secret `arms` name, from `environ`, and where each unset
        (or empty) one is named (``<file>: arms[2] (C1): NAME``), all at once."""
        missing = [f"{self.where(arm)}: {name}" for arm in arms for name in arm.secrets
                   if not environ.get(name)]
        found = {name: environ[name] for arm in arms for name in arm.secrets
                 if environ.get(name)}
        return found, missing

    def arm(self, arm_id: str) -> Arm:
        """The arm with this id; `UnknownArmError` naming the known ids otherwise."""
        for arm in self.manifest.arms:
            if arm.id == arm_id:
                return arm
        known = ", ".join(arm.id for arm in self.manifest.arms)
        raise UnknownArmError(f"{self.path}: no arm {arm_id!r}", hint=f"use one of: {known}")


def load_manifest(path: Path) -> LoadedManifest:
    """Read, validate and cross-check a manifest; raise one `ManifestError` if anything is off."""
    path = Path(path).expanduser().absolute()
    manifest = parse_manifest(_read_toml(path), path)
    loaded = LoadedManifest(manifest, path, path.parent)
    issues = [*_brief_issues(loaded), *_input_file_issues(loaded), *_agents_issues(loaded),
              *_repo_issues(loaded)]
    if issues:
        raise manifest_error(str(path), issues)
    return loaded


def parse_manifest(data: dict[str, Any], path: Path) -> Manifest:
    """Validate TOML data; no filesystem access. `path` only names the file in errors."""
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise manifest_error(str(path), validation_issues(exc)) from None


def init_manifest_of(repo: Path) -> Path:
    """Where `init` writes a repository's manifest by default: beside it, in
    `<repo>-bakeoff/` (the repository itself stays untouched)."""
    return repo.parent / f"{repo.name}-bakeoff" / DEFAULT_MANIFEST


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        problem = "is a directory, not a manifest" if path.is_dir() else "manifest not found"
        beside = init_manifest_of(path.parent)
        fix = (f"`init` wrote one beside the repository: pass -f {beside}" if beside.is_file()
               else f"write one with `bakeoff-sandbox init`, or pass -f FILE (the default "
                    f"is ./{DEFAULT_MANIFEST})")
        raise ManifestError(str(path), "", problem, fix=fix)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ManifestError(str(path), "", f"is not UTF-8 text ({exc.reason})",
                            fix="save the manifest as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(str(path), "", f"TOML syntax error: {exc}",
                            fix="correct the TOML at that line (https://toml.io)") from None


def _resolve(root: Path, relative: str) -> Path:
    path = Path(relative).expanduser()
    return (path if path.is_absolute() else root / path).resolve()


def _brief_issues(loaded: LoadedManifest) -> list[Issue]:
    issues = []
    for index, change in enumerate(loaded.manifest.changes):
        brief = loaded.brief_path(change)
        if not brief.is_file():
            issues.append(Issue(
                f"changes[{index}].brief", f"the brief file does not exist: {brief}",
                "write the brief (symptom + acceptance criteria; the diagnosis is withheld) "
                "at that path, or correct the path (relative to the manifest)",
                found=change.brief,
            ))
    return issues


def _input_file_issues(loaded: LoadedManifest) -> list[Issue]:
    """A stack's compose file and a browser criterion must be files under the manifest's
    directory (the rig's inputs, like a brief: never an arm's tree). `up` checks what a
    compose file holds."""
    compose = ("compose file", "compose/NAME.yml")
    criterion = ("browser criterion", "ui/test_NAME.py")
    named = [entry for index, change in enumerate(loaded.manifest.changes) for entry in (
        (f"changes[{index}].success.stack", change.success.stack, loaded.stack_path(change),
         compose),
        (f"changes[{index}].success.browser", change.success.browser,
         loaded.browser_path(change), criterion))]
    named.append(("toolchain.stack", loaded.manifest.toolchain.stack,
                  loaded.toolchain_stack_path, compose))
    issues = []
    for key, written, path, (what, example) in named:
        if path is None:
            continue
        if not path.is_relative_to(loaded.root):
            issues.append(Issue(key, f"leaves the manifest's directory: {path}",
                                f"keep the {what} under the manifest's directory",
                                found=written))
        elif not path.is_file():
            issues.append(Issue(key, f"the {what} does not exist: {path}",
                                f"write it (e.g. {example} beside the manifest)",
                                found=written))
    return issues


def _agents_issues(loaded: LoadedManifest) -> list[Issue]:
    agents = loaded.agents_path
    if agents is None or agents.is_dir():
        return []
    return [Issue("experiment.agents_dir", f"is not a directory: {agents}",
                  "point it at the directory holding the agent scripts (relative to the "
                  "manifest), or remove the key", found=loaded.manifest.experiment.agents_dir)]


def _repo_issues(loaded: LoadedManifest) -> list[Issue]:
    from runner import workspace  # the git wing; imported here: the models need no git

    experiment = loaded.manifest.experiment
    top = workspace.toplevel(loaded.repo_path)
    if top is None or top != loaded.repo_path.resolve():
        return [_not_a_repo(loaded, top)]
    issues = []
    if workspace.commit_of(loaded.repo_path, experiment.base) is None:
        issues.append(Issue(
            "experiment.base", f"is not a ref or commit of {loaded.repo_path}",
            "name an existing branch, tag or commit (see `git branch --list`)",
            found=experiment.base,
        ))
    return issues + _reference_issues(loaded, workspace.commit_of)


def _not_a_repo(loaded: LoadedManifest, top: Path | None) -> Issue:
    repo_path = loaded.repo_path
    fix = "point repo at the root of the target git repository (relative to the manifest)"
    if top is not None:
        fix += f"; the enclosing repository is {top}"
    else:
        fix += ", or run `git init` there and commit"
    return Issue("experiment.repo", f"is not the root of a git repository: {repo_path}",
                 fix, found=loaded.manifest.experiment.repo)


def _reference_issues(loaded: LoadedManifest,
                      commit_of: Callable[[Path, str], str | None]) -> list[Issue]:
    issues = []
    for index, change in enumerate(loaded.manifest.changes):
        ref = change.reference
        if not ref or commit_of(loaded.repo_path, ref) or _is_file(ref, loaded):
            continue
        issues.append(Issue(
            f"changes[{index}].reference", "is neither a commit of the repository nor a file",
            'name a commit (or a patch file relative to the manifest), or set reference = ""',
            found=ref,
        ))
    return issues


def _is_file(relative: str, loaded: LoadedManifest) -> bool:
    return any(_resolve(base, relative).is_file() for base in (loaded.root, loaded.repo_path))
