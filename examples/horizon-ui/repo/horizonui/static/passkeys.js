// Passkeys: the server issues a challenge, the browser's authenticator signs it, the
// server checks the answer. Binary values travel as base64url.
const status = document.getElementById("status");
const b64 = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf)))
  .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const bytes = (text) => Uint8Array.from(
  atob(text.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));

async function post(path, body) {
  const r = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"},
                               body: JSON.stringify(body)});
  return {ok: r.ok, body: await r.json().catch(() => ({}))};
}

document.getElementById("register").addEventListener("click", async () => {
  const username = document.getElementById("username").value;
  status.textContent = "…";
  try {
    const begin = await post("/api/passkeys/register/begin", {username});
    if (!begin.ok) throw new Error("begin");
    const o = begin.body;
    const credential = await navigator.credentials.create({publicKey: {
      challenge: bytes(o.challenge), rp: {id: o.rp_id, name: "horizonui"},
      user: {id: bytes(o.user_id), name: username, displayName: username},
      pubKeyCredParams: [{type: "public-key", alg: -7}],
      authenticatorSelection: {residentKey: "required", userVerification: "required"},
      attestation: "none"}});
    const finish = await post("/api/passkeys/register/finish", {
      username, credential_id: b64(credential.rawId),
      client_data_json: b64(credential.response.clientDataJSON),
      attestation_object: b64(credential.response.attestationObject)});
    status.textContent = finish.ok ? `Passkey saved for ${username}` : "Registration refused";
  } catch (e) {
    status.textContent = "Registration failed";
  }
});

document.getElementById("login").addEventListener("click", async () => {
  const username = document.getElementById("username").value;
  status.textContent = "…";
  try {
    const begin = await post("/api/passkeys/login/begin", {username});
    if (!begin.ok) throw new Error("begin");
    const o = begin.body;
    const assertion = await navigator.credentials.get({publicKey: {
      challenge: bytes(o.challenge), rpId: o.rp_id, userVerification: "required",
      allowCredentials: o.credential_ids.map((id) => ({type: "public-key", id: bytes(id)}))}});
    const finish = await post("/api/passkeys/login/finish", {
      username, credential_id: b64(assertion.rawId),
      client_data_json: b64(assertion.response.clientDataJSON),
      authenticator_data: b64(assertion.response.authenticatorData),
      signature: b64(assertion.response.signature)});
    status.textContent = finish.ok ? `Signed in as ${finish.body.user}` : "Sign-in refused";
  } catch (e) {
    status.textContent = "Sign-in failed";
  }
});
