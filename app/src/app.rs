//! The application's state and its consensus-facing operations; `abci.rs` adapts them to
//! the ABCI wire types.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use gonka_auth::AuthRead;
use gonka_sdk::{
    BlockContext, CommitVote, Delta, Event, HookOutput, Misbehavior, Module, Overlay, StateWrite,
    StateWriteExt, ValidatorUpdate,
};
use gonka_store::{ChangeSet, PreparedCommit, Store};

use crate::ante::{self, Mode};
use crate::beacon::BeaconNode;
use crate::duty::DutyPool;
use crate::lock::lock;
use crate::snapshots::{SnapshotConfig, Snapshots};
use crate::tx::{self, TxOutcome};

/// State key holding the chain id, written at genesis.
pub const CHAIN_ID_KEY: &[u8] = b"app/chain_id";

/// The ABCI application. Cheap to clone: `tendermint-abci` clones it for each of
/// CometBFT's connections, and all clones share one state.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    modules: Vec<Box<dyn Module>>,
    beacon: BeaconNode,
    /// Consensus connection state. Lock order: `consensus` before `check`.
    consensus: Mutex<Consensus>,
    check: Mutex<CheckState>,
    /// What this node keeps of its history.
    retention: Mutex<Retention>,
    /// State-sync snapshots: the ones this node writes, and a restore under way.
    snapshots: Snapshots,
    /// Duty transactions this node checked, which its proposals carry first. Lock order:
    /// after `check`.
    duties: Mutex<DutyPool>,
}

/// What a node keeps of its history. Node-local: the app hash depends only on the latest
/// state, so nodes may keep different amounts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Store versions (heights) kept whole for queries at a past height and proofs; after
    /// each commit the version falling out of the window is pruned. 0 keeps every version.
    pub keep_versions: u64,
    /// Blocks CometBFT is told to keep (Commit's `retain_height`); 0 keeps every block,
    /// which nodes syncing from genesis need.
    pub keep_blocks: u64,
}

#[derive(Default)]
struct Consensus {
    /// Genesis writes from `InitChain`, committed together with the first block (as version
    /// 0, the block as version 1), so a crash before that commit leaves an empty store and
    /// CometBFT simply calls `InitChain` again.
    genesis: Option<ChangeSet>,
    /// The finalized block awaiting `Commit`; never written before it.
    pending: Option<(PreparedCommit, BlockContext)>,
}

/// Mempool view: uncommitted writes of accepted `CheckTx` calls over the committed state.
struct CheckState {
    writes: ChangeSet,
    block: BlockContext,
}

/// What `FinalizeBlock` computed.
pub(crate) struct FinalizedBlock {
    pub tx_results: Vec<TxOutcome>,
    pub events: Vec<Event>,
    pub validator_updates: Vec<ValidatorUpdate>,
    pub app_hash: [u8; 32],
}

/// Validator updates of one block, at most one per key (CometBFT rejects duplicates); a
/// later hook's update for a key replaces an earlier one.
#[derive(Default)]
struct ValidatorChanges(BTreeMap<[u8; 32], i64>);

impl ValidatorChanges {
    fn add(&mut self, output: HookOutput) {
        for update in output.validator_updates {
            self.0.insert(update.ed25519_pub_key, update.power);
        }
    }

    /// The updates in key order.
    fn into_list(self) -> Vec<ValidatorUpdate> {
        self.0
            .into_iter()
            .map(|(ed25519_pub_key, power)| ValidatorUpdate {
                ed25519_pub_key,
                power,
            })
            .collect()
    }
}

impl App {
    /// Opens (or creates) the state database at `path` with the chain's modules.
    pub fn open(path: &Path) -> anyhow::Result<App> {
        Self::open_with_modules(path, crate::modules::all())
    }

    /// Opens the state database at `path` with the chain's modules, for a validator that
    /// signs beacons with the shares `beacon` finds.
    pub fn open_with_beacon(path: &Path, beacon: BeaconNode) -> anyhow::Result<App> {
        Self::open_full(path, crate::modules::all(), beacon)
    }

    /// Opens the state database at `path` with a custom module list: for tests and benches
    /// that add a test-only module (e.g. one that credits work or slashes on command).
    pub fn open_with_modules(path: &Path, modules: Vec<Box<dyn Module>>) -> anyhow::Result<App> {
        Self::open_full(path, modules, BeaconNode::default())
    }

