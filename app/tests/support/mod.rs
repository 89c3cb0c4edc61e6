//! Helpers for the epoch tests: a test-only work oracle standing in for the inference and
//! disputes modules, a chain wrapper that signs, tracks sequences and checks the chain's
//! invariants after every block, and the Sprint power rule re-derived from its documentation.

#![allow(dead_code)] // not every helper is used by every test

use gonka_proto::query::{self as q, Query};
use std::collections::{BTreeMap, BTreeSet};

use gonka_app::genesis::{GenesisAccount, GenesisConfig, GenesisValidator};
use gonka_app::harness::TestChain;
use gonka_client::disputes::ReExecution;
use gonka_client::tx::{
    msg_register_transfer_agent, signed_work_record, NodeSpec, RequestTerms, WorkRecordInput,
};
use gonka_client::{sign, SignerData};
use gonka_proto::inference::WorkRecord;
use gonka_proto::stake::{MsgStake, MsgUnjail, MsgUnstake, Participant, UnbondingEntry};
use gonka_proto::{auth, bank, disputes, rewards, stake};
use gonka_rewards::RewardsParams;
use gonka_sdk::{Any, ErrorCode, Module, Msg, Result, SdkError, StateRead, StateWrite, TxContext};
use k256::ecdsa::SigningKey;
use k256::sha2::{Digest, Sha256};
use prost::Message;
use tendermint_proto::v0_38::abci::{
    CommitInfo, Event, ExecTxResult, Misbehavior, ResponseFinalizeBlock, ResponseQuery,
};
use tendermint_proto::v0_38::crypto::public_key;

use crate::common::key;

pub const CHAIN_ID: &str = "gonka-epochs-test";
/// The fee of every tx the helpers sign ([`crate::common::tx_fee`]).
pub const FEE: u128 = crate::common::MIN_FEE;
/// Liquid balance of every genesis account.
pub const FUNDS: u128 = 1_000_000_000_000;
/// Label of the account that signs the oracle's messages.
pub const ORACLE: &str = "oracle";
/// Voting power handed out each epoch (`gonka_stake::power::TOTAL_POWER`).
pub const TOTAL_POWER: u128 = 1_000_000;

// ---------------------------------------------------------------------------------------
// The work oracle: a test-only module whose messages call stake's public work and
// punishment API, as the inference and disputes modules will.

/// Credits `units` of work to `operator` in the current epoch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MsgCreditWork {
    #[prost(string, tag = "1")]
    pub signer: String,
    #[prost(string, tag = "2")]
    pub operator: String,
    #[prost(uint64, tag = "3")]
    pub units: u64,
}

/// Voids `units` of `operator`'s work in `epoch`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MsgVoidWork {
    #[prost(string, tag = "1")]
    pub signer: String,
    #[prost(string, tag = "2")]
    pub operator: String,
    #[prost(uint64, tag = "3")]
    pub epoch: u64,
    #[prost(uint64, tag = "4")]
    pub units: u64,
}

/// Slashes `fraction_ppm` of `operator`'s stake to `beneficiary`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MsgSlash {
    #[prost(string, tag = "1")]
    pub signer: String,
    #[prost(string, tag = "2")]
    pub operator: String,
    #[prost(uint64, tag = "3")]
    pub fraction_ppm: u64,
    #[prost(string, tag = "4")]
    pub beneficiary: String,
}

/// Jails `operator`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MsgJail {
    #[prost(string, tag = "1")]
    pub signer: String,
    #[prost(string, tag = "2")]
    pub operator: String,
}

pub const CREDIT_WORK: &str = "/gonka.test.MsgCreditWork";
pub const VOID_WORK: &str = "/gonka.test.MsgVoidWork";
pub const SLASH: &str = "/gonka.test.MsgSlash";
pub const JAIL: &str = "/gonka.test.MsgJail";

enum OracleMsg {
    Credit(MsgCreditWork),
    Void(MsgVoidWork),
    Slash(MsgSlash),
    Jail(MsgJail),
}

impl Msg for OracleMsg {
    fn signer(&self) -> &str {
        match self {
            OracleMsg::Credit(m) => &m.signer,
            OracleMsg::Void(m) => &m.signer,
            OracleMsg::Slash(m) => &m.signer,
            OracleMsg::Jail(m) => &m.signer,
        }
    }

    fn execute(&self, _ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        match self {
            OracleMsg::Credit(m) => gonka_stake::credit_work(state, &m.operator, m.units),
            OracleMsg::Void(m) => gonka_stake::void_work(state, &m.operator, m.epoch, m.units),
            OracleMsg::Slash(m) => {
                gonka_stake::slash(state, &m.operator, m.fraction_ppm, &m.beneficiary).map(drop)
            }
            OracleMsg::Jail(m) => gonka_stake::jail(state, &m.operator),
        }
    }
}

fn decode<M: Message + Default>(any: &Any) -> Result<M> {
    M::decode(any.value.as_slice())
        .map_err(|e| SdkError::Decode.err(format!("{} is not valid: {e}", any.type_url)))
}

/// Test-only module crediting work and punishing through `gonka_stake`'s public API.
pub struct WorkOracle;

gonka_sdk::impl_no_genesis!(WorkOracle, "work_oracle");

impl Module for WorkOracle {
    fn decode_msg(&self, any: &Any) -> Option<Result<Box<dyn Msg>>> {
        let msg = match any.type_url.as_str() {
            CREDIT_WORK => decode(any).map(OracleMsg::Credit),
            VOID_WORK => decode(any).map(OracleMsg::Void),
            SLASH => decode(any).map(OracleMsg::Slash),
            JAIL => decode(any).map(OracleMsg::Jail),
            _ => return None,
        };
        Some(msg.map(|m| Box::new(m) as Box<dyn Msg>))
    }

    fn query(&self, _path: &str, _data: &[u8], _state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        None
    }
}

/// The chain's modules plus the work oracle.
pub fn modules() -> Vec<Box<dyn Module>> {
    let mut modules = gonka_app::modules::all();
    modules.push(Box::new(WorkOracle));
    modules
}

fn any<M: Message>(type_url: &str, msg: &M) -> Any {
    Any {
        type_url: type_url.into(),
        value: msg.encode_to_vec(),
    }
}

fn proto_any<M: Message + prost::Name>(msg: &M) -> Any {
    any(&gonka_sdk::type_url::<M>(), msg)
}

pub fn addr(label: &str) -> String {
    key(label).address().to_string()
}

pub fn credit(operator: &str, units: u64) -> Any {
    any(
        CREDIT_WORK,
        &MsgCreditWork {
            signer: addr(ORACLE),
            operator: addr(operator),
            units,
        },
    )
}

pub fn void(operator: &str, epoch: u64, units: u64) -> Any {
    any(
        VOID_WORK,
        &MsgVoidWork {
            signer: addr(ORACLE),
            operator: addr(operator),
            epoch,
            units,
        },
    )
}

pub fn slash(operator: &str, fraction_ppm: u64, beneficiary: &str) -> Any {
    any(
        SLASH,
        &MsgSlash {
            signer: addr(ORACLE),
            operator: addr(operator),
            fraction_ppm,
            beneficiary: beneficiary.into(),
        },
    )
}

pub fn jail(operator: &str) -> Any {
    any(
        JAIL,
        &MsgJail {
            signer: addr(ORACLE),
            operator: addr(operator),
        },
    )
}

