//! An in-process chain: drives an [`App`] through the ABCI `Application` calls block by
//! block, exactly as CometBFT would, for module, pipeline and determinism tests and for
//! benchmarks. Not a substitute for the real localnet.

use std::path::Path;

use sha2::{Digest, Sha256};

use tendermint_abci::Application;
use tendermint_proto::google::protobuf::Timestamp;
use tendermint_proto::v0_38::abci::{
    CommitInfo, Misbehavior, RequestCheckTx, RequestFinalizeBlock, RequestInitChain, RequestQuery,
    ResponseCheckTx, ResponseFinalizeBlock, ResponseQuery,
};

use tendermint_proto::v0_38::types::{AbciParams, ConsensusParams};

use crate::App;

/// Block time of height 0 (2026-01-01T00:00:00Z); each block adds one second.
pub const GENESIS_TIME: i64 = 1_767_225_600;

/// A chain of one in-process app.
pub struct TestChain {
    app: App,
    height: u64,
}

fn timestamp(height: u64) -> Timestamp {
    Timestamp {
        seconds: GENESIS_TIME + height as i64,
        nanos: 0,
    }
}

impl TestChain {
    /// Opens a fresh state database at `path` and runs `InitChain` with `app_state`.
    pub fn new(path: &Path, chain_id: &str, app_state: &serde_json::Value) -> anyhow::Result<Self> {
        Self::with_modules(path, chain_id, app_state, crate::modules::all())
    }

    /// Like [`TestChain::new`] with a custom module list (see [`App::open_with_modules`]).
    pub fn with_modules(
        path: &Path,
        chain_id: &str,
        app_state: &serde_json::Value,
        modules: Vec<Box<dyn gonka_sdk::Module>>,
    ) -> anyhow::Result<Self> {
        Self::with_vote_extensions(path, chain_id, app_state, modules, 0)
    }

    /// Like [`TestChain::with_modules`], with vote extensions on from height
    /// `vote_extensions_from` (0: off), as CometBFT's consensus parameters would say. The
    /// harness itself makes no extensions: a test drives `ExtendVote`, `PrepareProposal` and
    /// `ProcessProposal` through [`TestChain::app`] and commits the proposal it built.
    pub fn with_vote_extensions(
        path: &Path,
        chain_id: &str,
        app_state: &serde_json::Value,
        modules: Vec<Box<dyn gonka_sdk::Module>>,
        vote_extensions_from: u64,
    ) -> anyhow::Result<Self> {
        let app = App::open_with_modules(path, modules)?;
        let abci = AbciParams {
            vote_extensions_enable_height: i64::try_from(vote_extensions_from)?,
        };
        Application::init_chain(
            &app,
            RequestInitChain {
                time: Some(timestamp(0)),
                chain_id: chain_id.into(),
                app_state_bytes: serde_json::to_vec(app_state)?.into(),
                initial_height: 1,
                consensus_params: Some(ConsensusParams {
                    abci: Some(abci),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        Ok(Self { app, height: 0 })
    }

    /// Reopens an existing state database at `path`, continuing from its last commit.
    pub fn reopen(path: &Path) -> anyhow::Result<Self> {
        let app = App::open(path)?;
        let (height, _) = app.last_commit()?;
        Ok(Self { app, height })
    }

    /// The app under test.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// Last committed height.
    pub fn height(&self) -> u64 {
        self.height
    }

    /// The pseudo header hash the harness gives block `height`: SHA-256(height (u64
    /// big-endian) ‖ last committed app hash (absent before the first block)). Deterministic,
    /// so two chains fed the same blocks see the same hashes, and it changes with the state,
    /// as a real header hash (which commits to the previous app hash) does.
    pub fn block_hash(&self, height: u64) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(height.to_be_bytes());
        if let Some(app_hash) = self.app.last_commit().expect("store readable").1 {
            hasher.update(app_hash);
        }
        hasher.finalize().into()
    }

    /// Finalizes the next block with `txs` without committing it (a crash test's "before
    /// Commit" point).
    pub fn finalize(&mut self, txs: Vec<Vec<u8>>) -> ResponseFinalizeBlock {
        self.finalize_with(txs, None, Vec::new())
    }

    /// [`TestChain::finalize`] with what CometBFT tells the app about the validators: who
    /// signed the last commit, and evidence of misbehavior.
    pub fn finalize_with(
        &mut self,
        txs: Vec<Vec<u8>>,
        decided_last_commit: Option<CommitInfo>,
        misbehavior: Vec<Misbehavior>,
    ) -> ResponseFinalizeBlock {
        let height = self.height + 1;
        Application::finalize_block(
            &self.app,
            RequestFinalizeBlock {
                txs: txs.into_iter().map(Into::into).collect(),
                hash: self.block_hash(height).to_vec().into(),
                height: height as i64,
                time: Some(timestamp(height)),
                decided_last_commit,
                misbehavior,
                ..Default::default()
            },
        )
    }

    /// Finalizes and commits the next block with `txs`.
    pub fn next_block(&mut self, txs: Vec<Vec<u8>>) -> ResponseFinalizeBlock {
        self.next_block_with(txs, None, Vec::new())
    }

    /// [`TestChain::next_block`] with the last commit's signatures and the block's evidence
    /// (see [`TestChain::finalize_with`]).
    pub fn next_block_with(
        &mut self,
        txs: Vec<Vec<u8>>,
        decided_last_commit: Option<CommitInfo>,
        misbehavior: Vec<Misbehavior>,
    ) -> ResponseFinalizeBlock {
        let response = self.finalize_with(txs, decided_last_commit, misbehavior);
        Application::commit(&self.app);
        self.height += 1;
        response
    }

    /// Commits empty blocks up to and including the last block of the current epoch, and
    /// returns the response of that last block (which carries the epoch's validator updates).
    pub fn next_epoch(&mut self) -> ResponseFinalizeBlock {
        let epoch = |chain: &Self| {
            gonka_epochs::EpochsRead::current_epoch(chain.app.store())
                .expect("epochs state readable")
                .number
        };
        let start = epoch(self);
        loop {
            let response = self.next_block(Vec::new());
            if epoch(self) != start {
                return response;
            }
        }
    }

    /// Submits `tx` to the mempool check.
    pub fn check_tx(&self, tx: Vec<u8>) -> ResponseCheckTx {
        Application::check_tx(
            &self.app,
            RequestCheckTx {
                tx: tx.into(),
                r#type: 0,
            },
        )
    }

    /// Runs an ABCI query at the latest height.
    pub fn query(&self, path: &str, data: Vec<u8>) -> ResponseQuery {
        self.query_at(path, data, 0)
    }

    /// [`TestChain::query`] of the state committed at `height` (0: the latest).
    pub fn query_at(&self, path: &str, data: Vec<u8>, height: i64) -> ResponseQuery {
        Application::query(
            &self.app,
            RequestQuery {
                data: data.into(),
                path: path.into(),
                height,
                prove: false,
            },
        )
    }

    /// App hash of the last commit.
    pub fn app_hash(&self) -> [u8; 32] {
        self.app
            .last_commit()
            .expect("store readable")
            .1
            .expect("at least one block committed")
    }
}
