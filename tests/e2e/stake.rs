//! The Sprint end to end: a new account stakes with its own consensus key and, after the next
//! epoch boundary, appears in CometBFT's `/validators` with the power the rule gives; a fifth
//! node run with that key signs blocks; unstaking takes it out of the set and returns the funds
//! after the unbonding epochs.
//!
//! The network: 4 genesis validators, each a stake participant bonding [`GENESIS_BOND`] with its
//! node's consensus key (as `gonkad localnet` builds it), [`EPOCH_LENGTH`]-block epochs and
//! [`UNBONDING_EPOCHS`] unbonding epoch, plus a fifth, full node added with
//! `Localnet::add_full_node`.
//!
//! Heights: epoch `n` is blocks `n·L + 1 ..= (n + 1)·L`. The validator updates `FinalizeBlock`
//! returns for the last block `E` of an epoch are CometBFT's set from block `E + 2` on.

use gonka_proto::query::{self as q, Query};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gonka_app::genesis::{GenesisAccount, GenesisConfig};
use gonka_client::{msg_stake, msg_unstake};
use gonka_localnet::{read_consensus_key, AppStateFn, GenesisValidatorKey};
use gonka_proto::bank::QueryBalanceRequest;
use gonka_proto::epochs::{Epoch, QueryCurrentRequest, QueryEpochRequest};
use gonka_proto::stake::{
    Params, Participant, QueryParticipantsRequest, QueryUnbondingRequest, UnbondingEntry,
};
use prost::Message;
use tendermint::block::{CommitSig, Height};
use tendermint::{account, PublicKey};
use tendermint_rpc::{Client as _, Paging};

use crate::support::{addr, stake_validators, Net, MIN_FEE, START_BALANCE, VALIDATORS};

/// ngnk per GNK.
const GNK: u128 = 1_000_000_000;
/// Blocks per epoch: short, yet long enough to observe a state inside an epoch.
const EPOCH_LENGTH: u64 = 10;
/// Epochs an unstaked amount waits: paid at the end of epoch `created + 1`.
const UNBONDING_EPOCHS: u64 = 1;
/// `stake_weight_ppm`, `max_power_share_ppm`: the defaults of x/stake.
const STAKE_WEIGHT_PPM: u64 = 100_000;
const MAX_POWER_SHARE_PPM: u64 = 300_000;
/// Genesis bond of each of the 4 validators.
const GENESIS_BOND: u128 = 10_000 * GNK;
/// What the new account bonds: half a genesis validator's bond.
const NEW_BOND: u128 = 5_000 * GNK;
/// The account that stakes with the fifth node's key.
const STAKER: &str = "e2e-sprint-staker";
/// Index of the fifth (full) node.
const FIFTH: usize = 4;
/// Bound on every wait for blocks or transactions.
const WAIT: Duration = Duration::from_secs(60);

/// Powers of the 4 genesis validators alone: 4 equal bonds, S = 40,000 GNK.
/// weight = ⌊10^13 ngnk · 10^12 / (4·10^13)⌋ = 250,000,000,000 each, total 10^12;
/// power = ⌊2.5·10^11 · 10^6 / 10^12⌋ = 250,000.
const GENESIS_POWER: i64 = 250_000;
/// With the new bond, S = 45,000 GNK = 4.5·10^13 ngnk:
/// genesis weight = ⌊10^13 · 10^12 / 4.5·10^13⌋ = ⌊222,222,222,222.2⌋ = 222,222,222,222,
/// new weight = ⌊5·10^12 · 10^12 / 4.5·10^13⌋ = ⌊111,111,111,111.1⌋ = 111,111,111,111,
/// total = 4 · 222,222,222,222 + 111,111,111,111 = 999,999,999,999;
/// genesis power = ⌊222,222,222,222 · 10^6 / 999,999,999,999⌋ = ⌊222,222.2222224⌋ = 222,222,
/// new power = ⌊111,111,111,111 · 10^6 / 999,999,999,999⌋ = ⌊111,111.1111112⌋ = 111,111
/// (the powers sum to 999,999: the floors lose one). No weight reaches the 30% cap
/// (0.3 · 999,999,999,999 ≈ 3·10^11), so the cap changes nothing.
const JOINED_GENESIS_POWER: i64 = 222_222;
const JOINED_NEW_POWER: i64 = 111_111;

