//! The transfer agent's view of its requesters' escrows (x/settlement), so that the request
//! path needs no chain round trip: a request is served only when the requester's escrow for
//! this TA covers its worst-case cost on top of everything already promised.
//!
//! What a requester can still spend is
//!
//! `escrow balance − owed − reserved`
//!
//! where the *escrow balance* is the chain's, as of the height of the last query, less this
//! TA's own batches included after that height (the TA knows exactly what it debited);
//! *owed* is what its served records not yet included on chain will charge (the outbox's
//! count, [`Outbox::owed_by`](crate::settle::Outbox::owed_by)); and *reserved* is the
//! worst-case cost of its requests in flight ([`Reservation`]), so concurrent requests cannot
//! together overspend. Every error leans towards refusing: a batch the TA learns about late
//! is still counted as owed, and a fresher query never forgets a debit it does not show yet.
//!
//! An escrow is relied on only while it is open (`height < expires_at`) and at least
//! [`RELEASE_MARGIN_BLOCKS`] before it is released, so that the batch carrying the request
//! lands while the escrow can still be debited. A view older than the book's time to live is
//! queried again before use; a requester that falls short is queried again (at most once per
//! [`RECHECK_AFTER`]) before the 402, so a top-up counts at once. The book holds at most
//! `capacity` requesters; when full, those with nothing reserved are forgotten, oldest first.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gonka_client::rpc::QueryError;
use gonka_client::Chain;
use gonka_proto::query::settlement as q;

/// Blocks before an escrow's release within which it is no longer relied on for new requests.
pub const RELEASE_MARGIN_BLOCKS: u64 = 30;

/// Least age of a view before a shortfall makes the TA ask the chain again.
pub const RECHECK_AFTER: Duration = Duration::from_millis(200);

/// An escrow as the chain showed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EscrowTerms {
    /// ngnk the escrow holds.
    pub balance: u128,
    /// Height from which it is closing.
    pub expires_at: u64,
    /// Height at which it is released.
    pub release_at: u64,
}

#[derive(Debug)]
struct Entry {
    /// The escrow at `as_of` (`None`: the requester has none for this TA), less `debits`.
    escrow: Option<EscrowTerms>,
    /// Height of the query.
    as_of: u64,
    /// When the query answered.
    learned: Instant,
    /// This TA's batches included after `as_of`: (height, amount), already taken off
    /// `escrow.balance`.
    debits: Vec<(u64, u128)>,
    /// Worst-case cost of the requests in flight.
    reserved: u128,
}

/// Why a requester cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shortfall {
    /// The book has no fresh view of the requester: ask the chain.
    Unknown,
    /// No escrow for this TA on chain.
    NoEscrow,
    /// The escrow is closing (or too close to its release) at the height of the view.
    Closing { as_of: u64, expires_at: u64 },
    /// The escrow does not cover the request.
    Short {
        balance: u128,
        owed: u128,
        reserved: u128,
        needed: u128,
    },
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shortfall::Unknown => write!(f, "the escrow is not known yet"),
            Shortfall::NoEscrow => write!(f, "there is no escrow for this transfer agent"),
            Shortfall::Closing { as_of, expires_at } => write!(
                f,
                "the escrow closes at height {expires_at} (the chain is at {as_of}) and is no longer relied on"
            ),
            Shortfall::Short {
                balance,
                owed,
                reserved,
                needed,
            } => write!(
                f,
                "the escrow holds {balance} ngnk, of which {owed} ngnk is owed for requests not settled yet and {reserved} ngnk is held by requests in flight, but this request may cost up to {needed} ngnk"
            ),
        }
    }
}

/// The escrow view of every recent requester.
#[derive(Debug)]
pub struct EscrowBook {
    entries: Mutex<BTreeMap<String, Entry>>,
    ttl: Duration,
    capacity: usize,
}

/// The worst-case cost of one request in flight, held against its requester's escrow until
/// dropped (after the served record is counted as owed, or when the request fails).
#[derive(Debug)]
pub struct Reservation {
    book: Arc<EscrowBook>,
    requester: String,
    amount: u128,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(entry) = self.book.lock().get_mut(&self.requester) {
            entry.reserved = entry.reserved.saturating_sub(self.amount);
        }
    }
}

