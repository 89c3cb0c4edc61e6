//! `gonkad genesis`: the genesis ceremony of a network whose validators run on separate hosts,
//! in the Cosmos manner.
//!
//! 1. The coordinator starts a CometBFT `genesis.json` (`new`) and funds the operators'
//!    accounts (`add-account`).
//! 2. Each validator signs a statement with its operator key (`gentx`): the stake it bonds
//!    from that account, its CometBFT consensus key, its moniker, and the BLS key its
//!    validator worker will sign epoch certificates with, with the key's proof of possession.
//! 3. The coordinator checks and adds the statements (`collect-gentxs`): each must be signed
//!    by the operator it names, for this chain, with a fresh consensus key and a BLS proof that
//!    verifies; its stake moves from the operator's funded balance into its bond, so the
//!    ceremony creates no money. `validate` imports the result as `InitChain` would.
//!
//! The statement's signature covers every field (`gonka/gentx/v1` lines, below), so nobody can
//! bond someone else's funds, reuse a statement on another chain, or swap its keys.

use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use gonka_bls_crypto::{PublicKey as BlsPublicKey, Signature as BlsSignature};
use gonka_client::bls::account_bls_key;
use gonka_proto::signing::bls_pop_bytes;
use gonka_proto::{bank, bls, stake};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::amount::parse_ngnk;
use crate::Global;

/// `gonkad genesis` steps.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Start a CometBFT genesis.json for a new chain (no accounts, no validators yet).
    New(NewArgs),
    /// Fund an account in a genesis.json.
    AddAccount(AddAccountArgs),
    /// Sign the statement that makes you a genesis validator: stake bonded from your
    /// operator account to your consensus key, with your BLS key.
    Gentx(GentxArgs),
    /// Check signed statements and add their validators to a genesis.json.
    CollectGentxs(CollectArgs),
    /// Check that a genesis.json starts a chain: import it as InitChain would.
    Validate(GenesisFile),
}

/// The genesis.json a step edits.
#[derive(clap::Args)]
pub struct GenesisFile {
    /// Path of the CometBFT genesis.json.
    #[arg(long, default_value = "genesis.json")]
    genesis: PathBuf,
}

/// Arguments of `gonkad genesis new`.
#[derive(clap::Args)]
pub struct NewArgs {
    /// Chain id of the new chain.
    #[arg(long = "new-chain-id")]
    chain_id: String,
    /// Least fee per unit of gas, in ngnk.
    #[arg(long, default_value = "0.01")]
    min_gas_price: String,
    /// Blocks per epoch (default: the epochs module's).
    #[arg(long)]
    epoch_length: Option<u64>,
    #[command(flatten)]
    file: GenesisFile,
}

/// Arguments of `gonkad genesis add-account`.
#[derive(clap::Args)]
pub struct AddAccountArgs {
    /// The account (bech32).
    address: String,
    /// Amount, e.g. 20000gnk or 5ngnk; added to what the account already holds.
    amount: String,
    #[command(flatten)]
    file: GenesisFile,
}

/// Arguments of `gonkad genesis gentx`.
#[derive(clap::Args)]
pub struct GentxArgs {
    /// Operator key (keyring name): signs the statement and owns the bond.
    #[arg(long)]
    from: String,
    /// Stake bonded from the operator's genesis balance, e.g. 10000gnk.
    #[arg(long)]
    stake: String,
    /// Display name of the validator.
    #[arg(long)]
    moniker: String,
    /// The CometBFT node's priv_validator_key.json (or the base64 public key).
    #[arg(long)]
    consensus_key: String,
    /// The chain the statement is for.
    #[arg(long = "for-chain-id")]
    chain_id: String,
    /// Where to write the statement.
    #[arg(long, default_value = "gentx.json")]
    output_document: PathBuf,
}

