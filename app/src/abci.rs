//! `tendermint_abci::Application` for [`App`]: converts ABCI 2.0 requests and responses.
//!
//! A failure in a consensus call (`InitChain`, `FinalizeBlock`, `Commit`) means this node
//! can no longer follow the chain safely: it logs the reason and exits, and CometBFT
//! replays from the last commit when it is restarted.

use std::collections::BTreeSet;

use gonka_sdk::{Event, ValidatorUpdate};
use tendermint_abci::Application;
use tendermint_proto::google::protobuf::Timestamp;
use tendermint_proto::v0_38::abci::{
    self as abci, response_process_proposal::ProposalStatus,
    response_verify_vote_extension::VerifyStatus, ExecTxResult, RequestApplySnapshotChunk,
    RequestCheckTx, RequestExtendVote, RequestFinalizeBlock, RequestInfo, RequestInitChain,
    RequestLoadSnapshotChunk, RequestOfferSnapshot, RequestPrepareProposal, RequestProcessProposal,
    RequestQuery, RequestVerifyVoteExtension, ResponseApplySnapshotChunk, ResponseCheckTx,
    ResponseCommit, ResponseExtendVote, ResponseFinalizeBlock, ResponseInfo, ResponseInitChain,
    ResponseListSnapshots, ResponseLoadSnapshotChunk, ResponseOfferSnapshot,
    ResponsePrepareProposal, ResponseProcessProposal, ResponseQuery, ResponseVerifyVoteExtension,
};
use tendermint_proto::v0_38::crypto::{public_key, PublicKey};

use crate::duty;
use crate::tx::TxOutcome;
use crate::App;

fn fatal(call: &str, error: anyhow::Error) -> ! {
    tracing::error!("{call} failed, stopping so CometBFT can replay after a restart: {error:#}");
    eprintln!("gonkad: {call} failed: {error:#}");
    std::process::exit(1)
}

pub(crate) fn to_abci_events(events: Vec<Event>) -> Vec<abci::Event> {
    events
        .into_iter()
        .map(|event| abci::Event {
            r#type: event.kind,
            attributes: event
                .attributes
                .into_iter()
                .map(|a| abci::EventAttribute {
                    key: a.key,
                    value: a.value,
                    index: a.index,
                })
                .collect(),
        })
        .collect()
}

fn exec_result(outcome: TxOutcome) -> ExecTxResult {
    ExecTxResult {
        code: outcome.code,
        codespace: outcome.codespace.into(),
        log: outcome.log,
        gas_wanted: outcome.gas_wanted,
        gas_used: outcome.gas_used,
        events: to_abci_events(outcome.events),
        ..Default::default()
    }
}

fn to_abci_validator(update: ValidatorUpdate) -> abci::ValidatorUpdate {
    abci::ValidatorUpdate {
        pub_key: Some(PublicKey {
            sum: Some(public_key::Sum::Ed25519(update.ed25519_pub_key.to_vec())),
        }),
        power: update.power,
    }
}

fn block_time(time: Option<Timestamp>) -> (i64, u32) {
    time.map(|t| (t.seconds, u32::try_from(t.nanos).unwrap_or(0)))
        .unwrap_or((0, 0))
}

/// Whether every tx is within the app's size limit: what an honest proposer guarantees.
fn within_tx_limit(app: &App, txs: &[impl AsRef<[u8]>]) -> bool {
    let max = app.max_tx_bytes();
    txs.iter().all(|tx| tx.as_ref().len() as u64 <= max)
}

impl Application for App {
    fn info(&self, request: RequestInfo) -> ResponseInfo {
        let (height, app_hash) = self.last_commit().unwrap_or_else(|e| fatal("Info", e));
        tracing::info!(height, cometbft = %request.version, "Info");
        ResponseInfo {
            data: "gonka".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            app_version: 1,
            last_block_height: height as i64,
            last_block_app_hash: app_hash.map(|h| h.to_vec()).unwrap_or_default().into(),
        }
    }