/// The Sprint power rule of x/stake in the case this chain is in, an epoch without verified
/// work: `weight_i = ⌊bond_i·10^12/S⌋`, `power_i = ⌊weight_i·10^6/Σweight⌋`.
fn stake_only_powers(bonds: &[u128]) -> Vec<i64> {
    let candidates: Vec<gonka_stake::power::Candidate> = bonds
        .iter()
        .map(|&stake| gonka_stake::power::Candidate { stake, work: 0 })
        .collect();
    gonka_stake::power::compute(&candidates, STAKE_WEIGHT_PPM, MAX_POWER_SHARE_PPM)
        .expect("bonds fit the power computation")
}

/// Stake parameters: the x/stake defaults except a 1-epoch unbonding.
fn stake_params() -> Params {
    Params {
        min_stake: (100 * GNK).to_string(),
        unbonding_epochs: UNBONDING_EPOCHS,
        stake_weight_ppm: STAKE_WEIGHT_PPM,
        max_power_share_ppm: MAX_POWER_SHARE_PPM,
        jail_epochs: 2,
        ..gonka_stake::default_params()
    }
}

/// Genesis `app_state`: the staker funded, every node's consensus key bonded by its operator
/// (as `gonkad localnet` does), short epochs.
fn genesis(keys: &[GenesisValidatorKey]) -> serde_json::Value {
    let mut config = GenesisConfig {
        accounts: vec![GenesisAccount {
            address: addr(STAKER),
            ngnk: START_BALANCE,
        }],
        min_gas_price: Some(crate::support::min_gas_price()),
        epoch_length: Some(EPOCH_LENGTH),
        stake_params: Some(stake_params()),
        // A challenge window within the one-epoch unbonding (genesis requires it).
        disputes_params: Some(gonka_app::genesis::quick_disputes_params()),
        ..Default::default()
    };
    stake_validators(&mut config, keys, GENESIS_BOND);
    config.app_state()
}

/// Consensus key → power.
type PowerSet = BTreeMap<[u8; 32], i64>;

fn raw_key(key: PublicKey) -> [u8; 32] {
    key.to_bytes()
        .try_into()
        .unwrap_or_else(|k| panic!("not an ed25519 key: {k:?}"))
}

/// CometBFT's validator set for block `height` as node `i` reports it (`/validators`).
async fn validator_set(net: &Net, i: usize, height: u64) -> PowerSet {
    let response = net.clients[i]
        .http()
        .validators(height_of(height), Paging::All)
        .await
        .unwrap_or_else(|e| panic!("validators at {height} from {}: {e:#}", net.logs_of(i)));
    response
        .validators
        .into_iter()
        .map(|v| (raw_key(v.pub_key), v.power.value() as i64))
        .collect()
}

/// The validator updates `FinalizeBlock` returned for block `height` (`/block_results`).
async fn validator_updates(net: &Net, i: usize, height: u64) -> PowerSet {
    block_results(net, i, height)
        .await
        .validator_updates
        .into_iter()
        .map(|u| (raw_key(u.pub_key), u.power.value() as i64))
        .collect()
}

async fn block_results(
    net: &Net,
    i: usize,
    height: u64,
) -> tendermint_rpc::endpoint::block_results::Response {
    net.clients[i]
        .http()
        .block_results(height_of(height))
        .await
        .unwrap_or_else(|e| panic!("block_results {height} from {}: {e:#}", net.logs_of(i)))
}

