//! The key that seals the vaults a redacting route keeps along a `/v1/responses` chain, so the
//! values a store holds are never at rest in the clear.
//!
//! A vault's values are sealed with AES-256-GCM under a fresh random nonce each time, and the
//! sealed bytes are bound to the (tenant, response id) they are kept under (the AEAD's
//! associated data): bytes copied under another tenant's or another response's key do not open.
//! The key is the router's: generated at start when the operator gives none (a `memory` store,
//! one process), or read from the file `--vault-key-file` or `SRC_VAULT_KEY_FILE` names (64
//! hexadecimal digits,
//! `openssl rand -hex 32`), which every router sharing a Redis store must be given so that a
//! chain sealed by one opens on another.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::Value;
use src_compiler::pii::{EntityType, Kind, Vault};

/// The first byte of sealed bytes: their layout (version, nonce, sealed values and tag).
const VERSION: u8 = 1;

/// Why the vault key cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum VaultKeyError {
    #[error("cannot read the vault key file `{}`: {cause}", .path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(
        "the vault key file `{}` must hold 64 hexadecimal digits (32 bytes, \
         e.g. `openssl rand -hex 32`)", .0.display()
    )]
    Malformed(PathBuf),
    #[error("cannot make a vault key: the system's random source failed")]
    Random,
}

/// The router's key for sealing vaults.
pub struct VaultKey {
    key: LessSafeKey,
    random: SystemRandom,
    /// The operator gave it (routers sharing a store can open each other's vaults).
    supplied: bool,
}

impl std::fmt::Debug for VaultKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VaultKey")
            .field("supplied", &self.supplied)
            .finish_non_exhaustive()
    }
}

impl VaultKey {
    /// A key of this process only.
    pub fn generate() -> Result<VaultKey, VaultKeyError> {
        let random = SystemRandom::new();
        let mut bytes = [0u8; 32];
        random.fill(&mut bytes).map_err(|_| VaultKeyError::Random)?;
        VaultKey::of(&bytes, random, false).ok_or(VaultKeyError::Random)
    }

    /// The key written in the file at `path` (64 hexadecimal digits; spaces around are ignored).
    pub fn from_file(path: &Path) -> Result<VaultKey, VaultKeyError> {
        let text = std::fs::read_to_string(path).map_err(|cause| VaultKeyError::Read {
            path: path.to_owned(),
            cause,
        })?;
        let malformed = || VaultKeyError::Malformed(path.to_owned());
        let bytes = from_hex(text.trim()).ok_or_else(malformed)?;
        VaultKey::of(&bytes, SystemRandom::new(), true).ok_or_else(malformed)
    }

    fn of(bytes: &[u8], random: SystemRandom, supplied: bool) -> Option<VaultKey> {
        let key = UnboundKey::new(&AES_256_GCM, bytes).ok()?;
        Some(VaultKey {
            key: LessSafeKey::new(key),
            random,
            supplied,
        })
    }

    /// Whether the operator gave the key (rather than this process making it).
    pub fn supplied(&self) -> bool {
        self.supplied
    }

    /// `vault`'s values sealed for keeping under (`tenant`, `id`); `None` when the random
    /// source fails (the vault is then not kept).
    pub fn seal(&self, tenant: &str, id: &str, vault: &Vault) -> Option<Bytes> {
        let values: Vec<Value> = vault
            .values()
            .map(|(kind, value)| Value::from(vec![kind.name(), value]))
            .collect();
        let mut sealed = serde_json::to_vec(&values).ok()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).ok()?;
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(associated(tenant, id)),
                &mut sealed,
            )
            .ok()?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Some(Bytes::from(out))
    }

    /// The vault sealed in `sealed` under (`tenant`, `id`); `None` when it does not open with
    /// this key there (another key, another tenant's or response's bytes, altered bytes).
    pub fn open(&self, tenant: &str, id: &str, sealed: &[u8]) -> Option<Vault> {
        let (&version, rest) = sealed.split_first()?;
        if version != VERSION || rest.len() < NONCE_LEN {
            return None;
        }
        let (nonce, body) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut body = body.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(associated(tenant, id)), &mut body)
            .ok()?;
        let values: Vec<(String, String)> = serde_json::from_slice(plain).ok()?;
        let typed = values
            .iter()
            .map(|(kind, value)| (kind_named(kind), value.as_str()));
        Some(Vault::resume(typed))
    }
}