    fn init_chain(&self, request: RequestInitChain) -> ResponseInitChain {
        let vote_extensions_from = request
            .consensus_params
            .as_ref()
            .and_then(|p| p.abci.as_ref())
            .map_or(0, |a| {
                u64::try_from(a.vote_extensions_enable_height).unwrap_or(0)
            });
        let (app_hash, validators) = self
            .init_chain(
                &request.chain_id,
                request.initial_height,
                vote_extensions_from,
                &request.app_state_bytes,
            )
            .unwrap_or_else(|e| fatal("InitChain", e));
        ResponseInitChain {
            app_hash: app_hash.to_vec().into(),
            // Empty validators: CometBFT keeps the genesis.json validator set.
            validators: validators.into_iter().map(to_abci_validator).collect(),
            consensus_params: None,
        }
    }

    fn query(&self, request: RequestQuery) -> ResponseQuery {
        crate::query::answer(
            self,
            &request.path,
            &request.data,
            request.height,
            request.prove,
        )
    }

    /// Answers without the tx's events: CometBFT does not index CheckTx events and
    /// `broadcast_tx_sync` returns none, so encoding them here and decoding them in CometBFT
    /// would be work for nobody, on every tx and recheck. The block's `FinalizeBlock`
    /// results carry them (what `broadcast_tx_commit`'s `tx_result` and `/tx` show).
    fn check_tx(&self, request: RequestCheckTx) -> ResponseCheckTx {
        let outcome = self.check_tx(&request.tx);
        ResponseCheckTx {
            code: outcome.code,
            codespace: outcome.codespace.into(),
            log: outcome.log,
            gas_wanted: outcome.gas_wanted,
            gas_used: outcome.gas_used,
            ..Default::default()
        }
    }

    fn extend_vote(&self, request: RequestExtendVote) -> ResponseExtendVote {
        let height = u64::try_from(request.height).unwrap_or(0);
        ResponseExtendVote {
            vote_extension: self.extend_vote(height).into(),
        }
    }

    fn verify_vote_extension(
        &self,
        request: RequestVerifyVoteExtension,
    ) -> ResponseVerifyVoteExtension {
        let height = u64::try_from(request.height).unwrap_or(0);
        let status = match self.verify_vote_extension(
            height,
            &request.validator_address,
            &request.vote_extension,
        ) {
            Ok(()) => VerifyStatus::Accept,
            Err(why) => {
                tracing::warn!(
                    height,
                    validator = %hex::encode_upper(&request.validator_address),
                    "rejecting a vote extension: {why}"
                );
                VerifyStatus::Reject
            }
        };
        ResponseVerifyVoteExtension {
            status: status as i32,
        }
    }

    fn prepare_proposal(&self, request: RequestPrepareProposal) -> ResponsePrepareProposal {
        // The beacon first, then the duties this node checked (up to their share of the
        // block), then mempool order without them; drop what does not fit in the block or
        // exceeds the tx limit.
        let height = u64::try_from(request.height).unwrap_or(0);
        let max_tx = self.max_tx_bytes();
        let mut budget = u64::try_from(request.max_tx_bytes).unwrap_or(0);
        let beacon = self.beacon_tx(height, request.local_last_commit.as_ref());
        let duties = self.duty_txs(budget / duty::DUTY_SHARE_DIVISOR, max_tx);
        let placed: BTreeSet<&[u8]> = duties.iter().map(Vec::as_slice).collect();
        let mempool: Vec<_> = request
            .txs
            .into_iter()
            .filter(|tx| !placed.contains(tx.as_ref()))
            .collect();
        let ordered = if duties.is_empty() {
            mempool
        } else {
            self.in_sequence_order(duties.into_iter().map(Into::into).chain(mempool).collect())
        };
        let txs = beacon
            .map(Into::into)
            .into_iter()
            .chain(ordered)
            .filter(|tx| {
                let size = tx.len() as u64;
                let keep = size <= max_tx && size <= budget;
                if keep {
                    budget -= size;
                }
                keep
            })
            .collect();
        ResponsePrepareProposal { txs }
    }

