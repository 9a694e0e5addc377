"""bakeoff-sandbox's observer hook (`bakeoff_hook`), imported by every Python process in a
sample when it starts: by the rig's `sitecustomize` (first on PYTHONPATH) and by its
`usercustomize` (in the sandbox user's root-owned site, for a command that sets its own
PYTHONPATH); a module is imported once, so the hook is installed once.

Written by the rig, root-owned: it runs when the interpreter starts, before any code of
the tree. It installs one audit hook (PEP 578: it cannot be removed)
that is the only writer of the sample's observation:

- a pytest session says so through the rig's plugin (`observer_plugin.py`, verified by its
  sha256 when it is compiled), and from then on the hook streams what the session does to
  the root reader's socket: one datagram per record, each with a sequence number and an
  HMAC under a key this process made (and announced in its first record);
- it attests tests: the plugin tells it when it calls a test function and whether that
  call returned; a pinned file's code counts only when the hook saw it compiled from the
  pinned bytes (sha256) and executed by the import system;
- it flags the in-process routes to the observer and to the runner's own state when code
  outside the image's and the rig's root-owned files takes them: frames, the garbage
  collector, tracing, ctypes, code objects made or swapped, bytecode from writable files,
  the observer's socket, more audit hooks.

Standard library only; nothing here is reachable from a module (the state lives in the
hook's closure).
"""

from __future__ import annotations

import contextlib
import sys