pub fn stake_msg(operator: &str, amount: u128, consensus_key: Option<[u8; 32]>) -> Any {
    proto_any(&MsgStake {
        operator: addr(operator),
        amount: amount.to_string(),
        moniker: String::new(),
        consensus_pubkey: consensus_key.map(|k| k.to_vec()).unwrap_or_default(),
    })
}

pub fn unstake_msg(operator: &str, amount: u128) -> Any {
    proto_any(&MsgUnstake {
        operator: addr(operator),
        amount: amount.to_string(),
    })
}

pub fn unjail_msg(operator: &str) -> Any {
    proto_any(&MsgUnjail {
        operator: addr(operator),
    })
}

/// Participant `index`'s ed25519 consensus signing key (what CometBFT signs its votes and
/// vote extensions with).
pub fn consensus_signing_key(index: usize) -> ed25519_consensus::SigningKey {
    let mut seed = [0xC0; 32];
    seed[..8].copy_from_slice(&(index as u64).to_be_bytes());
    ed25519_consensus::SigningKey::from(seed)
}

/// Participant `index`'s ed25519 consensus public key.
pub fn consensus_key(index: usize) -> [u8; 32] {
    consensus_signing_key(index).verification_key().to_bytes()
}

// ---------------------------------------------------------------------------------------
// Genesis.

/// What a test chain starts with.
#[derive(Clone)]
pub struct Setup {
    pub epoch_length: u64,
    pub stake: stake::Params,
    pub rewards: rewards::Params,
    /// `(label, bonded ngnk)`; participant `i` gets `consensus_key(i)`.
    pub participants: Vec<(String, u128)>,
    /// `(label, liquid ngnk)` besides the participants, which get `FUNDS` each.
    pub accounts: Vec<(String, u128)>,
    /// The disputes section (a test's `edit` may still replace it).
    pub disputes: disputes::Params,
    /// First height with vote extensions (0: off).
    pub vote_extensions_from: u64,
}

impl Setup {
    /// `n` participants `p0..` bonding `stake` each; 5-block epochs; min stake 1,000 ngnk;
    /// 2 unbonding and 2 jail epochs; 10% stake weight; 30% cap; 1,000,000 ngnk per epoch
    /// without decay; the oracle, alice and bob funded; disputes with
    /// [`gonka_app::genesis::quick_disputes_params`] (their challenge window fits the unbonding).
    pub fn new(n: usize, stake: u128) -> Setup {
        Setup {
            epoch_length: 5,
            stake: stake::Params {
                min_stake: "1000".into(),
                // Scaled with min_stake (the default is 1% of the default min_stake).
                min_unstake: "10".into(),
                unbonding_epochs: 2,
                stake_weight_ppm: 100_000,
                max_power_share_ppm: 300_000,
                jail_epochs: 2,
                ..gonka_stake::default_params()
            },
            rewards: rewards::Params {
                initial_emission: "1000000".into(),
                decay_ppb: 0,
                validation_share_ppm: 0,
            },
            participants: (0..n).map(|i| (format!("p{i}"), stake)).collect(),
            accounts: [ORACLE, "alice", "bob"]
                .into_iter()
                .map(|l| (l.to_string(), FUNDS))
                .collect(),
            disputes: gonka_app::genesis::quick_disputes_params(),
            vote_extensions_from: 0,
        }
    }

    pub fn app_state(&self) -> serde_json::Value {
        let mut accounts: Vec<GenesisAccount> = self
            .accounts
            .iter()
            .map(|(label, ngnk)| GenesisAccount {
                address: addr(label),
                ngnk: *ngnk,
            })
            .collect();
        accounts.extend(self.participants.iter().map(|(label, _)| GenesisAccount {
            address: addr(label),
            ngnk: FUNDS,
        }));
        GenesisConfig {
            accounts,
            validators: self
                .participants
                .iter()
                .enumerate()
                .map(|(i, (label, stake))| GenesisValidator {
                    operator: addr(label),
                    moniker: label.clone(),
                    consensus_pubkey: consensus_key(i),
                    stake_ngnk: *stake,
                })
                .collect(),
            min_gas_price: Some(crate::common::min_gas_price()),
            epoch_length: Some(self.epoch_length),
            stake_params: Some(self.stake.clone()),
            rewards_params: Some(self.rewards.clone()),
            models: Vec::new(),
            disputes_params: Some(self.disputes.clone()),
            bls_keys: Vec::new(),
            settlement_params: None,
            escrows: Vec::new(),
            pol_params: None,
        }
        .app_state()
    }
}

/// A state directory: in memory (`/dev/shm`) where available, since redb's fsync on every
/// commit would otherwise dominate the run time; these tests need no durability.
pub fn state_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

/// A new chain (`gonka-next`) started from an exported `app_state`, its first block
/// committed; the directory holding its state goes with it.
pub fn chain_from_export(exported: &serde_json::Value) -> (tempfile::TempDir, TestChain) {
    let dir = state_dir();
    let mut chain = TestChain::with_modules(
        &dir.path().join("state.redb"),
        "gonka-next",
        exported,
        modules(),
    )
    .unwrap();
    chain.next_block(vec![]);
    (dir, chain)
}

// ---------------------------------------------------------------------------------------
// The chain wrapper.

/// One committed block and what the checks learned about it.
pub struct Block {
    pub response: ResponseFinalizeBlock,
    /// The epoch this block closed, if it was an epoch's last block.
    pub closed_epoch: Option<u64>,
}

impl Block {
    pub fn result(&self, index: usize) -> &ExecTxResult {
        &self.response.tx_results[index]
    }

    /// Validator updates of this block by consensus key.
    pub fn updates(&self) -> BTreeMap<[u8; 32], i64> {
        validator_updates(&self.response)
    }

    /// Events of the block (not of its txs) of `kind`.
    pub fn events(&self, kind: &str) -> Vec<Attributes> {
        events_of(&self.response.events, kind)
    }

    /// Events of `kind` emitted by the block's tx `index`.
    pub fn tx_events(&self, index: usize, kind: &str) -> Vec<Attributes> {
        tx_events(self.result(index), kind)
    }
}

/// The attributes of one event, by key.
pub type Attributes = BTreeMap<String, String>;

