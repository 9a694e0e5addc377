"""runner.manifest: the reference manifest loads; every bad one is ONE clear ManifestError.

The reference is the repository's own docs/bakeoff.example.toml (the user contract,
docs/design.md "The manifest"); tests/unit/bad_manifests/reference.toml is a link to it.
Each bad manifest is the reference with one textual edit, loaded from a real git
repository on `main` that holds the brief the reference names.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import jsonschema
import pytest
from pydantic import ValidationError

from runner.errors import BadInputError, ManifestError, UnknownArmError
from runner.manifest import (
    PARSER_NAMES,
    Arm,
    EffortNormalized,
    EffortProvenance,
    Manifest,
    Mode,
    ParserName,
    json_schema,
    load_manifest,
    parse_manifest,
    write_init,
)

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "bakeoff.example.toml"
LINKED_REFERENCE = Path(__file__).parent / "bad_manifests" / "reference.toml"
TEMPLATE = ROOT / "runner" / "manifest" / "templates" / "bakeoff.toml"
GIT_IDENTITY = ("-c", "user.name=bakeoff-test", "-c", "user.email=bakeoff-test@example.invalid",
                "-c", "commit.gpgsign=false")


def git(directory: Path, *args: str) -> None:
    subprocess.run(["git", *GIT_IDENTITY, *args], cwd=directory, check=True,
                   capture_output=True)


def commit_all(directory: Path) -> None:
    """`git init -b main` (if needed), then commit every file (the git CLI: GitPython is
    not a dependency of the project any more)."""
    if not (directory / ".git").exists():
        git(directory, "init", "-q", "-b", "main")
    git(directory, "add", "--all")
    git(directory, "commit", "-q", "-m", "fixture")


@pytest.fixture
def manifest_path(tmp_path: Path) -> Path:
    """The reference manifest at the root of a committed git repo with its brief."""
    root = tmp_path / "target"
    (root / "briefs").mkdir(parents=True)
    (root / "agents").mkdir()  # the reference's agents_dir (empty: git keeps the tree clean)
    (root / "briefs" / "cap-horizon.md").write_text("# cap-horizon\n\nSymptom: ...\n")
    (root / "bakeoff.toml").write_text(REFERENCE.read_text())
    commit_all(root)
    return root / "bakeoff.toml"


def edit(old: str, new: str) -> Callable[[str], str]:
    """A mutation replacing the first `old` (which must be present) with `new`."""
    def mutate(text: str) -> str:
        assert old in text, f"fixture drift: {old!r} is not in the reference"
        return text.replace(old, new, 1)
    return mutate


def cut(start: str, end: str | None, *, prepend: str = "") -> Callable[[str], str]:
    """A mutation removing the text from `start` up to `end` (or the end of the file)."""
    def mutate(text: str) -> str:
        head, found, tail = text.partition(start)
        assert found, f"fixture drift: {start!r} is not in the reference"
        rest = "" if end is None else tail[tail.index(end):]
        return prepend + head + rest
    return mutate


def line_of(fragment: str) -> int:
    """The 1-based line of the reference that holds `fragment`."""
    lines = REFERENCE.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if fragment in line)


def zero_weights(text: str) -> str:
    """Every weight of [contract.weights] set to 0."""
    head, _, rest = text.partition("[contract.weights]")
    weights, _, tail = rest.partition("[toolchain]")
    zeroed = re.sub(r"= \d+", "= 0", weights)
    return f"{head}[contract.weights]{zeroed}[toolchain]{tail}"


SECOND_CHANGE = """
[[changes]]
id = "cap-horizon"
brief = "briefs/cap-horizon.md"

