//! The browser's part of a passkey ceremony (W3C Web Authentication Level 3): the options the
//! server sent (`{"publicKey": ...}` with base64url buffers, as webauthn-rs writes them) are
//! turned into the buffers `navigator.credentials.create` / `.get` take, and the credential
//! that comes back into the JSON webauthn-rs reads (base64url without padding). A small
//! script rather than `web-sys`'s credential bindings: the conversion is JSON on both sides,
//! and the script keeps the WebAssembly of every other page as it was.

/// The script: `kind` is `create` or `get`, `options` the server's JSON text; answers a
/// promise of the credential's JSON text.
#[cfg(feature = "hydrate")]
const CEREMONY: &str = r#"
const b2u = s => { s = s.replace(/-/g, '+').replace(/_/g, '/'); while (s.length % 4) s += '=';
  return Uint8Array.from(atob(s), c => c.charCodeAt(0)).buffer; };
const u2b = b => btoa(String.fromCharCode(...new Uint8Array(b)))
  .replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
const clean = x => { if (x && typeof x === 'object') { for (const k of Object.keys(x)) {
  if (x[k] === null) delete x[k]; else clean(x[k]); } } return x; };
if (!window.PublicKeyCredential || !navigator.credentials) {
  return Promise.reject(new Error('this browser has no passkeys (WebAuthn)'));
}
const o = clean(JSON.parse(options)).publicKey;
o.challenge = b2u(o.challenge);
if (kind === 'create') {
  o.user.id = b2u(o.user.id);
  (o.excludeCredentials || []).forEach(c => { c.id = b2u(c.id); });
  return navigator.credentials.create({ publicKey: o }).then(c => JSON.stringify({
    id: c.id, rawId: u2b(c.rawId), type: c.type, extensions: {},
    response: { attestationObject: u2b(c.response.attestationObject),
                clientDataJSON: u2b(c.response.clientDataJSON) } }));
}
(o.allowCredentials || []).forEach(c => { c.id = b2u(c.id); });
return navigator.credentials.get({ publicKey: o }).then(c => JSON.stringify({
  id: c.id, rawId: u2b(c.rawId), type: c.type, extensions: {},
  response: { authenticatorData: u2b(c.response.authenticatorData),
              clientDataJSON: u2b(c.response.clientDataJSON),
              signature: u2b(c.response.signature),
              userHandle: c.response.userHandle ? u2b(c.response.userHandle) : null } }));
"#;

/// Runs ceremony `kind` (`create` or `get`) with the server's `options` in the browser: the
/// credential's JSON text, or why not (no WebAuthn, the person cancelled, no passkey matched).
#[cfg(feature = "hydrate")]
pub async fn ceremony(kind: &str, options: &str) -> Result<String, String> {
    use wasm_bindgen::{JsCast, JsValue};
    let why = |e: JsValue| {
        js_sys::Reflect::get(&e, &JsValue::from_str("message"))
            .ok()
            .and_then(|m| m.as_string())
            .or_else(|| e.as_string())
            .unwrap_or_else(|| "the passkey did not answer".into())
    };
    let f = js_sys::Function::new_with_args("kind, options", CEREMONY);
    let promise = f
        .call2(
            &JsValue::NULL,
            &JsValue::from_str(kind),
            &JsValue::from_str(options),
        )
        .map_err(why)?
        .dyn_into::<js_sys::Promise>()
        .map_err(why)?;
    wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map_err(why)?
        .as_string()
        .ok_or_else(|| "the passkey did not answer".into())
}

/// Without the WebAssembly (the server's render) there is no browser to ask.
#[cfg(not(feature = "hydrate"))]
pub async fn ceremony(_kind: &str, _options: &str) -> Result<String, String> {
    Err("passkeys need JavaScript".into())
}

/// A step-up by passkey, start to end: the ceremony begun on the server, answered by the
/// browser. The ceremony's id and the credential's JSON, or a sentence to show.
pub async fn step_up() -> Result<(String, String), String> {
    let c = crate::api_passkeys::begin_passkey_step_up()
        .await
        .map_err(|e| crate::api::error_message(&e))?;
    let credential = ceremony("get", &c.options).await?;
    Ok((c.challenge_id, credential))
}
