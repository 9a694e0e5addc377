"""`python -m runner.cli`: the command line."""

from runner.cli.app import main

raise SystemExit(main())