/// Arguments of `gonkad genesis collect-gentxs`.
#[derive(clap::Args)]
pub struct CollectArgs {
    /// Statements written by `gonkad genesis gentx`.
    #[arg(required = true)]
    gentxs: Vec<PathBuf>,
    #[command(flatten)]
    file: GenesisFile,
}

/// A validator's signed statement (a gentx).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gentx {
    pub chain_id: String,
    pub operator: String,
    /// Compressed secp256k1 public key of the operator, hex.
    pub operator_pubkey: String,
    pub moniker: String,
    /// Bonded stake, ngnk.
    pub stake: String,
    /// CometBFT ed25519 consensus public key, base64.
    pub consensus_pubkey: String,
    /// BLS public key, hex.
    pub bls_pubkey: String,
    /// Its proof of possession over `gonka/bls-pop/v1` (chain id, operator), hex.
    pub bls_proof_of_possession: String,
    /// The operator's signature of [`Gentx::signed_bytes`], hex.
    pub signature: String,
}

impl Gentx {
    /// What the operator signs: every field but the signature, one `name=value` line each.
    pub fn signed_bytes(&self) -> Vec<u8> {
        format!(
            "gonka/gentx/v1\nchain_id={}\noperator={}\noperator_pubkey={}\nmoniker={}\nstake={}\nconsensus_pubkey={}\nbls_pubkey={}\nbls_proof_of_possession={}\n",
            self.chain_id,
            self.operator,
            self.operator_pubkey,
            self.moniker,
            self.stake,
            self.consensus_pubkey,
            self.bls_pubkey,
            self.bls_proof_of_possession
        )
        .into_bytes()
    }

    /// The statement of `key` bonding `stake` ngnk to `consensus_pubkey` on `chain_id`, signed.
    pub fn sign(
        key: &gonka_client::Key,
        chain_id: &str,
        moniker: &str,
        stake: u128,
        consensus_pubkey: [u8; 32],
    ) -> Result<Gentx> {
        let operator = key.address().to_string();
        let bls_key = account_bls_key(key);
        let bls_pubkey = bls_key.public_key().to_bytes();
        let proof = bls_key.prove_possession(&bls_pop_bytes(chain_id, &operator, &bls_pubkey));
        let mut gentx = Gentx {
            chain_id: chain_id.into(),
            operator,
            operator_pubkey: hex::encode(key.public_key().to_bytes()),
            moniker: moniker.into(),
            stake: stake.to_string(),
            consensus_pubkey: crate::b64::encode(&consensus_pubkey),
            bls_pubkey: hex::encode(bls_pubkey),
            bls_proof_of_possession: hex::encode(proof.to_bytes()),
            signature: String::new(),
        };
        let signature = key
            .signing_key()
            .sign(&gentx.signed_bytes())
            .map_err(|e| anyhow::anyhow!("signing the statement failed: {e}"))?;
        gentx.signature = hex::encode(signature.to_bytes());
        Ok(gentx)
    }

