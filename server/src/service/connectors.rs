//! The connector home: which connector a payment goes to, decided by one rule in one place
//! (DESIGN.md "Connectors and lanes"; issue 33 "A connector home").
//!
//! The rule: a payment is routed at its create by (merchant, payment method) to a named
//! connector, most specific first: the route for the merchant and that method, then the
//! route for the merchant (any method), then the default connector (the sandbox, or
//! `--channel-url`, named [`DEFAULT_CONNECTOR`]). The chosen name is stored on the payment
//! (`payments.connector`), and every later operation on it (charge, query, cancel, refund,
//! and the holds' capture and void) goes to that connector through
//! [`Connectors::for_payment`], whatever the route table says by then. Today's payments have
//! no method, so routes are per merchant; a method is matched once payments carry one.
//!
//! A merchant's own PSP account (issue 38; `converge merchant connector`, the merchants page)
//! is a connector too, named [`account_name`] (`stripe-<merchant id>`), installed from the
//! store by [`Core::refresh_connectors`](super::Core::refresh_connectors) and routed before
//! the command line's routes: merchant and method (`--route`), then the merchant's own
//! account, then the merchant (`--route`), then the default.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;

use crate::channel::{
    AuthorizeOutcome, CancelOutcome, CaptureOutcome, ChargeOutcome, Connector, HoldQueryOutcome,
    QueryOutcome, RefundOutcome, StatementError, Unsupported, VoidOutcome,
};
use crate::store::records::Payment;

/// The default connector's name: the sandbox in-process, or the one at `--channel-url`.
/// Payments created before connectors had names (migration 0124) carry it.
pub const DEFAULT_CONNECTOR: &str = "sandbox";

/// A connector name: 1 to 64 of `a-z`, `0-9`, `-`, `_`. Errors: what is wrong.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "connector name {name:?} must be 1 to 64 of a-z, 0-9, '-', '_'"
        ))
    }
}

/// The named connectors and the route table (cheap to clone: clones share the merchants'
/// accounts, which change while the process runs).
#[derive(Clone)]
pub struct Connectors {
    by_name: BTreeMap<String, Arc<dyn Connector>>,
    default: String,
    /// (merchant id, method or `None` for any method) → connector name.
    routes: HashMap<(i64, Option<String>), String>,
    accounts: Arc<RwLock<Accounts>>,
}

/// The merchants' own PSP accounts installed from the store.
#[derive(Default)]
struct Accounts {
    /// Connector name → (the account's `updated_at`, its connector).
    by_name: BTreeMap<String, (i64, Arc<dyn Connector>)>,
    /// Merchant id → its account's connector name, for accounts that are routed.
    routes: HashMap<i64, String>,
}

/// The connector name of merchant `merchant_id`'s own PSP account of `kind` (`stripe-7`).
pub fn account_name(kind: &str, merchant_id: i64) -> String {
    format!("{kind}-{merchant_id}")
}

/// One merchant account for [`Connectors::install_accounts`].
pub struct Account {
    /// Its connector name ([`account_name`]).
    pub name: String,
    /// The merchant whose account it is.
    pub merchant_id: i64,
    /// Whether the merchant's new payments go to it.
    pub routed: bool,
    /// The stored row's `updated_at`: an unchanged account keeps its connector (and what
    /// that connector has learnt).
    pub stamp: i64,
}

impl std::fmt::Debug for Connectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connectors")
            .field("names", &self.by_name.keys().collect::<Vec<_>>())
            .field("default", &self.default)
            .field("routes", &self.routes)
            .finish()
    }
}

impl Connectors {
    /// One connector, `name`, which is also the default; no routes.
    pub fn single(name: &str, connector: Arc<dyn Connector>) -> Self {
        Self {
            by_name: BTreeMap::from([(name.to_owned(), connector)]),
            default: name.to_owned(),
            routes: HashMap::new(),
            accounts: Arc::default(),
        }
    }

    /// Replaces the merchants' accounts with `accounts`; `build` makes the connector of an
    /// account that is new or changed. One that cannot be built (`None`: its secrets do not
    /// open) stays in place as [`Unconfigured`], routed as it was: its payments, new ones
    /// too, wait undecided instead of going to another connector, and the next install tries
    /// to build it again. Accounts whose name a configured connector already has are ignored.
    pub fn install_accounts(
        &self,
        accounts: Vec<Account>,
        mut build: impl FnMut(&Account) -> Option<Arc<dyn Connector>>,
    ) {
        let mut next = Accounts::default();
        let current = self.accounts.read().unwrap_or_else(|p| p.into_inner());
        for a in accounts {
            if self.by_name.contains_key(&a.name) {
                continue;
            }
            let kept = current
                .by_name
                .get(&a.name)
                .filter(|(stamp, _)| *stamp == a.stamp)
                .map(|(_, c)| c.clone());
            let (stamp, c) = match kept
                .map(|c| (a.stamp, c))
                .or_else(|| build(&a).map(|c| (a.stamp, c)))
            {
                Some(built) => built,
                // A stamp no row has, so the next install builds it again.
                None => (
                    i64::MIN,
                    Arc::new(Unconfigured(a.name.clone())) as Arc<dyn Connector>,
                ),
            };
            if a.routed {
                next.routes.insert(a.merchant_id, a.name.clone());
            }
            next.by_name.insert(a.name, (stamp, c));
        }
        drop(current);
        *self.accounts.write().unwrap_or_else(|p| p.into_inner()) = next;
    }