/// The attributes of every event of `kind` among `events`, in emission order: the one place
/// the tests flatten ABCI events.
pub fn events_of(events: &[Event], kind: &str) -> Vec<Attributes> {
    events
        .iter()
        .filter(|e| e.r#type == kind)
        .map(|e| {
            e.attributes
                .iter()
                .map(|a| (a.key.clone(), a.value.clone()))
                .collect()
        })
        .collect()
}

/// Events of `kind` emitted by one transaction.
pub fn tx_events(result: &ExecTxResult, kind: &str) -> Vec<Attributes> {
    events_of(&result.events, kind)
}

pub fn validator_updates(response: &ResponseFinalizeBlock) -> BTreeMap<[u8; 32], i64> {
    response
        .validator_updates
        .iter()
        .map(|update| {
            let Some(public_key::Sum::Ed25519(bytes)) =
                update.pub_key.as_ref().and_then(|k| k.sum.clone())
            else {
                panic!("validator update without an ed25519 key: {update:?}")
            };
            (bytes.as_slice().try_into().unwrap(), update.power)
        })
        .collect()
}

/// A chain with the work oracle that checks, after every block: bank balances sum to the
/// supply; stake's invariants; the supply grows by exactly the closing epoch's emission
/// (computed here, independently) and not otherwise; the epoch's fees and rewards settle
/// exactly as the rule says (recomputed here from the work ledger); no validator update
/// exceeds the power cap when the cap can hold.
pub struct World {
    pub chain: TestChain,
    dir: tempfile::TempDir,
    pub setup: Setup,
    /// Txs signed per label since the last block, so several can share a block.
    pending: BTreeMap<String, u64>,
    /// Fees the fee collector has gathered since the last settlement.
    fees_pending: u128,
}

impl World {
    /// Runs genesis and commits block 1 (empty), so queries and signing can start; epoch 0
    /// then has `epoch_length − 1` blocks left. The chain's modules plus the work oracle.
    pub fn new(setup: Setup) -> World {
        World::with_genesis(setup, |_| {})
    }

    /// Like [`World::new`], with the genesis `app_state` edited by `edit` first: for example
    /// to set the `inference` section's parameters and models (`GenesisConfig` builds that
    /// section, but with default parameters, and `Setup` gives it no models) or to add the
    /// `disputes` section, which `GenesisConfig` does not build.
    pub fn with_genesis(setup: Setup, edit: impl FnOnce(&mut serde_json::Value)) -> World {
        World::with_modules(setup, modules(), edit)
    }

    /// Like [`World::with_genesis`] on exactly `modules` (for example
    /// `gonka_app::modules::all()`, the production list without the work oracle).
    pub fn with_modules(
        setup: Setup,
        modules: Vec<Box<dyn Module>>,
        edit: impl FnOnce(&mut serde_json::Value),
    ) -> World {
        let dir = state_dir();
        let mut app_state = setup.app_state();
        edit(&mut app_state);
        let chain = TestChain::with_vote_extensions(
            &dir.path().join("state.redb"),
            CHAIN_ID,
            &app_state,
            modules,
            setup.vote_extensions_from,
        )
        .unwrap();
        let mut world = World {
            chain,
            dir,
            setup,
            pending: BTreeMap::new(),
            fees_pending: 0,
        };
        let response = world.chain.next_block(vec![]);
        world.check_balances_and_stake();
        world.check_power_cap(&response);
        world
    }

    fn check_balances_and_stake(&self) {
        let height = self.chain.height();
        assert_eq!(
            self.balances_sum(),
            self.supply(),
            "bank balances do not sum to the supply after block {height}"
        );
        if let Err(breach) = gonka_stake::check_invariants(self.chain.app().store()) {
            panic!("stake invariant broken after block {height}: {breach}");
        }
    }

    pub fn rewards_params(&self) -> RewardsParams {
        RewardsParams::from_proto(&self.setup.rewards).unwrap()
    }

    /// Signs `msgs` by `label` with its next sequence, counting txs already signed for the
    /// coming block.
    pub fn tx(&mut self, label: &str, msgs: Vec<Any>) -> Vec<u8> {
        let tx = self.tx_unsequenced(label, msgs);
        *self.pending.entry(label.to_string()).or_default() += 1;
        tx
    }

    /// Like [`World::tx`] for a tx expected to fail before the ante step (a stateless check),
    /// which therefore does not use its sequence.
    pub fn tx_unsequenced(&mut self, label: &str, msgs: Vec<Any>) -> Vec<u8> {
        let account = self.account(&addr(label));
        let signer = SignerData {
            chain_id: CHAIN_ID.into(),
            account_number: account.account_number,
            sequence: account.sequence + self.pending.get(label).copied().unwrap_or(0),
        };
        sign(key(label), msgs, &signer, crate::common::tx_fee(), "").unwrap()
    }

    /// Commits the next block with `txs` and checks every invariant.
    pub fn block(&mut self, txs: Vec<Vec<u8>>) -> Block {
        self.block_with(txs, None, Vec::new())
    }

    /// [`World::block`] with the last commit's signatures and the block's evidence, as
    /// CometBFT hands them to `FinalizeBlock`.
    pub fn block_with(
        &mut self,
        txs: Vec<Vec<u8>>,
        last_commit: Option<CommitInfo>,
        misbehavior: Vec<Misbehavior>,
    ) -> Block {
        let epoch_before = self.current_epoch();
        let supply_before = self.supply();
        let response = self.chain.next_block_with(txs, last_commit, misbehavior);
        self.pending.clear();
        let epoch_after = self.current_epoch();
        let closed_epoch = (epoch_after != epoch_before).then_some(epoch_before);
        assert!(epoch_after <= epoch_before + 1);
        // Fees, and the stake slashed for downtime or double signing, which is paid out
        // with them.
        let collector = gonka_bank::fee_collector_address();
        let slashed_to_fees: u128 = events_of(&response.events, "slash")
            .iter()
            .filter(|attributes| attributes.get("beneficiary") == Some(&collector))
            .map(|attributes| {
                attributes["amount"]
                    .trim_end_matches("ngnk")
                    .parse::<u128>()
                    .unwrap()
            })
            .sum();
        self.fees_pending += fees_paid(&response) + slashed_to_fees;

        let height = self.chain.height();
        let supply = self.supply();
        self.check_balances_and_stake();
        match closed_epoch {
            Some(epoch) => {
                let expected = expected_emission(&self.rewards_params(), epoch);
                assert_eq!(
                    supply - supply_before,
                    expected,
                    "supply must grow by exactly epoch {epoch}'s emission"
                );
                self.check_settlement(epoch, expected, &response);
                self.fees_pending = 0;
            }
            None => {
                assert_eq!(supply, supply_before, "supply changed in block {height}");
                assert_eq!(
                    self.balance(&gonka_bank::fee_collector_address()),
                    self.fees_pending,
                    "fee collector after block {height}"
                );
            }
        }
        self.check_power_cap(&response);
        Block {
            response,
            closed_epoch,
        }
    }

    /// Commits empty blocks through the end of the current epoch; returns its last block.
    pub fn finish_epoch(&mut self) -> Block {
        loop {
            let block = self.block(vec![]);
            if block.closed_epoch.is_some() {
                return block;
            }
        }
    }

    /// Recomputes epoch `epoch`'s settlement from the post-block state (which is the state
    /// settlement saw: txs run before `end_epoch`) and compares it with what was recorded.
    fn check_settlement(&self, epoch: u64, emission: u128, response: &ResponseFinalizeBlock) {
        let params = self.rewards_params();
        let settled = self.epoch_rewards(epoch);
        let rewards = settled.rewards.clone().unwrap();
        let total = emission + self.fees_pending;
        let validation = total * u128::from(params.validation_share_ppm) / 1_000_000;
        let rest = total - validation;
        let participants: BTreeMap<String, Participant> = self
            .participants()
            .into_iter()
            .map(|p| (p.operator.clone(), p))
            .collect();
        let counted: Vec<(String, u64)> = self
            .work(epoch)
            .into_iter()
            .filter(|(operator, units)| {
                *units > 0 && participants.get(operator).is_some_and(|p| !p.jailed)
            })
            .collect();
        let total_work: u128 = counted.iter().map(|(_, u)| u128::from(*u)).sum();
        let paid: Vec<(String, u64, u128)> = if total_work == 0 {
            Vec::new()
        } else {
            counted
                .iter()
                .map(|(operator, units)| {
                    let amount = rest * u128::from(*units) / total_work;
                    (operator.clone(), *units, amount)
                })
                .collect()
        };
        let distributed: u128 = paid.iter().map(|(_, _, a)| a).sum();
        assert_eq!(
            (
                rewards.emission.as_str(),
                rewards.fees.as_str(),
                rewards.validation_share.as_str(),
                rewards.distributed.as_str(),
                rewards.community.as_str(),
                u128::from(rewards.total_work),
            ),
            (
                emission.to_string().as_str(),
                self.fees_pending.to_string().as_str(),
                validation.to_string().as_str(),
                distributed.to_string().as_str(),
                (rest - distributed).to_string().as_str(),
                total_work,
            ),
            "settlement of epoch {epoch}"
        );
        let recorded: Vec<(String, u64, u128)> = settled
            .participants
            .iter()
            .map(|r| (r.operator.clone(), r.work, r.amount.parse().unwrap()))
            .collect();
        assert_eq!(recorded, paid, "participant rewards of epoch {epoch}");
        let reward_events = response
            .events
            .iter()
            .filter(|e| e.r#type == "reward")
            .count();
        assert_eq!(reward_events, paid.len());
        assert_eq!(self.balance(&gonka_rewards::rewards_pool_address()), 0);
        assert_eq!(self.balance(&gonka_bank::fee_collector_address()), 0);
    }

    fn check_power_cap(&self, response: &ResponseFinalizeBlock) {
        let params = &self.setup.stake;
        let eligible = eligible(&self.participants(), params).len() as u64;
        if eligible * params.max_power_share_ppm < 1_000_000 {
            return;
        }
        let max = (TOTAL_POWER * u128::from(params.max_power_share_ppm) / 1_000_000) as i64;
        for (key, power) in validator_updates(response) {
            assert!(
                (0..=max).contains(&power),
                "validator {} gets power {power}, above the cap {max} of {TOTAL_POWER}",
                hex::encode(key)
            );
        }
    }

    // --- reads ----------------------------------------------------------------------

    /// Asks query `Q` at the latest committed height; panics on a non-zero code.
    pub fn query<Q: Query>(&self, request: Q::Request) -> Q::Response {
        let response = self.chain.query(Q::PATH, request.encode_to_vec());
        assert_eq!(response.code, 0, "{}: {}", Q::PATH, response.log);
        Q::Response::decode(response.value.as_ref()).unwrap()
    }

    /// The raw answer to query `Q` (its code and log, for a query expected to fail).
    pub fn query_raw<Q: Query>(&self, request: Q::Request) -> ResponseQuery {
        self.chain.query(Q::PATH, request.encode_to_vec())
    }

    /// Every item of the list query `Q`, page after page.
    pub fn query_all<Q: q::ListQuery>(&self, request: Q::Request) -> Vec<Q::Item> {
        let route = |path: &str, data: &[u8]| {
            let response = self.chain.query(path, data.to_vec());
            assert_eq!(response.code, 0, "{path}: {}", response.log);
            Some(Ok(response.value.to_vec()))
        };
        gonka_sdk::walk_pages::<Q>(route, request, q::page::MAX_LIMIT)
            .into_iter()
            .flatten()
            .collect()
    }

    pub fn account(&self, address: &str) -> auth::Account {
        self.query::<q::auth::Account>(auth::QueryAccountRequest {
            address: address.into(),
        })
        .account
        .unwrap()
    }

    pub fn balance(&self, address: &str) -> u128 {
        self.query::<q::bank::Balance>(bank::QueryBalanceRequest {
            address: address.into(),
            denom: "ngnk".into(),
        })
        .balance
        .unwrap()
        .amount
        .parse()
        .unwrap()
    }

    pub fn balance_of(&self, label: &str) -> u128 {
        self.balance(&addr(label))
    }

    pub fn supply(&self) -> u128 {
        self.query::<q::bank::Supply>(bank::QuerySupplyRequest {
            denom: "ngnk".into(),
        })
        .amount
        .unwrap()
        .amount
        .parse()
        .unwrap()
    }

    /// Sum of every ngnk balance, scanned straight from the committed store.
    pub fn balances_sum(&self) -> u128 {
        self.chain
            .app()
            .store()
            .prefix(b"bank/balance/")
            .unwrap()
            .into_iter()
            .map(|(_, value)| bank::Coin::decode(value.as_slice()).unwrap())
            .filter(|coin| coin.denom == "ngnk")
            .map(|coin| coin.amount.parse::<u128>().unwrap())
            .sum()
    }

    pub fn participants(&self) -> Vec<Participant> {
        self.query_all::<q::stake::Participants>(Default::default())
    }

    pub fn participant(&self, label: &str) -> Participant {
        self.query::<q::stake::Participant>(stake::QueryParticipantRequest {
            operator: addr(label),
        })
        .participant
        .unwrap()
    }

    pub fn bonded(&self, label: &str) -> u128 {
        self.participant(label).bonded.parse().unwrap()
    }

    /// The balance of `requester`'s escrow for transfer agent `ta`.
    pub fn escrow(&self, requester: &str, ta: &str) -> u128 {
        use gonka_proto::settlement as spb;
        self.query::<q::settlement::Escrow>(spb::QueryEscrowRequest {
            requester: addr(requester),
            transfer_agent: addr(ta),
        })
        .escrow
        .unwrap()
        .balance
        .parse()
        .unwrap()
    }

    pub fn unbonding(&self, label: &str) -> Vec<UnbondingEntry> {
        self.query_all::<q::stake::Unbonding>(stake::QueryUnbondingRequest {
            operator: addr(label),
            ..Default::default()
        })
    }

    /// Work ledger of `epoch`: `(operator address, units)`.
    pub fn work(&self, epoch: u64) -> Vec<(String, u64)> {
        self.query_all::<q::stake::Work>(stake::QueryWorkRequest {
            epoch,
            ..Default::default()
        })
        .into_iter()
        .map(|r| (r.operator, r.units))
        .collect()
    }

    pub fn epoch_rewards(&self, epoch: u64) -> rewards::QueryEpochRewardsResponse {
        self.query::<q::rewards::Epoch>(rewards::QueryEpochRewardsRequest {
            epoch,
            ..Default::default()
        })
    }

    pub fn epoch_info(&self) -> gonka_proto::epochs::Epoch {
        gonka_epochs::EpochsRead::current_epoch(self.chain.app().store()).unwrap()
    }

    pub fn current_epoch(&self) -> u64 {
        self.epoch_info().number
    }

    /// Committed powers by operator address.
    pub fn powers(&self) -> BTreeMap<String, i64> {
        self.participants()
            .into_iter()
            .map(|p| (p.operator, p.power))
            .collect()
    }
}

/// ngnk paid in fees by the txs of a block: the `fee` of each `tx` event (a tx that passed
/// the ante step, whether or not its messages succeeded).
pub fn fees_paid(response: &ResponseFinalizeBlock) -> u128 {
    response
        .tx_results
        .iter()
        .flat_map(|r| &r.events)
        .filter(|e| e.r#type == "tx")
        .flat_map(|e| &e.attributes)
        .filter(|a| a.key == "fee")
        .map(|a| a.value.trim_end_matches("ngnk").parse::<u128>().unwrap())
        .sum()
}

/// The emission of `epoch` per `gonka_rewards::emission`, cross-checked against the slow
/// way (one 10^18-scaled multiplication per epoch, each rounding down). The two round at
/// different steps, so they must agree to within one part in 10^12 (plus an ngnk per
/// epoch); exact values are asserted by hand in the tests.
pub fn expected_emission(params: &RewardsParams, epoch: u64) -> u128 {
    let exact = gonka_rewards::emission(params, epoch);
    // Independent check: repeated multiplication (f64-free) of the 10^18-scaled factor.
    const SCALE: u128 = 1_000_000_000_000_000_000;
    let step = u128::from(1_000_000_000 - params.decay_ppb) * 1_000_000_000;
    let mut factor = SCALE;
    for _ in 0..epoch {
        factor = factor * step / SCALE;
    }
    let slow = params.initial_emission * factor / SCALE;
    let tolerance = slow / 1_000_000_000_000 + epoch as u128 + 1;
    assert!(
        exact.abs_diff(slow) <= tolerance,
        "emission of epoch {epoch}: module says {exact}, repeated multiplication {slow}"
    );
    exact
}

// ---------------------------------------------------------------------------------------
// The Sprint power rule, re-derived from the `gonka_stake` crate docs.

/// Operators eligible for power: not jailed, bonded ≥ min_stake, with a consensus key.
pub fn eligible<'a>(
    participants: &'a [Participant],
    params: &stake::Params,
) -> Vec<&'a Participant> {
    let min: u128 = params.min_stake.parse().unwrap();
    participants
        .iter()
        .filter(|p| {
            !p.jailed && p.bonded.parse::<u128>().unwrap() >= min && p.consensus_pubkey.len() == 32
        })
        .collect()
}

/// Expected powers after an epoch whose work ledger is `work` (`None`: stake only, as at
/// genesis), by operator; `None` if nobody is eligible (the set is then left unchanged).
pub fn expected_powers(
    participants: &[Participant],
    work: Option<&BTreeMap<String, u64>>,
    params: &stake::Params,
) -> Option<BTreeMap<String, i64>> {
    const SCALE: u128 = 1_000_000_000_000;
    const PPM: u128 = gonka_sdk::PPM as u128;
    let eligible = eligible(participants, params);
    if eligible.is_empty() {
        return None;
    }
    let stakes: Vec<u128> = eligible.iter().map(|p| p.bonded.parse().unwrap()).collect();
    let works: Vec<u128> = eligible
        .iter()
        .map(|p| u128::from(work.and_then(|w| w.get(&p.operator)).copied().unwrap_or(0)))
        .collect();
    let (s, w_total) = (stakes.iter().sum::<u128>(), works.iter().sum::<u128>());
    let w = u128::from(params.stake_weight_ppm);
    let mut weights: Vec<u128> = stakes
        .iter()
        .zip(&works)
        .map(|(stake, work)| {
            let stake_share = stake * SCALE / s;
            // W = 0 (an epoch without verified work): stake only.
            match (work * SCALE).checked_div(w_total) {
                None => stake_share,
                Some(work_share) => (w * stake_share + (PPM - w) * work_share) / PPM,
            }
        })
        .collect();
    let total: u128 = weights.iter().sum();
    let mut powers = BTreeMap::new();
    for p in participants {
        powers.insert(p.operator.clone(), 0);
    }
    if total == 0 {
        return Some(powers);
    }
    let cap_ppm = u128::from(params.max_power_share_ppm);
    if eligible.len() as u128 * cap_ppm >= PPM {
        // Water-filling: weights at or above the cap are pinned to it and the rest of the
        // total is re-spread over the others in proportion to their weights (floor).
        let cap = total * cap_ppm / PPM;
        let mut capped: BTreeSet<usize> = BTreeSet::new();
        loop {
            let newly: Vec<usize> = (0..weights.len())
                .filter(|i| !capped.contains(i) && weights[*i] >= cap)
                .collect();
            if newly.is_empty() {
                break;
            }
            for i in newly {
                weights[i] = cap;
                capped.insert(i);
            }
            let uncapped: u128 = (0..weights.len())
                .filter(|i| !capped.contains(i))
                .map(|i| weights[i])
                .sum();
            if uncapped == 0 {
                break;
            }
            let room = total.saturating_sub(cap * capped.len() as u128);
            for (i, weight) in weights.iter_mut().enumerate() {
                if !capped.contains(&i) {
                    *weight = *weight * room / uncapped;
                }
            }
        }
    }
    for (p, weight) in eligible.iter().zip(&weights) {
        powers.insert(p.operator.clone(), (weight * TOTAL_POWER / total) as i64);
    }
    Some(powers)
}

/// A small seeded xorshift64* generator for the property test (no crates.io dependency).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Avoid the all-zero state, and decorrelate consecutive seeds.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `low..=high`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next() as usize % items.len()]
    }
}

