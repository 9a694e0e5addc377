"""What `up` refuses before it starts anything: a manifest that still holds the
template's placeholders, or an arm whose script does not exist.

Each is an `Issue` (the key, what is wrong, the fix); `require_ready` raises them all as
one `ManifestError` (exit 2). `placeholder_issues` is pure: the base commit's file list
comes in.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Collection

from rig.preflight import named_test_files
from runner.manifest.answers import TEMPLATE_ANSWERS, toml_list
from runner.manifest.arms import PLACEHOLDER, Arm
from runner.manifest.issues import Issue, manifest_error
from runner.manifest.loader import LoadedManifest

TEMPLATE_MODELS = frozenset(arm.model for arm in TEMPLATE_ANSWERS.arms if arm.model)
# A line only the template's brief holds (templates/brief.md): the brief was not written.
TEMPLATE_BRIEF_MARK = "What a user observes, as they would report it"
# Programs that run the script their first operand names (`sh /agents/x.sh {brief}`).
INTERPRETERS = frozenset({"sh", "bash", "dash", "zsh", "python", "python3", "node",
                          "ruby", "perl"})
AGENTS_MOUNT = "/agents/"


def require_ready(loaded: LoadedManifest) -> None:
    """`up`'s first step: every issue below at once, one `ManifestError` (exit 2)."""
    from runner import workspace  # the git wing, as the loader imports it: models need none

    base = workspace.commit_of(loaded.repo_path, loaded.manifest.experiment.base)
    files = set(workspace.files_at(loaded.repo_path, base)) if base else set()
    issues = placeholder_issues(loaded, files)
    if issues:
        raise manifest_error(str(loaded.path), issues)


def placeholder_issues(loaded: LoadedManifest, base_files: Collection[str]) -> list[Issue]:
    """Every placeholder of the template still in the manifest, every test file a success
    command names that an empty `protected` leaves to the arms, and every command arm's
    script that exists neither in agents_dir nor in the base commit (`base_files`)."""
    manifest = loaded.manifest
    issues = [Issue(f"arms[{at}].model", "is the template's placeholder",
                    'name the model the arm runs (e.g. model = "claude-sonnet-4-5"); a '
                    "scripted command arm may leave model out", found=arm.model)
              for at, arm in enumerate(manifest.arms) if arm.model in TEMPLATE_MODELS]
    for at, change in enumerate(manifest.changes):
        brief = loaded.brief_path(change)
        if brief.is_file() and TEMPLATE_BRIEF_MARK in brief.read_text(encoding="utf-8",
                                                                       errors="replace"):
            issues.append(Issue(f"changes[{at}].brief", "is still the template's brief",
                                f"write the symptom and the acceptance criteria in {brief}",
                                found=change.brief))
        named = [] if change.success.run is None else named_test_files(
            change.success.run, base_files)
        if named and not change.protected:
            issues.append(Issue(
                f"changes[{at}].protected", "is empty, and the success command runs "
                f"{', '.join(named)}: an arm could pass by rewriting its own test",
                f"protected = {toml_list(named)}",
                found=[]))
    return issues + [issue for at, arm in enumerate(manifest.arms)
                     if (issue := script_issue(loaded, arm, at, base_files)) is not None]


def script_issue(loaded: LoadedManifest, arm: Arm, at: int,
                 base_files: Collection[str]) -> Issue | None:
    """A command arm whose script does not exist where its sandbox would look for it:
    under /agents (the manifest's agents_dir) or in the checkout (the base commit)."""
    script = script_of(arm)
    if script is None or (script.startswith("/") and not script.startswith(AGENTS_MOUNT)):
        return None
    key = f"arms[{at}].command"
    agents = loaded.agents_path
    if script.startswith(AGENTS_MOUNT):
        name = script.removeprefix(AGENTS_MOUNT)
        if agents is None:
            return Issue(key, f"runs {script}, and /agents is mounted only from "
                         "[experiment] agents_dir, which is not set",
                         'set agents_dir = "agents" (relative to the manifest) and put '
                         f"{name} there", found=arm.command)
        if (agents / name).is_file():
            return None
        return Issue(key, f"runs {script}: {agents / name} does not exist",
                     f"write the script at {agents / name}, or correct the command",
                     found=arm.command)
    if posixpath.normpath(script.removeprefix("./")) in base_files:
        return None
    where = f"{agents}/" if agents is not None else "an agents_dir beside the manifest"
    return Issue(key, f"runs {script}, which the base commit does not have (the command "
                 "runs in the arm's checkout)",
                 f"put the script in {where} and run it as "
                 f"sh /agents/{posixpath.basename(script)} {{brief}}", found=arm.command)


def script_of(arm: Arm) -> str | None:
    """The script a command arm's command runs: its first word when that is a path, or
    the first operand of an interpreter (`sh /agents/x.sh {brief}`); None for a program
    on PATH, an inline script (`sh -c ...`), or a command the shell must parse."""
    if arm.agent != "command":
        return None
    try:
        words = shlex.split(PLACEHOLDER.sub("x", arm.command))
    except ValueError:
        return None
    while words and "=" in words[0] and not words[0].startswith(("/", ".")):
        words = words[1:]  # VAR=value before the program
    if not words:
        return None
    if posixpath.basename(words[0]) in INTERPRETERS:
        operands = words[1:]
        if "-c" in operands or "-m" in operands:
            return None
        words = [word for word in operands if not word.startswith("-")][:1]
        return words[0] if words else None
    return words[0] if "/" in words[0] else None