    /// These connectors with `connector` added as `name` (or replacing the one so named:
    /// tests wrap the real connector this way).
    pub fn with_connector(mut self, name: &str, connector: Arc<dyn Connector>) -> Self {
        self.by_name.insert(name.to_owned(), connector);
        self
    }

    /// These connectors with payments of `merchant_id` (and `method`, or any method for
    /// `None`) routed to `connector`. Errors: `connector` is not one of them.
    pub fn with_route(
        mut self,
        merchant_id: i64,
        method: Option<&str>,
        connector: &str,
    ) -> Result<Self, String> {
        if !self.by_name.contains_key(connector) {
            return Err(format!(
                "route for merchant {merchant_id} names unknown connector {connector:?} (known: {})",
                self.names().join(", ")
            ));
        }
        self.routes.insert(
            (merchant_id, method.map(str::to_owned)),
            connector.to_owned(),
        );
        Ok(self)
    }

    /// The rule: the connector a new payment of `merchant_id` paid by `method` goes to
    /// (merchant and method, then merchant, then the default).
    pub fn route(&self, merchant_id: i64, method: Option<&str>) -> String {
        if let Some(r) = method.and_then(|m| self.routes.get(&(merchant_id, Some(m.to_owned())))) {
            return r.clone();
        }
        let accounts = self.accounts.read().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = accounts.routes.get(&merchant_id) {
            return r.clone();
        }
        self.routes
            .get(&(merchant_id, None))
            .unwrap_or(&self.default)
            .clone()
    }

    /// The connector that took `payment` (the name stored at its create).
    pub fn for_payment(&self, payment: &Payment) -> Arc<dyn Connector> {
        self.named(&payment.connector)
    }

    /// The connector called `name`; one no longer configured answers every operation as
    /// undecidable ([`Unconfigured`]), so its payments wait in UNKNOWN for the operator
    /// instead of being failed on no evidence.
    pub fn named(&self, name: &str) -> Arc<dyn Connector> {
        if let Some(c) = self.by_name.get(name) {
            return c.clone();
        }
        let accounts = self.accounts.read().unwrap_or_else(|p| p.into_inner());
        match accounts.by_name.get(name) {
            Some((_, c)) => c.clone(),
            None => Arc::new(Unconfigured(name.to_owned())),
        }
    }

    /// The default connector's name.
    pub fn default_name(&self) -> &str {
        &self.default
    }

    /// The configured names (then the merchants' accounts), in order.
    pub fn names(&self) -> Vec<String> {
        self.iter().into_iter().map(|(n, _)| n).collect()
    }

    /// Whether a connector is called `name`.
    pub fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
            || self
                .accounts
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .by_name
                .contains_key(name)
    }

    /// The configured connectors (then the merchants' accounts) with their names, in name
    /// order.
    pub fn iter(&self) -> Vec<(String, Arc<dyn Connector>)> {
        let accounts = self.accounts.read().unwrap_or_else(|p| p.into_inner());
        self.by_name
            .iter()
            .map(|(n, c)| (n.clone(), c.clone()))
            .chain(
                accounts
                    .by_name
                    .iter()
                    .map(|(n, (_, c))| (n.clone(), c.clone())),
            )
            .collect()
    }
}

/// A connector name a payment carries that this process has no connector for (a route
/// removed from the configuration while its payments were open). Every answer is an
/// undecidable `Error` naming it, and a statement `Failed`: never a decline, never
/// `Unsupported` (what the missing connector supports is unknown).
#[derive(Debug)]
pub struct Unconfigured(pub String);

impl Unconfigured {
    fn detail(&self) -> String {
        format!("connector {:?} is not configured in this process", self.0)
    }
}

