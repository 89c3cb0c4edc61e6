//! Executing one transaction: decode, ante, then messages, each stage in its own fork.

use gonka_auth::AuthRead;
use gonka_sdk::{BlockContext, Delta, Error, Event, Module, StateRead, StateWrite, TxContext};

use crate::ante;

/// What happened to a transaction; becomes a `ResponseCheckTx` or an `ExecTxResult`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxOutcome {
    /// Zero on success.
    pub code: u32,
    /// Codespace of a non-zero code.
    pub codespace: &'static str,
    /// Readable log: what failed and what to do.
    pub log: String,
    /// Events of the kept stages.
    pub events: Vec<Event>,
    /// Gas limit from the tx's fee (reported, not metered).
    pub gas_wanted: i64,
}

impl TxOutcome {
    fn failed(error: Error, events: Vec<Event>, gas_wanted: i64) -> Self {
        Self {
            code: error.code,
            codespace: error.codespace,
            log: error.log,
            events,
            gas_wanted,
        }
    }
}

/// Runs `bytes` against `state`:
/// 1. decode and stateless checks — on failure nothing changes;
/// 2. ante (signature, sequence, fee) in a fork — on failure nothing changes;
/// 3. every message in one fork — on failure only the ante's fee and sequence stay.
pub fn execute(
    modules: &[Box<dyn Module>],
    block: &BlockContext,
    state: &mut Delta<'_>,
    bytes: &[u8],
) -> TxOutcome {
    let decoded = match state
        .auth_params()
        .and_then(|params| ante::decode(modules, &params, bytes))
    {
        Ok(decoded) => decoded,
        Err(error) => return TxOutcome::failed(error, Vec::new(), 0),
    };
    let gas_wanted = i64::try_from(decoded.gas_limit).unwrap_or(i64::MAX);

    // Everything the tx keeps is gathered in its own layer, so its events are its own.
    let mut tx_state = state.fork();
    let mut ante_state = tx_state.fork();
    if let Err(error) = ante::authenticate(&decoded, &block.chain_id, &mut ante_state) {
        return TxOutcome::failed(error, Vec::new(), gas_wanted);
    }
    let ante_parts = ante_state.into_parts();
    tx_state.absorb(ante_parts);

    let ctx = TxContext {
        block,
        signer: &decoded.signer,
    };
    let mut msg_state = tx_state.fork();
    let mut failure = None;
    for (type_url, msg) in &decoded.msgs {
        let _span =
            tracing::debug_span!("msg", action = %type_url, height = block.height).entered();
        msg_state.emit(
            Event::new("message")
                .attr("action", type_url)
                .attr("sender", &decoded.signer),
        );
        if let Err(error) = msg.execute(&ctx, &mut msg_state) {
            failure = Some(error);
            break;
        }
    }
    // On failure the fee is paid and the sequence used; the messages' writes are dropped.
    if failure.is_none() {
        let msg_parts = msg_state.into_parts();
        tx_state.absorb(msg_parts);
    }
    let (writes, events) = tx_state.into_parts();
    state.absorb((writes, Vec::new()));
    match failure {
        Some(error) => TxOutcome::failed(error, events, gas_wanted),
        None => TxOutcome {
            code: 0,
            codespace: "",
            log: String::new(),
            events,
            gas_wanted,
        },
    }
}

/// Reads the chain id recorded at genesis.
pub fn chain_id(state: &dyn StateRead) -> gonka_sdk::Result<String> {
    Ok(state
        .get_raw(crate::CHAIN_ID_KEY)?
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default())
}