// ---------------------------------------------------------------------------------------
// Inference and disputes: ML nodes, transfer agents and signed work records.

impl World {
    /// Every committed `(key, value)` under `prefix`, straight from the store.
    pub fn raw_prefix(&self, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.chain.app().store().prefix(prefix).unwrap()
    }
}

/// The fixed secp256k1 key of an ML node: the scalar `[seed; 32]`.
pub fn node_key(seed: u8) -> SigningKey {
    SigningKey::from_slice(&[seed; 32]).unwrap()
}

/// The compressed (33-byte) public key of `key`.
pub fn pubkey(key: &SigningKey) -> Vec<u8> {
    key.verifying_key()
        .to_encoded_point(true)
        .as_bytes()
        .to_vec()
}

/// ML node `id` of host `host` (a label) serving `models` with `vram_mib`, signing with
/// `node_key(seed)` (with its proof of possession on [`CHAIN_ID`]), reachable at
/// `http://127.0.0.1:90{seed}`.
pub fn node_spec(host: &str, id: &str, models: &[&str], vram_mib: u64, seed: u8) -> NodeSpec {
    NodeSpec {
        node_id: id.into(),
        models: models.iter().map(|m| m.to_string()).collect(),
        vram_mib,
        bandwidth_mbps: 1_000,
        max_concurrency: 4,
        endpoint: format!("http://127.0.0.1:90{seed:02}"),
        pubkey: pubkey(&node_key(seed)),
        key_proof: gonka_client::node_key_proof(&node_key(seed), CHAIN_ID, &addr(host), id),
    }
}