def _install() -> None:
    import _thread
    import hashlib
    import hmac
    import json
    import os
    import secrets
    import site
    import socket
    import sysconfig

    config_path = "/bakeoff/in/observe/config.json"
    try:
        with open(config_path, "rb") as handle:
            config = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return
    pinned = dict(config.get("pinned", {}))  # absolute path -> sha256 of its bytes
    plugin_paths = frozenset(str(p) for p in config.get("plugin_paths", ()))
    sock_path = str(config.get("socket", ""))
    untrusted = tuple(config.get("untrusted", ()))
    trusted_extra = tuple(config.get("trusted", ()))
    user_site = str(config.get("user_site", "")) or "\0"

    prefixes = set(trusted_extra)
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            prefixes.add(path.rstrip("/") + "/")
    try:
        for path in site.getsitepackages():
            prefixes.add(path.rstrip("/") + "/")
    except AttributeError:
        pass
    if user_site != "\0":
        prefixes.add(user_site.rstrip("/") + "/")
    trusted_prefixes = tuple(sorted(prefixes))

    getframe, sha256, dumps = sys._getframe, hashlib.sha256, json.dumps
    get_ident = _thread.get_ident
    hmac_new, token_bytes, getpid, stat = hmac.new, secrets.token_bytes, os.getpid, os.stat
    busy: set = set()
    verdicts: dict = {}  # co_filename -> trusted?
    state: dict = {"session": None, "seq": 0, "flags": {}, "items": {}, "plugin_codes": set(),
                   "plugin_globals": None, "pinned_codes": {}, "pinned_globals": {},
                   "bad_pinned": set(), "trace": None, "keep": [], "early": []}

    def trusted(name: str) -> bool:
        known = verdicts.get(name)
        if known is not None:
            return known
        verdict = False
        if name.startswith("<frozen "):
            verdict = True
        elif name.startswith("/"):
            inside = [p for p in untrusted if name.startswith(p)]
            if not inside or name.startswith(user_site):
                verdict = any(name.startswith(p) for p in trusted_prefixes)
        verdicts[name] = verdict
        return verdict

    def requester(frame: object) -> object:
        """The first frame up the stack that is not the import system's."""
        hops = 0
        while frame is not None and hops < 12:
            name = frame.f_code.co_filename
            if not name.startswith("<frozen importlib"):
                return frame
            frame = frame.f_back
            hops += 1
        return frame

    def where(frame: object) -> str:
        if frame is None:
            return "?"
        code = frame.f_code
        return f"{code.co_filename}:{code.co_name}"

    def send(kind: str, **fields: object) -> None:
        session = state["session"]
        if session is None:
            return
        body = {"s": state["seq"], "k": kind, **fields}
        text = dumps(body, sort_keys=True, default=str)
        mac = hmac_new(session["key"], text.encode("utf-8", "replace"), "sha256").hexdigest()
        state["seq"] += 1
        line = dumps({"b": text, "m": mac[:32]})
        try:
            session["sock"].send(line.encode("utf-8", "replace")[:65000])
        except OSError:
            session["broken"] = True

    def flag(kind: str, detail: str) -> None:
        flags = state["flags"]
        key = (kind, detail)
        if key in flags or len(flags) >= 64:
            return
        flags[key] = True
        if state["session"] is None:  # said when pytest's session starts (initial conftests)
            state["early"].append((kind, detail))
            return
        send("flag", flag=kind, detail=detail[:400])

    def owned_by_root(path: object) -> bool:
        try:
            info = stat(path)
        except (OSError, TypeError, ValueError):
            return False
        return info.st_uid == 0 and not info.st_mode & 0o022

    def start_session(args: tuple) -> None:
        if state["session"] is not None:
            flag("session", "a second pytest session in one process")
            return
        key = token_bytes(32)
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.connect(sock_path)
        except OSError:
            return
        state["session"] = {"key": key, "sock": sock, "broken": False}
        state["trace"] = (sys.gettrace(), sys.getprofile())
        facts = args[0] if args and isinstance(args[0], dict) else {}
        send("session", key=key.hex(), pid=getpid(), ppid=os.getppid(), **facts)
        for kind, detail in state["early"]:
            send("flag", flag=kind, detail=detail[:400])
        try:  # nothing of the sandbox user's may ptrace this process or read its memory
            import ctypes
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
        except Exception:
            send("note", note="PR_SET_DUMPABLE unavailable")

    def harness(inipath: object, plugins: object) -> None:
        """pytest's ini file and every plugin it registered come from the image or from
        the base's pinned harness: anything else was written into the sample."""
        if isinstance(inipath, str) and inipath not in pinned:
            flag("harness", f"pytest read its ini from {inipath}, not from the base's")
        for name, source in list(plugins)[:500] if isinstance(plugins, (list, tuple)) else ():
            if not isinstance(source, str) or source in plugin_paths:
                continue
            if source not in pinned and not trusted(source):
                flag("harness", f"plugin {name} from {source}, neither the image's nor the "
                                "base's")

    def handlers() -> None:
        """A Python signal handler of the tree's is handed the frame a signal interrupts:
        one installed while tests run is a route to any frame, the rig's included."""
        import signal
        for number in range(1, signal.NSIG):
            try:
                handler = signal.getsignal(number)
            except (ValueError, OSError):
                continue
            code = getattr(getattr(handler, "__func__", handler), "__code__", None)
            if code is not None and not trusted(code.co_filename):
                flag("signals", f"signal {number} handled by {code.co_filename}:{code.co_name}")

    def from_plugin(frame: object) -> bool:
        return (frame is not None and frame.f_code in state["plugin_codes"]
                and frame.f_globals is state["plugin_globals"])

    def nested_codes(code: object) -> list:
        found, todo = [], [code]
        while todo:
            current = todo.pop()
            found.append(current)
            todo.extend(c for c in current.co_consts if hasattr(c, "co_code"))
        return found

    def plugin_ast(path: str) -> str:
        """ast.dump of the rig's plugin as its file holds it ("" when the file is not the
        rig's own bytes)."""
        if "plugin_ast" not in state:
            import ast
            with open(path, "rb") as handle:
                data = handle.read()
            ok = sha256(data).hexdigest() == config.get("plugin_sha256")
            state["plugin_ast"] = ast.dump(compile(data, path, "exec",
                                                   ast.PyCF_ONLY_AST)) if ok else ""
            state["dump"] = ast.dump
        return state["plugin_ast"]

    def on_compile(args: tuple, frame: object) -> None:
        source, filename = args[0], args[1]
        name = filename if isinstance(filename, str) else str(filename)
        if name in plugin_paths and not isinstance(source, (bytes, str)):
            # pytest compiles a plugin it imports by name from its AST; the plugin opts out
            # of assertion rewriting, so that AST must be the file's, node for node
            if not plugin_ast(name) or state["dump"](source) != plugin_ast(name):
                state["bad_pinned"].add(name)
                flag("pinned", "the rig's plugin compiled from another AST than its file's")
            return
        if name in pinned or name in plugin_paths:
            if not isinstance(source, (bytes, str)):
                state["bad_pinned"].add(name)
                flag("pinned", f"{name} compiled from an AST, not from its file")
                return
            data = source.encode("utf-8") if isinstance(source, str) else source
            expected = pinned.get(name) or config.get("plugin_sha256")
            if sha256(data).hexdigest() != expected:
                state["bad_pinned"].add(name)
                flag("pinned", f"{name} compiled from other bytes than the pinned file")
            return
        if name.endswith("/conftest.py") and name not in pinned and name.startswith(
                untrusted):
            flag("harness", f"{name} loaded as a conftest: the base's harness has none there")
            return
        if state["session"] is None or not trusted(name):
            return
        asker = requester(frame)
        if asker is not None and not trusted(asker.f_code.co_filename):
            if isinstance(source, (bytes, str)) and on_disk(name) == (
                    source.encode("utf-8") if isinstance(source, str) else source):
                return  # the import system compiling a module of the image: its own bytes
            flag("code", f"{where(asker)} compiled code under the name {name}")

    def on_disk(name: str) -> bytes | None:
        try:
            with open(name, "rb") as handle:
                return handle.read()
        except OSError:
            return None

    def on_exec(args: tuple, frame: object) -> None:
        code = args[0] if args else None
        name = getattr(code, "co_filename", None)
        if name is None or not (name in pinned or name in plugin_paths):
            return
        if name in state["bad_pinned"]:
            return
        caller = frame
        module_globals = None
        code_name = caller.f_code.co_name if caller is not None else ""
        if code_name == "_call_with_frames_removed" and caller.f_code.co_filename.startswith(
                "<frozen importlib"):
            call_args = caller.f_locals.get("args")
            if isinstance(call_args, tuple) and len(call_args) > 1 and isinstance(
                    call_args[1], dict):
                module_globals = call_args[1]
        elif (code_name == "exec_module" and name in plugin_paths
              and caller.f_code.co_filename.endswith("/_pytest/assertion/rewrite.py")
              and trusted(caller.f_code.co_filename)):
            module = caller.f_locals.get("module")
            module_globals = getattr(module, "__dict__", None)
        if module_globals is None:
            flag("pinned", f"{name} executed outside the import system by {where(caller)}")
            return
        codes = nested_codes(code)
        state["keep"].append(codes)
        if name in plugin_paths:
            if state["plugin_globals"] is not None:
                flag("pinned", "the rig's plugin executed twice")
                return
            state["plugin_codes"].update(codes)
            state["plugin_globals"] = module_globals
            return
        if name in state["pinned_globals"]:
            flag("pinned", f"{name} executed twice")
            return
        state["pinned_globals"][name] = module_globals
        for each in codes:
            state["pinned_codes"][id(each)] = name

    def verified(fn: object) -> bool:
        target = getattr(fn, "__func__", fn)
        code = getattr(target, "__code__", None)
        name = state["pinned_codes"].get(id(code))
        if name is None:
            return False
        return getattr(target, "__globals__", None) is state["pinned_globals"].get(name)

    def item_facts(item: object) -> dict:
        nodeid = str(getattr(item, "nodeid", ""))[:1000]
        path = str(getattr(item, "path", getattr(item, "fspath", "")))
        fn = getattr(item, "obj", None) if hasattr(item, "_fixtureinfo") else None
        return {"id": nodeid, "path": path[:1000], "pinned": path in pinned,
                "verified": fn is not None and verified(fn)}

    def on_plugin(event: str, args: tuple, frame: object) -> None:
        if event == "bakeoff.session":
            start_session(args)
            return
        if state["session"] is None:
            return
        if event == "bakeoff.collected":
            items = [item_facts(item) for item in list(args[0])[:200000]]
            for at in range(0, len(items), 100):
                send("items", items=items[at:at + 100])
        elif event == "bakeoff.start":
            item, fn = args[0], args[1]
            key = id(item)
            if key in state["items"]:
                flag("attest", f"{getattr(item, 'nodeid', '?')} called twice")
            state["items"][key] = (frame, fn, item)
            trace = (sys.gettrace(), sys.getprofile())
            if trace != state["trace"]:
                flag("trace", "a trace or profile function is set while tests run")
            send("start", id=str(getattr(item, "nodeid", ""))[:1000], verified=verified(fn))
        elif event == "bakeoff.end":
            item, ok = args[0], args[1]
            started = state["items"].get(id(item))
            nodeid = str(getattr(item, "nodeid", ""))[:1000]
            if started is None or started[0] is not frame or started[2] is not item:
                flag("attest", f"{nodeid} ended by a call the rig did not start")
                return
            trace = (sys.gettrace(), sys.getprofile())
            if trace != state["trace"]:
                flag("trace", "a trace or profile function is set while tests run")
            pinned_call = verified(started[1])
            if pinned_call:
                handlers()
            send("end", id=nodeid, ok=ok is True, verified=pinned_call)
        elif event == "bakeoff.report":
            nodeid, when, outcome, xfail = (list(args) + [None] * 4)[:4]
            send("report", id=str(nodeid)[:1000], when=str(when), outcome=str(outcome),
                 xfail=bool(xfail))
        elif event == "bakeoff.collectreport":
            send("collectreport", id=str(args[0])[:1000], outcome=str(args[1]))
        elif event == "bakeoff.unattested":
            send("unattested", id=str(args[0])[:1000], why=str(args[1])[:200])
        elif event == "bakeoff.config":
            facts = args[0] if args and isinstance(args[0], dict) else {}
            send("config", **facts)
            harness(facts.get("inipath"), args[1] if len(args) > 1 else ())
        elif event == "bakeoff.finish":
            handlers()
            send("finish", status=args[0] if args else None)

    def on_marshal(event: str, frame: object) -> None:
        """Bytecode: the import system's (or pytest's own cache) only from root-owned files;
        anyone else's is code the hook never saw compiled."""
        code = frame.f_code if frame is not None else None
        if code is not None and code.co_name in ("_compile_bytecode", "_read_pyc") and trusted(
                code.co_filename):
            path = frame.f_locals.get("bytecode_path") or frame.f_locals.get("pyc")
            if path is not None and not owned_by_root(path):
                flag("bytecode", f"bytecode read from {path}, which the sandbox can write")
            return
        asker = requester(frame)
        if asker is not None and not trusted(asker.f_code.co_filename):
            flag("code", f"{event} by {where(asker)}")

    def on_watch(event: str, args: tuple, frame: object) -> None:
        if event in ("marshal.loads", "marshal.load"):
            on_marshal(event, frame)
            return
        asker = requester(frame)
        name = asker.f_code.co_filename if asker is not None else ""
        if event in ("sys.settrace", "sys.setprofile") or event.startswith("sys.monitoring"):
            flag("trace", f"{event} by {where(asker)}")
        elif trusted(name):
            return
        elif event == "sys._current_frames":  # other threads' frames: the hook's, running
            flag("frames", f"{event} by {where(asker)}")
        elif event == "object.__getattr__":
            if len(args) > 1 and args[1] in ("tb_frame", "gi_frame", "cr_frame", "ag_frame"):
                flag("frames", f"{args[1]} read by {where(asker)}")
        elif event.startswith("gc."):
            flag("gc", f"{event} by {where(asker)}")
        elif event.startswith("ctypes."):
            flag("ctypes", f"{event} by {where(asker)}")
        elif event == "code.__new__":
            flag("code", f"{event} by {where(asker)}")
        elif event == "sys.addaudithook":
            flag("audit", f"an audit hook added by {where(asker)}")

    def on_setattr(args: tuple, frame: object) -> None:
        if len(args) > 1 and args[1] in ("__code__", "__defaults__", "__kwdefaults__"):
            asker = requester(frame)
            target = getattr(args[0], "__code__", None)
            name = getattr(target, "co_filename", "")
            if (not trusted(asker.f_code.co_filename if asker is not None else "")
                    or name in pinned or name in plugin_paths):
                flag("code", f"{args[1]} of {getattr(args[0], '__qualname__', '?')} set by "
                             f"{where(asker)}")

    def on_socket(args: tuple, frame: object) -> None:
        address = args[1] if len(args) > 1 else None
        if isinstance(address, (str, bytes)) and sock_path and (
                address == sock_path or address == sock_path.encode()):
            flag("channel", f"the observer's socket reached by {where(requester(frame))}")

    def on_open(args: tuple, frame: object) -> None:
        path = args[0] if args else None
        if isinstance(path, str) and path.startswith("/proc/") and (
                path.endswith("/mem") or "/fd/" in path or path.endswith("/fd")):
            asker = requester(frame)
            if asker is not None and not trusted(asker.f_code.co_filename):
                flag("proc", f"{path} opened by {where(asker)}")

    # Not `sys._getframe`: it hands a caller its own stack, which `inspect.currentframe`
    # (a root-owned module's call) hands out unflagged; honest code reads its caller's name
    # with it, and the hook is on no stack it returns but its own, where it is busy.
    watched = frozenset({"sys._current_frames", "object.__getattr__",
                         "gc.get_objects", "gc.get_referrers", "gc.get_referents",
                         "sys.settrace", "sys.setprofile", "code.__new__", "marshal.loads",
                         "marshal.load", "sys.addaudithook"})

    def hook(event: str, args: tuple) -> None:
        me = get_ident()
        if me in busy:
            return
        if not (event in watched or event.startswith(("bakeoff.", "ctypes.", "sys.monitoring"))
                or event in ("compile", "exec", "object.__setattr__", "socket.connect",
                             "socket.sendto", "socket.sendmsg", "socket.bind", "open",
                             "os.listdir", "os.scandir")):
            return
        busy.add(me)
        try:
            try:
                frame = getframe(1)
            except ValueError:  # raised from C with no Python frame above the hook
                frame = None
            if event.startswith("bakeoff."):
                if from_plugin(frame):
                    on_plugin(event, args, frame)
                elif state["session"] is not None:
                    flag("channel", f"{event} raised by {where(frame)}, not by the rig's plugin")
            elif event == "compile":
                on_compile(args, frame)
            elif event == "exec":
                on_exec(args, frame)
            elif event == "object.__setattr__":
                on_setattr(args, frame)
            elif event.startswith("socket."):
                on_socket(args, frame)
            elif event in ("open", "os.listdir", "os.scandir"):
                on_open(args, frame)
            elif state["session"] is not None:
                on_watch(event, args, frame)
        except Exception as error:
            with contextlib.suppress(Exception):
                flag("observer", f"{type(error).__name__}: {error}"[:300])
        finally:
            busy.discard(me)

    sys.addaudithook(hook)


_install()
del _install
