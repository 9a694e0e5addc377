"""ARCHITECTURE.md and docs/design.md describe the code; these tests keep them true (issue 12).

Fast and without docker: the code map is compared with the tree, every name and test
the documents cite must exist, the layering is proved by importing in a FRESH
interpreter, and the choke points by reading the source files (as `grep -rn` would).
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import json
import pkgutil
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import rig
import runner

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
DESIGN = ROOT / "docs" / "design.md"
DOCUMENTS = (ARCHITECTURE, DESIGN)
NOT_ENTRIES = {"__pycache__", "__init__.py", "py.typed"}
RUNNER_MAX_ENTRIES = 9
HEADING = re.compile(r"^### `([^`]+)`")
# An entry line names one or more entries before its colon: "- `a.py`, `b/`: what".
ENTRY = re.compile(r"^- ((?:`[^`]+`(?:, )?)+)(?::|$)")
NAME = re.compile(r"`([^`]+)`")
ARCHITECTURE_MAX_LINES = 300
ENTRY_POINTS = ("runner.cli.app.main", "runner.commands.run.run",
                "rig.sample.oracle.run_sample", "rig.sample.verdict.judge",
                "gateway.server.Gateway")
DOTTED = re.compile(r"`((?:runner|rig)(?:\.\w+)+)`")
CITED_TEST = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
MD_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CITED_NAME = re.compile(r"(?<![\w.])((?:runner|rig)(?:\.\w+)+)")
CITED_PATH = re.compile(r"(?<![\w/.-])((?:runner|rig|gateway|bench)/[\w/.-]*\w\.py"
                        r"|tests/(?:unit|integration)/test_\w+\.py)\b")
CITED_DOCUMENT = re.compile(r"(?<![\w/.-])(docs/[\w.-]+\.md|[A-Z][A-Z_-]*\.md)\b")
PRINCIPLE = re.compile(r"\bprinciples?\s+(\d+)", re.IGNORECASE)
# Files the tool writes or an agent reads, named as such; and a file of an arm's repository
# the threat model's attack writes: not documents of this repository.
NOT_DOCUMENTS = {"SCORECARD.md", "RESULTS.md", "RESCORE.md", "RESULT.md", "AGENTS.md",
                 "docs/notes.md"}
RIG_MAX_ENTRIES = 16


# -- the code map ------------------------------------------------------------------------

def code_map() -> dict[str, list[str]]:
    """Folder ("" for the repository root) -> the entries ARCHITECTURE.md lists under its
    `### \\`folder/\\`` heading, in the order written."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    start = text.index("\n## Code map\n")
    end = text.find("\n## ", start + 1)
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in logical_lines(text[start:None if end == -1 else end]):
        heading = HEADING.match(line)
        if heading:
            current = heading.group(1).removeprefix("./").rstrip("/")
            assert current not in found, f"ARCHITECTURE.md: two headings for {heading.group(1)}"
            found[current] = []
        elif current is not None and (entry := ENTRY.match(line)):
            found[current] += NAME.findall(entry.group(1))
    return found


def logical_lines(text: str) -> list[str]:
    """Lines with their indented continuations joined: an entry's names may wrap."""
    joined: list[str] = []
    for line in text.splitlines():
        if line.startswith("  ") and joined and joined[-1].startswith("- "):
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    return joined


