//! Gas: what the work a transaction causes costs, and the meter that holds it to its limit.
//!
//! A transaction pays for its bytes, every signature it makes the chain verify, and every
//! state read and write it causes, as in the Cosmos SDK. The app gives each transaction a
//! [`GasMeter`] with the tx's gas limit, runs the ante step and the messages on a
//! [`GasState`] (the one place state access is charged, so no module charges its own reads),
//! and hands messages the meter in their [`crate::TxContext`] for the work that is not state
//! access (a message that verifies signatures charges each one).
//!
//! Integer arithmetic only; additions saturate, so a meter can be exceeded but never wrap.

use std::cell::Cell;

use crate::{ErrorCode, Event, Result, SdkError, StateRead, StateWrite};

/// What each kind of work costs, in gas (auth's parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GasCosts {
    /// Per byte of the TxRaw.
    pub tx_size_per_byte: u64,
    /// Per secp256k1 signature verification.
    pub sig_verify_secp256k1: u64,
    /// Per state read (a prefix scan counts as one read).
    pub read_flat: u64,
    /// Per byte of key and value read.
    pub read_per_byte: u64,
    /// Per state write or delete.
    pub write_flat: u64,
    /// Per byte of key and value written.
    pub write_per_byte: u64,
    /// Per BLS12-381 pairing check.
    pub sig_verify_bls12_381: u64,
}

/// Counts the gas one transaction uses against its limit.
///
/// Once the consumed gas exceeds the limit, every further charge fails with `sdk` error
/// [`SdkError::OutOfGas`] (code 11, as in the Cosmos SDK), and so does [`GasMeter::check`].
/// The consumed amount keeps counting past the limit, as the Cosmos SDK reports it.
#[derive(Debug)]
pub struct GasMeter {
    limit: u64,
    consumed: Cell<u64>,
    /// Where the limit was first exceeded.
    exhausted_at: Cell<Option<&'static str>>,
    /// Inside [`GasMeter::prepaid`] work: charges are not counted.
    prepaid: Cell<bool>,
    costs: GasCosts,
}

impl GasMeter {
    /// A meter allowing `limit` gas at `costs`.
    pub fn new(limit: u64, costs: GasCosts) -> Self {
        Self {
            limit,
            consumed: Cell::new(0),
            exhausted_at: Cell::new(None),
            prepaid: Cell::new(false),
            costs,
        }
    }

    /// A meter that never runs out (simulation, where the limit is what is being asked).
    pub fn unlimited(costs: GasCosts) -> Self {
        Self::new(u64::MAX, costs)
    }

    /// The limit: the tx's `gas_wanted`.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Gas consumed so far: the tx's `gas_used`.
    pub fn consumed(&self) -> u64 {
        self.consumed.get()
    }

    /// The costs this meter charges.
    pub fn costs(&self) -> &GasCosts {
        &self.costs
    }

    /// Charges `amount` gas for `location` (a short name such as `"ReadFlat"`, shown in the
    /// out-of-gas log). Fails once the total exceeds the limit; the gas stays counted.
    pub fn consume(&self, amount: u64, location: &'static str) -> Result<()> {
        if self.prepaid.get() {
            return self.check();
        }
        let consumed = self.consumed.get().saturating_add(amount);
        self.consumed.set(consumed);
        if consumed > self.limit && self.exhausted_at.get().is_none() {
            self.exhausted_at.set(Some(location));
        }
        self.check()
    }

    /// Charges the flat `amount` for `location`, then runs `work` without charging what it
    /// uses. For work whose cost depends on the order of transactions in a block (the vote
    /// or reveal that happens to decide a dispute settles it): a flat price makes the gas a
    /// simulation estimates the gas the tx uses wherever it lands, so a tx cannot run out of
    /// gas (or be dropped from the mempool on recheck) because another landed first. The
    /// caller must bound `work` and set `amount` above what it can cost.
    pub fn prepaid<R>(
        &self,
        amount: u64,
        location: &'static str,
        work: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.consume(amount, location)?;
        let outer = self.prepaid.replace(true);
        let result = work();
        self.prepaid.set(outer);
        result
    }

