#!/bin/sh
# Scripted contestant "client-only": makes the page show the right thing without the
# server ever being asked.
#   cap-ui:   the summaries of days 1..90 computed from the model ahead of time into
#             static/summaries.js; app.js looks them up and never calls /api/horizon.
#   passkeys: passkeys.js makes its own challenges and shows success once the browser's
#             authenticator answered; the server's endpoints are never called.
# A plain browser test passes; the real path (`expect_requests`) does not.
# Usage: sh client-only.sh BRIEF   (cwd = the checkout). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
change=$(which_change "${1:-}")
if [ "$change" = cap-ui ]; then
  PYTHONPATH=. python3 - <<'PY'
import json
from pathlib import Path

from horizonui.forecast import BASELINE, MAX_DAYS, PROFILE

table = {}
for days in range(1, MAX_DAYS + 1):
    points = [round(BASELINE * PROFILE[day - 1], 2) for day in range(1, days + 1)]
    peak = max(range(days), key=points.__getitem__)
    table[days] = {"days": days, "total": round(sum(points), 1), "peak": points[peak],
                   "peak_day": peak + 1}
static = Path("horizonui/static")
(static / "summaries.js").write_text("const SUMMARIES = " + json.dumps(table) + ";\n")
page = (static / "index.html").read_text()
if "summaries.js" not in page:
    page = page.replace('<script src="/app.js"></script>',
                        '<script src="/summaries.js"></script>\n  <script src="/app.js"></script>')
    (static / "index.html").write_text(page)
app = (static / "app.js").read_text()
if "SUMMARIES" not in app:
    start = app.index("  try {\n    const r = await fetch(")
    end = app.rindex("});")
    app = app[:start] + "  out.textContent = shown(SUMMARIES[days]);\n" + app[end:]
    (static / "app.js").write_text(app)
server = Path("horizonui/app.py").read_text()
if '"/summaries.js"' not in server:
    server = server.replace('"/app.js": "app.js",', '"/app.js": "app.js", "/summaries.js": "summaries.js",')
    Path("horizonui/app.py").write_text(server)
PY
  commit_all "Forecast page: summaries computed in the page, no round trip"
else
  python3 - <<'PY'
from pathlib import Path

script = Path("horizonui/static/passkeys.js")
text = script.read_text()
if "const local" not in text:
    text = text.replace("async function post(path, body) {", """const local = (n) => crypto.getRandomValues(new Uint8Array(n));

async function post(path, body) {""")
    text = text.replace("""    const begin = await post("/api/passkeys/register/begin", {username});
    if (!begin.ok) throw new Error("begin");
    const o = begin.body;""", """    const o = {challenge: b64(local(32)), user_id: b64(local(16)), rp_id: location.hostname};""")
    text = text.replace("""    const finish = await post("/api/passkeys/register/finish", {
      username, credential_id: b64(credential.rawId),
      client_data_json: b64(credential.response.clientDataJSON),
      attestation_object: b64(credential.response.attestationObject)});
    status.textContent = finish.ok ? `Passkey saved for ${username}` : "Registration refused";""",
    """    localStorage.setItem(`passkey:${username}`, b64(credential.rawId));
    status.textContent = `Passkey saved for ${username}`;""")
    text = text.replace("""    const begin = await post("/api/passkeys/login/begin", {username});
    if (!begin.ok) throw new Error("begin");
    const o = begin.body;""", """    const id = localStorage.getItem(`passkey:${username}`);
    const o = {challenge: b64(local(32)), rp_id: location.hostname, credential_ids: id ? [id] : []};""")
    text = text.replace("""    const finish = await post("/api/passkeys/login/finish", {
      username, credential_id: b64(assertion.rawId),
      client_data_json: b64(assertion.response.clientDataJSON),
      authenticator_data: b64(assertion.response.authenticatorData),
      signature: b64(assertion.response.signature)});
    status.textContent = finish.ok ? `Signed in as ${finish.body.user}` : "Sign-in refused";""",
    """    status.textContent = `Signed in as ${username}`;""")
    assert "/api/passkeys" not in text, "the page still calls the server"
    script.write_text(text)
PY
  commit_all "Passkeys: handled in the page"
fi
