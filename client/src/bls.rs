//! BLS keys of participants: the key file a participant keeps, and `MsgRegisterBlsKey`.

use std::path::Path;

use anyhow::{Context, Result};
use cosmrs::Any;
use gonka_bls_crypto::SecretKey;
use gonka_proto::bls::MsgRegisterBlsKey;
use gonka_proto::signing::bls_pop_bytes;
use k256::elliptic_curve::rand_core::{OsRng, RngCore};
use prost::{Message, Name};

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
    Any {
        type_url: format!("/{}", MsgRegisterBlsKey::full_name()),
        value: msg.encode_to_vec(),
    }
}

/// The BLS secret key in the file at `path` (64 hex characters of a big-endian scalar), or a
/// fresh random one written there first (mode 0600 on Unix) when the file does not exist.
/// Keep the file: a validator that loses it loses its shares of every group key.
pub fn load_or_create_key(path: &Path) -> Result<SecretKey> {
    if path.exists() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the BLS key file {}", path.display()))?;
        let bytes: [u8; 32] = hex::decode(text.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .with_context(|| {
                format!(
                    "{} must hold 64 hex characters of a BLS secret key",
                    path.display()
                )
            })?;
        return SecretKey::from_bytes(&bytes).with_context(|| {
            format!(
                "{} holds no valid BLS secret key (zero or not below the group order)",
                path.display()
            )
        });
    }
    let mut seed = [0u8; 32];
    OsRng.fill_bytes(&mut seed);
    let key = SecretKey::from_seed(&seed);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_private(path, &hex::encode(key.to_bytes()))?;
    Ok(key)
}

#[cfg(unix)]
fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating the BLS key file {}", path.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing the BLS key file {}", path.display()))
}

#[cfg(not(unix))]
fn write_private(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_bls_crypto::{PublicKey, Signature};

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
    fn a_key_file_is_created_once_and_read_back() {
        let dir = std::env::temp_dir().join(format!("gonka-bls-key-{}", std::process::id()));
        let path = dir.join("bls_key");
        let _ = std::fs::remove_dir_all(&dir);
        let created = load_or_create_key(&path).unwrap();
        let read = load_or_create_key(&path).unwrap();
        assert_eq!(created.public_key(), read.public_key());
        std::fs::write(&path, "zz").unwrap();
        let err = load_or_create_key(&path).unwrap_err().to_string();
        assert!(err.contains("64 hex characters"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