    /// Charges one secp256k1 signature verification.
    pub fn consume_signature_verify(&self, location: &'static str) -> Result<()> {
        self.consume(self.costs.sig_verify_secp256k1, location)
    }

    /// Charges one BLS12-381 pairing check.
    pub fn consume_bls_verify(&self, location: &'static str) -> Result<()> {
        self.consume(self.costs.sig_verify_bls12_381, location)
    }

    /// `Ok` while the limit holds; the out-of-gas error once it has been exceeded.
    pub fn check(&self) -> Result<()> {
        match self.exhausted_at.get() {
            None => Ok(()),
            Some(location) => Err(SdkError::OutOfGas.err(format!(
                "out of gas in location: {location}; gasWanted: {}, gasUsed: {}; raise the tx's gas limit (gonkad tx --gas auto estimates it)",
                self.limit,
                self.consumed()
            ))),
        }
    }

    /// Whether the limit has been exceeded.
    pub fn is_out_of_gas(&self) -> bool {
        self.exhausted_at.get().is_some()
    }

    fn per_byte(cost: u64, bytes: usize) -> u64 {
        cost.saturating_mul(u64::try_from(bytes).unwrap_or(u64::MAX))
    }
}

/// State access charged to a [`GasMeter`]: reads cost `read_flat` plus `read_per_byte` per
/// byte of key and value, writes `write_flat` plus `write_per_byte` per byte, deletes
/// `write_flat`. A read fails once the meter is exhausted; a write cannot fail, so a write
/// past the limit is only recorded in the meter, which the caller checks when the message
/// returns ([`GasMeter::check`]).
pub struct GasState<'a> {
    inner: &'a mut dyn StateWrite,
    gas: &'a GasMeter,
}

impl<'a> GasState<'a> {
    /// Charges every access to `inner` to `gas`.
    pub fn new(inner: &'a mut dyn StateWrite, gas: &'a GasMeter) -> Self {
        Self { inner, gas }
    }
}

impl GasState<'_> {
    /// Charges the flat cost of a read, before it runs.
    fn charge_read(&self) -> Result<()> {
        self.gas.consume(self.gas.costs().read_flat, "ReadFlat")
    }

    /// Charges the `bytes` of keys and values a read returned.
    fn charge_read_bytes(&self, bytes: usize) -> Result<()> {
        self.gas.consume(
            GasMeter::per_byte(self.gas.costs().read_per_byte, bytes),
            "ReadPerByte",
        )
    }
}

impl StateRead for GasState<'_> {
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.charge_read()?;
        let value = self.inner.get_raw(key)?;
        self.charge_read_bytes(key.len() + value.as_ref().map_or(0, Vec::len))?;
        Ok(value)
    }

    fn range_raw(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.charge_read()?;
        let rows = self.inner.range_raw(prefix, start, limit)?;
        self.charge_read_bytes(rows.iter().map(|(k, v)| k.len() + v.len()).sum())?;
        Ok(rows)
    }
}