/// The validators whose precommit for block `height` is in its commit, and how many
/// signature slots (validators of that height) the commit has.
async fn commit_signers(net: &Net, i: usize, height: u64) -> (Vec<account::Id>, usize) {
    let commit = net.clients[i]
        .http()
        .commit(height_of(height))
        .await
        .unwrap_or_else(|e| panic!("commit {height} from {}: {e:#}", net.logs_of(i)))
        .signed_header
        .commit;
    let signed = commit
        .signatures
        .iter()
        .filter_map(|sig| match sig {
            CommitSig::BlockIdFlagCommit {
                validator_address, ..
            } => Some(*validator_address),
            _ => None,
        })
        .collect();
    (signed, commit.signatures.len())
}

fn height_of(height: u64) -> Height {
    Height::try_from(height).unwrap_or_else(|e| panic!("height {height}: {e}"))
}

/// `abci_query` of `path` on node `i`; returns the height the app answered at and the answer.
async fn query<Q: Query>(net: &Net, i: usize, request: &Q::Request) -> (u64, Q::Response) {
    let path = Q::PATH;
    let response = net.clients[i]
        .http()
        .abci_query(Some(path.to_string()), request.encode_to_vec(), None, false)
        .await
        .unwrap_or_else(|e| panic!("abci_query {path} on {}: {e:#}", net.logs_of(i)));
    assert!(
        response.code.is_ok(),
        "abci_query {path} on {} failed ({} {}): {}",
        net.logs_of(i),
        response.codespace,
        response.code.value(),
        response.log
    );
    let answer = Q::Response::decode(response.value.as_slice()).unwrap_or_else(|e| {
        panic!(
            "the answer to {path} from {} is malformed: {e}",
            net.logs_of(i)
        )
    });
    (response.height.value(), answer)
}

/// The chain state the test follows, all read at one committed height.
#[derive(Debug)]
struct Snapshot {
    height: u64,
    epoch: Epoch,
    balance: u128,
    unbonding: Vec<UnbondingEntry>,
    participants: Vec<Participant>,
}

impl Snapshot {
    fn participant(&self, operator: &str) -> &Participant {
        self.participants
            .iter()
            .find(|p| p.operator == operator)
            .unwrap_or_else(|| panic!("no participant {operator} at height {}", self.height))
    }
}

/// Reads the running epoch, the staker's balance and unbonding entries and every participant
/// through node `i`, retrying until all four answers come from the same height.
async fn snapshot(net: &Net, i: usize) -> Snapshot {
    let staker = addr(STAKER);
    for _ in 0..20 {
        let (height, current) = query::<q::epochs::Current>(net, i, &QueryCurrentRequest {}).await;
        let (h_balance, balance) = query::<q::bank::Balance>(
            net,
            i,
            &QueryBalanceRequest {
                address: staker.clone(),
                denom: gonka_client::DENOM.into(),
            },
        )
        .await;
        let (h_unbonding, unbonding) = query::<q::stake::Unbonding>(
            net,
            i,
            &QueryUnbondingRequest {
                operator: staker.clone(),
                ..Default::default()
            },
        )
        .await;
        let (h_participants, participants) =
            query::<q::stake::Participants>(net, i, &QueryParticipantsRequest::default()).await;
        if [h_balance, h_unbonding, h_participants] == [height; 3] {
            let amount = balance.balance.unwrap_or_default().amount;
            return Snapshot {
                height,
                epoch: current
                    .epoch
                    .unwrap_or_else(|| panic!("/epochs/current without an epoch at {height}")),
                balance: amount
                    .parse()
                    .unwrap_or_else(|e| panic!("balance {amount:?}: {e}")),
                unbonding: unbonding.entries,
                participants: participants.participants,
            };
        }
    }
    panic!(
        "{} committed a block between every two queries in 20 tries",
        net.logs_of(i)
    );
}

/// The epoch a transaction included at `height` ran in.
fn epoch_of(height: u64) -> u64 {
    (height - 1) / EPOCH_LENGTH
}