#[async_trait]
impl Connector for Unconfigured {
    async fn charge(&self, _: &str, _: i64, _: &str) -> ChargeOutcome {
        ChargeOutcome::Error {
            detail: self.detail(),
        }
    }
    async fn query(&self, _: &str) -> QueryOutcome {
        QueryOutcome::Error {
            detail: self.detail(),
        }
    }
    async fn cancel(&self, _: &str) -> CancelOutcome {
        CancelOutcome::Error {
            detail: self.detail(),
        }
    }
    async fn refund(&self, _: &str, _: &str, _: i64) -> RefundOutcome {
        RefundOutcome::Error {
            detail: self.detail(),
        }
    }
    async fn authorize(
        &self,
        _: &str,
        _: i64,
        _: &str,
        _: i64,
    ) -> Result<AuthorizeOutcome, Unsupported> {
        Ok(AuthorizeOutcome::Error {
            detail: self.detail(),
        })
    }
    async fn capture(
        &self,
        _: &str,
        _: &str,
        _: i64,
        _: bool,
    ) -> Result<CaptureOutcome, Unsupported> {
        Ok(CaptureOutcome::Error {
            detail: self.detail(),
        })
    }
    async fn void(&self, _: &str) -> Result<VoidOutcome, Unsupported> {
        Ok(VoidOutcome::Error {
            detail: self.detail(),
        })
    }
    async fn query_hold(&self, _: &str) -> Result<HoldQueryOutcome, Unsupported> {
        Ok(HoldQueryOutcome::Error {
            detail: self.detail(),
        })
    }
    async fn statement(&self, _: &str) -> Result<String, StatementError> {
        Err(StatementError::Failed(self.detail()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connectors() -> Connectors {
        let a: Arc<dyn Connector> = Arc::new(Unconfigured("a".into()));
        Connectors::single(DEFAULT_CONNECTOR, a.clone())
            .with_connector("second", a.clone())
            .with_connector("cards", a)
    }

    #[test]
    fn the_most_specific_route_wins_and_the_default_takes_the_rest() {
        let c = connectors()
            .with_route(7, None, "second")
            .unwrap()
            .with_route(7, Some("card"), "cards")
            .unwrap();
        assert_eq!(c.route(7, Some("card")), "cards");
        assert_eq!(c.route(7, Some("wallet")), "second");
        assert_eq!(c.route(7, None), "second");
        assert_eq!(c.route(8, Some("card")), DEFAULT_CONNECTOR);
        assert_eq!(c.route(8, None), DEFAULT_CONNECTOR);
    }

    #[test]
    fn a_route_to_an_unknown_connector_is_refused() {
        let e = connectors().with_route(1, None, "stripe").unwrap_err();
        assert!(e.contains("unknown connector \"stripe\""), "{e}");
    }

    #[tokio::test]
    async fn a_payment_on_a_connector_no_longer_configured_gets_undecidable_answers() {
        let c = connectors().named("gone");
        assert!(matches!(
            c.charge("k", 1, "CNY").await,
            ChargeOutcome::Error { .. }
        ));
        assert!(matches!(c.query("k").await, QueryOutcome::Error { .. }));
        assert!(matches!(c.cancel("k").await, CancelOutcome::Error { .. }));
        assert!(matches!(c.void("k").await, Ok(VoidOutcome::Error { .. })));
        assert!(matches!(
            c.statement("2026-12-01").await,
            Err(StatementError::Failed(_))
        ));
    }

    #[tokio::test]
    async fn a_merchant_account_that_cannot_be_built_keeps_its_route_and_answers_undecidable() {
        let c = connectors();
        let account = |stamp| Account {
            name: account_name("stripe", 9),
            merchant_id: 9,
            routed: true,
            stamp,
        };
        c.install_accounts(vec![account(1)], |_| None);
        assert_eq!(
            c.route(9, None),
            "stripe-9",
            "never the default on no evidence"
        );
        assert!(matches!(
            c.named("stripe-9").charge("k", 1, "USD").await,
            ChargeOutcome::Error { .. }
        ));
        // The next install builds it again, and an unchanged one is kept as built.
        let mut built = 0;
        let real: Arc<dyn Connector> = Arc::new(Unconfigured("real".into()));
        for _ in 0..2 {
            c.install_accounts(vec![account(1)], |_| {
                built += 1;
                Some(real.clone())
            });
        }
        assert_eq!(built, 1);
        assert!(c.has("stripe-9"));
        c.install_accounts(
            vec![Account {
                routed: false,
                ..account(2)
            }],
            |_| Some(real.clone()),
        );
        assert_eq!(
            c.route(9, None),
            DEFAULT_CONNECTOR,
            "unrouted: back to the default"
        );
        assert!(c.has("stripe-9"), "kept for the payments made on it");
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("sandbox").is_ok());
        assert!(check_name("psp-2_b").is_ok());
        for bad in ["", "Sandbox", "a b", "x/y", &"n".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