    /// Checks the statement for `chain_id`: its signature by the operator it names, its keys
    /// and BLS proof; returns the stake and the decoded keys.
    pub fn verify(&self, chain_id: &str) -> Result<VerifiedGentx> {
        use k256::ecdsa::signature::Verifier as _;
        ensure!(
            self.chain_id == chain_id,
            "it is for chain {:?}, not {chain_id:?}",
            self.chain_id
        );
        let pubkey = hex::decode(&self.operator_pubkey).context("operator_pubkey is not hex")?;
        let owner = gonka_proto::address::address_of_pubkey(&pubkey)
            .context("operator_pubkey is not a secp256k1 public key")?;
        ensure!(
            owner == self.operator,
            "operator_pubkey belongs to {owner}, not to the operator {}",
            self.operator
        );
        let signature = hex::decode(&self.signature)
            .ok()
            .and_then(|bytes| k256::ecdsa::Signature::from_slice(&bytes).ok())
            .context("signature is not a 64-byte secp256k1 signature in hex")?;
        k256::ecdsa::VerifyingKey::from_sec1_bytes(&pubkey)?
            .verify(&self.signed_bytes(), &signature)
            .map_err(|_| anyhow::anyhow!("the operator's signature does not verify: the statement was altered or signed by someone else"))?;
        let stake = parse_ngnk(&format!("{}ngnk", self.stake))?;
        ensure!(stake > 0, "it bonds no stake");
        let consensus_pubkey: [u8; 32] = crate::b64::decode(&self.consensus_pubkey)
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .context("consensus_pubkey is not a 32-byte ed25519 key in base64")?;
        let bls_pubkey = hex::decode(&self.bls_pubkey).context("bls_pubkey is not hex")?;
        let key = BlsPublicKey::from_bytes(&bls_pubkey).context("bls_pubkey is not a BLS key")?;
        let proof = hex::decode(&self.bls_proof_of_possession)
            .ok()
            .and_then(|bytes| BlsSignature::from_bytes(&bytes))
            .context("bls_proof_of_possession is not a BLS signature in hex")?;
        ensure!(
            key.verify_possession(
                &bls_pop_bytes(chain_id, &self.operator, &bls_pubkey),
                &proof
            ),
            "the BLS proof of possession does not verify"
        );
        Ok(VerifiedGentx {
            stake,
            consensus_pubkey,
            bls_pubkey,
        })
    }
}

/// What a checked statement adds to genesis.
#[derive(Debug)]
pub struct VerifiedGentx {
    pub stake: u128,
    pub consensus_pubkey: [u8; 32],
    pub bls_pubkey: Vec<u8>,
}