/// `label` registers as a transfer agent at `url` with its account key.
pub fn register_ta(label: &str, url: &str) -> Any {
    msg_register_transfer_agent(&addr(label), url, &key(label).public_key().to_bytes())
}

/// The model of [`batch_world`], priced 1 ngnk per token.
pub const BATCH_MODEL: &str = "bench/model";
/// The transfer agent of [`batch_world`].
pub const BATCH_TA: &str = "p2";

/// A world for work batches: three participants p0..p2 bonding 1,000,000, `extra` funded
/// with its amount, [`BATCH_MODEL`] priced, [`BATCH_TA`] registered and p0's node n0 (key
/// seed 10); epochs long enough that none ends.
pub fn batch_world(extra: (&str, u128)) -> World {
    let mut setup = Setup::new(3, 1_000_000);
    setup.epoch_length = 100_000;
    setup.accounts.push((extra.0.into(), extra.1));
    let mut world = World::with_genesis(setup, |state| {
        state["inference"] = serde_json::json!({
            "models": [{"id": BATCH_MODEL, "price_per_token": "1", "min_vram_mib": 0}],
        });
    });
    let txs = vec![
        world.tx(BATCH_TA, vec![register_ta(BATCH_TA, "https://ta.example")]),
        world.tx(
            "p0",
            vec![gonka_client::msg_register_node(
                &addr("p0"),
                &node_spec("p0", "n0", &[BATCH_MODEL], 0, 10),
            )],
        ),
    ];
    let block = world.block(txs);
    assert!(block.response.tx_results.iter().all(|r| r.code == 0));
    world
}

