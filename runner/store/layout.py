"""Every path of the run directory `<repo>/.bakeoff/<experiment>/`, in one module.

    .bakeoff/<experiment>/
      sandboxes.json               what `up` made (`runner.store.state`)
      lock                         the experiment lock (`runner.store.files`)
      tools/<key>.json             an image's tool probes (`runner.containers.images.facts`)
      OBSERVATION.json, RESULTS.md, REPORT.html
                                   `report`
      oracle/<name>/               an `oracle` run                       (a sample root)
      reproduce/<name>/            a `reproduce` re-run                  (a sample root)
      stages/<change>/
        contract.lock.json         the frozen contract (`rig.contract` names it)
        stage.json                 what `up` proved (`records.StageRecord`)
        merge.json                 what `merge` did (`records.MergeRecord`)
        SCORECARD.md               `score`, `merge`
        base.bundle                the base for the checkouts (gone after `up`)
        brief/                     mounted read-only in every sandbox
        arms/<arm>/                arm.json, dispatch.log, keep/ (`dispatch`),
                                   stack.log (the arm stack's services, at `down`)
        judge/<arm>.json           the judge's answer
        judge/<arm>.wire.json      an agent judge's requests, totalled (its gateway's records)
        judge/gateway/             the agent judges' gateway state, laid out like gateway/
        gateway/                   the model gateway's state (a copy: its own is a volume):
          config.json              its tokens, upstreams, budgets, prices (`up` writes it)
          records/<change>/        requests.jsonl (one line per request) and bodies/,
                                   read back after each arm and at `down`
        samples/<arm>/<check>/     the scored samples: <n>.json, <n>.log, ...
        proofs/<sha12>/            `up`'s proofs of one contract          (a sample root)
        diagnosis/<image12>/       the base's runs in one image           (a sample root)
        merge/                     the grafts' and the head's verification (a sample root)
        rescore/<stamp>/           a `rescore`, with rescore.json, RESCORE.md (a sample root)

A sample root holds `samples/<arm>/<check>/<n>.{json,log}` as `rig.sample.oracle.sample_paths`
writes them (the rig writes the sample records, so it owns those names: `sample_dir` too,
which this module takes from there rather than spelling them twice). No other
module spells a name of this tree (`tests/unit/test_store.py` greps for them).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from rig.sample.oracle import RETRIED_DIR, SAMPLES_DIR, sample_dir

STATE_ROOT = ".bakeoff"
STAGES = "stages"
ARM_RECORD = "arm.json"
DISPATCH_LOG = "dispatch.log"
ARM_STACK_LOG = "stack.log"
RESCORE_SUMMARY = "rescore.json"
RESCORE_CARD = "RESCORE.md"


# -- the experiment directory ---------------------------------------------------------


def experiment_dir(repo: Path, experiment: str) -> Path:
    return repo / STATE_ROOT / experiment


def run_dir_of(path: Path) -> tuple[Path, str] | None:
    """(repository, experiment) of a resolved path inside a run directory, else None."""
    parts = path.parts
    if STATE_ROOT not in parts[:-1]:
        return None
    at = len(parts) - 1 - parts[::-1].index(STATE_ROOT)
    return Path(*parts[:at]), parts[at + 1]


def state_file(directory: Path) -> Path:
    """What `up` made (`runner.store.state.ExperimentState`)."""
    return directory / "sandboxes.json"


def lock_file(directory: Path) -> Path:
    return directory / "lock"


def tools_cache(directory: Path, key: str) -> Path:
    """One image's probe of the tools a sample needs, cached by `key`."""
    return directory / "tools" / f"{key}.json"


def observation_file(directory: Path) -> Path:
    return directory / "OBSERVATION.json"


def results_file(directory: Path) -> Path:
    return directory / "RESULTS.md"


def report_file(directory: Path) -> Path:
    """The page (`rig.report.page`): its links are relative to this directory."""
    return directory / "REPORT.html"


def oracle_dir(directory: Path, name: str) -> Path:
    """One `oracle` run's sample root."""
    return directory / "oracle" / name


def reproduce_dir(directory: Path, name: str) -> Path:
    """One `reproduce` re-run's sample root: beside nothing it could overwrite."""
    return directory / "reproduce" / name


# -- a stage ----------------------------------------------------------------------------


def stage_dir(directory: Path, change: str) -> Path:
    """`stages/<change>/` of an experiment directory: one per change."""
    return directory / STAGES / change


def stage_file(stage: Path) -> Path:
    """What `up` proved (`runner.store.records.StageRecord`)."""
    return stage / "stage.json"


def merge_file(stage: Path) -> Path:
    """What `merge` did (`runner.store.records.MergeRecord`)."""
    return stage / "merge.json"


def continued_file(stage: Path) -> Path:
    """The samples `run --continue-on-rig-error` went on past, when it did (a list)."""
    return stage / "continued-past-rig-errors.json"


def scorecard_file(stage: Path) -> Path:
    return stage / "SCORECARD.md"


def base_bundle(stage: Path) -> Path:
    """The base commit as a bundle, for the arms' checkouts (removed when they are made)."""
    return stage / "base.bundle"


