//! Who acts, for the audit log: one type for every audited change, whoever makes it (a console
//! user, a merchant through the API, an operator at the command line, converge itself), so
//! each audit record names its actor the same way (DESIGN.md "Audit log").

use crate::store::AuditEntry;

/// The actor of an audited change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// A console username, `merchant:<name>`, `cli:<os user>`, or `system`.
    pub username: String,
    /// Console roles, comma-separated; empty for the others.
    pub roles: String,
    /// Request metadata, JSON text (a console request's client address and trace id, `{"via":
    /// "cli"}`, or `{}`). Hashed into the audit chain with the rest of the record.
    pub meta: String,
}

impl Actor {
    /// converge itself (an endpoint disabled after a 410 or a run of failures).
    pub fn system() -> Self {
        Actor {
            username: "system".into(),
            roles: String::new(),
            meta: "{}".into(),
        }
    }

    /// A merchant changing its own settings through the API (`merchant:<name>`).
    pub fn merchant(name: &str) -> Self {
        Actor {
            username: format!("merchant:{name}"),
            roles: String::new(),
            meta: "{}".into(),
        }
    }

    /// A console user `username` with `roles` (comma-separated) acting from client address
    /// `addr`. The current request's trace id rides in the hashed metadata
    /// (`{"addr": .., "trace_id": ..}`), so an audit record leads to the payment events and
    /// log lines of the same request (seed 004 §8.4).
    pub fn console(username: &str, roles: &str, addr: &str) -> Self {
        Actor {
            username: username.into(),
            roles: roles.into(),
            meta: match crate::telemetry::current_trace() {
                Some(trace_id) => serde_json::json!({"addr": addr, "trace_id": trace_id}),
                None => serde_json::json!({"addr": addr}),
            }
            .to_string(),
        }
    }

    /// An operator at the command line (`cli:<os user>`, meta `{"via":"cli"}`).
    pub fn cli(os_user: &str) -> Self {
        Actor {
            username: format!("cli:{os_user}"),
            roles: String::new(),
            meta: r#"{"via":"cli"}"#.into(),
        }
    }

    /// An audit entry by this actor at `at` (epoch ms UTC); `before` and `after` are JSON
    /// text of the target's state.
    pub fn entry(
        &self,
        at: i64,
        action: &str,
        target: &str,
        reason: &str,
        before: String,
        after: String,
    ) -> AuditEntry {
        AuditEntry {
            at,
            actor: self.username.clone(),
            roles: self.roles.clone(),
            action: action.into(),
            target: target.into(),
            reason: reason.into(),
            before,
            after,
            meta: self.meta.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cli_actor_carries_its_channel_in_the_hashed_meta() {
        let a = Actor::cli("ana");
        assert_eq!(a.username, "cli:ana");
        let meta: serde_json::Value = serde_json::from_str(&a.meta).unwrap();
        assert_eq!(meta, serde_json::json!({"via": "cli"}));
        let e = a.entry(
            5,
            "merchant.create",
            "merchant:acme",
            "",
            "{}".into(),
            "{}".into(),
        );
        assert_eq!(
            (e.actor.as_str(), e.at, e.meta.as_str()),
            ("cli:ana", 5, a.meta.as_str())
        );
    }
}
