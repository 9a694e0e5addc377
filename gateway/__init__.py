"""The model gateway (issue 13): the one door between an arm's sandbox and a model API.

Standard library only, so it runs from a read-only mount inside `bakeoff/python`
(`PYTHONPATH=/bakeoff python3 -m gateway --state /state --port 8080`). It holds the real
API keys (from its environment), accepts per-arm tokens, forwards `/anthropic/...`,
`/openai/...` and `/gemini/...` to the configured upstreams, streams SSE straight
through, and records every request (usage, model, effort, cost) under
`<state>/records/`.
"""


class GatewayError(Exception):
    """The root of the gateway's exceptions: what was wrong, where, and the fix."""
