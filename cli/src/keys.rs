//! `gonkad keys`: a file keyring of BIP-39 mnemonics (`<home>/keyring.json`, mode 0600).
//!
//! Like the Cosmos SDK's `test` backend, mnemonics are stored unencrypted: protect the
//! file, or keep real funds in a hardware wallet.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gonka_client::keys::{generate_mnemonic, normalize_mnemonic, HD_PATH};
use gonka_client::Key;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::Global;

/// `gonkad keys` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Create a new key from a fresh 24-word mnemonic (printed once: write it down).
    Add {
        /// Name of the key.
        name: String,
    },
    /// List stored keys.
    List,
    /// Show a key's address.
    Show {
        /// Name of the key.
        name: String,
    },
    /// Import a key from a mnemonic read from standard input (or --mnemonic).
    Import {
        /// Name of the key.
        name: String,
        /// The mnemonic; prefer standard input so it stays out of shell history.
        #[arg(long)]
        mnemonic: Option<String>,
    },
    /// Print a key's mnemonic (or its raw secp256k1 private key, for signing libraries that
    /// take one, e.g. the Python example in the README).
    Export {
        /// Name of the key.
        name: String,
        /// Print the hex of the 32-byte private key instead of the mnemonic.
        #[arg(long)]
        private_key: bool,
    },
}

#[derive(Serialize, Deserialize, Default)]
struct Keyring {
    keys: Vec<StoredKey>,
}

#[derive(Serialize, Deserialize, Clone)]
struct StoredKey {
    name: String,
    address: String,
    mnemonic: String,
}

fn keyring_path(home: &Path) -> PathBuf {
    home.join("keyring.json")
}

fn load(home: &Path) -> Result<Keyring> {
    let path = keyring_path(home);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("keyring {} is corrupt", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Keyring::default()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn save(home: &Path, keyring: &Keyring) -> Result<()> {
    std::fs::create_dir_all(home).with_context(|| format!("cannot create {}", home.display()))?;
    let path = keyring_path(home);
    let tmp = path.with_extension("json.tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(&serde_json::to_vec_pretty(keyring)?)?;
    file.sync_all()?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot replace {}", path.display()))
}

/// Loads the key called `name` from the keyring under `home`.
pub fn load_key(home: &Path, name: &str) -> Result<Key> {
    let keyring = load(home)?;
    let stored = keyring.keys.iter().find(|k| k.name == name).with_context(|| {
        format!(
            "no key named {name:?} in {}; create one with `gonkad keys add {name}` or import it with `gonkad keys import {name}`",
            keyring_path(home).display()
        )
    })?;
    Key::from_mnemonic(&stored.mnemonic)
}

fn insert(home: &Path, name: &str, mnemonic: &str) -> Result<StoredKey> {
    let mut keyring = load(home)?;
    if keyring.keys.iter().any(|k| k.name == name) {
        bail!("a key named {name:?} already exists; pick another name");
    }
    let mnemonic = normalize_mnemonic(mnemonic)?;
    let stored = StoredKey {
        name: name.to_string(),
        address: Key::from_mnemonic(&mnemonic)?.address().to_string(),
        mnemonic,
    };
    keyring.keys.push(stored.clone());
    keyring.keys.sort_by(|a, b| a.name.cmp(&b.name));
    save(home, &keyring)?;
    Ok(stored)
}

/// Stores `mnemonic` as `name` unless a key of that name exists already (then it is left
/// alone). Returns whether it was stored.
pub fn import_if_absent(home: &Path, name: &str, mnemonic: &str) -> Result<bool> {
    if load(home)?.keys.iter().any(|k| k.name == name) {
        return Ok(false);
    }
    insert(home, name, mnemonic)?;
    Ok(true)
}

/// Runs a `gonkad keys` subcommand.
pub fn run(global: &Global, command: Command) -> Result<()> {
    let home = global.home();
    let out = global.output;
    match command {
        Command::Add { name } => {
            let key = insert(&home, &name, &generate_mnemonic())?;
            out.print(
                json!({"name": key.name, "address": key.address, "mnemonic": key.mnemonic, "hd_path": HD_PATH}),
                || format!(
                    "name: {}\naddress: {}\n\nWrite this mnemonic down; it is the only way to recover the key:\n{}",
                    key.name, key.address, key.mnemonic
                ),
            );
        }
        Command::List => {
            let keyring = load(&home)?;
            let rows: Vec<_> = keyring
                .keys
                .iter()
                .map(|k| json!({"name": k.name, "address": k.address}))
                .collect();
            out.print(json!(rows), || {
                if keyring.keys.is_empty() {
                    "no keys yet; create one with `gonkad keys add NAME`".into()
                } else {
                    keyring
                        .keys
                        .iter()
                        .map(|k| format!("{}\t{}", k.name, k.address))
                        .collect::<Vec<_>>()
                        .join("\n")
                }
            });
        }
        Command::Show { name } => {
            let key = load_key(&home, &name)?;
            out.print(
                json!({"name": name, "address": key.address(), "pub_key": hex::encode(key.public_key().to_bytes())}),
                || key.address().to_string(),
            );
        }
        Command::Import { name, mnemonic } => {
            let mnemonic = match mnemonic {
                Some(m) => m,
                None => {
                    let mut text = String::new();
                    std::io::stdin().read_to_string(&mut text)?;
                    text
                }
            };
            let key = insert(&home, &name, &mnemonic)?;
            out.print(json!({"name": key.name, "address": key.address}), || {
                format!("imported {} as {}", key.address, key.name)
            });
        }
        Command::Export { name, private_key } => {
            let keyring = load(&home)?;
            let key = keyring
                .keys
                .iter()
                .find(|k| k.name == name)
                .with_context(|| format!("no key named {name:?}; see `gonkad keys list`"))?;
            eprintln!(
                "warning: anyone who sees this secret controls {}",
                key.address
            );
            if private_key {
                let secret = Key::from_mnemonic(&key.mnemonic)?.secret_bytes();
                let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
                out.print(
                    json!({"name": key.name, "address": key.address, "private_key": hex}),
                    || hex.clone(),
                );
            } else {
                out.print(json!({"name": key.name, "mnemonic": key.mnemonic}), || {
                    key.mnemonic.clone()
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyring_is_private_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let mnemonic = gonka_client::keys::well_known_mnemonic("keys-test");
        let stored = insert(dir.path(), "alice", &format!("  {mnemonic}\n")).unwrap();
        let mode = std::fs::metadata(keyring_path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            load_key(dir.path(), "alice").unwrap().address(),
            stored.address
        );
        assert!(insert(dir.path(), "alice", &mnemonic).is_err());
        let missing = load_key(dir.path(), "bob").err().unwrap().to_string();
        assert!(missing.contains("gonkad keys add bob"), "{missing}");
    }
}
