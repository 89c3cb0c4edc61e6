//! `gonkad keys`: a keyring of BIP-39 mnemonics in the home directory (mode 0600), with
//! two backends, as in the Cosmos SDK:
//!
//! - **`file`** (the default): `<home>/keyring-file.json`. Each mnemonic is sealed with
//!   ChaCha20-Poly1305 under a key derived from the keyring's passphrase by Argon2id
//!   (19 MiB, 2 passes: OWASP's minimum for Argon2id), with its own random salt and nonce;
//!   the key's name and address are authenticated with it, so sealed entries cannot be
//!   swapped between names. Names and addresses stay readable (`keys list` and `keys show`
//!   need no passphrase). The passphrase is asked on the terminal, or read from
//!   `GONKA_KEYRING_PASSPHRASE` for scripts; one passphrase per keyring (a new key must
//!   open the keys already there).
//! - **`test`**: `<home>/keyring-test.json`, unencrypted, for local test networks only
//!   (`gonkad localnet` imports its public test accounts there). Chosen explicitly with
//!   `--keyring-backend test` or `GONKA_KEYRING_BACKEND=test`.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use chacha20poly1305::aead::rand_core::RngCore;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::ChaCha20Poly1305;
use gonka_client::keys::{generate_mnemonic, normalize_mnemonic, HD_PATH};
use gonka_client::Key;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::Global;

/// `gonkad keys` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Create a new key from a fresh 24-word mnemonic (printed once: write it down), or with
    /// --recover from an existing mnemonic read from standard input (as `keys import`).
    Add {
        /// Name of the key.
        name: String,
        /// Recover the key from a mnemonic read from standard input (the Cosmos SDK's
        /// spelling of `keys import`).
        #[arg(long)]
        recover: bool,
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

/// Where a keyring keeps its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// Encrypted with a passphrase (`<home>/keyring-file.json`).
    File,
    /// Unencrypted (`<home>/keyring-test.json`): local test networks only.
    Test,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::File => "file",
            Backend::Test => "test",
        }
    }

    fn path(self, home: &Path) -> PathBuf {
        home.join(format!("keyring-{}.json", self.name()))
    }
}

/// The environment variable a script gives the `file` keyring's passphrase in.
pub const PASSPHRASE_ENV: &str = "GONKA_KEYRING_PASSPHRASE";

/// Shortest passphrase the `file` backend takes (as the Cosmos SDK's).
const MIN_PASSPHRASE: usize = 8;

/// A keyring: the backend's file under a home directory.
#[derive(Clone)]
pub struct Keyring {
    home: PathBuf,
    backend: Backend,
    /// The `file` backend's passphrase when given (`GONKA_KEYRING_PASSPHRASE`); asked on
    /// the terminal when `None`.
    passphrase: Option<String>,
}

#[derive(Serialize, Deserialize, Default)]
struct Stored {
    keys: Vec<StoredKey>,
}

#[derive(Serialize, Deserialize, Clone)]
struct StoredKey {
    name: String,
    address: String,
    /// Hex of the compressed secp256k1 public key.
    pub_key: String,
    /// The mnemonic, in the `test` backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mnemonic: Option<String>,
    /// The sealed mnemonic, in the `file` backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sealed: Option<Sealed>,
}

/// A mnemonic sealed under a passphrase: Argon2id, then ChaCha20-Poly1305.
#[derive(Serialize, Deserialize, Clone)]
struct Sealed {
    kdf: String,
    /// Argon2id memory in KiB, passes and lanes.
    m_kib: u32,
    t: u32,
    p: u32,
    /// Hex.
    salt: String,
    nonce: String,
    ciphertext: String,
}

/// What a sealed mnemonic's authentication covers besides the mnemonic: its entry.
fn associated_data(name: &str, address: &str) -> Vec<u8> {
    format!("gonka-keyring/v1\0{name}\0{address}").into_bytes()
}