def gitignored(name: str) -> bool:
    patterns = [line.strip().rstrip("/") for line in
                (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
    return name == ".git" or any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def entries(folder: str) -> set[str]:
    """The real entries of a folder (`name/` for a folder), as the code map lists them."""
    found = set()
    for child in (ROOT / folder).iterdir():
        if child.name in NOT_ENTRIES or (folder == "" and gitignored(child.name)):
            continue
        found.add(f"{child.name}/" if child.is_dir() else child.name)
    return found


def shown(folder: str) -> str:
    return f"`{folder}/`" if folder else "`./`"


def required_folders() -> list[str]:
    """The root, runner/, every folder of runner/, and rig/: the code map covers each."""
    wings = sorted(f"runner/{name.removesuffix('/')}" for name in entries("runner")
                   if name.endswith("/"))
    return ["", "runner", *wings, "rig"]


def test_the_code_map_names_every_folder_it_must_cover() -> None:
    headings = code_map()
    missing = [shown(folder) for folder in required_folders() if folder not in headings]
    assert not missing, ("ARCHITECTURE.md's code map has no `### ` heading for "
                         + ", ".join(missing) + ": add one (what it owns, what it must never "
                         "do) and list its entries under it")


def test_the_code_map_lists_exactly_each_folder_s_entries() -> None:
    problems = []
    for folder, listed in code_map().items():
        if not (ROOT / folder).is_dir():
            problems.append(f"{shown(folder)} is not a folder of the repository")
            continue
        real = entries(folder)
        problems += [f"{shown(folder)}: `{name}` is listed twice"
                     for name in sorted({n for n in listed if listed.count(n) > 1})]
        problems += [f"{shown(folder)}: `{name}` is in the tree but not in the code map "
                     f"(add a line \"- `{name}`: what it owns\" under ### {shown(folder)})"
                     for name in sorted(real - set(listed))]
        problems += [f"{shown(folder)}: `{name}` is in the code map but not in the tree "
                     "(remove or rename its line)" for name in sorted(set(listed) - real)]
    assert not problems, "ARCHITECTURE.md's code map does not match the tree:\n" + "\n".join(
        problems)


def test_architecture_md_is_a_first_read_with_its_entry_points() -> None:
    """Under 300 lines (issue 35: a first read in minutes, rust-analyzer's the model), a
    section per folder (above), and an Entry points section naming the CLI's main, the
    loop, one sample's oracle, the verdict and the gateway, before the code map."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert text.count("\n") < ARCHITECTURE_MAX_LINES, (
        f"ARCHITECTURE.md is {text.count(chr(10))} lines: keep it under "
        f"{ARCHITECTURE_MAX_LINES} (the detail of one sample is docs/one-sample.md)")
    start, end = text.index("\n## Entry points\n"), text.index("\n## Code map\n")
    assert start < end
    section = text[start:end]
    missing = [name for name in ENTRY_POINTS if f"`{name}`" not in section]
    assert not missing, f"ARCHITECTURE.md's Entry points do not name: {', '.join(missing)}"
    for name in ENTRY_POINTS:
        assert callable(resolve(name)), name


def test_an_entry_line_may_name_several_entries() -> None:
    """The markup the code map is read with: one name, several before the colon, a
    folder; prose that merely starts with a dash and backticks mid-sentence is not one."""
    assert NAME.findall(ENTRY.match("- `a.py`, `b/`: what they own").group(1)) == [
        "a.py", "b/"]
    assert NAME.findall(ENTRY.match("- `rig/`: the rig").group(1)) == ["rig/"]
    assert ENTRY.match("- `a.py` and then `b.py` in prose") is None
    wrapped = logical_lines("- `a.py`, `b.py`,\n  `c.py`: what they own\n- `d/`: more")
    assert [NAME.findall(ENTRY.match(line).group(1)) for line in wrapped] == [
        ["a.py", "b.py", "c.py"], ["d/"]]


def test_runner_top_level_holds_at_most_nine_entries() -> None:
    found = sorted(entries("runner"))
    assert len(found) <= RUNNER_MAX_ENTRIES, (
        f"runner/ holds {len(found)} entries ({', '.join(found)}), more than "
        f"{RUNNER_MAX_ENTRIES}: put the new one in the wing that owns its concern")


def test_rig_top_level_holds_at_most_sixteen_entries() -> None:
    """Pins: rig/ was 29 flat entries and one sample's path jumped between 11 of them
    (issue 35). One sample's modules are in rig/sample/, the guards in rig/guards/."""
    found = sorted(entries("rig"))
    assert len(found) <= RIG_MAX_ENTRIES, (
        f"rig/ holds {len(found)} entries ({', '.join(found)}), more than "
        f"{RIG_MAX_ENTRIES}: put the new one in the room that owns it (sample/, guards/, ...)")


# Names two classes still share (issue 35 renamed `Evidence` and `Observation`, three
# classes each); nothing may join them, and each pair that goes leaves this set.
SHARED_CLASS_NAMES: set[str] = set()


def test_one_class_per_name() -> None:
    """A class name names one class in runner/ and rig/ (private ones aside): a reader
    who meets `Evidence` knows which one it is."""
    where: dict[str, list[str]] = {}
    for folder in ("runner", "rig"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "insample" in path.parts:
                continue
            for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    where.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert "Evidence" not in shared and "Observation" not in shared
    new = {name: paths for name, paths in shared.items() if name not in SHARED_CLASS_NAMES}
    assert not new, "one name, several classes (rename each by what it holds):\n" + "\n".join(
        f"{name}: {', '.join(paths)}" for name, paths in sorted(new.items()))
    gone = sorted(SHARED_CLASS_NAMES - set(shared))
    assert not gone, f"no longer shared, remove from SHARED_CLASS_NAMES: {', '.join(gone)}"


# -- what the documents cite ---------------------------------------------------------------

def resolve(dotted: str) -> object:
    """The module, class, function or attribute a dotted name names (AttributeError or
    ModuleNotFoundError when there is none)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


def cited_texts() -> dict[Path, str]:
    """What cites the code: the documents (ARCHITECTURE.md, README.md, docs/*.md) whole,
    and the docstrings and comments of every runner/ and rig/ module (not the programs
    of rig/guards/insample/: their bytes are the browser image's identity)."""
    texts = {path: path.read_text(encoding="utf-8") for path in
             (ARCHITECTURE, ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))}
    for folder in ("runner", "rig"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "insample" not in path.parts:
                texts[path] = prose_of(path)
    return texts


def prose_of(path: Path) -> str:
    """A module's docstrings and comments, one after the other."""
    source = path.read_text(encoding="utf-8")
    found = [ast.get_docstring(node, clean=False) or "" for node in
             ast.walk(ast.parse(source, str(path))) if isinstance(
                 node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)]
    found += [line.split("#", 1)[1] for line in source.splitlines() if "#" in line]
    return "\n".join(found)


def test_every_module_and_function_the_docs_name_exists() -> None:
    """The path of one sample names real functions: a rename that forgets the documents
    or a docstring fails here, naming where and the stale name: a dotted `runner.x.y` /
    `rig.x.y` must import, a bare module path (`rig/foo.py`) must be a file (issue 35: 14
    names cited in docstrings no longer existed)."""
    stale = []
    for where, text in cited_texts().items():
        shown_as = where.relative_to(ROOT)
        for dotted in sorted(set(CITED_NAME.findall(text))):
            try:
                resolve(dotted.rstrip("."))
            except (AttributeError, ModuleNotFoundError):
                stale.append(f"{shown_as}: `{dotted}` does not exist")
        stale += [f"{shown_as}: {path} is not a file of the repository"
                  for path in sorted(set(CITED_PATH.findall(text))) if not (ROOT / path).is_file()]
    assert not stale, "\n".join(stale)


def principles() -> int:
    """How many principles docs/design.md states (its `### N.` headings)."""
    return len(re.findall(r"^### \d+\. ", DESIGN.read_text(encoding="utf-8"), re.MULTILINE))


def test_every_document_and_principle_cited_exists() -> None:
    """Pins: 12 references to a `DESIGN.md` not in the repository and 8 to a "principle
    12" of a design that has ten (issue 35). Every document a text names (`docs/x.md`, an
    upper-case `X.md` that is not a file the tool writes) is a file of the repository, and
    every "principle N" is one of docs/design.md's."""
    count = principles()
    assert count == 10, f"docs/design.md states {count} principles"
    wrong = []
    tests = {path: path.read_text(encoding="utf-8") for path in
             sorted((ROOT / "tests").rglob("*.py")) if path != Path(__file__).resolve()}
    for where, text in {**cited_texts(), **tests}.items():
        shown_as = where.relative_to(ROOT)
        wrong += [f"{shown_as}: principle {n} (docs/design.md has {count})"
                  for n in sorted(set(PRINCIPLE.findall(text)), key=int)
                  if not 1 <= int(n) <= count]
        if where in tests:
            wrong += [f"{shown_as}: names DESIGN.md" for _ in re.findall(r"\bDESIGN\.md", text)]
            continue
        wrong += [f"{shown_as}: names {name}, not a file of the repository"
                  for name in sorted(set(CITED_DOCUMENT.findall(text)))
                  if name not in NOT_DOCUMENTS and not (ROOT / name).is_file()]
    assert not wrong, "\n".join(wrong)


def test_every_test_the_docs_cite_exists() -> None:
    missing = []
    for document in DOCUMENTS:
        for path, name in sorted(set(CITED_TEST.findall(document.read_text(encoding="utf-8")))):
            source = ROOT / path
            text = source.read_text(encoding="utf-8") if source.is_file() else ""
            if not re.search(rf"^(?:async )?def {name}\(", text, flags=re.MULTILINE):
                missing.append(f"{document.relative_to(ROOT)}: {path}::{name} does not exist")
    assert not missing, "\n".join(missing)


def test_nothing_in_readme_docs_or_tests_points_outside_the_repository() -> None:
    """Pins: the README sent readers to ../shared/DESIGN.md and a manifest test read
    ../shared/bakeoff.example.toml, neither part of the repository. Every relative link of
    the README and the docs must name a file of this tree; no text names the shared dir."""
    outside = ("../" + "shared", "/work/" + "shared")
    texts = [ROOT / "README.md", ARCHITECTURE, *sorted((ROOT / "docs").rglob("*.md")),
             *sorted(p for p in (ROOT / "tests").rglob("*") if p.suffix in {".py", ".md",
                                                                             ".toml"})]
    problems = []
    for path in texts:
        if path.resolve() == Path(__file__).resolve() or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        where = path.relative_to(ROOT)
        problems += [f"{where}: names {needle}" for needle in outside if needle in text]
        if path.suffix != ".md" or "tests" in where.parts:
            continue
        for target in MD_LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue  # a URL
            linked = (path.parent / target).resolve()
            if not linked.exists() or not linked.is_relative_to(ROOT):
                problems.append(f"{where}: the link ({target}) names no file of the repository")
    assert not problems, "\n".join(problems)


# -- layering, in a fresh interpreter ------------------------------------------------------

CHILD = r"""
import importlib, json, sys
loaded_by = {}
for name in json.loads(sys.argv[1]):
    before = set(sys.modules)
    importlib.import_module(name)
    for new in set(sys.modules) - before:
        loaded_by[new] = name
print(json.dumps(loaded_by))
"""


def modules_of(package: ModuleType, *, skip: str | None = None) -> list[str]:
    found = [info.name for info in pkgutil.walk_packages(package.__path__,
                                                         f"{package.__name__}.")]
    return [name for name in found
            if skip is None or (name != skip and not name.startswith(f"{skip}."))]


def loaded_by(modules: list[str]) -> dict[str, str]:
    """Every module a fresh interpreter loads while importing `modules` in order -> the
    one of `modules` whose import loaded it first."""
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(modules)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout)
    return result


def culprits(loaded: dict[str, str], wrong: Callable[[str], bool]) -> list[str]:
    """`module (first loaded by importing X)` for each wrong module none of whose parent
    packages is wrong too (`rich`, not every `rich.*`)."""
    bad = {module for module in loaded if wrong(module)}
    top = sorted(m for m in bad if not any(m.startswith(f"{p}.") for p in bad))
    return [f"{module} (first loaded by importing {loaded[module]})" for module in top]


def rig_may_load(module: str) -> bool:
    return module in {"runner", "runner.errors", "runner.manifest"} or module.startswith(
        "runner.manifest.")


def test_rig_loads_no_runner_module_but_the_manifest() -> None:
    """rig measures; runner orchestrates. rig may import the models it measures
    (runner.manifest, which brings runner.errors), nothing else of runner, and none of
    docker, a git library, the database driver, typer or rich."""
    modules = modules_of(rig)
    assert "rig.sample.oracle" in modules and "rig.parsers.pytest" in modules
    loaded = loaded_by(modules)
    forbidden = {"docker", "git", "testcontainers", "psycopg", "requests", "typer", "rich",
                 "click"}
    wrong = culprits(loaded, lambda module: module.split(".")[0] in forbidden or (
        module.split(".")[0] == "runner" and not rig_may_load(module)))
    assert not wrong, "rig loads what it must not:\n" + "\n".join(wrong)


def test_no_runner_module_outside_cli_loads_typer_or_rich() -> None:
    modules = modules_of(runner, skip="runner.cli")
    assert "runner.commands.score" in modules and not any(
        m.startswith("runner.cli") for m in modules)
    loaded = loaded_by(modules)
    wrong = culprits(loaded, lambda module: module.split(".")[0] in {"typer", "rich"})
    assert not wrong, ("only runner/cli may import typer or rich; these were loaded by "
                       "other runner modules:\n" + "\n".join(wrong))


# -- the choke points, read from the source ------------------------------------------------

def source_files() -> list[Path]:
    return sorted(p for folder in ("runner", "rig") for p in (ROOT / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def hits(pattern: re.Pattern[str], allowed: tuple[str, ...], *, python_only: bool = False
         ) -> list[str]:
    """`path:line: text` of every line matching `pattern` in a file of runner/ or rig/
    whose path does not start with one of `allowed`."""
    found = []
    for path in source_files():
        where = path.relative_to(ROOT).as_posix()
        if where.startswith(allowed) or (python_only and path.suffix != ".py"):
            continue
        for number, line in enumerate(
                path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{where}:{number}: {line.strip()}")
    return found


def test_processes_start_only_in_the_wings_and_rigs_command_runners() -> None:
    """`grep -rn "subprocess\\|import git\\|docker\\.\\(from_env\\|DockerClient\\)" runner rig`
    hits only the docker and git wings, runner/install (pip for Compose, the engine
    script) and rig's judge and preflight command runners."""
    pattern = re.compile(r"subprocess|import git|docker\.(from_env|DockerClient)")
    wrong = hits(pattern, ("runner/containers/", "runner/workspace/", "runner/install/",
                           "rig/judge.py", "rig/preflight.py"))
    assert not wrong, ("a process, a git library or a docker client outside the wings "
                       "(ARCHITECTURE.md, Invariants):\n" + "\n".join(wrong))


def test_no_child_process_runs_python_code_before_its_exec() -> None:
    """subprocess's pre-exec hook runs Python code in a child forked from a process with
    threads (ours have them; an xdist worker and the tests' emulators have more): Python
    documents it as unsafe there, a deadlock before exec. A test that used it is the likeliest cause
    of the CI run that hung at 99% with no trace. A limit goes on the child by itself
    (`resource` then `os.execv`), a session by `start_new_session`."""
    word = "preexec" + "_fn"  # spelled apart: this file is read too
    found = [f"{path.relative_to(ROOT)}:{number}" for folder in ("runner", "rig", "gateway",
                                                                "tests", "bench")
             for path in sorted((ROOT / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if word in line]
    assert found == []


def test_only_the_git_wing_runs_git_on_the_host() -> None:
    """Every host git call goes through runner.workspace (its timeout, safe.directory,
    one git stack); git inside containers is a script the container runs, not this."""
    pattern = re.compile(r"""(subprocess\.\w+|Popen)\(\s*\[\s*["']git["']""")
    wrong = hits(pattern, ("runner/workspace/",), python_only=True)
    assert not wrong, ("git run on the host outside runner/workspace (ARCHITECTURE.md: "
                       "\"only runner/workspace runs git on the host\"); call "
                       "runner.workspace.git.run_git / git_bytes instead:\n" + "\n".join(wrong))


def test_only_the_docker_wing_holds_a_docker_client() -> None:
    """Outside runner/containers nothing reaches the docker client (`engine.client`) or
    imports docker (not even `docker.errors`: the wing maps them to runner.errors)."""
    pattern = re.compile(r"\bengine\.client\b|^\s*(import|from) docker\b")
    wrong = hits(pattern, ("runner/containers/",), python_only=True)
    assert not wrong, ("the docker client used outside runner/containers (ARCHITECTURE.md: "
                       "\"only runner/containers talks to docker\"); give the wing a "
                       "function for it:\n" + "\n".join(wrong))


# Where no module may import a container library: everything but the docker wing (and the
# gateway, which is standard library only and has its own test).
NO_DOCKER = ("runner/commands", "runner/cli", "runner/store", "runner/workspace",
             "runner/manifest", "rig")
DOCKER_LIBRARIES = {"docker", "testcontainers"}


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a Python file, at any depth (a function-level
    import counts): `import a.b` and `from a.b import c` give `a.b`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_no_module_outside_the_docker_wing_imports_a_docker_library() -> None:
    """Pins: five commands imported `docker.errors` to catch what the engine raised, so
    every command knew which client the wing used. The wing maps docker's exceptions to
    runner.errors (`runner.containers.dockerclient.translated`); the commands, the CLI, the
    store, the workspace, the manifest, rig and runner's own top-level modules import
    neither docker nor testcontainers, at any depth of the file."""
    files = [p for folder in NO_DOCKER for p in sorted((ROOT / folder).rglob("*.py"))]
    files += sorted((ROOT / "runner").glob("*.py"))
    assert ROOT / "runner/commands/down.py" in files and ROOT / "rig/sample/oracle.py" in files
    wrong = [f"{path.relative_to(ROOT)}:{line}: imports {module}" for path in files
             for line, module in imported(path)
             if module.split(".")[0] in DOCKER_LIBRARIES]
    assert not wrong, ("a docker library imported outside runner/containers: catch "
                       "runner.errors.EngineError (NotFoundError, ConflictError, ...) and "
                       "ask the wing for what you need:\n" + "\n".join(wrong))


def test_the_import_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    """The scan above would pass vacuously if it missed a form: each one is seen."""
    source = tmp_path / "m.py"
    source.write_text("import docker.errors\nfrom docker import errors\n"
                      "def f():\n    from testcontainers.core import x\n"
                      "from . import docker\n", encoding="utf-8")
    assert imported(source) == [(1, "docker.errors"), (2, "docker"),
                                (4, "testcontainers.core")]



# -- no re-export aliases ------------------------------------------------------------------

def re_exports(path: Path) -> list[str]:
    """`line: the import` of each name a module imports under its own name (`import a as
    a`, `from m import X as X`, at any depth): mypy's explicit re-export, a name kept
    importable from a module that does not define it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {alias.name} as {alias.asname}"
                      for alias in node.names if alias.asname == alias.name]
        elif isinstance(node, ast.ImportFrom):
            found += [f"{node.lineno}: from {'.' * node.level}{node.module or ''} import "
                      f"{alias.name} as {alias.asname}"
                      for alias in node.names if alias.asname == alias.name]
    return found


def test_no_module_re_exports_a_name_it_imports() -> None:
    """Pins: `runner/containers/engine.py` re-exported 17 names of the engine interface
    (`from runner.containers.backend import Labels as Labels`, ...) once they lived in
    runner.containers.backend, and `runner/store/layout.py` rig's `sample_dir` (issue 35:
    no aliases of old names). A name is imported from the module that defines it."""
    files = [p for folder in ("runner", "rig", "gateway")
             for p in sorted((ROOT / folder).rglob("*.py")) if "_bundle" not in p.parts]
    assert ROOT / "runner/containers/engine.py" in files and ROOT / "gateway/server.py" in files
    wrong = [f"{path.relative_to(ROOT)}:{found}" for path in files for found in re_exports(path)]
    assert not wrong, ("a name re-exported under its own alias: import it from the module "
                       "that defines it, in every importer, and drop the alias:\n"
                       + "\n".join(wrong))


def test_the_re_export_scan_sees_both_forms(tmp_path: Path) -> None:
    """The scan above would pass vacuously if it missed a form; a real rename is no alias."""
    source = tmp_path / "m.py"
    source.write_text("import a as a\nfrom m import X as X, Y\nfrom m import Z as W\n"
                      "import b.c as c\ndef f():\n    from .n import V as V\n",
                      encoding="utf-8")
    assert re_exports(source) == ["1: import a as a", "2: from m import X as X",
                                  "6: from .n import V as V"]

# -- no import cycle -----------------------------------------------------------------------

def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_level_imports(path: Path, known: set[str]) -> set[str]:
    """The modules of `known` a module imports when it is loaded: its top-level imports
    (not those in a function or under `if TYPE_CHECKING:`), each with the packages above
    it that are not above the importer (their `__init__` runs first)."""
    importer = module_name(path)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                break
            found |= imported_names(inner, importer, is_package)
    targets = set()
    for name in found:
        parts = name.split(".")
        for cut in range(1, len(parts) + 1):
            target = ".".join(parts[:cut])
            above_me = importer == target or importer.startswith(f"{target}.")
            if target in known and not above_me:
                targets.add(target)
    return targets


def imported_names(node: ast.AST, importer: str, is_package: bool) -> set[str]:
    """`a.b` for `import a.b`; `a.b` and each `a.b.c` for `from a.b import c` (c may be a
    module); relative imports resolved against the importer."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        package = package[:len(package) - node.level + 1]
        base = ".".join([*package, *([base] if base else [])])
    return {base, *(f"{base}.{alias.name}" for alias in node.names)}


def import_graph(roots: tuple[str, ...] = ("runner", "rig")) -> dict[str, set[str]]:
    files = [p for root in roots for p in sorted((ROOT / root).rglob("*.py"))
             if "insample" not in p.parts]
    known = {module_name(p) for p in files}
    return {module_name(p): module_level_imports(p, known) for p in files}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each as one cycle
    through it, in import order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            members = []
            while not members or members[-1] != node:
                members.append(stack.pop())
            if len(members) > 1:
                found.append(a_cycle(graph, set(members)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def a_cycle(graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """One path from the first member back to itself, within `members`."""
    start = min(members)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & members):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    return sorted(members)


# Cycles still tolerated: none. The last (`runner.containers.browser` and the package
# `runner.containers.samples`, whose `__init__` held the executor) went when the executor
# left the `__init__` (issue 35). Nothing may join this set.
KNOWN_CYCLES: set[frozenset[str]] = set()


def test_no_import_cycle_among_runner_and_rig_modules() -> None:
    """Pins: `rig/canary.py` and `rig/inprocess.py` imported each other (one of them in a
    function, to dodge the cycle), and `runner/containers/browser.py` and the package
    `runner/containers/samples/` did, hidden behind the package's `__init__` (issue 35).
    A module-level import that closes a loop fails here, naming the loop."""
    found = [cycle for cycle in cycles(import_graph()) if frozenset(cycle) not in KNOWN_CYCLES]
    assert not found, "import cycles (A -> B: A imports B when it loads):\n" + "\n".join(
        " -> ".join(cycle) for cycle in found)


def test_the_samples_package_init_is_only_its_docstring() -> None:
    """Pins: `runner/containers/samples/__init__.py` held the whole docker executor (740
    lines), so `runner.containers.browser`, importing the driver under the package, loaded
    the executor that imports browser: a cycle hidden behind the package (issue 35). The
    `__init__` is its docstring: each module is imported by its own name, none re-exported
    under the package's."""
    path = ROOT / "runner/containers/samples/__init__.py"
    body = ast.parse(path.read_text(encoding="utf-8"), str(path)).body
    extra = [f"line {node.lineno}: {ast.unparse(node)[:60]}" for node in body
             if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    assert not extra, (f"{path.relative_to(ROOT)} holds more than its docstring ("
                       + "; ".join(extra) + "): put it in a module of the package")


# The names the samples package's modules had before they moved under it (issue 24: the
# docker wing in rooms); an alias back to one keeps the old name alive (issue 35 item 3).
SAMPLES_OLD_NAMES = {"sample_driver", "sample_inputs", "sample_network", "sample_tree"}


def test_no_import_names_a_samples_module_by_its_old_name() -> None:
    """Pins: `from runner.containers.samples import driver as sample_driver` (and
    `inputs`, `tree` the same) kept the flat modules' names alive after the move, in the
    product, its tests and its benchmarks alike."""
    found = []
    for folder in ("runner", "rig", "gateway", "tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name} as {alias.asname}"
                      for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
                      for alias in node.names if alias.asname in SAMPLES_OLD_NAMES]
    assert not found, "an old module name kept alive (name the module, or import what " \
        "you use from it):\n" + "\n".join(found)


def test_the_cycle_finder_names_a_cycle(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
