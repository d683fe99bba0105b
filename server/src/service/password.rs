//! Password hashing with argon2id at OWASP's parameters (m = 19456 KiB, t = 2, p = 1; OWASP
//! Password Storage Cheat Sheet), off the async threads and bounded: at most `permits`
//! hashes run at once, so a burst of logins queues instead of stalling the server.

use std::sync::Arc;

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use tokio::sync::Semaphore;

/// The bounds, in characters: a domain rule the OpenAPI schema (`schema.rs`) states too.
pub use crate::domain::password::{MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS};

fn argon2() -> Argon2<'static> {
    let params = Params::new(19_456, 2, 1, None).expect("OWASP argon2id parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Why a new password is refused.
pub fn check_new_password(password: &str) -> Result<(), String> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(format!(
            "password must have at least {MIN_PASSWORD_CHARS} characters"
        ));
    }
    if password.chars().count() > MAX_PASSWORD_CHARS {
        return Err(format!(
            "password must be at most {MAX_PASSWORD_CHARS} characters"
        ));
    }
    Ok(())
}

/// Hashes and verifies passwords on the blocking pool, a bounded number at a time.
#[derive(Debug, Clone)]
pub struct PasswordHasherPool {
    permits: Arc<Semaphore>,
    /// A real hash of a random password: unknown users are verified against it so that they
    /// take as long as a wrong password.
    dummy: Arc<String>,
}

impl PasswordHasherPool {
    /// A pool running at most `permits` hashes at once.
    pub fn new(permits: usize) -> Self {
        let salt = SaltString::generate(&mut OsRng);
        let dummy = argon2()
            .hash_password(crate::service::ids::new_token().as_bytes(), &salt)
            .map(|h| h.to_string())
            .unwrap_or_default();
        PasswordHasherPool {
            permits: Arc::new(Semaphore::new(permits.max(1))),
            dummy: Arc::new(dummy),
        }
    }

    /// The argon2id PHC string of `password`.
    pub async fn hash(&self, password: &str) -> Result<String, String> {
        let _permit = self.permits.acquire().await.map_err(|e| e.to_string())?;
        let password = password.to_string();
        tokio::task::spawn_blocking(move || {
            let salt = SaltString::generate(&mut OsRng);
            argon2()
                .hash_password(password.as_bytes(), &salt)
                .map(|h| h.to_string())
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// True when `password` matches `phc`. With `phc` None (unknown user) a dummy hash is
    /// verified anyway and the answer is false, in about the same time.
    pub async fn verify(&self, password: &str, phc: Option<&str>) -> bool {
        let Ok(_permit) = self.permits.acquire().await else {
            return false;
        };
        let known = phc.is_some();
        let phc = phc.map_or_else(|| self.dummy.to_string(), str::to_string);
        let password = password.to_string();
        let matched = tokio::task::spawn_blocking(move || {
            PasswordHash::new(&phc)
                .is_ok_and(|h| argon2().verify_password(password.as_bytes(), &h).is_ok())
        })
        .await
        .unwrap_or(false);
        known && matched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_its_password_only() {
        let pool = PasswordHasherPool::new(2);
        let h = pool.hash("correct horse battery").await.unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(pool.verify("correct horse battery", Some(&h)).await);
        assert!(!pool.verify("wrong horse battery", Some(&h)).await);
        assert!(
            !pool.verify("correct horse battery", None).await,
            "unknown user never matches"
        );
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(check_new_password("short").is_err());
        assert!(check_new_password("long enough password").is_ok());
        assert!(check_new_password(&"x".repeat(300)).is_err());
    }
}