    fn open_full(
        path: &Path,
        modules: Vec<Box<dyn Module>>,
        beacon: BeaconNode,
    ) -> anyhow::Result<App> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let store = Store::open(path)?;
        let block = BlockContext {
            chain_id: tx::chain_id(&store)?,
            height: store.latest_version()?.unwrap_or(0) + 1,
            time_seconds: 0,
            ..BlockContext::default()
        };
        Ok(App {
            inner: Arc::new(Inner {
                store,
                modules,
                beacon,
                consensus: Mutex::new(Consensus::default()),
                check: Mutex::new(CheckState {
                    writes: ChangeSet::new(),
                    block,
                }),
                retention: Mutex::new(Retention::default()),
                snapshots: Snapshots::default(),
                duties: Mutex::new(DutyPool::default()),
            }),
        })
    }

    /// The committed store (for queries and tests).
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Exports `app_state` at the last committed height: the genesis of a new chain that
    /// continues from this state (every module's [`gonka_sdk::Genesis::export_genesis`]).
    pub fn export_genesis(&self) -> anyhow::Result<serde_json::Value> {
        let mut sections = serde_json::Map::new();
        for module in self.modules() {
            let section = module
                .export_genesis_json(self.store())
                .map_err(|e| anyhow::anyhow!("exporting module {}: {e}", module.name()))?;
            sections.insert(module.name().to_string(), section);
        }
        Ok(serde_json::Value::Object(sections))
    }

    /// The node's beacon signing and checking state.
    pub(crate) fn beacon_node(&self) -> &BeaconNode {
        &self.inner.beacon
    }

    /// The modules in hook order.
    pub(crate) fn modules(&self) -> &[Box<dyn Module>] {
        &self.inner.modules
    }

    /// `txs` in proposal order with no tx before a tx of the same signer with a lower
    /// sequence: each is preceded by its signer's earlier ones in the list, so a duty
    /// placed first brings along what its signer sent before it rather than failing on
    /// its sequence. A tx that does not decode keeps its place.
    pub(crate) fn in_sequence_order<T: AsRef<[u8]>>(&self, txs: Vec<T>) -> Vec<T> {
        let Ok(params) = self.inner.store.auth_params() else {
            return txs;
        };
        let keys: Vec<Option<(String, u64)>> = txs
            .iter()
            .map(|tx| {
                ante::decode(self.modules(), &params, tx.as_ref(), Mode::Execute)
                    .ok()
                    .map(|d| (d.signer.clone(), d.sequence()))
            })
            .collect();
        let mut by_signer: BTreeMap<&str, BTreeMap<u64, usize>> = BTreeMap::new();
        for (index, key) in keys.iter().enumerate() {
            if let Some((signer, sequence)) = key {
                by_signer
                    .entry(signer)
                    .or_default()
                    .insert(*sequence, index);
            }
        }
        let mut order = Vec::with_capacity(txs.len());
        let mut placed = vec![false; txs.len()];
        for index in 0..txs.len() {
            if placed[index] {
                continue;
            }
            if let Some((signer, sequence)) = &keys[index] {
                for &earlier in by_signer[signer.as_str()]
                    .range(..*sequence)
                    .map(|(_, i)| i)
                {
                    if !placed[earlier] {
                        placed[earlier] = true;
                        order.push(earlier);
                    }
                }
            }
            placed[index] = true;
            order.push(index);
        }
        let mut slots: Vec<Option<T>> = txs.into_iter().map(Some).collect();
        order
            .into_iter()
            .filter_map(|index| slots[index].take())
            .collect()
    }

    /// Largest tx the committed parameters accept.
    pub(crate) fn max_tx_bytes(&self) -> u64 {
        self.inner
            .store
            .auth_params()
            .map_or(gonka_auth::default_params().max_tx_bytes, |p| {
                p.max_tx_bytes
            })
    }

    /// Last committed height and app hash; `(0, None)` before the first block.
    pub fn last_commit(&self) -> anyhow::Result<(u64, Option<[u8; 32]>)> {
        Ok((
            self.inner.store.latest_version()?.unwrap_or(0),
            self.inner.store.latest_root()?,
        ))
    }

    /// Imports genesis `app_state` (JSON object keyed by module name) and the first height
    /// with vote extensions (0: none), and returns the genesis app hash and the initial
    /// validator set (empty: keep CometBFT's genesis validators). Nothing is written until
    /// the first block commits.
    pub(crate) fn init_chain(
        &self,
        chain_id: &str,
        initial_height: i64,
        vote_extensions_from: u64,
        app_state: &[u8],
    ) -> anyhow::Result<([u8; 32], Vec<ValidatorUpdate>)> {
        if initial_height > 1 {
            bail!(
                "initial_height {initial_height} is not supported; genesis must start at height 1"
            );
        }
        if self.inner.store.latest_version()?.is_some() {
            bail!("InitChain called but the state database already holds committed blocks; start from an empty home or run with --reset");
        }
        let app_state: serde_json::Value = if app_state.is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            serde_json::from_slice(app_state).context("genesis app_state is not valid JSON")?
        };
        let sections = app_state
            .as_object()
            .context("genesis app_state must be a JSON object keyed by module name")?;
        if let Some(unknown) = sections
            .keys()
            .find(|name| !self.modules().iter().any(|m| m.name() == name.as_str()))
        {
            bail!("genesis app_state has a section {unknown:?} that no module owns");
        }

        let mut genesis = Delta::new(&self.inner.store);
        genesis.put_raw(CHAIN_ID_KEY.to_vec(), chain_id.as_bytes().to_vec());
        if vote_extensions_from > 0 {
            genesis.put_proto(
                crate::beacon::VOTE_EXTENSIONS_KEY.to_vec(),
                &vote_extensions_from,
            );
        }
        let mut validators = ValidatorChanges::default();
        for module in self.modules() {
            let output = module
                .init_genesis_json(&mut genesis, sections.get(module.name()))
                .map_err(|e| anyhow::anyhow!("genesis of module {}: {e}", module.name()))?;
            validators.add(output);
        }
        let (writes, _events) = genesis.into_parts();
        let app_hash = self.inner.store.prepare(0, vec![writes.clone()])?.root();

        let mut consensus = lock(&self.inner.consensus);
        let mut check = lock(&self.inner.check);
        check.writes = writes.clone();
        check.block = BlockContext {
            chain_id: chain_id.to_string(),
            height: 1,
            ..BlockContext::default()
        };
        consensus.genesis = Some(writes);
        consensus.pending = None;
        tracing::info!(chain_id, app_hash = %hex::encode(app_hash), "genesis imported");
        Ok((app_hash, validators.into_list()))
    }

    /// Runs a tx against the mempool state; keeps its writes only if it succeeds, so
    /// several txs of one account can queue with increasing sequences.
    pub(crate) fn check_tx(&self, bytes: &[u8]) -> TxOutcome {
        let mut check = lock(&self.inner.check);
        let CheckState { writes, block } = &mut *check;
        let (outcome, tx_writes) = {
            let base = Overlay::new(&self.inner.store, writes);
            let mut delta = Delta::new(&base);
            let outcome = tx::execute(self.modules(), block, &mut delta, bytes, Mode::Execute);
            (outcome, delta.into_parts().0)
        };
        if outcome.code == 0 {
            writes.extend(tx_writes);
        }
        if outcome.code != 0 {
            lock(&self.inner.duties).forget(bytes);
        } else if outcome.duty {
            lock(&self.inner.duties).admit(bytes, block.height);
        }
        outcome
    }

    /// The oldest duty transactions this node checked that fit in `budget` bytes (none
    /// larger than `max_tx`), for its proposal.
    pub(crate) fn duty_txs(&self, budget: u64, max_tx: u64) -> Vec<Vec<u8>> {
        lock(&self.inner.duties).proposal(budget, max_tx)
    }

    /// Runs a tx against a copy of the mempool state as the `Simulate` query does: no
    /// signature check (its gas is still charged), no gas limit, no minimum fee, and nothing
    /// kept. The outcome's `gas_used` is what the signed tx will use on the same state.
    pub(crate) fn simulate(&self, bytes: &[u8]) -> TxOutcome {
        let check = lock(&self.inner.check);
        let base = Overlay::new(&self.inner.store, &check.writes);
        let mut delta = Delta::new(&base);
        tx::execute(
            self.modules(),
            &check.block,
            &mut delta,
            bytes,
            Mode::Simulate,
        )
    }

    /// Executes a decided block (`block_hash` is the header hash CometBFT sends): begin
    /// hooks, every tx in its own fork, end hooks; computes the app hash. Persists nothing:
    /// `commit` does.
    pub(crate) fn finalize_block(
        &self,
        height: u64,
        (time_seconds, time_nanos): (i64, u32),
        block_hash: [u8; 32],
        txs: &[impl AsRef<[u8]>],
        consensus_info: ConsensusInfo,
    ) -> anyhow::Result<FinalizedBlock> {
        let mut consensus = lock(&self.inner.consensus);
        let store = &self.inner.store;
        let latest = store.latest_version()?;
        let (first_version, expected) = match (&consensus.genesis, latest) {
            (Some(_), None) => (0, 1),
            (None, Some(version)) => (height, version + 1),
            (Some(_), Some(version)) => bail!("genesis pending over committed version {version}"),
            (None, None) => bail!("FinalizeBlock before InitChain on an empty state database"),
        };
        if height != expected {
            bail!("FinalizeBlock for height {height} but the next height is {expected}");
        }
        let empty = ChangeSet::new();
        let genesis_view = Overlay::new(store, consensus.genesis.as_ref().unwrap_or(&empty));
        let mut state = Delta::new(&genesis_view);
        // A proposal's first transaction may be its beacon (checked by ProcessProposal, and
        // again by x/bls): it goes to the modules in the block context, and runs no messages.
        let beacon = txs
            .first()
            .and_then(|t| gonka_bls::beacon::decode_tx(t.as_ref()))
            .and_then(Result::ok);
        let block = &BlockContext {
            chain_id: tx::chain_id(&state)?,
            height,
            time_seconds,
            time_nanos,
            block_hash,
            beacon_tx: beacon.as_ref().map(prost::Message::encode_to_vec),
            last_commit: consensus_info.last_commit,
            misbehavior: consensus_info.misbehavior,
        };

        for module in self.modules() {
            let _span = hook_span(module.name(), height, "begin_block");
            module
                .begin_block(block, &mut state)
                .map_err(|e| anyhow::anyhow!("begin_block of {}: {e}", module.name()))?;
        }
        let mut events = state.take_events();
        let beacon_result = beacon.as_ref().map(|b| TxOutcome {
            code: 0,
            codespace: "",
            log: format!(
                "randomness beacon of height {} (and signing request {})",
                b.height, b.request_id
            ),
            events: Vec::new(),
            gas_wanted: 0,
            gas_used: 0,
            duty: false,
        });
        let skip = usize::from(beacon_result.is_some());
        let tx_results: Vec<TxOutcome> = beacon_result
            .into_iter()
            .chain(txs.iter().skip(skip).map(|bytes| {
                tx::execute(
                    self.modules(),
                    block,
                    &mut state,
                    bytes.as_ref(),
                    Mode::Execute,
                )
            }))
            .collect();
        let mut validators = ValidatorChanges::default();
        for module in self.modules() {
            let _span = hook_span(module.name(), height, "end_block");
            let output = module
                .end_block(block, &mut state)
                .map_err(|e| anyhow::anyhow!("end_block of {}: {e}", module.name()))?;
            validators.add(output);
        }
        if let Some(epoch) = gonka_epochs::ends_at(&state, height)? {
            for module in self.modules() {
                let _span = hook_span(module.name(), height, "end_epoch");
                let output = module
                    .end_epoch(block, epoch, &mut state)
                    .map_err(|e| anyhow::anyhow!("end_epoch {epoch} of {}: {e}", module.name()))?;
                validators.add(output);
            }
            gonka_epochs::advance(block, &mut state)?;
            tracing::info!(epoch, height, "epoch ended");
        }
        let validator_updates = validators.into_list();
        let (writes, end_events) = state.into_parts();
        events.extend(end_events);

        let mut change_sets = Vec::with_capacity(2);
        if let Some(genesis) = &consensus.genesis {
            change_sets.push(genesis.clone());
        }
        change_sets.push(writes);
        let prepared = store.prepare(first_version, change_sets)?;
        let app_hash = prepared.root();
        consensus.pending = Some((prepared, block.clone()));
        lock(&self.inner.duties).settle_block(height, txs);
        tracing::debug!(height = block.height, txs = txs.len(), app_hash = %hex::encode(app_hash), "block finalized");
        Ok(FinalizedBlock {
            tx_results,
            events,
            validator_updates,
            app_hash,
        })
    }

    /// Writes the finalized block in one durable transaction and resets the mempool state.
    pub(crate) fn commit(&self) -> anyhow::Result<u64> {
        let mut consensus = lock(&self.inner.consensus);
        let (prepared, block) = consensus
            .pending
            .take()
            .context("Commit without a finalized block")?;
        let height = prepared.version();
        let mut check = lock(&self.inner.check);
        self.inner.store.commit(prepared)?;
        consensus.genesis = None;
        check.writes.clear();
        check.block = BlockContext {
            height: height + 1,
            block_hash: [0; 32],
            beacon_tx: None,
            last_commit: Vec::new(),
            misbehavior: Vec::new(),
            ..block
        };
        tracing::info!(height, "committed");
        drop((check, consensus));
        self.prune(height);
        self.inner.snapshots.after_commit(&self.inner.store, height);
        Ok(height)
    }

    /// Writes snapshots as `config` says (see [`crate::snapshots`]); without this call the
    /// node writes and lists none, but still restores from its peers'.
    pub fn set_snapshots(&self, config: SnapshotConfig) -> anyhow::Result<()> {
        self.inner.snapshots.configure(config)
    }

    /// The node's snapshot state (for the ABCI snapshot calls).
    pub(crate) fn snapshots(&self) -> &Snapshots {
        &self.inner.snapshots
    }

    /// After a snapshot restore committed `height`: the mempool state starts over on it, as
    /// after a restart.
    pub(crate) fn restored(&self, height: u64) -> anyhow::Result<()> {
        let mut consensus = lock(&self.inner.consensus);
        let mut check = lock(&self.inner.check);
        consensus.genesis = None;
        consensus.pending = None;
        check.writes.clear();
        check.block = BlockContext {
            chain_id: tx::chain_id(&self.inner.store)?,
            height: height + 1,
            time_seconds: 0,
            ..BlockContext::default()
        };
        tracing::info!(
            height,
            "state restored from a snapshot; following the chain from the next block"
        );
        Ok(())
    }

    /// Sets what this node keeps of its history (see [`Retention`]).
    pub fn set_retention(&self, retention: Retention) {
        *lock(&self.inner.retention) = retention;
    }

    /// The height CometBFT may delete blocks below after committing `height` (0: none), so
    /// that it keeps the last `keep_blocks`.
    pub(crate) fn retain_height(&self, height: u64) -> u64 {
        match lock(&self.inner.retention).keep_blocks {
            keep if keep > 0 && height >= keep => height + 1 - keep,
            _ => 0,
        }
    }

    /// Prunes the store version that fell out of the window with `height`. A failure is
    /// logged, never fatal: the committed state is whole, and the next commit prunes again.
    fn prune(&self, height: u64) {
        let keep = lock(&self.inner.retention).keep_versions;
        if keep == 0 || height < keep {
            return;
        }
        match self.inner.store.prune(height + 1 - keep) {
            Ok(pruned) => tracing::debug!(
                height,
                nodes = pruned.nodes,
                values = pruned.values,
                "pruned"
            ),
            Err(e) => {
                tracing::warn!(height, error = %format!("{e:#}"), "pruning the store failed; the next commit tries again")
            }
        }
    }
}

/// What CometBFT tells `FinalizeBlock` about the validators: who signed the last commit and
/// the evidence of misbehavior in the block (see [`BlockContext`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct ConsensusInfo {
    pub last_commit: Vec<CommitVote>,
    pub misbehavior: Vec<Misbehavior>,
}

/// The span a module's hook runs in: whatever the module logs carries its name and the height.
fn hook_span(module: &'static str, height: u64, hook: &'static str) -> tracing::span::EnteredSpan {
    tracing::debug_span!("hook", module, height, hook).entered()
}
