//! Executing one transaction: decode, ante, then messages, each stage in its own fork, all
//! under one gas meter.

use gonka_auth::AuthRead;
use gonka_sdk::{
    BlockContext, Delta, Error, Event, GasMeter, GasState, Module, StateRead, StateWrite, TxContext,
};

use crate::ante::{self, Mode};

/// What happened to a transaction; becomes a `ResponseCheckTx`, an `ExecTxResult` or a
/// `SimulateResponse`.
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
    /// The tx's gas limit (zero if it could not be decoded).
    pub gas_wanted: i64,
    /// Gas the tx consumed up to where it stopped; past `gas_wanted` when it ran out.
    pub gas_used: i64,
    /// Executed, and every message is a duty ([`gonka_sdk::Msg::is_duty`]).
    pub duty: bool,
}

impl TxOutcome {
    fn failed(error: Error, events: Vec<Event>, gas_wanted: i64, gas_used: i64) -> Self {
        Self {
            code: error.code,
            codespace: error.codespace,
            log: error.log,
            events,
            gas_wanted,
            gas_used,
            duty: false,
        }
    }
}

fn gas_i64(gas: u64) -> i64 {
    i64::try_from(gas).unwrap_or(i64::MAX)
}

/// Runs `bytes` against `state`:
/// 1. decode and stateless checks — on failure nothing changes;
/// 2. ante (size gas, account, sequence, fee, signature) in a fork — on failure nothing
///    changes;
/// 3. every message in one fork — on failure, out of gas included, only the ante's fee and
///    sequence stay.
///
/// In [`Mode::Simulate`] the meter has no limit and the signature is not verified; the
/// caller drops `state` afterwards.
pub fn execute(
    modules: &[Box<dyn Module>],
    block: &BlockContext,
    state: &mut Delta<'_>,
    bytes: &[u8],
    mode: Mode,
) -> TxOutcome {
    let decoded = match state.auth_params().and_then(|params| {
        ante::decode(modules, &params, bytes, mode).map(|decoded| (params, decoded))
    }) {
        Ok(decoded) => decoded,
        Err(error) => return TxOutcome::failed(error, Vec::new(), 0, 0),
    };
    let (params, decoded) = decoded;
    let gas_wanted = gas_i64(decoded.gas_limit);
    let gas = match mode {
        Mode::Execute => GasMeter::new(decoded.gas_limit, params.gas_costs),
        Mode::Simulate => GasMeter::unlimited(params.gas_costs),
    };
    let gas_used = |gas: &GasMeter| gas_i64(gas.consumed());

    // Everything the tx keeps is gathered in its own layer, so its events are its own.
    let mut tx_state = state.fork();
    let mut ante_state = tx_state.fork();
    let authenticated = ante::authenticate(
        &decoded,
        &block.chain_id,
        &params,
        &gas,
        &mut GasState::new(&mut ante_state, &gas),
        mode,
    )
    // A write past the limit is only recorded in the meter: check it too.
    .and_then(|()| gas.check());
    if let Err(error) = authenticated {
        return TxOutcome::failed(error, Vec::new(), gas_wanted, gas_used(&gas));
    }
    let ante_parts = ante_state.into_parts();
    tx_state.absorb(ante_parts);

    let ctx = TxContext {
        block,
        signer: &decoded.signer,
        gas: &gas,
    };
    let mut msg_state = tx_state.fork();
    let mut failure = None;
    {
        let mut metered = GasState::new(&mut msg_state, &gas);
        for (type_url, msg) in &decoded.msgs {
            let _span =
                tracing::debug_span!("msg", action = %type_url, height = block.height).entered();
            metered.emit(
                Event::new("message")
                    .attr("action", type_url)
                    .attr("sender", &decoded.signer),
            );
            let result = msg.execute(&ctx, &mut metered);
            // Out of gas wins over whatever error the message made of it.
            if let Err(error) = gas.check().and(result) {
                failure = Some(error);
                break;
            }
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
        Some(error) => TxOutcome::failed(error, events, gas_wanted, gas_used(&gas)),
        None => TxOutcome {
            code: 0,
            codespace: "",
            log: String::new(),
            events,
            gas_wanted,
            gas_used: gas_used(&gas),
            duty: decoded.msgs.iter().all(|(_, msg)| msg.is_duty()),
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
