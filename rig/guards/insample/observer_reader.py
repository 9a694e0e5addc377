"""bakeoff-sandbox's observer reader: the root end of a sample's observation.

Run by the sample's driver as root (`python3 -I -S observer_reader.py SOCKET OUT LIMIT`)
before the command starts. It binds a unix datagram socket the sandbox user may send to,
and writes each datagram to OUT (a root-only file) as one JSON line with the sender's pid
and uid as the kernel gives them (SCM_CREDENTIALS): a record is tied to the process that
sent it, whatever it says. At most LIMIT bytes are kept; after that one `overflow` line,
and the rest is read and dropped so no sender ever blocks. It stops at the driver's own
stop datagram (uid 0), sent once every process of the sandbox user is gone: every record
before it has been read.
"""

import json
import os
import socket
import struct
import sys

STOP = b"bakeoff-stop"  # from uid 0 only: the driver, once every sandbox process is gone


def main() -> None:
    path, out, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.bind(path)
    os.chmod(path, 0o666)
    size = struct.calcsize("3i")
    written, over = 0, False
    with open(out, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"ready": os.getpid()}) + "\n")
        handle.flush()
        while True:
            data, ancillary, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(size))
            pid = uid = -1
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid, uid, _ = struct.unpack("3i", value[:size])
            if uid == 0 and data == STOP:
                break
            if over:
                continue
            line = json.dumps({"pid": pid, "uid": uid,
                               "d": data.decode("utf-8", "replace")}) + "\n"
            if written + len(line) > limit:
                handle.write(json.dumps({"overflow": written}) + "\n")
                over = True
                continue
            handle.write(line)
            written += len(line)


main()