fn cipher(
    passphrase: &str,
    salt: &[u8],
    (m_kib, t, p): (u32, u32, u32),
) -> Result<ChaCha20Poly1305> {
    let params = argon2::Params::new(m_kib, t, p, Some(32))
        .map_err(|e| anyhow!("bad key derivation parameters in the keyring: {e}"))?;
    let mut key = [0u8; 32];
    argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
        .hash_password_into(passphrase.as_bytes(), salt, &mut key)
        .map_err(|e| anyhow!("deriving the keyring key: {e}"))?;
    Ok(ChaCha20Poly1305::new(&key.into()))
}

impl Sealed {
    fn seal(mnemonic: &str, passphrase: &str, name: &str, address: &str) -> Result<Sealed> {
        let params = argon2::Params::DEFAULT;
        let cost = (params.m_cost(), params.t_cost(), params.p_cost());
        let mut salt = [0u8; 16];
        OsRng.fill_bytes(&mut salt);
        let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
        let aad = associated_data(name, address);
        let ciphertext = cipher(passphrase, &salt, cost)?
            .encrypt(
                &nonce,
                Payload {
                    msg: mnemonic.as_bytes(),
                    aad: &aad,
                },
            )
            .map_err(|_| anyhow!("sealing the mnemonic failed"))?;
        Ok(Sealed {
            kdf: "argon2id".into(),
            m_kib: cost.0,
            t: cost.1,
            p: cost.2,
            salt: hex::encode(salt),
            nonce: hex::encode(nonce),
            ciphertext: hex::encode(ciphertext),
        })
    }

    /// The mnemonic, if `passphrase` opens it for this entry.
    fn open(&self, passphrase: &str, name: &str, address: &str) -> Result<String> {
        if self.kdf != "argon2id" {
            bail!(
                "key {name:?} is sealed with an unknown key derivation {:?}",
                self.kdf
            );
        }
        let bytes = |field: &str, value: &str| {
            hex::decode(value).with_context(|| format!("key {name:?}: its {field} is not hex"))
        };
        let nonce = bytes("nonce", &self.nonce)?;
        if nonce.len() != 12 {
            bail!("key {name:?}: its nonce is not 12 bytes");
        }
        let aad = associated_data(name, address);
        let plain = cipher(
            passphrase,
            &bytes("salt", &self.salt)?,
            (self.m_kib, self.t, self.p),
        )?
        .decrypt(
            nonce.as_slice().into(),
            Payload {
                msg: &bytes("ciphertext", &self.ciphertext)?,
                aad: &aad,
            },
        )
        .map_err(|_| anyhow!("wrong passphrase for key {name:?} (or its entry was altered)"))?;
        String::from_utf8(plain).context("a sealed mnemonic is not text")
    }
}

/// The passphrase of the `file` keyring at `path`: `given`, else asked on the terminal
/// (twice when `confirm`, for a new keyring).
fn passphrase(path: &Path, given: Option<&str>, confirm: bool) -> Result<String> {
    let passphrase = match given {
        Some(p) => p.to_string(),
        None => {
            let no_terminal = |e: std::io::Error| {
                anyhow!(
                    "cannot ask for the keyring's passphrase ({e}): run in a terminal, set {PASSPHRASE_ENV}, \
                     or use the unencrypted test keyring of a local network with --keyring-backend test"
                )
            };
            let prompt = format!("passphrase of {}: ", path.display());
            let first = rpassword::prompt_password(prompt).map_err(no_terminal)?;
            if confirm {
                let again =
                    rpassword::prompt_password("repeat the passphrase: ").map_err(no_terminal)?;
                if again != first {
                    bail!("the passphrases differ; nothing was stored");
                }
            }
            first
        }
    };
    if passphrase.chars().count() < MIN_PASSPHRASE {
        bail!("the keyring passphrase must have at least {MIN_PASSPHRASE} characters");
    }
    Ok(passphrase)
}

impl Keyring {
    /// The keyring of `backend` under `home`; the `file` backend's `passphrase` is asked
    /// on the terminal when `None`.
    pub fn new(home: PathBuf, backend: Backend, passphrase: Option<String>) -> Keyring {
        Keyring {
            home,
            backend,
            passphrase,
        }
    }