impl EscrowBook {
    /// A book whose views are queried again after `ttl`, holding at most `capacity`
    /// requesters.
    pub fn new(ttl: Duration, capacity: usize) -> Arc<EscrowBook> {
        Arc::new(EscrowBook {
            entries: Mutex::new(BTreeMap::new()),
            ttl,
            capacity: capacity.max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the view of `requester` is missing or older than the time to live (or, with
    /// `shortfall`, than [`RECHECK_AFTER`]).
    pub fn needs_query(&self, requester: &str, now: Instant, shortfall: bool) -> bool {
        let age = if shortfall { RECHECK_AFTER } else { self.ttl };
        self.lock()
            .get(requester)
            .is_none_or(|e| now.saturating_duration_since(e.learned) >= age)
    }

    /// Records the chain's answer about `requester`'s escrow at height `as_of`. An answer
    /// older than the view held is ignored; debits the answer already shows are forgotten,
    /// the others stay taken off.
    pub fn learn(&self, requester: &str, as_of: u64, escrow: Option<EscrowTerms>, now: Instant) {
        let mut entries = self.lock();
        if !entries.contains_key(requester) && entries.len() >= self.capacity {
            Self::evict(&mut entries);
        }
        let entry = entries.entry(requester.to_string()).or_insert(Entry {
            escrow: None,
            as_of: 0,
            learned: now,
            debits: Vec::new(),
            reserved: 0,
        });
        if as_of < entry.as_of {
            return;
        }
        entry.debits.retain(|&(height, _)| height > as_of);
        let pending: u128 = entry.debits.iter().map(|&(_, amount)| amount).sum();
        entry.escrow = escrow.map(|mut e| {
            e.balance = e.balance.saturating_sub(pending);
            e
        });
        entry.as_of = as_of;
        entry.learned = now;
    }

    /// Forgets the requesters with nothing reserved, least recently learned first, until a
    /// quarter of the capacity is free.
    fn evict(entries: &mut BTreeMap<String, Entry>) {
        let keep = entries.len() - entries.len() / 4;
        let mut idle: Vec<(Instant, String)> = entries
            .iter()
            .filter(|(_, e)| e.reserved == 0)
            .map(|(r, e)| (e.learned, r.clone()))
            .collect();
        idle.sort();
        for (_, requester) in idle.into_iter().take(entries.len() - keep) {
            entries.remove(&requester);
        }
    }

    /// Takes `needed` from what `requester` can still spend, given `owed` for its records not
    /// yet on chain.
    pub fn reserve(
        self: &Arc<Self>,
        requester: &str,
        needed: u128,
        owed: u128,
    ) -> Result<Reservation, Shortfall> {
        let mut entries = self.lock();
        let entry = entries.get_mut(requester).ok_or(Shortfall::Unknown)?;
        let escrow = entry.escrow.ok_or(Shortfall::NoEscrow)?;
        if entry.as_of >= escrow.expires_at
            || entry.as_of.saturating_add(RELEASE_MARGIN_BLOCKS) >= escrow.release_at
        {
            return Err(Shortfall::Closing {
                as_of: entry.as_of,
                expires_at: escrow.expires_at,
            });
        }
        let spent = owed.saturating_add(entry.reserved);
        if escrow.balance.saturating_sub(spent) < needed {
            return Err(Shortfall::Short {
                balance: escrow.balance,
                owed,
                reserved: entry.reserved,
                needed,
            });
        }
        entry.reserved += needed;
        Ok(Reservation {
            book: self.clone(),
            requester: requester.to_string(),
            amount: needed,
        })
    }

    /// A batch of this TA was included at `height`, debiting each requester its amount:
    /// views older than that height did not show it yet and lose it now. Call before the
    /// outbox stops counting the batch as owed.
    pub fn included(&self, height: u64, debits: &[(String, u128)]) {
        let mut entries = self.lock();
        for (requester, amount) in debits {
            let Some(entry) = entries.get_mut(requester) else {
                continue;
            };
            if entry.as_of >= height {
                continue;
            }
            if let Some(escrow) = entry.escrow.as_mut() {
                escrow.balance = escrow.balance.saturating_sub(*amount);
            }
            entry.debits.push((height, *amount));
        }
    }
}

/// Asks the chain for `requester`'s escrow for the TA `chain` signs as, tells `book` and
/// returns it (`None`: there is none).
pub async fn fetch(
    chain: &Chain,
    book: &EscrowBook,
    requester: &str,
) -> anyhow::Result<Option<EscrowTerms>> {
    let request = gonka_proto::settlement::QueryEscrowRequest {
        requester: requester.to_string(),
        transfer_agent: chain.address().to_string(),
    };
    let (height, escrow) = match chain
        .client()
        .query_with_height::<q::Escrow>(&request)
        .await
    {
        Ok((height, answer)) => (
            height,
            answer.escrow.map(|e| EscrowTerms {
                balance: gonka_proto::batch::parse_decimal(&e.balance).unwrap_or(0),
                expires_at: e.expires_at,
                release_at: e.release_at,
            }),
        ),
        // settlement 5: no escrow for this pair; a refused query reports no height.
        Err(e)
            if e.downcast_ref::<QueryError>()
                .is_some_and(|q| q.codespace == "settlement" && q.code == 5) =>
        {
            let status = chain.client().status().await?;
            (status.sync_info.latest_block_height.value(), None)
        }
        Err(e) => return Err(e),
    };
    book.learn(requester, height, escrow, Instant::now());
    Ok(escrow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(balance: u128) -> Option<EscrowTerms> {
        Some(EscrowTerms {
            balance,
            expires_at: 1_000,
            release_at: 2_000,
        })
    }

    #[test]
    fn reservations_and_owed_records_share_the_escrow_and_free_it_when_dropped() {
        let book = EscrowBook::new(Duration::from_secs(5), 10);
        let now = Instant::now();
        assert_eq!(book.reserve("alice", 1, 0).unwrap_err(), Shortfall::Unknown);
        book.learn("alice", 10, terms(100), now);
        let first = book.reserve("alice", 60, 0).unwrap();
        // 60 in flight: 50 more does not fit, 40 does.
        assert!(matches!(
            book.reserve("alice", 50, 0),
            Err(Shortfall::Short { reserved: 60, .. })
        ));
        let second = book.reserve("alice", 40, 0).unwrap();
        drop(first);
        // The first request's record now owes 25 of the 60 it held; 40 are still in flight.
        assert!(book.reserve("alice", 36, 25).is_err());
        let third = book.reserve("alice", 35, 25).unwrap();
        drop((second, third));
        assert!(book.reserve("alice", 100, 0).is_ok());
    }

    #[test]
    fn an_included_batch_is_taken_off_until_a_query_shows_it() {
        let book = EscrowBook::new(Duration::from_secs(5), 10);
        let now = Instant::now();
        book.learn("alice", 10, terms(100), now);
        // A batch debiting 30 lands at 12: the view of 10 loses it at once.
        book.included(12, &[("alice".into(), 30)]);
        assert!(book.reserve("alice", 71, 0).is_err());
        assert!(book.reserve("alice", 70, 0).is_ok());
        // A query at 11 (before the batch) still shows 100: the debit stays taken off.
        book.learn("alice", 11, terms(100), now);
        assert!(book.reserve("alice", 71, 0).is_err());
        // A query at 12 shows 70 and the debit is forgotten, not taken twice.
        book.learn("alice", 12, terms(70), now);
        assert!(book.reserve("alice", 70, 0).is_ok());
        // An older answer arriving late changes nothing.
        book.learn("alice", 9, terms(1_000), now);
        assert!(book.reserve("alice", 71, 0).is_err());
        // A batch the view already shows is not taken again.
        book.included(12, &[("alice".into(), 30)]);
        assert!(book.reserve("alice", 70, 0).is_ok());
    }

    #[test]
    fn a_missing_or_closing_escrow_is_not_relied_on() {
        let book = EscrowBook::new(Duration::from_secs(5), 10);
        let now = Instant::now();
        book.learn("bob", 10, None, now);
        assert_eq!(book.reserve("bob", 1, 0).unwrap_err(), Shortfall::NoEscrow);
        book.learn("bob", 1_000, terms(100), now);
        assert!(matches!(
            book.reserve("bob", 1, 0),
            Err(Shortfall::Closing { .. })
        ));
        let near_release = EscrowTerms {
            balance: 100,
            expires_at: 5_000,
            release_at: 1_000 + RELEASE_MARGIN_BLOCKS,
        };
        book.learn("bob", 1_000, Some(near_release), now);
        assert!(book.reserve("bob", 1, 0).is_err());
    }

    #[test]
    fn views_expire_and_a_full_book_forgets_idle_requesters_first() {
        let book = EscrowBook::new(Duration::from_secs(5), 4);
        let start = Instant::now();
        book.learn("a", 1, terms(10), start);
        let held = book.reserve("a", 1, 0).unwrap();
        for (i, r) in ["b", "c", "d"].iter().enumerate() {
            book.learn(r, 1, terms(10), start + Duration::from_millis(i as u64 + 1));
        }
        assert!(!book.needs_query("b", start + Duration::from_secs(4), false));
        assert!(book.needs_query("b", start + Duration::from_secs(6), false));
        assert!(book.needs_query("b", start + Duration::from_secs(2), true));
        book.learn("e", 1, terms(10), start + Duration::from_secs(1));
        // "a" holds a reservation and stays; the oldest idle one, "b", went.
        assert!(book.reserve("a", 1, 0).is_ok());
        assert_eq!(book.reserve("b", 1, 0).unwrap_err(), Shortfall::Unknown);
        assert!(book.reserve("e", 1, 0).is_ok());
        drop(held);
    }
}