    fn process_proposal(&self, request: RequestProcessProposal) -> ResponseProcessProposal {
        let height = u64::try_from(request.height).unwrap_or(0);
        let verdict = if within_tx_limit(self, &request.txs) {
            self.check_beacon(height, &request.txs, request.proposed_last_commit.as_ref())
        } else {
            Err("a tx exceeds the size limit".to_string())
        };
        let status = match verdict {
            Ok(()) => ProposalStatus::Accept,
            Err(why) => {
                tracing::warn!(height, "rejecting proposal: {why}");
                ProposalStatus::Reject
            }
        };
        ResponseProcessProposal {
            status: status as i32,
        }
    }

    fn finalize_block(&self, request: RequestFinalizeBlock) -> ResponseFinalizeBlock {
        let height = u64::try_from(request.height).unwrap_or(0);
        let block_hash: [u8; 32] = request.hash.as_ref().try_into().unwrap_or_else(|_| {
            fatal(
                "FinalizeBlock",
                anyhow::anyhow!(
                    "block hash must be 32 bytes, found {} (height {height})",
                    request.hash.len()
                ),
            )
        });
        let consensus_info = consensus_info(&request);
        let finalized = self
            .finalize_block(
                height,
                block_time(request.time),
                block_hash,
                &request.txs,
                consensus_info,
            )
            .unwrap_or_else(|e| fatal("FinalizeBlock", e));
        ResponseFinalizeBlock {
            events: to_abci_events(finalized.events),
            tx_results: finalized.tx_results.into_iter().map(exec_result).collect(),
            validator_updates: finalized
                .validator_updates
                .into_iter()
                .map(to_abci_validator)
                .collect(),
            consensus_param_updates: None,
            app_hash: finalized.app_hash.to_vec().into(),
        }
    }

    fn list_snapshots(&self) -> ResponseListSnapshots {
        self.snapshots().list()
    }

    fn offer_snapshot(&self, request: RequestOfferSnapshot) -> ResponseOfferSnapshot {
        self.snapshots().offer(self.store(), request)
    }

    fn load_snapshot_chunk(&self, request: RequestLoadSnapshotChunk) -> ResponseLoadSnapshotChunk {
        self.snapshots().load_chunk(request)
    }

    fn apply_snapshot_chunk(
        &self,
        request: RequestApplySnapshotChunk,
    ) -> ResponseApplySnapshotChunk {
        let (response, restored) = self.snapshots().apply_chunk(request);
        if let Some(height) = restored {
            self.restored(height)
                .unwrap_or_else(|e| fatal("ApplySnapshotChunk", e));
        }
        response
    }

    fn commit(&self) -> ResponseCommit {
        let height = self.commit().unwrap_or_else(|e| fatal("Commit", e));
        ResponseCommit {
            retain_height: i64::try_from(self.retain_height(height)).unwrap_or(0),
        }
    }
}

/// Who signed the last commit, and the block's evidence, as the modules see them. Entries
/// whose address is not 20 bytes (no CometBFT sends one) are left out.
fn consensus_info(request: &RequestFinalizeBlock) -> crate::app::ConsensusInfo {
    use tendermint_proto::v0_38::types::BlockIdFlag;
    let address = |bytes: &[u8]| <[u8; 20]>::try_from(bytes).ok();
    let last_commit = request
        .decided_last_commit
        .iter()
        .flat_map(|commit| &commit.votes)
        .filter_map(|vote| {
            let validator = vote.validator.as_ref()?;
            Some(gonka_sdk::CommitVote {
                validator_address: address(&validator.address)?,
                // A vote for nil is a signature all the same (as the Cosmos SDK counts it).
                signed: vote.block_id_flag != BlockIdFlag::Absent as i32,
            })
        })
        .collect();
    let misbehavior = request
        .misbehavior
        .iter()
        .filter_map(|evidence| {
            let validator = evidence.validator.as_ref()?;
            Some(gonka_sdk::Misbehavior {
                validator_address: address(&validator.address)?,
                height: u64::try_from(evidence.height).ok()?,
                duplicate_vote: evidence.r#type
                    == tendermint_proto::v0_38::abci::MisbehaviorType::DuplicateVote as i32,
            })
        })
        .collect();
    crate::app::ConsensusInfo {
        last_commit,
        misbehavior,
    }
}