/// Some 32 bytes that depend on `s`.
pub fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// The true result hash of request `nonce`: what every honest execution yields.
pub fn truth(nonce: &str) -> [u8; 32] {
    digest(&format!("response {nonce}"))
}

/// Another 32 bytes for request `nonce`: a faked or falsely claimed result.
pub fn lie(nonce: &str) -> [u8; 32] {
    digest(&format!("fake {nonce}"))
}

/// The most ngnk per token every test requester signs for: above every test model's price.
pub const MAX_PRICE_PER_TOKEN: u128 = 1_000_000;

/// The ML node that executes a request: the label of its host, its id and its key seed
/// (`node_key(seed)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exec<'a> {
    pub host: &'a str,
    pub node: &'a str,
    pub seed: u8,
}

/// Node `node` of host `host` (a label), signing with `node_key(seed)`.
pub const fn exec<'a>(host: &'a str, node: &'a str, seed: u8) -> Exec<'a> {
    Exec { host, node, seed }
}

/// The salt of request `nonce`'s output commitment.
pub fn salt(nonce: &str) -> [u8; 32] {
    digest(&format!("salt {nonce}"))
}

/// The output commitment of a record of request `nonce` claiming answer `response_hash`
/// (what a dispute's `claimed_hash` is).
pub fn commitment(nonce: &str, response_hash: &[u8; 32]) -> Vec<u8> {
    gonka_proto::signing::text_output_commitment(&salt(nonce), response_hash).to_vec()
}

/// The ephemeral secret of `dealer`'s key generation dealing (test dealers derive it from
/// their address; real ones draw it).
pub fn dkg_ephemeral(dealer: &str) -> gonka_bls_crypto::dkg::Ephemeral {
    gonka_bls_crypto::dkg::Ephemeral::from_seed(&Sha256::digest(dealer.as_bytes()).into())
}

/// `MsgDkgDeal` of `dealer` (an address) dealing `poly` in `round`, its share for
/// `bad_slot` (if any) replaced by another polynomial's.
pub fn dkg_dealing(
    round: &gonka_proto::bls::DkgRound,
    dealer: &str,
    poly: &gonka_bls_crypto::threshold::Polynomial,
    bad_slot: Option<u64>,
) -> Any {
    use gonka_bls_crypto::threshold::Polynomial;
    let eph = dkg_ephemeral(dealer);
    let good = gonka_client::bls::msg_dkg_deal(CHAIN_ID, round, dealer, poly, &eph).unwrap();
    let Some(slot) = bad_slot else {
        return good;
    };
    let mut msg = gonka_proto::bls::MsgDkgDeal::decode(good.value.as_slice()).unwrap();
    let holder = round
        .members
        .iter()
        .find(|m| (m.first_slot..m.first_slot + m.slots).contains(&slot))
        .unwrap();
    let key = gonka_bls_crypto::PublicKey::from_bytes(&holder.pubkey).unwrap();
    let garbage = Polynomial::from_seed(poly.threshold(), b"garbage").share(slot);
    let context = gonka_proto::signing::dkg_dealing_context(CHAIN_ID, round.id, dealer);
    msg.shares[(slot - 1) as usize] = eph.encrypt(&key, &garbage, &context).to_vec();
    proto_any(&msg)
}

/// `MsgDkgComplain` of `complainer` about `dealer` (labels) in round `round`.
pub fn dkg_complaint(round: u64, complainer: &str, dealer: &str) -> Any {
    gonka_client::bls::msg_dkg_complain(round, &addr(complainer), &addr(dealer))
}

/// `MsgDkgReveal` of `dealer` (a label) answering `complainer` (a label) whose BLS key is
/// `complainer_key`.
pub fn dkg_reveal(
    round: u64,
    dealer: &str,
    complainer: &str,
    complainer_key: &gonka_bls_crypto::PublicKey,
) -> Any {
    gonka_client::bls::msg_dkg_reveal(
        round,
        &addr(dealer),
        &addr(complainer),
        complainer_key,
        &dkg_ephemeral(&addr(dealer)),
    )
}

/// The opening a transfer agent keeps for `record` (of request `record.nonce`, answered
/// with the truth or a lie): its salt and the answer hash its commitment is to.
pub fn opening(record: &WorkRecord) -> ([u8; 32], [u8; 32]) {
    let nonce = &record.nonce;
    [truth(nonce), lie(nonce)]
        .into_iter()
        .find(|answer| gonka_proto::signing::opens(record, &salt(nonce), answer))
        .map(|answer| (salt(nonce), answer))
        .unwrap_or_else(|| panic!("record {nonce} commits to neither the truth nor a lie"))
}

/// `MsgRevealOutput` of transfer agent `ta` (a label) opening `record`'s output.
pub fn reveal_msg(ta: &str, record: &WorkRecord) -> Any {
    let (salt, answer) = opening(record);
    gonka_client::disputes::msg_reveal_output(&addr(ta), &record.inference_id, &salt, &answer)
}

/// What a validator or committee member reports: answer hash `result_hash` and
/// `(prompt, completion)` tokens.
pub fn found(result_hash: [u8; 32], tokens: (u64, u64)) -> ReExecution {
    ReExecution {
        result_hash,
        prompt_tokens: tokens.0,
        completion_tokens: tokens.1,
    }
}

/// The facts of request `nonce` (prompt `digest("prompt {nonce}")`, signed at unix time
/// 1,700,000,000 on [`CHAIN_ID`] for transfer agent `ta` (a label), at most
/// [`MAX_PRICE_PER_TOKEN`] and exactly the completion tokens) executed honestly on `on` with
/// `(prompt, completion)` tokens, its answer committed with [`salt`]`(nonce)`.
pub fn request(
    ta: &str,
    nonce: &str,
    model: &str,
    on: Exec<'_>,
    tokens: (u64, u64),
    commission: u128,
) -> WorkRecordInput {
    WorkRecordInput {
        terms: RequestTerms {
            chain_id: CHAIN_ID.into(),
            body_hash: digest(&format!("prompt {nonce}")),
            timestamp: 1_700_000_000,
            nonce: nonce.into(),
            commission,
            transfer_agent: addr(ta),
            model: model.into(),
            max_price_per_token: MAX_PRICE_PER_TOKEN,
            max_completion_tokens: tokens.1,
            max_prompt_tokens: tokens.0,
        },
        response_hash: truth(nonce),
        salt: salt(nonce),
        scored: None,
        prompt_tokens: tokens.0,
        completion_tokens: tokens.1,
        executor_node: on.node.into(),
        host: addr(on.host),
    }
}

/// `input` as a work record signed by `requester` and by the node key `node_key(seed)`.
pub fn signed_record(requester: &str, seed: u8, input: &WorkRecordInput) -> WorkRecord {
    signed_work_record(key(requester), &node_key(seed), input).unwrap()
}

/// An honest record by `requester` of request `nonce` for transfer agent `ta`, executed by
/// `on`.
pub fn work_record(
    requester: &str,
    ta: &str,
    nonce: &str,
    model: &str,
    on: Exec<'_>,
    tokens: (u64, u64),
    commission: u128,
) -> WorkRecord {
    signed_record(
        requester,
        on.seed,
        &request(ta, nonce, model, on, tokens, commission),
    )
}

