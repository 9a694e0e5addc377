"""`python3 -m gateway --state DIR --port 8080`: serve until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from gateway import GatewayError
from gateway.server import Gateway, GatewayServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m gateway", description=__doc__)
    parser.add_argument("--state", type=Path, required=True,
                        help="the state directory (config.json in, records/ out)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="0.0.0.0")
    args = parser.parse_args(argv)
    try:
        server = GatewayServer((args.host, args.port), Gateway(args.state, os.environ))
    except (GatewayError, OSError) as error:
        print(f"gateway: cannot start: {error}", file=sys.stderr)
        return 2

    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = server.server_address[1]
    print(f"gateway: listening on {args.host}:{port}, state {args.state}", file=sys.stderr,
          flush=True)
    server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
