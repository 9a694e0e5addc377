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
ENTRY = re.compile(r"^- `([^`]+)`")
DOTTED = re.compile(r"`((?:runner|rig)(?:\.\w+)+)`")
CITED_TEST = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
MD_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


# -- the code map ------------------------------------------------------------------------

def code_map() -> dict[str, list[str]]:
    """Folder ("" for the repository root) -> the entries ARCHITECTURE.md lists under its
    `### \\`folder/\\`` heading, in the order written."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    start = text.index("\n## Code map\n")
    end = text.find("\n## ", start + 1)
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text[start:None if end == -1 else end].splitlines():
        heading = HEADING.match(line)
        if heading:
            current = heading.group(1).removeprefix("./").rstrip("/")
            assert current not in found, f"ARCHITECTURE.md: two headings for {heading.group(1)}"
            found[current] = []
        elif current is not None and (entry := ENTRY.match(line)):
            found[current].append(entry.group(1))
    return found


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


def test_runner_top_level_holds_at_most_nine_entries() -> None:
    found = sorted(entries("runner"))
    assert len(found) <= RUNNER_MAX_ENTRIES, (
        f"runner/ holds {len(found)} entries ({', '.join(found)}), more than "
        f"{RUNNER_MAX_ENTRIES}: put the new one in the wing that owns its concern")


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


def test_every_module_and_function_the_docs_name_exists() -> None:
    """The path of one sample names real functions: a rename that forgets the documents
    fails here, naming the document and the stale name."""
    stale = []
    for document in DOCUMENTS:
        for dotted in sorted(set(DOTTED.findall(document.read_text(encoding="utf-8")))):
            try:
                resolve(dotted)
            except (AttributeError, ModuleNotFoundError):
                stale.append(f"{document.relative_to(ROOT)}: `{dotted}` does not exist")
    assert not stale, "\n".join(stale)


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
    assert "rig.oracle" in modules and "rig.parsers.pytest" in modules
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
    assert ROOT / "runner/commands/down.py" in files and ROOT / "rig/oracle.py" in files
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