/// `label`'s BLS key, derived from its account key as the sidecars derive theirs.
pub fn bls_key(label: &str) -> gonka_bls_crypto::SecretKey {
    gonka_client::bls::account_bls_key(key(label))
}

/// `label` registers its BLS key (needed to co-sign committed batches as a host).
pub fn register_bls(label: &str) -> Any {
    gonka_client::bls::msg_register_bls_key(&addr(label), CHAIN_ID, &bls_key(label))
}

/// The tx of transfer agent `ta` settling `records` as its next committed batch, each
/// co-signed by its host (`host_of` gives the label of a record's host, whose BLS key is
/// registered) and paid at the model's price; with the batch.
pub fn settle_tx(
    w: &mut World,
    ta: &str,
    records: &[WorkRecord],
    host_of: impl Fn(&WorkRecord) -> &'static str,
) -> (gonka_client::settlement::Batch, Vec<u8>) {
    use gonka_client::settlement::{cosign, msg_settle_batch, Batch, Served};
    use gonka_proto::settlement as spb;
    let models: BTreeMap<String, (u128, u64)> = w
        .query_all::<q::inference::Models>(Default::default())
        .into_iter()
        .map(|m| (m.id, (m.price_per_token.parse().unwrap(), m.work_per_token)))
        .collect();
    let served: Vec<Served> = records
        .iter()
        .map(|r| Served {
            record: r.clone(),
            host: addr(host_of(r)),
            cost: u128::from(r.prompt_tokens + r.completion_tokens) * models[&r.model].0,
            work_per_token: models[&r.model].1,
        })
        .collect();
    let number = w
        .query::<q::settlement::BatchNumber>(spb::QueryBatchNumberRequest {
            transfer_agent: addr(ta),
        })
        .number
        + 1;
    let batch = Batch::build(&addr(ta), number, served).unwrap();
    let signatures: Vec<_> = batch
        .msg
        .hosts
        .iter()
        .map(|line| {
            let label = records
                .iter()
                .map(&host_of)
                .find(|l| addr(l) == line.host)
                .unwrap();
            cosign(&bls_key(label), CHAIN_ID, &batch.msg)
        })
        .collect();
    let tx = w.tx(ta, vec![msg_settle_batch(&batch.signed(&signatures))]);
    (batch, tx)
}

/// Batch `number` of `agent` charging `lines` requesters 1 ngnk each for one record of one
/// work unit, all paid to host p0, under an aggregate signature p0's key made over another message: a
/// well-formed batch whose signature any node that checked it would refuse.
pub fn unverifiable_batch(
    agent: &str,
    number: u64,
    lines: usize,
) -> gonka_proto::settlement::MsgSettleBatch {
    use gonka_proto::settlement::{HostTotal, MsgSettleBatch, RequesterTotal};
    let mut requesters: Vec<RequesterTotal> = (0..lines)
        .map(|i| RequesterTotal {
            requester: gonka_auth::module_address(&format!("requester-{i}")),
            amount: "1".into(),
        })
        .collect();
    requesters.sort_by(|a, b| a.requester.cmp(&b.requester));
    MsgSettleBatch {
        transfer_agent: addr(agent),
        number,
        root: vec![7; 32],
        total: lines.to_string(),
        record_count: lines as u64,
        requesters,
        hosts: vec![HostTotal {
            host: addr("p0"),
            work_units: lines as u64,
            payout: lines.to_string(),
            last_index: lines as u64 - 1,
        }],
        host_signature: bls_key("p0").sign(b"another message").to_bytes().to_vec(),
        total_work: lines as u64,
    }
}

/// `msg` signed by `label` as if it were a transfer agent, at sequence 0 with account number
/// `account_number` (any account, even one that does not exist), paying the test fee.
pub fn settle_tx_by(
    label: &str,
    account_number: u64,
    msg: &gonka_proto::settlement::MsgSettleBatch,
) -> Vec<u8> {
    let signer = SignerData {
        chain_id: CHAIN_ID.into(),
        account_number,
        sequence: 0,
    };
    let msgs = vec![gonka_client::settlement::msg_settle_batch(msg)];
    sign(key(label), msgs, &signer, crate::common::tx_fee(), "").unwrap()
}

/// Settles `records` in a block ([`settle_tx`]), then provides every leaf the chain demands
/// of `ta` in the next block (each becomes a stored record for x/disputes to sample). Asserts
/// both txs pass; returns the batch and its id.
pub fn commit_batch(
    w: &mut World,
    ta: &str,
    records: &[WorkRecord],
    host_of: impl Fn(&WorkRecord) -> &'static str,
) -> (gonka_client::settlement::Batch, u64) {
    use gonka_client::settlement::msg_provide_leaf;
    let (batch, tx) = settle_tx(w, ta, records, host_of);
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    let id: u64 = block.tx_events(0, "batch_settled")[0]["batch_id"]
        .parse()
        .unwrap();
    // The next block samples leaves and demands them; the transfer agent provides them.
    w.block(vec![]);
    let provide: Vec<Any> = demanded_leaves(w, ta)
        .into_iter()
        .filter(|(batch_id, _)| *batch_id == id)
        .map(|(_, index)| msg_provide_leaf(&addr(ta), id, batch.leaf_proof(index).unwrap()))
        .collect();
    if !provide.is_empty() {
        let tx = w.tx(ta, provide);
        let block = w.block(vec![tx]);
        assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    }
    (batch, id)
}

/// Every leaf the chain demands of `ta`, as `(batch id, index)`, page after page.
pub fn demanded_leaves(w: &World, ta: &str) -> Vec<(u64, u64)> {
    let mut all = Vec::new();
    let (mut start_batch_id, mut start_index) = (0, 0);
    loop {
        let page = w
            .query::<q::settlement::Demands>(gonka_proto::settlement::QueryDemandsRequest {
                transfer_agent: addr(ta),
                limit: q::settlement::MAX_DEMANDS,
                start_batch_id,
                start_index,
            })
            .demands;
        let full = page.len() as u64 == q::settlement::MAX_DEMANDS;
        if let Some(last) = page.last() {
            (start_batch_id, start_index) = (last.batch_id, last.index + 1);
        }
        all.extend(page.into_iter().map(|d| (d.batch_id, d.index)));
        if !full {
            return all;
        }
    }
}

/// Runs blocks until every committed batch of transfer agent `ta` is final (a batch credits
/// work and pays when it is).
pub fn until_batches_final(w: &mut World, ta: &str) {
    use gonka_proto::settlement as spb;
    let batch = |w: &World, id: u64| {
        let response = w.query_raw::<q::settlement::Batch>(spb::QueryBatchRequest {
            id,
            ..Default::default()
        });
        (response.code == 0).then(|| {
            spb::QueryBatchResponse::decode(response.value.as_ref())
                .unwrap()
                .batch
                .unwrap()
        })
    };
    // Batch ids count from 1 across all transfer agents.
    for id in 1.. {
        let Some(found) = batch(w, id) else { break };
        if found.settled.as_ref().unwrap().transfer_agent != addr(ta) {
            continue;
        }
        while batch(w, id).unwrap().status == spb::BatchStatus::Pending as i32 {
            w.block(vec![]);
        }
        let status = batch(w, id).unwrap().status;
        assert_eq!(status, spb::BatchStatus::Final as i32, "batch {id}");
    }
}