    fn passphrase(&self, confirm: bool) -> Result<String> {
        passphrase(&self.path(), self.passphrase.as_deref(), confirm)
    }

    /// Its file.
    pub fn path(&self) -> PathBuf {
        self.backend.path(&self.home)
    }

    fn load(&self) -> Result<Stored> {
        let path = self.path();
        let stored: Stored = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("keyring {} is corrupt", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stored::default(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        for key in &stored.keys {
            let fits = match self.backend {
                Backend::File => key.sealed.is_some() && key.mnemonic.is_none(),
                Backend::Test => key.mnemonic.is_some() && key.sealed.is_none(),
            };
            if !fits {
                bail!(
                    "key {:?} in {} is not stored the way the {} backend stores keys; the file was edited or mixed up",
                    key.name,
                    path.display(),
                    self.backend.name()
                );
            }
        }
        Ok(stored)
    }

    fn save(&self, stored: &Stored) -> Result<()> {
        let home = &self.home;
        std::fs::create_dir_all(home)
            .with_context(|| format!("cannot create {}", home.display()))?;
        let path = self.path();
        let tmp = path.with_extension("json.tmp");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(&serde_json::to_vec_pretty(stored)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot replace {}", path.display()))
    }

    fn entry(&self, stored: &Stored, name: &str) -> Result<StoredKey> {
        if let Some(key) = stored.keys.iter().find(|k| k.name == name) {
            return Ok(key.clone());
        }
        let other = match self.backend {
            Backend::File => Backend::Test,
            Backend::Test => Backend::File,
        };
        let elsewhere = Keyring::new(self.home.clone(), other, None)
            .load()
            .is_ok_and(|s| s.keys.iter().any(|k| k.name == name));
        if elsewhere {
            bail!(
                "no key named {name:?} in the {} keyring {}; the {} keyring has one: pass --keyring-backend {}",
                self.backend.name(),
                self.path().display(),
                other.name(),
                other.name()
            );
        }
        let legacy = self.home.join("keyring.json");
        let hint = match legacy.exists() {
            true => format!(
                " (the unencrypted {} of an earlier gonkad is not read any more: import its keys with `gonkad keys import`)",
                legacy.display()
            ),
            false => String::new(),
        };
        bail!(
            "no key named {name:?} in the {} keyring {}; create one with `gonkad keys add {name}` or import it with `gonkad keys import {name}`{hint}",
            self.backend.name(),
            self.path().display()
        )
    }

    /// The mnemonic of `key` (asks for the passphrase in the `file` backend).
    fn mnemonic(&self, key: &StoredKey) -> Result<String> {
        match (&key.mnemonic, &key.sealed) {
            (Some(mnemonic), _) => Ok(mnemonic.clone()),
            (None, Some(sealed)) => sealed.open(&self.passphrase(false)?, &key.name, &key.address),
            (None, None) => bail!("key {:?} has no secret", key.name),
        }
    }

    /// The signing key called `name`.
    pub fn key(&self, name: &str) -> Result<Key> {
        let stored = self.entry(&self.load()?, name)?;
        Key::from_mnemonic(&self.mnemonic(&stored)?)
    }

    /// Stores `mnemonic` as `name` (a new name). In the `file` backend the passphrase must
    /// open the keys already there (asked twice for the first key).
    fn insert(&self, name: &str, mnemonic: &str) -> Result<StoredKey> {
        let mut stored = self.load()?;
        if stored.keys.iter().any(|k| k.name == name) {
            bail!("a key named {name:?} already exists; pick another name");
        }
        let mnemonic = normalize_mnemonic(mnemonic)?;
        let signing = Key::from_mnemonic(&mnemonic)?;
        let address = signing.address().to_string();
        let pub_key = hex::encode(signing.public_key().to_bytes());
        let key = match self.backend {
            Backend::Test => StoredKey {
                name: name.into(),
                address,
                pub_key,
                mnemonic: Some(mnemonic),
                sealed: None,
            },
            Backend::File => {
                let passphrase = self.passphrase(stored.keys.is_empty())?;
                if let Some(first) = stored.keys.first() {
                    let sealed = first.sealed.as_ref().expect("load checked the backend");
                    sealed.open(&passphrase, &first.name, &first.address).map_err(|_| {
                        anyhow!(
                            "this passphrase does not open the keys already in {}; one keyring has one passphrase",
                            self.path().display()
                        )
                    })?;
                }
                StoredKey {
                    sealed: Some(Sealed::seal(&mnemonic, &passphrase, name, &address)?),
                    name: name.into(),
                    address,
                    pub_key,
                    mnemonic: None,
                }
            }
        };
        stored.keys.push(key.clone());
        stored.keys.sort_by(|a, b| a.name.cmp(&b.name));
        self.save(&stored)?;
        Ok(key)
    }

    /// Stores `mnemonic` as `name` unless a key of that name exists already (then it is
    /// left alone). Returns whether it was stored.
    pub fn import_if_absent(&self, name: &str, mnemonic: &str) -> Result<bool> {
        if self.load()?.keys.iter().any(|k| k.name == name) {
            return Ok(false);
        }
        self.insert(name, mnemonic)?;
        Ok(true)
    }
}

/// Loads the key called `name` from the keyring `--home` and `--keyring-backend` select.
pub fn load_key(global: &Global, name: &str) -> Result<Key> {
    global.keyring().key(name)
}

/// Stores `mnemonic` (read from standard input when `None`) as key `name` and says so.
fn import(
    keyring: &Keyring,
    name: &str,
    mnemonic: Option<String>,
    out: crate::output::Output,
) -> Result<()> {
    let mnemonic = match mnemonic {
        Some(m) => m,
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text)?;
            text
        }
    };
    let key = keyring.insert(name, &mnemonic)?;
    out.print(json!({"name": key.name, "address": key.address}), || {
        format!("imported {} as {}", key.address, key.name)
    });
    Ok(())
}

/// Runs a `gonkad keys` subcommand.
pub fn run(global: &Global, command: Command) -> Result<()> {
    let keyring = global.keyring();
    let out = global.output;
    match command {
        Command::Add {
            name,
            recover: true,
        } => import(&keyring, &name, None, out)?,
        Command::Add {
            name,
            recover: false,
        } => {
            let mnemonic = generate_mnemonic();
            let key = keyring.insert(&name, &mnemonic)?;
            out.print(
                json!({"name": key.name, "address": key.address, "mnemonic": mnemonic, "hd_path": HD_PATH}),
                || format!(
                    "name: {}\naddress: {}\n\nWrite this mnemonic down; it is the only way to recover the key:\n{}",
                    key.name, key.address, mnemonic
                ),
            );
        }
        Command::List => {
            let stored = keyring.load()?;
            let rows: Vec<_> = stored
                .keys
                .iter()
                .map(|k| json!({"name": k.name, "address": k.address}))
                .collect();
            out.print(json!(rows), || {
                if stored.keys.is_empty() {
                    format!(
                        "no keys yet in {}; create one with `gonkad keys add NAME`",
                        keyring.path().display()
                    )
                } else {
                    stored
                        .keys
                        .iter()
                        .map(|k| format!("{}\t{}", k.name, k.address))
                        .collect::<Vec<_>>()
                        .join("\n")
                }
            });
        }
        Command::Show { name } => {
            let key = keyring.entry(&keyring.load()?, &name)?;
            out.print(
                json!({"name": name, "address": key.address, "pub_key": key.pub_key}),
                || key.address.clone(),
            );
        }
        Command::Import { name, mnemonic } => import(&keyring, &name, mnemonic, out)?,
        Command::Export { name, private_key } => {
            let key = keyring.entry(&keyring.load()?, &name)?;
            let mnemonic = keyring.mnemonic(&key)?;
            eprintln!(
                "warning: anyone who sees this secret controls {}",
                key.address
            );
            if private_key {
                let secret = Key::from_mnemonic(&mnemonic)?.secret_bytes();
                let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
                out.print(
                    json!({"name": key.name, "address": key.address, "private_key": hex}),
                    || hex.clone(),
                );
            } else {
                out.print(json!({"name": key.name, "mnemonic": mnemonic}), || {
                    mnemonic.clone()
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSPHRASE: &str = "correct horse battery";

    fn mnemonic(name: &str) -> String {
        gonka_client::keys::well_known_mnemonic(name)
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_test_keyring_is_private_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let keyring = Keyring::new(dir.path().into(), Backend::Test, None);
        let stored = keyring
            .insert("alice", &format!("  {}\n", mnemonic("keys-test")))
            .unwrap();
        assert_eq!(mode(&keyring.path()), 0o600);
        assert!(keyring.path().ends_with("keyring-test.json"));
        assert_eq!(
            keyring.key("alice").unwrap().address().to_string(),
            stored.address
        );
        assert!(keyring.insert("alice", &mnemonic("keys-test")).is_err());
        let missing = keyring.key("bob").err().unwrap().to_string();
        assert!(missing.contains("gonkad keys add bob"), "{missing}");
    }

    #[test]
    fn the_file_keyring_seals_mnemonics_under_its_passphrase() {
        let dir = tempfile::tempdir().unwrap();
        let file = |passphrase: &str| {
            Keyring::new(dir.path().into(), Backend::File, Some(passphrase.into()))
        };
        let keyring = file(PASSPHRASE);
        let alice = keyring.insert("alice", &mnemonic("alice")).unwrap();
        keyring.insert("bob", &mnemonic("bob")).unwrap();
        assert_eq!(mode(&keyring.path()), 0o600);

        // No word of either mnemonic is in the file; names and addresses are.
        let text = std::fs::read_to_string(keyring.path()).unwrap();
        for word in mnemonic("alice")
            .split(' ')
            .chain(mnemonic("bob").split(' '))
        {
            assert!(
                !text.contains(&format!("\"{word}")) && !text.contains(&format!(" {word} ")),
                "{word} leaked"
            );
        }
        assert!(text.contains(&alice.address));
        assert_eq!(
            keyring.key("alice").unwrap().address().to_string(),
            alice.address
        );

        // A wrong passphrase opens nothing and cannot add a key under a second passphrase.
        let wrong = file("not the passphrase");
        let err = wrong.key("alice").err().unwrap().to_string();
        assert!(err.contains("wrong passphrase"), "{err}");
        let err = wrong
            .insert("carol", &mnemonic("carol"))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("does not open the keys already"), "{err}");
        assert_eq!(keyring.load().unwrap().keys.len(), 2);
        let err = file("short").key("alice").err().unwrap().to_string();
        assert!(err.contains("at least 8 characters"), "{err}");

        // Sealed entries are bound to their name and address: swapping them fails.
        let mut stored = keyring.load().unwrap();
        let sealed: Vec<_> = stored.keys.iter().map(|k| k.sealed.clone()).collect();
        stored.keys[0].sealed = sealed[1].clone();
        stored.keys[1].sealed = sealed[0].clone();
        keyring.save(&stored).unwrap();
        for name in ["alice", "bob"] {
            let err = keyring.key(name).err().unwrap().to_string();
            assert!(err.contains("wrong passphrase"), "{name}: {err}");
        }
    }

    #[test]
    fn each_backend_refuses_the_others_entries_and_points_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let test = Keyring::new(dir.path().into(), Backend::Test, None);
        let file = Keyring::new(dir.path().into(), Backend::File, Some(PASSPHRASE.into()));
        test.insert("alice", &mnemonic("alice")).unwrap();
        let err = file.key("alice").err().unwrap().to_string();
        assert!(err.contains("pass --keyring-backend test"), "{err}");

        // An unencrypted entry put into the file keyring is refused, not used.
        std::fs::copy(test.path(), file.path()).unwrap();
        let err = file.key("alice").err().unwrap().to_string();
        assert!(err.contains("not stored the way the file backend"), "{err}");
    }
}
