"""The contract: the grading, frozen at ``up`` with a hash, verified by every later command.

docs/design.md principle 1. `build_contract` turns a loaded manifest into a `Contract` (the
canonical grading content); `contract_sha256` hashes its `canonical_json`. `freeze`
records it as a version of ``contract.lock.json`` in the experiment directory; `verify`
refuses a current contract that differs from the latest frozen version, naming the
changed fields (`diff`). A refreeze appends a version; none is ever overwritten.
"""

from rig.contract.comparison import diff
from rig.contract.content import (
    ABSENT,
    Contract,
    ContractChange,
    ContractCheck,
    ContractLimits,
    ContractServer,
    ContractStack,
    ContractSuccess,
    ContractToolchain,
    ContractWeights,
    ReadAtBase,
    ResolveReference,
    build_contract,
    canonical_json,
    contract_sha256,
    reference_file,
)
from rig.contract.lock import (
    LOCK_FILE,
    LOCK_SCHEMA,
    Lock,
    LockVersion,
    freeze,
    load_lock,
    lock_path,
    verify,
)

__all__ = [
    "ABSENT",
    "LOCK_FILE",
    "LOCK_SCHEMA",
    "Contract",
    "ContractChange",
    "ContractCheck",
    "ContractLimits",
    "ContractServer",
    "ContractStack",
    "ContractSuccess",
    "ContractToolchain",
    "ContractWeights",
    "Lock",
    "LockVersion",
    "ReadAtBase",
    "ResolveReference",
    "build_contract",
    "canonical_json",
    "contract_sha256",
    "diff",
    "freeze",
    "load_lock",
    "lock_path",
    "reference_file",
    "verify",
]
