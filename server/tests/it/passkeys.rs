//! Passkeys for step-up (issue 36), black-box over HTTP on both backends, with a software
//! authenticator made here (ES256 keys from ring; the attestation and assertion built byte by
//! byte as W3C WebAuthn Level 3 §6.1 and §6.5 lay them out, "none" attestation): a passkey
//! registered with the password approves a reversal; a wrong credential, a replayed ceremony,
//! a removed passkey and a cloned credential (its counter not rising) are refused, the clone
//! audited; failed assertions count toward the throttle like wrong passwords; and once an
//! admin requires passkeys, the password no longer approves.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use converge_server::config::Settings;

use crate::support::{OPS_PASSWORD, TestApp, add_ops_user, ops_post, ops_session};

/// The console's origin in these tests (`--webauthn-origin`); the relying party is its host.
const ORIGIN: &str = "http://localhost:3000";

fn tweak(s: &mut Settings) {
    s.session.webauthn_origin = Some(url::Url::parse(ORIGIN).unwrap());
}

/// A software authenticator holding one ES256 credential, with its signature counter.
struct SoftKey {
    pkcs8: Vec<u8>,
    cred_id: Vec<u8>,
    /// The counter the next assertion signs (then raised by one).
    counter: u32,
}

/// A CBOR byte string header and body.
fn cbor_bytes(b: &[u8]) -> Vec<u8> {
    let mut out = match b.len() {
        n if n < 24 => vec![0x40 | n as u8],
        n if n < 256 => vec![0x58, n as u8],
        n => vec![0x59, (n >> 8) as u8, n as u8],
    };
    out.extend_from_slice(b);
    out
}

/// A CBOR text string (shorter than 24 bytes).
fn cbor_text(s: &str) -> Vec<u8> {
    let mut out = vec![0x60 | s.len() as u8];
    out.extend_from_slice(s.as_bytes());
    out
}

fn client_data(kind: &str, challenge: &str) -> Vec<u8> {
    json!({"type": kind, "challenge": challenge, "origin": ORIGIN, "crossOrigin": false})
        .to_string()
        .into_bytes()
}

impl SoftKey {
    fn new() -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .unwrap()
            .as_ref()
            .to_vec();
        let mut cred_id = vec![0u8; 32];
        rng.fill(&mut cred_id).unwrap();
        SoftKey {
            pkcs8,
            cred_id,
            counter: 1,
        }
    }

    /// The same private key and credential id, and the counter where it is now: a clone.
    fn clone_key(&self) -> Self {
        SoftKey {
            pkcs8: self.pkcs8.clone(),
            cred_id: self.cred_id.clone(),
            counter: self.counter,
        }
    }

    fn pair(&self) -> EcdsaKeyPair {
        EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            &self.pkcs8,
            &SystemRandom::new(),
        )
        .unwrap()
    }

    /// The COSE_Key of the public key: {1: 2, 3: -7, -1: 1, -2: x, -3: y}.
    fn cose_key(&self) -> Vec<u8> {
        let pair = self.pair();
        let point = pair.public_key().as_ref();
        let mut out = vec![0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21];
        out.extend(cbor_bytes(&point[1..33]));
        out.push(0x22);
        out.extend(cbor_bytes(&point[33..65]));
        out
    }

    /// What `navigator.credentials.create` gives for `options` (`{"publicKey": ...}`).
    fn attest(&self, options: &Value) -> Value {
        let pk = &options["publicKey"];
        let rp_id = pk["rp"]["id"].as_str().unwrap();
        let challenge = pk["challenge"].as_str().unwrap();
        let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        auth_data.push(0x45); // UP, UV, AT
        auth_data.extend_from_slice(&0u32.to_be_bytes());
        auth_data.extend_from_slice(&[0u8; 16]); // AAGUID
        auth_data.extend_from_slice(&(self.cred_id.len() as u16).to_be_bytes());
        auth_data.extend_from_slice(&self.cred_id);
        auth_data.extend(self.cose_key());
        let mut att = vec![0xa3];
        att.extend(cbor_text("fmt"));
        att.extend(cbor_text("none"));
        att.extend(cbor_text("attStmt"));
        att.push(0xa0);
        att.extend(cbor_text("authData"));
        att.extend(cbor_bytes(&auth_data));
        json!({
            "id": B64.encode(&self.cred_id),
            "rawId": B64.encode(&self.cred_id),
            "type": "public-key",
            "response": {
                "attestationObject": B64.encode(&att),
                "clientDataJSON": B64.encode(client_data("webauthn.create", challenge)),
            },
            "extensions": {},
        })
    }

    /// What `navigator.credentials.get` gives for `options`, signing with the counter now
    /// (then raised).
    fn assert(&mut self, options: &Value) -> Value {
        let pk = &options["publicKey"];
        let rp_id = pk["rpId"].as_str().unwrap();
        let challenge = pk["challenge"].as_str().unwrap();
        let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        auth_data.push(0x05); // UP, UV
        auth_data.extend_from_slice(&self.counter.to_be_bytes());
        self.counter += 1;
        let cdj = client_data("webauthn.get", challenge);
        let mut signed = auth_data.clone();
        signed.extend_from_slice(&Sha256::digest(&cdj));
        let sig = self
            .pair()
            .sign(&SystemRandom::new(), &signed)
            .unwrap()
            .as_ref()
            .to_vec();
        json!({
            "id": B64.encode(&self.cred_id),
            "rawId": B64.encode(&self.cred_id),
            "type": "public-key",
            "response": {
                "authenticatorData": B64.encode(&auth_data),
                "clientDataJSON": B64.encode(&cdj),
                "signature": B64.encode(&sig),
                "userHandle": null,
            },
            "extensions": {},
        })
    }
}