def brief_dir(stage: Path) -> Path:
    """The host directory mounted read-only in every sandbox of the stage."""
    return stage / "brief"


def gateway_dir(stage: Path) -> Path:
    return stage / "gateway"


def gateway_requests(stage: Path, change: str) -> Path:
    """The gateway's records of the stage's requests (its own layout under `gateway_dir`)."""
    return gateway_dir(stage) / "records" / change / "requests.jsonl"


def judge_dir(stage: Path) -> Path:
    return stage / "judge"


def judge_answer(stage: Path, arm: str) -> Path:
    return judge_dir(stage) / f"{arm}.json"


def judge_wire(stage: Path, arm: str) -> Path:
    """What an agent judge of `arm` ran, from its gateway's records."""
    return judge_dir(stage) / f"{arm}.wire.json"


def judge_gateway_dir(stage: Path) -> Path:
    """The state of the agent judges' gateway (`gateway_requests(judge_dir(stage), ...)`)."""
    return gateway_dir(judge_dir(stage))


def proofs_dir(stage: Path, contract_sha256: str) -> Path:
    """`up`'s proofs (baseline, reference, ratchets) of one contract: a sample root."""
    return stage / "proofs" / contract_sha256[:12]


def proof_roots(stage: Path) -> list[Path]:
    """Every proof's sample root of the stage, in order."""
    return sorted((stage / "proofs").glob("*"))


def diagnosis_dir(stage: Path, image_id: str) -> Path:
    """The base's run of each check in one image (`sha256:` + 12 hex digits of its id)."""
    return stage / "diagnosis" / image_id[7:19]


def tripwire_dir(stage: Path, image_id: str, command: str, base_commit: str) -> Path:
    """The tripwire runs of one exit-code check's command on one base in one image
    (`rig.guards.tripwire`): a sample root (`samples/<commit>/<check>/1`), apart from the samples
    the rubric counts."""
    what = hashlib.sha256(f"{base_commit}\0{command}".encode()).hexdigest()[:12]
    return stage / "tripwires" / image_id[7:19] / what


def merge_dir(stage: Path) -> Path:
    """The grafts' and the merged head's verification: a sample root."""
    return stage / "merge"


def rescore_dir(stage: Path, stamp: str) -> Path:
    """One `rescore` of the stage: a sample root beside the recorded samples."""
    return stage / "rescore" / stamp


def rescore_summaries(stage: Path) -> list[Path]:
    """Every rescore's summary of the stage, oldest first."""
    return sorted((stage / "rescore").glob(f"*/{RESCORE_SUMMARY}"))


# -- an arm's dispatch ------------------------------------------------------------------


def arm_dir(directory: Path, change: str, arm: str) -> Path:
    """`stages/<change>/arms/<arm>/`: the arm record, its dispatch log, kept work."""
    return stage_dir(directory, change) / "arms" / arm


def arm_record(directory: Path, change: str, arm: str) -> Path:
    return arm_dir(directory, change, arm) / ARM_RECORD


def dispatch_log(directory: Path, change: str, arm: str) -> Path:
    """The agent's output during dispatch (redacted)."""
    return arm_dir(directory, change, arm) / DISPATCH_LOG


def arm_stack_log(arm_folder: Path) -> Path:
    """The services' log of the arm's own stack (`[toolchain] stack`), kept when it is
    stopped (`down`, or `up` when it never got healthy)."""
    return arm_folder / ARM_STACK_LOG


def keep_dir(arm_folder: Path) -> Path:
    """Scratch space of the work keeper, inside an arm's directory."""
    return arm_folder / "keep"


# -- samples, under any sample root -----------------------------------------------------


def samples_root(root: Path) -> Path:
    return root / SAMPLES_DIR


def sample_record(root: Path, arm: str, check: str, n: int) -> Path:
    return sample_dir(root, arm, check) / f"{n}.json"


def sample_log(root: Path, arm: str, check: str, n: int) -> Path:
    return sample_dir(root, arm, check) / f"{n}.log"


def sample_arms(root: Path) -> list[str]:
    """The arms (or labels: `baseline`, `graft-1`, ...) with samples under `root`."""
    return sorted(p.name for p in samples_root(root).glob("*"))


def sample_checks(root: Path, arm: str) -> list[str]:
    """The checks `arm` has samples of under `root`."""
    return sorted(p.name for p in (samples_root(root) / arm).glob("*"))


def retried_attempts(root: Path, arm: str) -> list[Path]:
    """The records of an arm's sample attempts that were no result (cut by an outage, a
    rig error set aside) under `root` (`rig.sample.oracle.retried_dir`): never read as results."""
    return sorted(samples_root(root).glob(f"{arm}/*/{RETRIED_DIR}/*.json"))


def sample_records(root: Path, arm: str | None = None, check: str | None = None) -> list[Path]:
    """The sample records under `root` (one arm's, one check's), in path order. Only the
    records: a sample's other files are `.log`, `.server.log`, `.canary.jsonl`, `N.files/`."""
    if arm is not None and check is not None:
        return sorted(sample_dir(root, arm, check).glob("*.json"))
    return sorted(samples_root(root).glob(f"{arm or '*'}/{check or '*'}/*.json"))
