"""The measurement apparatus: contracts, preflight, oracle, parsers, scores, reports.

`rig` never imports `runner` internals except the models it measures.
"""