/// The placeholder kind a sealed vault names: a built-in type by its name, else a detector's
/// entity type as its labels write it.
fn kind_named(name: &str) -> Kind {
    EntityType::from_name(name).map_or_else(|| Kind::Entity(name.into()), Kind::Pii)
}

/// The associated data of a vault kept under (`tenant`, `id`): a length-prefixed tenant, so
/// no (tenant, id) pair spells another's.
fn associated(tenant: &str, id: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(16 + tenant.len() + id.len());
    aad.extend_from_slice(b"sr-vault-v1");
    aad.extend_from_slice(&(tenant.len() as u64).to_be_bytes());
    aad.extend_from_slice(tenant.as_bytes());
    aad.extend_from_slice(id.as_bytes());
    aad
}

/// 32 bytes from 64 hexadecimal digits.
fn from_hex(text: &str) -> Option<[u8; 32]> {
    let digits = text.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use src_compiler::pii::Redact;

    fn vault() -> Vault {
        let redact = Redact::new(&[EntityType::Email, EntityType::CreditCard])
            .unwrap_or_else(|e| panic!("{e}"));
        let mut vault = Vault::new();
        vault.redact(&redact, "ann@example.com pays with 4111 1111 1111 1111");
        vault
    }

    fn key() -> VaultKey {
        VaultKey::generate().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_sealed_vault_opens_only_with_its_key_tenant_and_id() {
        let key = key();
        let sealed = key.seal("t1", "resp_1", &vault());
        let sealed = sealed.unwrap_or_default();
        let text = String::from_utf8_lossy(&sealed);
        assert!(!text.contains("ann@example.com") && !text.contains("4111"));
        let opened = key.open("t1", "resp_1", &sealed);
        let values: Vec<(Kind, String)> = opened
            .iter()
            .flat_map(|v| {
                v.values()
                    .map(|(k, s)| (k.clone(), s.to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            values,
            vec![
                (Kind::Pii(EntityType::Email), "ann@example.com".to_owned()),
                (
                    Kind::Pii(EntityType::CreditCard),
                    "4111 1111 1111 1111".to_owned()
                )
            ]
        );
        assert!(key.open("t2", "resp_1", &sealed).is_none());
        assert!(key.open("t1", "resp_2", &sealed).is_none());
        assert!(self::key().open("t1", "resp_1", &sealed).is_none());
        let mut altered = sealed.to_vec();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert!(key.open("t1", "resp_1", &altered).is_none());
        // Each seal draws its own nonce.
        assert_ne!(key.seal("t1", "resp_1", &vault()), Some(sealed));
    }

    #[test]
    fn a_detectors_types_come_back_as_theirs_and_keep_their_placeholders() {
        let key = key();
        let person: Kind = Kind::Entity("PERSON".into());
        let kept = Vault::resume([
            (Kind::Pii(EntityType::Email), "ann@example.com"),
            (person.clone(), "Ann Lee"),
        ]);
        let sealed = key.seal("t1", "resp_1", &kept).unwrap_or_default();
        let opened = key
            .open("t1", "resp_1", &sealed)
            .unwrap_or_else(|| panic!("the vault did not open"));
        let values: Vec<(Kind, &str)> = opened.values().map(|(k, v)| (k.clone(), v)).collect();
        assert_eq!(
            values,
            vec![
                (Kind::Pii(EntityType::Email), "ann@example.com"),
                (person, "Ann Lee")
            ]
        );
        assert_eq!(
            opened.restore("<PERSON_1> wrote from <EMAIL_1>", false),
            Some("Ann Lee wrote from ann@example.com".to_owned())
        );
    }

    #[test]
    fn a_key_file_holds_sixty_four_hex_digits() {
        let dir = std::env::temp_dir().join(format!("sr-vault-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let good = dir.join("good");
        std::fs::write(&good, format!("{}\n", "ab".repeat(32))).unwrap_or_else(|e| panic!("{e}"));
        let one = VaultKey::from_file(&good).unwrap_or_else(|e| panic!("{e}"));
        let two = VaultKey::from_file(&good).unwrap_or_else(|e| panic!("{e}"));
        assert!(one.supplied());
        let sealed = one.seal("t", "r", &vault()).unwrap_or_default();
        assert!(two.open("t", "r", &sealed).is_some());
        let short = dir.join("short");
        std::fs::write(&short, "abcd").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            VaultKey::from_file(&short),
            Err(VaultKeyError::Malformed(_))
        ));
        assert!(matches!(
            VaultKey::from_file(&dir.join("none")),
            Err(VaultKeyError::Read { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
