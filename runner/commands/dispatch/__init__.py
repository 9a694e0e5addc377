"""Dispatch: every arm's agent in its own sandbox, in parallel, on an identical brief.

    runner.commands.dispatch.run.dispatch(engine, loaded, arms=None, reporter=None)
        -> DispatchReport

The adapters (how an arm's agent is started) are in `runner.commands.dispatch.agents`;
the live view is `runner.cli.dispatch_view.DispatchView`; `bakeoff-sandbox dispatch` is
`runner.cli.dispatch`. Each module is imported by its own name (nothing is re-exported
here: the package loads none of them, so `run` and `runner.commands.services` import each
other's pieces without a cycle).
"""
