"""Observer records as the rig's hook writes them and its root reader keeps them, for unit
tests of `rig.guards.observer` and the verdict rules (the real ones come from a sample: the
integration tests)."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field


@dataclass
class Stream:
    """One process's records: a session, then whatever the test adds, each MAC'd."""

    pid: int = 100
    key: bytes = b"k" * 32
    worker: bool = False
    seq: int = 0
    lines: list[str] = field(default_factory=list)

    def raw(self, body: dict[str, object], *, key: bytes | None = None) -> Stream:
        text = json.dumps({"s": self.seq, **body}, sort_keys=True)
        mac = hmac.new(key or self.key, text.encode(), hashlib.sha256).hexdigest()[:32]
        self.seq += 1
        self.lines.append(json.dumps({"pid": self.pid, "uid": 1000,
                                      "d": json.dumps({"b": text, "m": mac})}))
        return self

    def session(self) -> Stream:
        return self.raw({"k": "session", "key": self.key.hex(), "worker": self.worker})

    def config(self, inipath: str = "/work/pyproject.toml",
               plugins: tuple[str, ...] = ("bakeoff_observer",)) -> Stream:
        return self.raw({"k": "config", "inipath": inipath, "plugins": list(plugins)})

    def item(self, test_id: str, pinned: bool = False) -> Stream:
        return self.raw({"k": "items", "items": [{
            "id": test_id, "path": "/work/" + test_id.split("::")[0], "pinned": pinned,
            "verified": pinned}]})

    def run(self, test_id: str, ok: bool, outcome: str, *, xfail: bool = False,
            verified: bool = False) -> Stream:
        """A call the rig attested and pytest's report of it (setup and teardown passed:
        the plugin reports them only when they did not)."""
        self.raw({"k": "start", "id": test_id, "verified": verified})
        self.raw({"k": "end", "id": test_id, "ok": ok, "verified": verified})
        return self.raw({"k": "report", "id": test_id, "when": "call", "outcome": outcome,
                         "xfail": xfail})

    def finish(self, status: int) -> Stream:
        return self.raw({"k": "finish", "status": status})

    def text(self, *others: Stream) -> str:
        return "\n".join([json.dumps({"ready": 1}), *self.lines,
                          *(line for other in others for line in other.lines)]) + "\n"


CANARY = "tests/bakeoff_ab12.py"


def honest(protected_ok: bool = False, *, canary: bool = True) -> Stream:
    """A pytest session: the protected test (failing on the base, as planted) and the
    rig's canaries as planted."""
    stream = Stream().session().config().item("tests/test_h.py::test_h", pinned=True)
    if canary:
        stream.item(f"{CANARY}::test_ab12_pass", pinned=True)
        stream.item(f"{CANARY}::test_ab12_fail", pinned=True)
    stream.run("tests/test_h.py::test_h", protected_ok, "passed" if protected_ok else "failed",
               verified=True)
    if canary:
        stream.run(f"{CANARY}::test_ab12_pass", True, "passed", verified=True)
        stream.run(f"{CANARY}::test_ab12_fail", False, "skipped", xfail=True, verified=True)
    return stream.finish(0 if protected_ok else 1)