[changes.success]
run = "pytest -q"
"""


@dataclass(frozen=True)
class Bad:
    """One bad manifest: the edit, the key path the error must name, a message fragment."""

    name: str
    mutate: Callable[[str], str]
    key_path: str
    says: str = ""


BAD_MANIFESTS = [
    Bad("missing-control-arm", edit("control = true", "control = false"), "arms",
        "control = true"),
    Bad("duplicate-arm-ids", edit('id = "C1"', 'id = "C0"'), "arms[1].id", "duplicates arms[0].id"),
    Bad("unknown-parser", edit('parser = "exit-code"', 'parser = "make"'), "checks[1].parser",
        ", ".join(PARSER_NAMES)),
    Bad("effort-normalized-hi", edit('effort_normalized = "high"', 'effort_normalized = "hi"'),
        "arms[1].effort_normalized",
        "none, minimal, low, medium, high, xhigh, max, ultra, unknown"),
    Bad("missing-effort-evidence",
        edit('effort_evidence = "bakeoff.toml arms[1].effort, passed as --effort high"\n', ""),
        "arms[1].effort_evidence", "missing"),
    Bad("judge-is-a-contestant", edit('judge = "none"', 'judge = "claude-opus-4-8"'),
        "contract.judge", "cannot grade itself"),
    Bad("judge-is-a-contestant-with-provider",
        edit('judge = "none"', 'judge = "anthropic:claude-sonnet-5-0"'), "contract.judge"),
    Bad("samples-2", edit("samples = 3 ", "samples = 2 "), "contract.samples",
        "allow_fewer_samples"),
    Bad("samples-string", edit("samples = 3 ", 'samples = "3" '), "contract.samples",
        "expected an integer"),
    Bad("missing-brief-file", edit('"briefs/cap-horizon.md"', '"briefs/nope.md"'),
        "changes[0].brief", "does not exist"),
    Bad("stack-file-missing", edit('parser = "pytest"\n# server', 'parser = "pytest"\n'
                                   'stack = "compose/web.yml"\n# server'),
        "changes[0].success.stack", "the compose file does not exist"),
    Bad("stack-outside-the-manifest-dir", edit('parser = "pytest"\n# server',
                                               'parser = "pytest"\nstack = "../web.yml"\n'
                                               '# server'),
        "changes[0].success.stack"),
    Bad("toolchain-stack-file-missing",
        edit("env_files = []", 'env_files = []\nstack = "compose/dev.yml"'),
        "toolchain.stack", "the compose file does not exist"),
    Bad("toolchain-stack-outside-the-manifest-dir",
        edit("env_files = []", 'env_files = []\nstack = "../dev.yml"'), "toolchain.stack",
        "relative to the repository root, without '..'"),
    Bad("base-ref-missing", edit('base = "main"', 'base = "no-such-ref"'), "experiment.base",
        "no-such-ref"),
    Bad("repo-not-a-repository", edit('repo = "."', 'repo = "briefs"'), "experiment.repo",
        "not the root of a git repository"),
    Bad("repo-missing", edit('repo = "."', 'repo = "../nowhere"'), "experiment.repo"),
    Bad("negative-weight", edit("plan = 1 ", "plan = -1 "), "contract.weights.plan", ">= 0"),
    Bad("all-weights-zero", zero_weights, "contract.weights", "all weights are 0"),
    Bad("unknown-key-top-level", lambda text: 'colour = "red"\n' + text, "colour",
        "unknown key"),
    Bad("unknown-key-nested", edit("cpus = 1.0", "cpus = 1.0\ncpu = 2"), "limits.cpu",
        "did you mean 'cpus'"),
    Bad("unknown-key-in-arm", edit("control = true", "control = true\nefort = 1"),
        "arms[0].efort"),
    Bad("wrong-type", edit("memory_mb = 2048", 'memory_mb = "2GB"'), "limits.memory_mb",
        "expected an integer, got a string"),
    Bad("bool-as-string", edit("control = true", 'control = "true"'), "arms[0].control",
        "true or false"),
    Bad("empty-arms", cut("[[arms]]", None, prepend="arms = []\n"), "arms", "at least 1"),
    Bad("bad-experiment-name", edit('name = "horizon"', 'name = "Horizon"'), "experiment.name",
        "lowercase"),
    Bad("duplicate-check-names", edit('name = "compile"', 'name = "tests"'), "checks[1].name",
        "duplicates checks[0].name"),
    Bad("check-named-success", edit('name = "compile"', 'name = "success"'), "checks[1].name",
        "reserved"),
    Bad("ratchet-without-metric", edit('metric = "coverage-json:cov.json"', ""),
        "checks[2].metric", "a ratchet requires it"),
    Bad("ratchet-without-better", edit('better = "higher"', ""), "checks[2].better"),
    Bad("ratchet-regex-without-value-group",
        edit('metric = "coverage-json:cov.json"', 'metric = "TOTAL +([0-9]+)%"'),
        "checks[2].metric", "named group 'value'"),
    Bad("ratchet-regex-broken", edit('metric = "coverage-json:cov.json"', 'metric = "(?P<value>"'),
        "checks[2].metric", "not a valid regular expression"),
    Bad("test-check-with-metric", edit('parser = "pytest"', 'parser = "pytest"\nbetter = "lower"'),
        "checks[0].better", 'kind = "ratchet"'),
    Bad("bad-effort-probe", edit("control = false", 'control = false\neffort_probe = "effort=(["'),
        "arms[1].effort_probe", "not a valid regular expression"),
    Bad("toml-syntax-error", edit("pids = 512", "pids = = 512"), "",
        f"line {line_of('pids = 512')}"),
    Bad("threshold-1.5", edit("threshold = 1.0", "threshold = 1.5"), "contract.threshold",
        "<= 1"),
    Bad("pids-0", edit("pids = 512", "pids = 0"), "limits.pids", ">= 16"),
    Bad("database-connection-limit-0",
        edit('url_env = "DATABASE_URL"', 'url_env = "DATABASE_URL"\nconnection_limit = 0'),
        "database.connection_limit", ">= 1"),
    Bad("database-connection-limit-1000",
        edit('url_env = "DATABASE_URL"', 'url_env = "DATABASE_URL"\nconnection_limit = 1000'),
        "database.connection_limit", "<= 100"),
    Bad("database-statement-timeout-0",
        edit('url_env = "DATABASE_URL"', 'url_env = "DATABASE_URL"\nstatement_timeout_s = 0'),
        "database.statement_timeout_s", "> 0"),
    Bad("network-open", edit("control = true", 'control = true\nnetwork = "open"'),
        "arms[0].network", "none, egress"),
    Bad("missing-contract-section", cut("[contract]", "[toolchain]"), "contract",
        "[contract]"),
    Bad("changes-empty", cut("[[changes]]", "[[arms]]", prepend="changes = []\n"), "changes",
        "at least 1"),
    Bad("duplicate-change-ids", lambda text: text + SECOND_CHANGE, "changes[1].id",
        "duplicates changes[0].id"),
    Bad("branch-is-base", edit('branch = "bakeoff/horizon"', 'branch = "main"'),
        "experiment.branch"),
    Bad("secret-not-a-variable-name",
        edit("control = false", 'control = false\nsecrets = ["1KEY"]'),
        "arms[1].secrets[0]", "environment variable"),
    Bad("protected-outside-repo", edit('protected = ["tests/test_horizon.py"]',
                                       'protected = ["../grader.py"]'),
        "changes[0].protected[0]", "relative"),
    Bad("protected-dot-segment", edit('protected = ["tests/test_horizon.py"]',
                                      'protected = ["tests/", "./tests/*.py"]'),
        "changes[0].protected[1]", "'.' path segment"),
    Bad("reference-unresolvable", edit('reference = ""', 'reference = "deadbeef"'),
        "changes[0].reference"),
    Bad("server-health-not-a-path", edit(
        "# server = {", 'server = { run = "app", health = "healthz" }\n# '),
        "changes[0].success.server.health", "starting with '/'"),
    Bad("missing-model", edit('model = "claude-opus-4-8"\n', ""), "arms[1].model"),
]


@pytest.mark.parametrize("bad", BAD_MANIFESTS, ids=lambda bad: bad.name)
def test_bad_manifest_is_one_manifest_error_naming_the_key(
    manifest_path: Path, bad: Bad
) -> None:
    manifest_path.write_text(bad.mutate(manifest_path.read_text()))
    with pytest.raises(ManifestError) as caught:
        load_manifest(manifest_path)
    error = caught.value
    assert error.exit_code == 2
    assert error.key_path == bad.key_path
    where = f"{manifest_path}: {bad.key_path}: " if bad.key_path else f"{manifest_path}: "
    assert str(error).splitlines()[0].startswith(where)
    assert "\n  fix: " in str(error)
    assert bad.says in str(error)


def test_bad_manifest_table_covers_the_required_cases() -> None:
    assert len(BAD_MANIFESTS) >= 24
    assert len({bad.name for bad in BAD_MANIFESTS}) == len(BAD_MANIFESTS)


def test_reference_manifest_loads_with_its_documented_meaning(manifest_path: Path) -> None:
    loaded = load_manifest(manifest_path)
    manifest = loaded.manifest
    assert manifest.experiment.branch == "bakeoff/horizon"
    assert manifest.contract.samples == 3
    assert manifest.contract.weights.max == 50
    assert manifest.database is not None and manifest.database.url_env == "DATABASE_URL"
    assert [check.kind for check in manifest.checks] == ["test", "test", "ratchet"]
    assert manifest.arms[0].effort_normalized is EffortNormalized.UNKNOWN
    assert manifest.arms[1].effort_provenance is EffortProvenance.EXPERIMENT_CONFIG
    assert manifest.arms[1].mode is Mode.SINGLE_AGENT
    assert manifest.arms[0].network == "none"
    assert loaded.caveats == []


def test_the_reference_is_the_repository_s_own_and_validates_without_a_repository() -> None:
    """Pins: the reference lived outside the repository and the test comparing the copy
    with it skipped wherever that file was absent. The repository's
    docs/bakeoff.example.toml is THE reference: it is always here, the bad-manifest
    fixture is a link to it (one file, nothing to drift), and it validates as it is."""
    assert REFERENCE.is_file()
    assert LINKED_REFERENCE.resolve() == REFERENCE.resolve()
    manifest = parse_manifest(tomllib.loads(REFERENCE.read_text(encoding="utf-8")), REFERENCE)
    assert [arm.id for arm in manifest.arms] == ["C0", "C1"]
    assert [check.name for check in manifest.checks] == ["tests", "compile", "coverage"]
    assert [change.id for change in manifest.changes] == ["cap-horizon"]


def test_the_init_template_uses_only_the_reference_s_sections() -> None:
    """`init` writes a subset of the user contract: every section it shows (commented out
    or not) is a section of the reference, so a renamed table cannot hide in one of them."""
    heading = re.compile(r"^#? ?(\[\[?[a-z_.]+\]\]?)", flags=re.MULTILINE)
    shown = set(heading.findall(TEMPLATE.read_text(encoding="utf-8")))
    assert shown, "template parse drift"
    assert shown <= set(heading.findall(REFERENCE.read_text(encoding="utf-8")))


def test_loaded_manifest_helpers(manifest_path: Path) -> None:
    loaded = load_manifest(manifest_path)
    root = manifest_path.parent.resolve()
    assert loaded.path == manifest_path and loaded.root == manifest_path.parent
    assert loaded.repo_path == root
    assert loaded.brief_path("cap-horizon") == root / "briefs" / "cap-horizon.md"
    assert loaded.brief_path(loaded.change("cap-horizon")) == loaded.brief_path("cap-horizon")
    assert loaded.arm("C1").model == "claude-opus-4-8"
    assert [arm.id for arm in loaded.control_arms] == ["C0"]
    with pytest.raises(UnknownArmError, match="C0, C1"):
        loaded.arm("C9")
    with pytest.raises(BadInputError, match="cap-horizon"):
        loaded.change("nope")


def test_branch_defaults_to_bakeoff_slash_name(manifest_path: Path) -> None:
    manifest_path.write_text(edit('branch = "bakeoff/horizon"', "")(manifest_path.read_text()))
    assert load_manifest(manifest_path).manifest.experiment.branch == "bakeoff/horizon"


def test_limits_and_database_sections_are_optional(manifest_path: Path) -> None:
    text = cut("[limits]", "[[checks]]")(manifest_path.read_text())
    manifest_path.write_text(text)
    manifest = load_manifest(manifest_path).manifest
    assert manifest.database is None
    assert manifest.limits.memory_mb == 2048 and manifest.limits.pids == 512


def test_database_limits_default_and_can_be_set(manifest_path: Path) -> None:
    """Issue 11: each arm's and sample's role gets these (defaults in code)."""
    database = load_manifest(manifest_path).manifest.database
    assert database is not None
    assert (database.connection_limit, database.statement_timeout_s,
            database.temp_file_limit_mb) == (20, 120, 1024)
    manifest_path.write_text(edit('url_env = "DATABASE_URL"', 'url_env = "DATABASE_URL"\n'
                                  "connection_limit = 5\nstatement_timeout_s = 2.5\n"
                                  "temp_file_limit_mb = 64")(manifest_path.read_text()))
    database = load_manifest(manifest_path).manifest.database
    assert database is not None
    assert (database.connection_limit, database.statement_timeout_s,
            database.temp_file_limit_mb) == (5, 2.5, 64)


def test_fewer_samples_allowed_when_asked_and_recorded_as_caveat(manifest_path: Path) -> None:
    allow = edit("samples = 3 ", "samples = 2\nallow_fewer_samples = true ")
    manifest_path.write_text(allow(manifest_path.read_text()))
    loaded = load_manifest(manifest_path)
    assert loaded.manifest.contract.samples == 2
    assert loaded.caveats == ["samples=2 < 3 (allow_fewer_samples)"]


def test_zero_samples_refused_even_when_fewer_are_allowed(manifest_path: Path) -> None:
    allow = edit("samples = 3 ", "samples = 0\nallow_fewer_samples = true ")
    manifest_path.write_text(allow(manifest_path.read_text()))
    with pytest.raises(ManifestError) as caught:
        load_manifest(manifest_path)
    assert caught.value.key_path == "contract.samples"


def test_every_error_is_reported_in_one_message_first_key_first(manifest_path: Path) -> None:
    text = manifest_path.read_text()
    for mutate in (edit("threshold = 1.0", "threshold = 1.5"), edit("pids = 512", "pids = 0"),
                   edit('effort_normalized = "high"', 'effort_normalized = "hi"')):
        text = mutate(text)
    manifest_path.write_text(text)
    with pytest.raises(ManifestError) as caught:
        load_manifest(manifest_path)
    lines = str(caught.value).splitlines()
    assert caught.value.key_path == "contract.threshold"
    assert lines[0].startswith(f"{manifest_path}: contract.threshold: ")
    problem_lines = [line for line in lines if not line.startswith("  fix: ")]
    assert [line.split(": ")[1] for line in problem_lines] == [
        "contract.threshold", "limits.pids", "arms[1].effort_normalized",
    ]


def test_missing_manifest_names_the_path_and_suggests_init(tmp_path: Path) -> None:
    missing = tmp_path / "bakeoff.toml"
    with pytest.raises(ManifestError) as caught:
        load_manifest(missing)
    assert caught.value.exit_code == 2
    assert str(missing) in str(caught.value)
    assert "bakeoff-sandbox init" in str(caught.value)


def test_manifest_that_is_not_utf8_is_a_manifest_error(manifest_path: Path) -> None:
    manifest_path.write_bytes(b"name = \"\xff\"\n")
    with pytest.raises(ManifestError, match="UTF-8"):
        load_manifest(manifest_path)


def test_effort_identity_is_required_never_defaulted() -> None:
    required = {name for name, field in Arm.model_fields.items() if field.is_required()}
    assert {"effort", "effort_normalized", "effort_provenance", "effort_evidence",
            "mode"} <= required


def test_enums_hold_exactly_the_documented_values() -> None:
    assert [e.value for e in EffortNormalized] == [
        "none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra", "unknown"]
    assert [e.value for e in EffortProvenance] == [
        "source_document", "experiment_config", "runtime_log", "unknown"]
    assert [e.value for e in Mode] == ["single_agent", "multi_agent", "adaptive", "unknown"]
    assert get_args(ParserName) == PARSER_NAMES == (
        "pytest", "cargo", "go-test", "node-test", "jest", "vitest", "junit", "exit-code")


def test_manifest_round_trips_through_json(manifest_path: Path) -> None:
    """The contract freezes the manifest as JSON: reading it back must give the same model."""
    manifest = load_manifest(manifest_path).manifest
    assert Manifest.model_validate_json(manifest.model_dump_json()) == manifest


def test_models_are_frozen(manifest_path: Path) -> None:
    manifest = load_manifest(manifest_path).manifest
    with pytest.raises(ValidationError):
        manifest.contract.samples = 1


def reference_as_json() -> dict[str, object]:
    return tomllib.loads(REFERENCE.read_text())


def test_json_schema_accepts_the_reference_and_rejects_a_broken_one() -> None:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(reference_as_json(), schema)
    broken = reference_as_json()
    arms = broken["arms"]
    assert isinstance(arms, list)
    arms[1]["effort_normalized"] = "hi"
    with pytest.raises(jsonschema.ValidationError, match="hi"):
        jsonschema.validate(broken, schema)


def test_json_schema_rejects_an_unknown_key() -> None:
    broken = reference_as_json()
    broken["colour"] = "red"
    with pytest.raises(jsonschema.ValidationError, match="colour"):
        jsonschema.validate(broken, json_schema())


def test_json_schema_titles_the_contract_table_contract_whatever_its_class() -> None:
    """Pins issue 35's rename of the `[contract]` model to `ContractSection` (one class
    per name: `rig.contract.Contract` is the frozen content): the published schema still
    titles the table `Contract`; only its $defs key follows the class."""
    schema = json_schema()
    key = schema["properties"]["contract"]["$ref"].rsplit("/", 1)[1]
    assert schema["$defs"][key]["title"] == "Contract"


def test_init_writes_a_manifest_that_loads_once_committed(tmp_path: Path) -> None:
    target = tmp_path / "My Repo"
    written = write_init(target)
    assert written == [target / "bakeoff.toml", target / "briefs" / "first-change.md"]
    assert "withheld" in written[1].read_text()
    commit_all(target)
    loaded = load_manifest(target / "bakeoff.toml")
    assert loaded.manifest.experiment.name == "my-repo"
    assert loaded.brief_path("first-change") == written[1].resolve()
    assert [arm.id for arm in loaded.control_arms] == ["C0"]


def test_init_template_keys_are_all_in_the_schema() -> None:
    """Every key the template shows commented out is a real key (uncommenting it is safe)."""
    template = TEMPLATE.read_text()
    shown = set(re.findall(r"^#? ?([a-z_]+) = ", template, flags=re.MULTILINE))
    schema_text = str(json_schema())
    assert shown, "template parse drift"
    assert all(f"'{key}'" in schema_text for key in shown)


def test_init_refuses_to_overwrite(tmp_path: Path) -> None:
    write_init(tmp_path)
    manifest = tmp_path / "bakeoff.toml"
    manifest.write_text("# mine\n")
    with pytest.raises(ManifestError) as caught:
        write_init(tmp_path)
    assert caught.value.exit_code == 2
    assert str(manifest) in str(caught.value) and "fix: " in str(caught.value)
    assert manifest.read_text() == "# mine\n"


def test_init_refuses_when_only_the_brief_exists(tmp_path: Path) -> None:
    brief = tmp_path / "briefs" / "first-change.md"
    brief.parent.mkdir()
    brief.write_text("my brief\n")
    with pytest.raises(ManifestError):
        write_init(tmp_path)
    assert not (tmp_path / "bakeoff.toml").exists()
    assert brief.read_text() == "my brief\n"