fn read_genesis(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read {}; start one with `gonkad genesis new`",
            path.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

fn write_genesis(path: &Path, genesis: &Value) -> Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(genesis)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Module `name`'s genesis section of `genesis`, as its protobuf genesis state.
fn section<T: serde::de::DeserializeOwned + Default>(genesis: &Value, name: &str) -> Result<T> {
    match &genesis["app_state"][name] {
        Value::Null => Ok(T::default()),
        value => serde_json::from_value(value.clone())
            .with_context(|| format!("app_state.{name} is not a valid genesis section")),
    }
}

fn set_section<T: Serialize>(genesis: &mut Value, name: &str, state: &T) -> Result<()> {
    genesis["app_state"][name] = serde_json::to_value(state)?;
    Ok(())
}

/// The ngnk balance of `address` in a bank genesis (0 if absent).
fn balance_of(bank: &bank::GenesisState, address: &str) -> Result<u128> {
    bank.balances
        .iter()
        .filter(|b| b.address == address)
        .flat_map(|b| &b.coins)
        .filter(|c| c.denom == gonka_bank::NATIVE_DENOM)
        .map(|c| parse_ngnk(&format!("{}ngnk", c.amount)))
        .sum()
}

/// Sets the ngnk balance of `address` to `ngnk`.
fn set_balance(bank: &mut bank::GenesisState, address: &str, ngnk: u128) {
    bank.balances.retain(|b| b.address != address);
    if ngnk > 0 {
        bank.balances.push(bank::Balance {
            address: address.into(),
            coins: vec![bank::Coin {
                denom: gonka_bank::NATIVE_DENOM.into(),
                amount: ngnk.to_string(),
            }],
        });
        bank.balances.sort_by(|a, b| a.address.cmp(&b.address));
    }
}

/// Adds the statement `gentx`, already verified as `checked`, to `genesis`.
fn add_validator(genesis: &mut Value, gentx: &Gentx, checked: &VerifiedGentx) -> Result<()> {
    let mut bank: bank::GenesisState = section(genesis, gonka_bank::NAME)?;
    let mut stake: stake::GenesisState = section(genesis, gonka_stake::NAME)?;
    let mut bls: bls::GenesisState = section(genesis, gonka_bls::NAME)?;
    if stake
        .participants
        .iter()
        .any(|p| p.operator == gentx.operator)
    {
        bail!("{} is already a genesis validator", gentx.operator);
    }
    if let Some(p) = stake
        .participants
        .iter()
        .find(|p| p.consensus_pubkey == checked.consensus_pubkey)
    {
        bail!("its consensus key is already {}'s", p.operator);
    }
    let funded = balance_of(&bank, &gentx.operator)?;
    if funded < checked.stake {
        bail!(
            "it bonds {}ngnk but {} holds {funded}ngnk in genesis; fund it first with `gonkad genesis add-account`",
            checked.stake,
            gentx.operator
        );
    }
    set_balance(&mut bank, &gentx.operator, funded - checked.stake);
    stake.participants.push(stake::GenesisParticipant {
        operator: gentx.operator.clone(),
        moniker: gentx.moniker.clone(),
        consensus_pubkey: checked.consensus_pubkey.to_vec(),
        amount: checked.stake.to_string(),
        ..Default::default()
    });
    bls.keys.retain(|k| k.address != gentx.operator);
    bls.keys.push(bls::BlsKey {
        address: gentx.operator.clone(),
        pubkey: checked.bls_pubkey.clone(),
        registered_height: 0,
    });
    set_section(genesis, gonka_bank::NAME, &bank)?;
    set_section(genesis, gonka_stake::NAME, &stake)?;
    set_section(genesis, gonka_bls::NAME, &bls)
}

/// Runs `gonkad genesis ...`.
pub fn run(global: &Global, command: Command) -> Result<()> {
    let out = global.output;
    match command {
        Command::New(args) => {
            let min_gas_price = gonka_client::GasPrice::parse(&args.min_gas_price)
                .map_err(|e| anyhow::anyhow!("--min-gas-price: {e}"))?;
            // Short epochs need more of them to unbond, so that stake unbonded right after
            // some work is still there to slash when a dispute of it settles.
            let stake_params = args.epoch_length.map(|length| {
                let window =
                    gonka_disputes::challenge_window_blocks(&gonka_disputes::default_params());
                let defaults = gonka_stake::default_params();
                gonka_proto::stake::Params {
                    unbonding_epochs: defaults
                        .unbonding_epochs
                        .max(window.div_ceil(length.max(1))),
                    ..defaults
                }
            });
            let app_state = gonka_app::genesis::GenesisConfig {
                min_gas_price: Some(min_gas_price),
                epoch_length: args.epoch_length,
                stake_params,
                ..Default::default()
            }
            .app_state();
            let genesis = json!({
                "genesis_time": tendermint::Time::now().to_rfc3339(),
                "chain_id": args.chain_id,
                "initial_height": "1",
                "consensus_params": {
                    "block": {"max_bytes": "22020096", "max_gas": "-1"},
                    "evidence": {"max_age_num_blocks": "100000", "max_age_duration": "172800000000000", "max_bytes": "1048576"},
                    "validator": {"pub_key_types": ["ed25519"]},
                    "version": {"app": "0"},
                    // The validators sign the randomness beacon in their vote extensions.
                    "abci": {"vote_extensions_enable_height": "1"},
                },
                "validators": [],
                "app_hash": "",
                "app_state": app_state,
            });
            write_genesis(&args.file.genesis, &genesis)?;
            out.print(
                json!({"genesis": args.file.genesis, "chain_id": args.chain_id}),
                || {
                    format!(
                        "started {} for chain {}",
                        args.file.genesis.display(),
                        args.chain_id
                    )
                },
            );
        }
        Command::AddAccount(args) => {
            gonka_auth::validate_address("address", &args.address)
                .map_err(|e| anyhow::anyhow!("{}", e.log))?;
            let amount = parse_ngnk(&args.amount)?;
            let path = &args.file.genesis;
            let mut genesis = read_genesis(path)?;
            let mut bank: bank::GenesisState = section(&genesis, gonka_bank::NAME)?;
            let total = balance_of(&bank, &args.address)?
                .checked_add(amount)
                .context("the balance overflows")?;
            set_balance(&mut bank, &args.address, total);
            set_section(&mut genesis, gonka_bank::NAME, &bank)?;
            write_genesis(path, &genesis)?;
            out.print(
                json!({"address": args.address, "ngnk": total.to_string()}),
                || format!("{} holds {total}ngnk in {}", args.address, path.display()),
            );
        }
        Command::Gentx(args) => {
            let key = crate::keys::load_key(global, &args.from)?;
            let stake = parse_ngnk(&args.stake)?;
            let consensus_pubkey = crate::consensus_key::parse_consensus_key(&args.consensus_key)?;
            let gentx = Gentx::sign(&key, &args.chain_id, &args.moniker, stake, consensus_pubkey)?;
            std::fs::write(&args.output_document, serde_json::to_vec_pretty(&gentx)?)
                .with_context(|| format!("cannot write {}", args.output_document.display()))?;
            out.print(json!(gentx), || {
                format!(
                    "{} bonds {stake}ngnk to consensus key {} on {}; statement written to {} — send it to the coordinator",
                    gentx.operator,
                    gentx.consensus_pubkey,
                    gentx.chain_id,
                    args.output_document.display()
                )
            });
        }
        Command::CollectGentxs(args) => {
            let path = &args.file.genesis;
            let mut genesis = read_genesis(path)?;
            let chain_id = genesis["chain_id"]
                .as_str()
                .context("the genesis has no chain_id")?
                .to_string();
            let mut added = Vec::new();
            for file in &args.gentxs {
                let text = std::fs::read_to_string(file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                let gentx: Gentx = serde_json::from_str(&text)
                    .with_context(|| format!("{} is not a gentx", file.display()))?;
                let checked = gentx
                    .verify(&chain_id)
                    .and_then(|checked| {
                        add_validator(&mut genesis, &gentx, &checked).map(|_| checked)
                    })
                    .with_context(|| format!("gentx {} refused", file.display()))?;
                added.push(json!({"operator": gentx.operator, "moniker": gentx.moniker, "stake": checked.stake.to_string()}));
            }
            write_genesis(path, &genesis)?;
            out.print(json!({"genesis": path, "validators": added}), || {
                format!("added {} validator(s) to {}", added.len(), path.display())
            });
        }
        Command::Validate(file) => {
            let genesis = read_genesis(&file.genesis)?;
            let chain_id = genesis["chain_id"]
                .as_str()
                .context("the genesis has no chain_id")?;
            let dir = std::env::temp_dir().join(format!(
                "gonkad-genesis-validate-{}-{}",
                std::process::id(),
                tendermint::Time::now().unix_timestamp_nanos()
            ));
            let checked =
                gonka_app::genesis::check(&dir.join("state.redb"), chain_id, &genesis["app_state"]);
            let _ = std::fs::remove_dir_all(&dir);
            let (app_hash, validators) = checked
                .with_context(|| format!("{} does not start a chain", file.genesis.display()))?;
            ensure!(
                !validators.is_empty()
                    || genesis["validators"]
                        .as_array()
                        .is_some_and(|v| !v.is_empty()),
                "{} has no validators: add them with `gonkad genesis collect-gentxs`",
                file.genesis.display()
            );
            out.print(
                json!({"chain_id": chain_id, "app_hash": hex::encode(app_hash), "validators": validators.len()}),
                || format!("{} starts chain {chain_id} with {} validator(s); genesis app hash {}", file.genesis.display(), validators.len(), hex::encode(app_hash)),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_client::keys::well_known_mnemonic;

    fn operator(name: &str) -> gonka_client::Key {
        gonka_client::Key::from_mnemonic(&well_known_mnemonic(name)).unwrap()
    }

    fn genesis(funded: &[(&str, u128)]) -> Value {
        let mut genesis = json!({"chain_id": "c", "app_state": gonka_app::genesis::GenesisConfig::default().app_state()});
        let mut bank: bank::GenesisState = section(&genesis, gonka_bank::NAME).unwrap();
        for (name, ngnk) in funded {
            set_balance(&mut bank, operator(name).address(), *ngnk);
        }
        set_section(&mut genesis, gonka_bank::NAME, &bank).unwrap();
        genesis
    }

    #[test]
    fn a_signed_statement_bonds_funded_stake_and_registers_the_bls_key() {
        let key = operator("v0");
        let gentx = Gentx::sign(&key, "c", "v0", 600, [7; 32]).unwrap();
        let checked = gentx.verify("c").unwrap();
        let mut genesis = genesis(&[("v0", 1_000)]);
        add_validator(&mut genesis, &gentx, &checked).unwrap();
        let bank: bank::GenesisState = section(&genesis, gonka_bank::NAME).unwrap();
        assert_eq!(
            balance_of(&bank, key.address()).unwrap(),
            400,
            "the bond comes out of the balance"
        );
        let stake: stake::GenesisState = section(&genesis, gonka_stake::NAME).unwrap();
        assert_eq!(stake.participants[0].amount, "600");
        let bls: bls::GenesisState = section(&genesis, gonka_bls::NAME).unwrap();
        assert_eq!(hex::encode(&bls.keys[0].pubkey), gentx.bls_pubkey);
        // The same operator or consensus key twice is refused.
        let again = Gentx::sign(&operator("v1"), "c", "v1", 1, [7; 32]).unwrap();
        let mut funded = genesis.clone();
        let mut bank: bank::GenesisState = section(&funded, gonka_bank::NAME).unwrap();
        set_balance(&mut bank, operator("v1").address(), 10);
        set_section(&mut funded, gonka_bank::NAME, &bank).unwrap();
        let err = add_validator(&mut funded, &again, &again.verify("c").unwrap()).unwrap_err();
        assert!(err.to_string().contains("consensus key"), "{err}");
        let err = add_validator(&mut genesis, &gentx, &checked).unwrap_err();
        assert!(err.to_string().contains("already"), "{err}");
    }

    #[test]
    fn altered_foreign_or_unfunded_statements_are_refused() {
        let gentx = Gentx::sign(&operator("v0"), "c", "v0", 600, [7; 32]).unwrap();
        assert!(gentx
            .verify("other")
            .unwrap_err()
            .to_string()
            .contains("for chain"));
        let mut more = gentx.clone();
        more.stake = "6000".into();
        assert!(more
            .verify("c")
            .unwrap_err()
            .to_string()
            .contains("signature"));
        let mut swapped = gentx.clone();
        swapped.consensus_pubkey = crate::b64::encode(&[8; 32]);
        assert!(swapped.verify("c").is_err());
        // Someone else's operator field with the original signature and key.
        let mut stolen = gentx.clone();
        stolen.operator = operator("v1").address().to_string();
        assert!(stolen
            .verify("c")
            .unwrap_err()
            .to_string()
            .contains("belongs to"));
        // A BLS proof made for another operator.
        let other = Gentx::sign(&operator("v1"), "c", "v1", 600, [9; 32]).unwrap();
        let mut borrowed = gentx.clone();
        borrowed.bls_pubkey = other.bls_pubkey.clone();
        borrowed.bls_proof_of_possession = other.bls_proof_of_possession.clone();
        let key = operator("v0");
        let resigned = key.signing_key().sign(&borrowed.signed_bytes()).unwrap();
        borrowed.signature = hex::encode(resigned.to_bytes());
        assert!(borrowed
            .verify("c")
            .unwrap_err()
            .to_string()
            .contains("proof of possession"));
        // Not enough funded for the bond.
        let mut genesis = genesis(&[("v0", 599)]);
        let err = add_validator(&mut genesis, &gentx, &gentx.verify("c").unwrap()).unwrap_err();
        assert!(err.to_string().contains("add-account"), "{err}");
    }
}