fn code(v: &Value) -> Option<&str> {
    v["error"]["code"].as_str()
}

/// A ceremony's id and its options (`{"publicKey": ...}`).
async fn begin(c: &reqwest::Client, app: &TestApp, path: &str) -> (String, Value) {
    let (s, v) = ops_post(c, app, path, json!({})).await;
    assert_eq!(s, 200, "{v}");
    let options = serde_json::from_str(v["options"].as_str().unwrap()).unwrap();
    (v["challenge_id"].as_str().unwrap().to_string(), options)
}

/// Registers `key` for the signed-in `c` with the password; the passkey's id.
async fn register(c: &reqwest::Client, app: &TestApp, key: &SoftKey) -> String {
    let (id, options) = begin(c, app, "/ops/v1/passkeys/registrations").await;
    let (s, v) = ops_post(
        c,
        app,
        "/ops/v1/passkeys",
        json!({"challenge_id": id, "name": "laptop", "credential": key.attest(&options),
               "password": OPS_PASSWORD}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    v["passkey"]["id"].as_str().unwrap().to_string()
}

/// A fresh step-up ceremony answered by `key`: the `passkey` member of an approval.
async fn assertion(c: &reqwest::Client, app: &TestApp, key: &mut SoftKey) -> Value {
    let (id, options) = begin(c, app, "/ops/v1/passkeys/step-up").await;
    json!({"challenge_id": id, "credential": key.assert(&options)})
}

async fn paid(app: &TestApp, order: &str) -> String {
    let a = app
        .post(
            "/v1/payments",
            Some(&format!("k-{order}")),
            &json!({"amount": 2_000, "currency": "CNY", "merchant_order_id": order}),
        )
        .await;
    assert_eq!(a.json()["status"], "SUCCESS");
    a.json()["id"].as_str().unwrap().to_string()
}

async fn request_reverse(c: &reqwest::Client, app: &TestApp, order: &str) -> String {
    let payment = paid(app, order).await;
    let (s, v) = ops_post(
        c,
        app,
        "/ops/v1/actions",
        json!({"kind": "reverse", "payment_id": payment, "reason": "customer disputed"}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    v["action"]["id"].as_str().unwrap().to_string()
}

async fn approve(c: &reqwest::Client, app: &TestApp, id: &str, proof: Value) -> (u16, Value) {
    let mut body = json!({"reason": "checked the dispute"});
    body.as_object_mut()
        .unwrap()
        .extend(proof.as_object().unwrap().clone());
    ops_post(c, app, &format!("/ops/v1/actions/{id}/approve"), body).await
}

async fn audit_count(app: &TestApp, action: &str) -> i64 {
    app.sql_i64(
        "SELECT COUNT(*) FROM audit_log WHERE action = $1",
        &[action],
    )
    .await
}

on_both_backends!(
    a_passkey_registered_with_the_password_approves_a_reversal_and_a_clone_is_refused,
    |s| { tweak(s) },
    |app| {
        add_ops_user(&app, "op", "operator").await;
        add_ops_user(&app, "ap", "approver").await;
        let op = ops_session(&app, "op").await;
        let ap = ops_session(&app, "ap").await;
        let mut key = SoftKey::new();
        // Registration asks for the password again: a stolen session alone adds nothing.
        let (cid, options) = begin(&ap, &app, "/ops/v1/passkeys/registrations").await;
        let (s, v) = ops_post(
            &ap,
            &app,
            "/ops/v1/passkeys",
            json!({"challenge_id": cid, "name": "laptop", "credential": key.attest(&options),
                   "password": "not-the-password"}),
        )
        .await;
        assert_eq!((s, code(&v)), (403, Some("step_up_refused")), "{v}");
        let pk = register(&ap, &app, &key).await;
        let (s, v) = ops_post(&ap, &app, "/ops/v1/passkeys/registrations", json!({})).await;
        assert_eq!(s, 200, "{v}");
        let list = ap
            .get(format!("{}/ops/v1/passkeys", app.base))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        assert_eq!(list["items"][0]["id"], pk.as_str(), "{list}");
        assert!(
            list["items"][0].get("passkey").is_none(),
            "no key material shown"
        );
        assert_eq!(audit_count(&app, "passkey_registered").await, 1);

        // Approved by passkey.
        let first = request_reverse(&op, &app, "o-1").await;
        let proof = json!({"passkey": assertion(&ap, &app, &mut key).await});
        let (s, v) = approve(&ap, &app, &first, proof.clone()).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["action"]["status"], "executed", "{v}");
        assert_eq!(v["action"]["decided_by"], "ap", "{v}");
        // The same ceremony again (a replay): refused, single use.
        let second = request_reverse(&op, &app, "o-2").await;
        let (s, v) = approve(&ap, &app, &second, proof).await;
        assert_eq!((s, code(&v)), (403, Some("approval_refused")), "{v}");

        // A clone of the key, behind the original: its counter does not rise.
        let mut clone = key.clone_key();
        clone.counter = 0;
        let (s, v) = approve(
            &ap,
            &app,
            &second,
            json!({"passkey": assertion(&ap, &app, &mut clone).await}),
        )
        .await;
        assert_eq!((s, code(&v)), (403, Some("approval_refused")), "{v}");
        assert_eq!(audit_count(&app, "passkey_counter_regressed").await, 1);
        // The same counter value as the last accepted one (1): a clone too.
        let mut same = key.clone_key();
        same.counter -= 1;
        assert_eq!(same.counter, 1);
        let (s, _) = approve(
            &ap,
            &app,
            &second,
            json!({"passkey": assertion(&ap, &app, &mut same).await}),
        )
        .await;
        assert_eq!(s, 403);
        assert_eq!(audit_count(&app, "passkey_counter_regressed").await, 2);
        // The genuine key, counter above: approved.
        let (s, v) = approve(
            &ap,
            &app,
            &second,
            json!({"passkey": assertion(&ap, &app, &mut key).await}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["action"]["status"], "executed", "{v}");
        assert_eq!(
            app.sql_i64(
                "SELECT sign_count FROM passkeys WHERE id = $1",
                &[pk.as_str()]
            )
            .await,
            i64::from(key.counter - 1)
        );
    }
);

on_both_backends!(
    a_wrong_or_removed_credential_is_refused_and_failures_count_like_wrong_passwords,
    |s| { tweak(s) },
    |app| {
        add_ops_user(&app, "op", "operator").await;
        add_ops_user(&app, "ap", "approver").await;
        add_ops_user(&app, "ap2", "approver").await;
        let op = ops_session(&app, "op").await;
        let ap = ops_session(&app, "ap").await;
        let ap2 = ops_session(&app, "ap2").await;
        let mut key = SoftKey::new();
        let pk = register(&ap, &app, &key).await;
        let mut other = SoftKey::new();
        register(&ap2, &app, &other).await;
        let id = request_reverse(&op, &app, "o-1").await;
        // A credential never registered, and another user's: refused alike.
        let mut stranger = SoftKey::new();
        for k in [&mut stranger, &mut other] {
            let (s, v) = approve(
                &ap,
                &app,
                &id,
                json!({"passkey": assertion(&ap, &app, k).await}),
            )
            .await;
            assert_eq!((s, code(&v)), (403, Some("approval_refused")), "{v}");
        }
        // No proof at all: step-up required, not an attempt (403, so that every body the
        // schema admits gets an answer it documents: schemathesis).
        let (s, v) = approve(&ap, &app, &id, json!({})).await;
        assert_eq!((s, code(&v)), (403, Some("step_up_required")), "{v}");
        // A credential that is no WebAuthn assertion is refused as one that does not verify.
        let junk = json!({"passkey": {"challenge_id": "x", "credential": {"id": 1}}});
        let (s, v) = approve(&ap, &app, &id, junk).await;
        assert_eq!((s, code(&v)), (403, Some("passkey_refused")), "{v}");
        // Removed: a ceremony begun before is refused, and no new one begins.
        let pending = assertion(&ap, &app, &mut key).await;
        let (s, v) = ops_post(
            &ap2,
            &app,
            &format!("/ops/v1/passkeys/{pk}/remove"),
            json!({}),
        )
        .await;
        assert_eq!(
            (s, code(&v)),
            (404, Some("not_found")),
            "only its owner removes it: {v}"
        );
        let (s, _) = ops_post(
            &ap,
            &app,
            &format!("/ops/v1/passkeys/{pk}/remove"),
            json!({}),
        )
        .await;
        assert_eq!(s, 204);
        let (s, v) = approve(&ap, &app, &id, json!({"passkey": pending})).await;
        assert_eq!((s, code(&v)), (403, Some("approval_refused")), "{v}");
        let (s, v) = ops_post(&ap, &app, "/ops/v1/passkeys/step-up", json!({})).await;
        assert_eq!((s, code(&v)), (409, Some("no_passkeys")), "{v}");
        assert_eq!(audit_count(&app, "passkey_removed").await, 1);
        // Failed assertions count like wrong passwords: after the free failures (5, since
        // the last good check: the registration below), the next check waits, whatever its
        // proof.
        let mut k2 = SoftKey::new();
        register(&ap, &app, &k2).await;
        for _ in 0..5 {
            let mut wrong = SoftKey::new();
            let (s, _) = approve(
                &ap,
                &app,
                &id,
                json!({"passkey": assertion(&ap, &app, &mut wrong).await}),
            )
            .await;
            assert_eq!(s, 403);
        }
        let (s, v) = approve(
            &ap,
            &app,
            &id,
            json!({"passkey": assertion(&ap, &app, &mut k2).await}),
        )
        .await;
        assert_eq!((s, code(&v)), (429, Some("rate_limited")), "{v}");
        let (s, v) = approve(&ap, &app, &id, json!({"password": OPS_PASSWORD})).await;
        assert_eq!((s, code(&v)), (429, Some("rate_limited")), "{v}");
    }
);

on_both_backends!(
    once_an_admin_requires_passkeys_the_password_neither_approves_nor_makes_a_passkey_that_does,
    |s| { tweak(s) },
    |app| {
        add_ops_user(&app, "op", "operator").await;
        add_ops_user(&app, "ap", "approver").await;
        add_ops_user(&app, "ad", "admin").await;
        let op = ops_session(&app, "op").await;
        let ap = ops_session(&app, "ap").await;
        let ad = ops_session(&app, "ad").await;
        let put = |c: &reqwest::Client, body: Value| {
            let req = c
                .put(format!("{}/ops/v1/settings/passkeys", app.base))
                .json(&body);
            async move {
                let r = req.send().await.unwrap();
                (
                    r.status().as_u16(),
                    r.json::<Value>().await.unwrap_or(Value::Null),
                )
            }
        };
        // The admin's own passkey, registered before the rule: confirmed at once.
        let mut admin_key = SoftKey::new();
        register(&ad, &app, &admin_key).await;
        // Not an admin: refused.
        let (s, v) = put(
            &ap,
            json!({"required": true, "reason": "policy", "password": OPS_PASSWORD}),
        )
        .await;
        assert_eq!((s, code(&v)), (403, Some("forbidden")), "{v}");
        let (s, v) = put(
            &ad,
            json!({"required": true, "reason": "policy", "password": OPS_PASSWORD}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(
            (v["required"].as_bool(), v["updated_by"].as_str()),
            (Some(true), Some("ad"))
        );
        assert_eq!(audit_count(&app, "passkeys_required_changed").await, 1);

        let id = request_reverse(&op, &app, "o-1").await;
        let (s, v) = approve(&ap, &app, &id, json!({"password": OPS_PASSWORD})).await;
        assert_eq!((s, code(&v)), (403, Some("passkey_required")), "{v}");
        assert_eq!(
            app.sql_strings("SELECT status FROM actions WHERE id = $1", &[id.as_str()])
                .await,
            ["pending"]
        );
        // A first passkey registered with the password alone proves only the password (a
        // thief holding it could register one): it approves nothing until another admin
        // confirms it.
        let mut key = SoftKey::new();
        let (cid, options) = begin(&ap, &app, "/ops/v1/passkeys/registrations").await;
        let (s, v) = ops_post(
            &ap,
            &app,
            "/ops/v1/passkeys",
            json!({"challenge_id": cid, "name": "laptop", "credential": key.attest(&options),
                   "password": OPS_PASSWORD}),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        assert_eq!(v["passkey"]["confirmed"], false, "{v}");
        let (s, v) = ops_post(&ap, &app, "/ops/v1/passkeys/step-up", json!({})).await;
        assert_eq!((s, code(&v)), (409, Some("no_passkeys")), "{v}");
        let confirm = app
            .sql_strings(
                "SELECT id FROM privilege_requests WHERE kind = 'confirm_passkey' AND target = 'ap' AND status = 'pending'",
                &[],
            )
            .await;
        assert_eq!(confirm.len(), 1, "one confirmation request waits");
        let mut body = json!({"reason": "checked with ap by phone",
                              "passkey": assertion(&ad, &app, &mut admin_key).await});
        let (s, v) = ops_post(
            &ad,
            &app,
            &format!("/ops/v1/privilege-requests/{}/approve", confirm[0]),
            body.take(),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(audit_count(&app, "passkey_confirmed").await, 1);
        let (s, v) = approve(
            &ap,
            &app,
            &id,
            json!({"passkey": assertion(&ap, &app, &mut key).await}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["action"]["status"], "executed", "{v}");
        // A further passkey needs a passkey now, not the password.
        let second = SoftKey::new();
        let (cid, options) = begin(&ap, &app, "/ops/v1/passkeys/registrations").await;
        let (s, v) = ops_post(
            &ap,
            &app,
            "/ops/v1/passkeys",
            json!({"challenge_id": cid, "name": "phone", "credential": second.attest(&options),
                   "password": OPS_PASSWORD}),
        )
        .await;
        assert_eq!((s, code(&v)), (403, Some("passkey_required")), "{v}");
        // Turning the rule off with a password alone: refused; with the admin's passkey: done.
        let (s, v) = put(
            &ad,
            json!({"required": false, "reason": "rollback", "password": OPS_PASSWORD}),
        )
        .await;
        assert_eq!((s, code(&v)), (403, Some("passkey_required")), "{v}");
        let proof = assertion(&ad, &app, &mut admin_key).await;
        let (s, v) = put(
            &ad,
            json!({"required": false, "reason": "rollback", "passkey": proof}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["required"], false);
        assert_eq!(audit_count(&app, "passkeys_required_changed").await, 2);
    }
);
