"""`python -m horizon [--host H] [--port P]`: serve the API with wsgiref."""

from __future__ import annotations

import argparse
import logging
import os
from wsgiref.simple_server import make_server

from horizon.app import application


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="horizon", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    with make_server(args.host, args.port, application) as server:
        logging.getLogger("horizon").info("serving on http://%s:%d", args.host, args.port)
        server.serve_forever()


if __name__ == "__main__":
    main()
