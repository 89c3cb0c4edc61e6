//! BLS keys of participants: the key file a participant keeps, and `MsgRegisterBlsKey`.

use std::path::Path;

use crate::tx::any_of;
use anyhow::{Context, Result};
use cosmrs::Any;
use gonka_bls_crypto::dkg::Ephemeral;
use gonka_bls_crypto::threshold::Polynomial;
use gonka_bls_crypto::PublicKey;
use gonka_bls_crypto::SecretKey;
use gonka_proto::bls::{DkgRound, MsgDkgComplain, MsgDkgDeal, MsgDkgReveal, MsgRegisterBlsKey};
use gonka_proto::signing::{bls_pop_bytes, dkg_dealing_context};
use sha2::{Digest, Sha256};

use crate::keys::Key;

pub use gonka_bls_crypto as crypto;

/// `/gonka.bls.v1.MsgRegisterBlsKey`: `address` registers `key`'s public key on chain
/// `chain_id`, with its proof of possession over `gonka/bls-pop/v1`.
pub fn msg_register_bls_key(address: &str, chain_id: &str, key: &SecretKey) -> Any {
    let pubkey = key.public_key().to_bytes();
    let proof = key.prove_possession(&bls_pop_bytes(chain_id, address, &pubkey));
    let msg = MsgRegisterBlsKey {
        address: address.into(),
        pubkey: pubkey.to_vec(),
        proof_of_possession: proof.to_bytes().to_vec(),
    };
    any_of(&msg)
}

/// `/gonka.bls.v1.MsgDkgDeal`: `dealer` deals `poly` in `round`, each slot's share encrypted
/// to its holder's key with `ephemeral`. `None` if a member's key does not decode.
pub fn msg_dkg_deal(
    chain_id: &str,
    round: &DkgRound,
    dealer: &str,
    poly: &Polynomial,
    ephemeral: &Ephemeral,
) -> Option<Any> {
    let context = dkg_dealing_context(chain_id, round.id, dealer);
    let mut shares = Vec::with_capacity(round.total_slots as usize);
    for member in &round.members {
        let key = PublicKey::from_bytes(&member.pubkey)?;
        for slot in member.first_slot..member.first_slot + member.slots {
            shares.push(
                ephemeral
                    .encrypt(&key, &poly.share(slot), &context)
                    .to_vec(),
            );
        }
    }
    Some(any_of(&MsgDkgDeal {
        dealer: dealer.into(),
        round: round.id,
        commitments: poly.commitments().to_bytes(),
        ephemeral: ephemeral.public().to_bytes().to_vec(),
        shares,
    }))
}

/// `/gonka.bls.v1.MsgDkgComplain`: `complainer` says `dealer`'s shares to it do not verify.
pub fn msg_dkg_complain(round: u64, complainer: &str, dealer: &str) -> Any {
    any_of(&MsgDkgComplain {
        complainer: complainer.into(),
        round,
        dealer: dealer.into(),
    })
}

/// `/gonka.bls.v1.MsgDkgReveal`: `dealer` answers `complainer` (whose key is
/// `complainer_key`) by revealing the Diffie–Hellman point of its shares to it, with the
/// proof.
pub fn msg_dkg_reveal(
    round: u64,
    dealer: &str,
    complainer: &str,
    complainer_key: &PublicKey,
    ephemeral: &Ephemeral,
) -> Any {
    let (shared, proof) = ephemeral.reveal(complainer_key);
    any_of(&MsgDkgReveal {
        dealer: dealer.into(),
        round,
        complainer: complainer.into(),
        shared_point: shared.to_bytes().to_vec(),
        proof: proof.to_vec(),
    })
}

/// Domain of [`account_bls_key`].
const ACCOUNT_BLS_DOMAIN: &[u8] = b"gonka/bls-key/v1";

