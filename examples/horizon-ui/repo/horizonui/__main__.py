"""`python3 -m horizonui [--host H] [--port P]`: serve the app (threads, wsgiref)."""

from __future__ import annotations

import argparse
import os
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from horizonui.app import application


class Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        print(f"{self.command} {self.path} {args[1] if len(args) > 1 else ''}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="horizonui", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = parser.parse_args(argv)
    with make_server(args.host, args.port, application, server_class=Server,
                     handler_class=Quiet) as server:
        print(f"serving on http://{args.host}:{args.port}", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