/// Waits until epoch `number` has ended and its last block is committed on node 0, checks the
/// chain's record of it (`/epochs/epoch`) against the fixed-length schedule, and returns it.
async fn ended_epoch(net: &Net, number: u64) -> Epoch {
    let last = (number + 1) * EPOCH_LENGTH;
    net.wait_for_height(0, last + 1, WAIT).await;
    let (_, answer) = query::<q::epochs::Epoch>(net, 0, &QueryEpochRequest { number }).await;
    let epoch = answer
        .epoch
        .unwrap_or_else(|| panic!("/epochs/epoch {number}: no epoch"));
    assert_eq!(
        (epoch.start_height, epoch.end_height),
        (number * EPOCH_LENGTH + 1, last),
        "epoch {number} on {}: {epoch:?}",
        net.logs_of(0)
    );
    epoch
}

/// Signs and broadcasts `msg` from the staker through node `i`; returns the height that
/// includes it, asserting it succeeded.
async fn staker_tx(net: &Net, i: usize, msg: gonka_client::Any, memo: &str) -> u64 {
    net.tx_ok(i, STAKER, vec![msg], memo).await.height
}

/// The longest interval between consecutive block times in `1..=last` (from node 0's
/// `/blockchain`), and the height that ends it.
async fn longest_block_gap(net: &Net, last: u64) -> (Duration, u64) {
    let mut times = BTreeMap::new();
    let mut max = last;
    while max >= 1 {
        let min = max.saturating_sub(19).max(1);
        let metas = net.clients[0]
            .http()
            .blockchain(height_of(min), height_of(max))
            .await
            .unwrap_or_else(|e| panic!("blockchain {min}..={max}: {e:#}"))
            .block_metas;
        for meta in metas {
            times.insert(meta.header.height.value(), meta.header.time);
        }
        max = min - 1;
    }
    assert_eq!(times.len() as u64, last, "node 0 is missing block metas");
    let times: Vec<(u64, tendermint::Time)> = times.into_iter().collect();
    times
        .windows(2)
        .map(|w| {
            let gap = w[1]
                .1
                .duration_since(w[0].1)
                .unwrap_or_else(|e| panic!("block {} is older than block {}: {e}", w[1].0, w[0].0));
            (gap, w[1].0)
        })
        .max()
        .unwrap_or_default()
}