/// A small training job's configuration (the reference architecture, 5 inner steps of 4
/// sequences of 64 bytes, DiLoCo's outer optimizer).
pub fn training_config() -> gonka_proto::pol::TrainingConfig {
    gonka_proto::pol::TrainingConfig {
        model: "gonka-ref-v1".into(),
        seq_len: 64,
        batch_size: 4,
        inner_steps: 5,
        inner_lr_ppm: 3_000,
        inner_weight_decay_ppm: 0,
        outer_lr_ppm: 700_000,
        outer_momentum_ppm: 900_000,
    }
}

// ---------------------------------------------------------------------------------------
// A BLS group and blocks whose beacon it signs.

/// A BLS group in force: its round and each member's shares (member `i` is validator `p{i}`).
pub struct Group {
    pub round: gonka_proto::bls::DkgRound,
    pub shares: Vec<Vec<gonka_bls_crypto::threshold::SecretShare>>,
}

/// CometBFT's address of validator `i` (`p{i}`).
pub fn consensus_address(i: usize) -> Vec<u8> {
    Sha256::digest(consensus_key(i))[..20].to_vec()
}

/// Validator `i`'s vote extension: its partials of the beacon message of `height` with
/// `shares` of round `round`.
pub fn beacon_extension(
    round: u64,
    shares: &[gonka_bls_crypto::threshold::SecretShare],
    height: u64,
) -> Vec<u8> {
    use gonka_proto::bls as pb;
    pb::VoteExtension {
        round,
        partials: gonka_bls_crypto::threshold::sign_all(
            shares,
            &gonka_proto::signing::beacon_message(CHAIN_ID, height),
        )
        .into_iter()
        .map(|p| pb::PartialSignature {
            slot: p.index,
            signature: p.signature.to_bytes().to_vec(),
        })
        .collect(),
        ..Default::default()
    }
    .encode_to_vec()
}

/// Validator `i`'s CometBFT signature of `extension` at `height`, round 0.
pub fn extension_signature(i: usize, extension: &[u8], height: u64) -> [u8; 64] {
    let sign_bytes = tendermint_proto::v0_38::types::CanonicalVoteExtension {
        extension: extension.to_vec(),
        height: height as i64,
        round: 0,
        chain_id: CHAIN_ID.into(),
    }
    .encode_length_delimited_to_vec();
    consensus_signing_key(i).sign(&sign_bytes).to_bytes()
}

/// The last commit as the proposer of the next block sees it: every validator committed,
/// with `extensions[i]` signed by validator `i`'s consensus key at the last height.
pub fn extended_commit(
    w: &World,
    extensions: &[Vec<u8>],
) -> tendermint_proto::v0_38::abci::ExtendedCommitInfo {
    use tendermint_proto::v0_38::abci::{ExtendedCommitInfo, ExtendedVoteInfo, Validator};
    let height = w.chain.height();
    ExtendedCommitInfo {
        round: 0,
        votes: extensions
            .iter()
            .enumerate()
            .map(|(i, ext)| ExtendedVoteInfo {
                validator: Some(Validator {
                    address: consensus_address(i).into(),
                    power: 1,
                }),
                vote_extension: ext.clone().into(),
                extension_signature: extension_signature(i, ext, height).to_vec().into(),
                block_id_flag: tendermint_proto::v0_38::types::BlockIdFlag::Commit as i32,
            })
            .collect(),
    }
}

/// `PrepareProposal` of the next block with `commit` and the mempool's `txs`.
pub fn prepare_with(
    w: &World,
    commit: &tendermint_proto::v0_38::abci::ExtendedCommitInfo,
    txs: Vec<Vec<u8>>,
) -> Vec<Vec<u8>> {
    tendermint_abci::Application::prepare_proposal(
        w.chain.app(),
        tendermint_proto::v0_38::abci::RequestPrepareProposal {
            max_tx_bytes: 1 << 20,
            txs: txs.into_iter().map(Into::into).collect(),
            local_last_commit: Some(commit.clone()),
            height: w.chain.height() as i64 + 1,
            ..Default::default()
        },
    )
    .txs
    .into_iter()
    .map(|t| t.to_vec())
    .collect()
}

impl World {
    /// Validators `p0..p{n-1}` register their BLS keys (those that have none) and deal in
    /// the next key generation round; returns once its group is in force and a block has
    /// passed since (so the group signs the last committed height). The world's epochs must
    /// be short: a round starts in an epoch's last block.
    pub fn form_group(&mut self, n: usize) -> Group {
        use gonka_bls::BlsRead;
        use gonka_bls_crypto::dkg::Ephemeral;
        use gonka_bls_crypto::threshold::Polynomial;
        use gonka_proto::bls as pb;
        use gonka_proto::query::bls as qb;
        let labels: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        let unregistered: Vec<&String> = labels
            .iter()
            .filter(|l| {
                self.chain
                    .app()
                    .store()
                    .bls_key(&addr(l))
                    .unwrap()
                    .is_none()
            })
            .collect();
        let txs = unregistered
            .into_iter()
            .map(|l| self.tx(l, vec![register_bls(l)]))
            .collect();
        self.block(txs);
        let round = loop {
            let latest = self.chain.query(
                qb::Dkg::PATH,
                pb::QueryDkgRequest { round: 0 }.encode_to_vec(),
            );
            if latest.code == 0 {
                let round = pb::QueryDkgResponse::decode(latest.value.as_ref())
                    .unwrap()
                    .round
                    .unwrap();
                if round.members.len() == n {
                    break round;
                }
            }
            self.block(vec![]);
        };
        let deals = labels
            .iter()
            .enumerate()
            .map(|(i, label)| {
                let poly = Polynomial::from_seed(round.threshold as usize, &[i as u8, 7]);
                let ephemeral = Ephemeral::from_seed(&[i as u8 + 50; 32]);
                let msg = gonka_client::bls::msg_dkg_deal(
                    CHAIN_ID,
                    &round,
                    &addr(label),
                    &poly,
                    &ephemeral,
                )
                .unwrap();
                self.tx(label, vec![msg])
            })
            .collect();
        self.block(deals);
        let round = loop {
            let group = self.query::<qb::Group>(pb::QueryGroupRequest {}).round;
            if let Some(group) = group.filter(|g| g.id == round.id) {
                break group;
            }
            self.block(vec![]);
        };
        self.block(vec![]);
        let shares = labels
            .iter()
            .map(|l| {
                gonka_bls::shares::group_shares_in_state(
                    self.chain.app().store(),
                    &bls_key(l),
                    CHAIN_ID,
                    &round,
                )
                .unwrap()
            })
            .collect();
        Group { round, shares }
    }

    /// Commits the next block of `txs` as its proposer makes it from every member's vote
    /// extension of the last height: its beacon transaction carries `group`'s signature.
    pub fn signed_block(&mut self, group: &Group, txs: Vec<Vec<u8>>) -> Block {
        let height = self.chain.height();
        let extensions: Vec<Vec<u8>> = group
            .shares
            .iter()
            .map(|shares| beacon_extension(group.round.id, shares, height))
            .collect();
        let commit = extended_commit(self, &extensions);
        let txs = prepare_with(self, &commit, txs);
        let beacon = gonka_bls::beacon::decode_tx(&txs[0]).unwrap().unwrap();
        assert!(!beacon.signature.is_empty(), "the extensions make a beacon");
        self.block(txs)
    }
}