impl StateWrite for GasState<'_> {
    fn put_raw(&mut self, key: Vec<u8>, value: Vec<u8>) {
        let costs = self.gas.costs();
        let per_byte = GasMeter::per_byte(costs.write_per_byte, key.len() + value.len());
        // A write past the limit is recorded in the meter; the tx fails when it is checked.
        let _ = self
            .gas
            .consume(costs.write_flat.saturating_add(per_byte), "WriteFlat");
        self.inner.put_raw(key, value);
    }

    fn delete_raw(&mut self, key: Vec<u8>) {
        let _ = self.gas.consume(self.gas.costs().write_flat, "Delete");
        self.inner.delete_raw(key);
    }

    fn emit(&mut self, event: Event) {
        self.inner.emit(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Delta, MemoryState};

    const COSTS: GasCosts = GasCosts {
        tx_size_per_byte: 10,
        sig_verify_secp256k1: 1000,
        read_flat: 1000,
        read_per_byte: 3,
        write_flat: 2000,
        write_per_byte: 30,
        sig_verify_bls12_381: 10_000,
    };

    #[test]
    fn prepaid_work_costs_its_flat_price_whatever_it_does() {
        let used = |work_reads: u64| {
            let meter = GasMeter::new(10_000, COSTS);
            meter.consume(100, "before").unwrap();
            meter
                .prepaid(3_000, "flat", || {
                    for _ in 0..work_reads {
                        meter.consume(1_000, "inside")?;
                    }
                    Ok(())
                })
                .unwrap();
            meter.consume(10, "after").unwrap();
            meter.consumed()
        };
        assert_eq!(used(0), 3_110);
        assert_eq!(used(50), 3_110, "what the prepaid work does is not charged");
        let meter = GasMeter::new(1_000, COSTS);
        let err = meter.prepaid(3_000, "flat", || Ok(())).unwrap_err();
        assert_eq!(
            err.code,
            SdkError::OutOfGas as u32,
            "the flat price is charged first"
        );
    }

    #[test]
    fn meter_counts_and_fails_past_the_limit_with_sdk_code_11() {
        let meter = GasMeter::new(2_500, COSTS);
        meter.consume(1_000, "a").unwrap();
        meter.consume_signature_verify("sig").unwrap();
        assert_eq!(meter.consumed(), 2_000);
        meter.consume(500, "exactly the limit").unwrap();
        assert!(!meter.is_out_of_gas());
        let err = meter.consume(1, "one more").unwrap_err();
        assert_eq!((err.codespace, err.code), ("sdk", 11));
        assert_eq!(err.code, SdkError::OutOfGas as u32);
        assert!(
            err.log.contains("location: one more")
                && err.log.contains("gasWanted: 2500")
                && err.log.contains("gasUsed: 2501"),
            "{}",
            err.log
        );
        // Consumption keeps counting, and the first location is what the log names.
        assert!(meter.consume(10, "later").is_err());
        assert_eq!(meter.consumed(), 2_511);
        assert!(meter.check().unwrap_err().log.contains("one more"));
    }

    #[test]
    fn meter_saturates_instead_of_wrapping() {
        let meter = GasMeter::unlimited(COSTS);
        meter.consume(u64::MAX - 1, "big").unwrap();
        meter.consume(u64::MAX, "bigger").unwrap();
        assert_eq!(meter.consumed(), u64::MAX);
        assert!(!meter.is_out_of_gas(), "the unlimited meter never runs out");
    }

    #[test]
    fn state_access_is_charged_per_access_and_per_byte() {
        let base = MemoryState::from_changes(
            [(b"k/1".to_vec(), Some(b"12345".to_vec()))]
                .into_iter()
                .collect(),
        );
        let mut delta = Delta::new(&base);
        let meter = GasMeter::unlimited(COSTS);
        let mut state = GasState::new(&mut delta, &meter);
        assert_eq!(state.get_raw(b"k/1").unwrap(), Some(b"12345".to_vec()));
        assert_eq!(meter.consumed(), 1000 + 3 * (3 + 5));
        state.get_raw(b"k/2").unwrap();
        assert_eq!(meter.consumed(), 1024 + 1000 + 3 * 3);
        state.put_raw(b"k/2".to_vec(), b"ab".to_vec());
        assert_eq!(meter.consumed(), 2033 + 2000 + 30 * 5);
        state.delete_raw(b"k/1".to_vec());
        assert_eq!(meter.consumed(), 4183 + 2000);
        // The scan sees the fork's own writes: one read plus the bytes of every row.
        assert_eq!(state.prefix_raw(b"k/").unwrap().len(), 1);
        assert_eq!(meter.consumed(), 6183 + 1000 + 3 * 5);
        let (writes, _) = delta.into_parts();
        assert_eq!(writes.len(), 2, "writes pass through to the layer below");
    }

    #[test]
    fn a_write_past_the_limit_is_recorded_and_later_reads_fail() {
        let base = MemoryState::default();
        let mut delta = Delta::new(&base);
        let meter = GasMeter::new(2_100, COSTS);
        let mut state = GasState::new(&mut delta, &meter);
        state.put_raw(b"key".to_vec(), b"value".to_vec());
        assert!(meter.is_out_of_gas());
        let err = state.get_raw(b"key").unwrap_err();
        assert_eq!(err.code, SdkError::OutOfGas as u32);
        assert!(err.log.contains("WriteFlat"), "{}", err.log);
    }
}