/// The Sprint, end to end, on 4 genesis validators and a fifth node:
///
/// 1. Genesis: CometBFT's set is the 4 nodes' keys at 250,000 each.
/// 2. A fifth, full node (fresh keys, not in genesis) starts, catches up and reports voting
///    power 0. A funded account stakes 5,000 GNK with that node's consensus key (broadcast
///    through the fifth node).
/// 3. At the end of the epoch: `FinalizeBlock` of its last block `E` returns the 5 updates,
///    `/validators` at `E + 1` is still the genesis set and at `E + 2` holds the fifth key at
///    111,111 and the genesis keys at 222,222 (the rule, by hand and by formula), on node 0
///    and on the fifth node; `/stake/participants` agrees and the fifth node's `/status`
///    reports its power.
/// 4. The fifth node signs: a commit from `E + 2` on holds its precommit (`BlockIdFlagCommit`
///    with its address), and none before it joined does.
/// 5. The account unstakes everything: an unbonding entry completing `UNBONDING_EPOCHS` later;
///    after the next boundary the fifth key is gone from `/validators` (genesis keys back at
///    250,000, commits with 4 slots); during the completing epoch the funds are still away;
///    `FinalizeBlock` of that epoch's last block pays them (`unbonding_completed`), after
///    which the balance is the genesis balance minus the two fees and no entry is left.
/// 6. Blocks came steadily throughout, and all 5 nodes store the same block and app hash at a
///    common height and their apps agree.
#[test]
fn a_new_account_stakes_validates_with_its_own_node_and_unstakes() {
    crate::support::run(async {
        let started = Instant::now();
        let mut net = Net::start_with("sprint", VALIDATORS + 1, |config| {
            config.app_state_for_validators = Some(AppStateFn(Arc::new(genesis)));
        })
        .await;
        let staker = addr(STAKER);
        let genesis_keys: Vec<[u8; 32]> = (0..VALIDATORS)
            .map(|i| {
                read_consensus_key(&net.node(i).cometbft_home)
                    .unwrap_or_else(|e| panic!("consensus key of node {i}: {e:#}"))
            })
            .collect();

        // The expected sets, from the rule and checked against the hand computation above.
        let genesis_powers = stake_only_powers(&[GENESIS_BOND; VALIDATORS]);
        assert_eq!(genesis_powers, vec![GENESIS_POWER; VALIDATORS]);
        let mut bonds = vec![GENESIS_BOND; VALIDATORS];
        bonds.push(NEW_BOND);
        let joined_powers = stake_only_powers(&bonds);
        assert_eq!(
            joined_powers,
            vec![
                JOINED_GENESIS_POWER,
                JOINED_GENESIS_POWER,
                JOINED_GENESIS_POWER,
                JOINED_GENESIS_POWER,
                JOINED_NEW_POWER
            ]
        );
        let genesis_set: PowerSet = genesis_keys.iter().copied().zip(genesis_powers).collect();

        // 1. Genesis.
        let h = net.height(0).await;
        assert_eq!(
            validator_set(&net, 0, h).await,
            genesis_set,
            "genesis validator set at height {h}"
        );
        // The CLI lists the 4 genesis participants a page at a time: --limit, and the
        // --page-key each page hands out.
        let node0 = net.node(0).rpc_url.clone();
        let participants = |page: &[&str]| {
            let mut args = vec![
                "--node",
                &node0,
                "--output",
                "json",
                "query",
                "stake",
                "participants",
                "--limit",
                "3",
            ];
            args.extend_from_slice(page);
            crate::support::gonkad_json(&args)
        };
        let first = participants(&[]);
        assert_eq!(
            first["participants"].as_array().unwrap().len(),
            3,
            "{first}"
        );
        let next_key = first["pagination"]["next_key"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(!next_key.is_empty(), "{first}");
        let second = participants(&["--page-key", &next_key]);
        assert_eq!(
            second["participants"].as_array().unwrap().len(),
            1,
            "{second}"
        );
        assert_eq!(second["pagination"]["next_key"], "", "{second}");
        assert!(
            second["participants"][0]["operator"].as_str()
                > first["participants"][2]["operator"].as_str(),
            "{first} then {second}"
        );

        // 2. The fifth node.
        let fifth = net.add_full_node();
        assert_eq!(fifth, FIFTH);
        assert!(!net.node(fifth).genesis_validator);
        let fifth_key = read_consensus_key(&net.node(fifth).cometbft_home)
            .unwrap_or_else(|e| panic!("consensus key of node {fifth}: {e:#}"));
        assert!(!genesis_keys.contains(&fifth_key));
        let fifth_address = account::Id::from(
            PublicKey::from_raw_ed25519(&fifth_key).expect("a 32-byte ed25519 key"),
        );
        net.restart(fifth);
        let tip = net.height(0).await;
        let caught_up = net.wait_for_height(fifth, tip, WAIT).await;
        let status = net.clients[fifth]
            .status()
            .await
            .unwrap_or_else(|e| panic!("status of {}: {e:#}", net.logs_of(fifth)));
        assert_eq!(raw_key(status.validator_info.pub_key), fifth_key);
        assert_eq!(status.validator_info.power.value(), 0);
        eprintln!(
            "node {fifth} (full node, validator address {fifth_address}) caught up to height \
             {caught_up} after {:?}",
            started.elapsed()
        );

        let staked_at = staker_tx(
            &net,
            fifth,
            msg_stake(&staker, NEW_BOND, "node4", Some(fifth_key)),
            "e2e sprint stake",
        )
        .await;
        let stake_epoch = epoch_of(staked_at);

        // 3. The next boundary.
        let joined_at = ended_epoch(&net, stake_epoch).await.end_height;
        net.wait_all_heights(joined_at + 2, WAIT).await;
        let mut joined_set = genesis_set.clone();
        for (key, power) in genesis_keys.iter().chain([&fifth_key]).zip(&joined_powers) {
            joined_set.insert(*key, *power);
        }
        assert_eq!(
            validator_updates(&net, 0, joined_at).await,
            joined_set,
            "FinalizeBlock of block {joined_at}, the last of epoch {stake_epoch}, returns every \
             changed power"
        );
        assert_eq!(
            validator_set(&net, 0, joined_at + 1).await,
            genesis_set,
            "block {} still has the old set",
            joined_at + 1
        );
        for i in [0, fifth] {
            assert_eq!(
                validator_set(&net, i, joined_at + 2).await,
                joined_set,
                "the set of block {} on {}",
                joined_at + 2,
                net.logs_of(i)
            );
        }
        let snap = snapshot(&net, 0).await;
        let participant = snap.participant(&staker);
        assert_eq!(participant.power, JOINED_NEW_POWER, "{participant:?}");
        assert_eq!(participant.bonded, NEW_BOND.to_string(), "{participant:?}");
        assert_eq!(participant.consensus_pubkey, fifth_key.to_vec());
        assert_eq!(participant.moniker, "node4");
        for p in snap.participants.iter().filter(|p| p.operator != staker) {
            assert_eq!(p.power, JOINED_GENESIS_POWER, "{p:?}");
        }
        assert_eq!(snap.balance, START_BALANCE - NEW_BOND - MIN_FEE);
        let status = net.clients[fifth]
            .status()
            .await
            .unwrap_or_else(|e| panic!("status of {}: {e:#}", net.logs_of(fifth)));
        assert_eq!(
            status.validator_info.power.value(),
            JOINED_NEW_POWER as u64,
            "node {fifth} /status"
        );
        eprintln!(
            "staked at height {staked_at} (epoch {stake_epoch}); from block {} on the set is \
             node {fifth} {JOINED_NEW_POWER} and 4 x {JOINED_GENESIS_POWER}",
            joined_at + 2
        );

        // 4. The fifth node signs. Before it joined, no commit could hold its precommit.
        let (signed, slots) = commit_signers(&net, 0, joined_at + 1).await;
        assert_eq!(slots, VALIDATORS);
        assert!(!signed.contains(&fifth_address));
        let mut signed_at = None;
        for height in joined_at + 2..joined_at + 2 + EPOCH_LENGTH {
            net.wait_for_height(0, height + 1, WAIT).await;
            let (signed, slots) = commit_signers(&net, 0, height).await;
            assert_eq!(slots, VALIDATORS + 1, "commit of block {height}");
            if signed.contains(&fifth_address) {
                signed_at = Some(height);
                break;
            }
        }
        let signed_at = signed_at.unwrap_or_else(|| {
            panic!(
                "node {fifth} ({fifth_address}) signed none of the {EPOCH_LENGTH} blocks from {} \
                 on; see {}",
                joined_at + 2,
                net.logs_of(fifth)
            )
        });
        eprintln!("node {fifth} precommitted block {signed_at}");

        // 5. Unstake everything, through node 0 this time.
        let unstaked_at = staker_tx(
            &net,
            0,
            msg_unstake(&staker, NEW_BOND),
            "e2e sprint unstake",
        )
        .await;
        let unstake_epoch = epoch_of(unstaked_at);
        let completes = unstake_epoch + UNBONDING_EPOCHS;
        let away = START_BALANCE - NEW_BOND - 2 * MIN_FEE;
        let snap = snapshot(&net, 0).await;
        let expected_entry = UnbondingEntry {
            operator: staker.clone(),
            amount: NEW_BOND.to_string(),
            created_epoch: unstake_epoch,
            completes_epoch: completes,
            id: snap.unbonding.first().map_or(0, |e| e.id),
        };
        assert_eq!(snap.unbonding, vec![expected_entry.clone()]);
        assert_eq!(snap.balance, away);
        assert_eq!(snap.participant(&staker).bonded, "0");

        let left_at = ended_epoch(&net, unstake_epoch).await.end_height;
        net.wait_all_heights(left_at + 2, WAIT).await;
        let mut left_updates = genesis_set.clone();
        left_updates.insert(fifth_key, 0);
        assert_eq!(
            validator_updates(&net, 0, left_at).await,
            left_updates,
            "FinalizeBlock of block {left_at}, the last of epoch {unstake_epoch}"
        );
        assert_eq!(validator_set(&net, 0, left_at + 1).await, joined_set);
        for i in [0, fifth] {
            assert_eq!(
                validator_set(&net, i, left_at + 2).await,
                genesis_set,
                "the set of block {} on {}",
                left_at + 2,
                net.logs_of(i)
            );
        }
        net.wait_for_height(0, left_at + 3, WAIT).await;
        let (signed, slots) = commit_signers(&net, 0, left_at + 2).await;
        assert_eq!(slots, VALIDATORS, "commit of block {}", left_at + 2);
        assert!(!signed.contains(&fifth_address));

        // Within the completing epoch the funds are still away.
        let snap = snapshot(&net, 0).await;
        assert_eq!(
            snap.epoch.number, completes,
            "test too slow: height {} is past epoch {completes}, so the state before the payment \
             was not observed",
            snap.height
        );
        assert_eq!(snap.participant(&staker).power, 0);
        assert_eq!(snap.unbonding, vec![expected_entry]);
        assert_eq!(
            snap.balance, away,
            "funds back before the end of epoch {completes}"
        );
        let before_payment = snap.height;

        // The last block of the completing epoch pays them.
        let paid_at = ended_epoch(&net, completes).await.end_height;
        let events = block_results(&net, 0, paid_at).await.finalize_block_events;
        let paid = events.iter().any(|event| {
            event.kind == "unbonding_completed"
                && event.attributes.iter().any(|a| {
                    a.key_str().ok() == Some("operator") && a.value_str().ok() == Some(&staker)
                })
                && event.attributes.iter().any(|a| {
                    a.key_str().ok() == Some("amount")
                        && a.value_str().ok() == Some(&format!("{NEW_BOND}ngnk"))
                })
        });
        assert!(
            paid,
            "block {paid_at} has no unbonding_completed event for {staker}: {events:?}"
        );
        let snap = snapshot(&net, 0).await;
        assert!(snap.epoch.number > completes);
        assert_eq!(snap.unbonding, Vec::new());
        assert_eq!(
            snap.balance,
            START_BALANCE - 2 * MIN_FEE,
            "after the end of epoch {completes} the staker holds its genesis balance minus 2 fees"
        );
        assert_eq!(
            net.balance(fifth, &staker).await,
            START_BALANCE - 2 * MIN_FEE,
            "balance on node {fifth}"
        );
        eprintln!(
            "unstaked at height {unstaked_at} (epoch {unstake_epoch}); left the set at block {}; \
             funds still away at height {before_payment}, paid back in block {paid_at} (end of \
             epoch {completes})",
            left_at + 2
        );

        // 6. Steady blocks; one chain on all 5 nodes.
        let end = net.height(0).await + 1;
        net.wait_all_heights(end, WAIT).await;
        let app_hash = net.assert_same_block(&[0, 1, 2, 3, fifth], end).await;
        for i in 0..=fifth {
            net.assert_app_agrees(i, 0).await;
        }
        let (gap, gap_at) = longest_block_gap(&net, end).await;
        assert!(
            gap < Duration::from_secs(5),
            "block {gap_at} came {gap:?} after the one before it: the chain stalled"
        );
        eprintln!(
            "all 5 nodes store block {end} with app hash {app_hash}; longest block interval \
             {gap:?} (before block {gap_at}); test took {:?}",
            started.elapsed()
        );
        // The explorer shows the settled epochs and the power changes as RPC reads them.
        crate::explorer::browse_and_check(&net, STAKER, crate::explorer::History::Epoch, "stake")
            .await;
    });
}