/// The BLS key an account derives from its secp256k1 secret key:
/// `SecretKey::from_seed(SHA-256("gonka/bls-key/v1" ‖ secret))`. The same account always
/// gets the same BLS key (recoverable from its mnemonic, and known to whoever writes a
/// genesis for well-known test accounts); the hash does not reveal the account key.
pub fn account_bls_key(account: &Key) -> SecretKey {
    let seed: [u8; 32] = Sha256::new()
        .chain_update(ACCOUNT_BLS_DOMAIN)
        .chain_update(account.secret_bytes())
        .finalize()
        .into();
    SecretKey::from_seed(&seed)
}

/// The BLS secret key in the file at `path` (64 hex characters of a big-endian scalar), or
/// `account`'s derived key ([`account_bls_key`]) written there first (mode 0600 on Unix) when
/// the file does not exist. Keep the file: the shares of every group key are tied to it.
pub fn load_or_create_key(path: &Path, account: &Key) -> Result<SecretKey> {
    let bytes = load_or_create_secret(path, || account_bls_key(account).to_bytes())?;
    SecretKey::from_bytes(&bytes).with_context(|| {
        format!(
            "{} holds no valid BLS secret key (zero or not below the group order)",
            path.display()
        )
    })
}

/// The `N` secret bytes kept hex-encoded in the file at `path`, or `make()`'s, written there
/// first ([`write_secret_file`], creating the directory) when the file does not exist.
pub fn load_or_create_secret<const N: usize>(
    path: &Path,
    make: impl FnOnce() -> [u8; N],
) -> Result<[u8; N]> {
    if !path.exists() {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        write_secret_file(path, &hex::encode(make()))?;
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the secret file {}", path.display()))?;
    hex::decode(text.trim())
        .ok()
        .and_then(|b| b.try_into().ok())
        .with_context(|| format!("{} must hold {} hex characters", path.display(), 2 * N))
}

/// Writes `text` as a new secret file at `path`: readable by its owner only (Unix), synced,
/// and in place all at once (written beside it, then renamed), so a crash leaves either no
/// file or the whole one. Refuses to replace an existing file: secrets are never overwritten.
fn write_secret_file(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    if path.exists() {
        anyhow::bail!(
            "{} exists; a secret file is never overwritten",
            path.display()
        );
    }
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("moving the new file to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_bls_crypto::{PublicKey, Signature};
    use prost::Message;

    #[test]
    fn the_registration_proves_possession_for_this_chain_and_address_only() {
        let key = SecretKey::from_seed(&[9; 32]);
        let any = msg_register_bls_key("gonka1a", "c", &key);
        let msg = MsgRegisterBlsKey::decode(any.value.as_slice()).unwrap();
        let pubkey = PublicKey::from_bytes(&msg.pubkey).unwrap();
        let proof = Signature::from_bytes(&msg.proof_of_possession).unwrap();
        assert!(pubkey.verify_possession(&bls_pop_bytes("c", "gonka1a", &msg.pubkey), &proof));
        assert!(!pubkey.verify_possession(&bls_pop_bytes("c", "gonka1b", &msg.pubkey), &proof));
        assert!(!pubkey.verify_possession(&bls_pop_bytes("d", "gonka1a", &msg.pubkey), &proof));
    }

    #[test]
    fn a_key_file_is_created_once_from_the_account_and_read_back() {
        let dir = std::env::temp_dir().join(format!("gonka-bls-key-{}", std::process::id()));
        let path = dir.join("bls_key");
        let _ = std::fs::remove_dir_all(&dir);
        let account = Key::from_mnemonic(&crate::keys::well_known_mnemonic("bls")).unwrap();
        let other = Key::from_mnemonic(&crate::keys::well_known_mnemonic("other")).unwrap();
        let created = load_or_create_key(&path, &account).unwrap();
        assert_eq!(created.public_key(), account_bls_key(&account).public_key());
        assert_ne!(created.public_key(), account_bls_key(&other).public_key());
        let read = load_or_create_key(&path, &other).unwrap();
        assert_eq!(created.public_key(), read.public_key(), "the file wins");
        std::fs::write(&path, "zz").unwrap();
        let err = load_or_create_key(&path, &account).unwrap_err().to_string();
        assert!(err.contains("64 hex characters"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
