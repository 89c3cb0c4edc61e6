//! A bounded window of things seen recently, for refusing replays of signed messages: every
//! entry carries its signed timestamp, entries older than the clock window are forgotten
//! (their timestamps fail the skew check anyway), and at most `capacity` are held.

use std::collections::BTreeSet;

/// Why an entry was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Seen already within the window.
    Replayed,
    /// The window holds `capacity` entries; retry once old ones age out.
    Full,
}

/// Entries `(timestamp, K)` seen within the clock window, at most `capacity`.
#[derive(Debug, Clone)]
pub struct ReplayWindow<K: Ord> {
    seen: BTreeSet<(u64, K)>,
    capacity: usize,
}

impl<K: Ord + Default> ReplayWindow<K> {
    /// An empty window holding at most `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        Self {
            seen: BTreeSet::new(),
            capacity,
        }
    }

    /// Admits `(timestamp, key)` unless it was seen already or the window is full, after
    /// forgetting entries older than `now_secs − window_secs`.
    pub fn admit(
        &mut self,
        timestamp: u64,
        key: K,
        now_secs: u64,
        window_secs: u64,
    ) -> Result<(), Refused> {
        let oldest = now_secs.saturating_sub(window_secs);
        self.seen = self.seen.split_off(&(oldest, K::default()));
        let entry = (timestamp, key);
        if self.seen.contains(&entry) {
            return Err(Refused::Replayed);
        }
        if self.seen.len() >= self.capacity {
            return Err(Refused::Full);
        }
        self.seen.insert(entry);
        Ok(())
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_are_refused_old_entries_forgotten_and_the_window_bounded() {
        let mut window = ReplayWindow::new(2);
        assert_eq!(window.admit(100, "a", 100, 60), Ok(()));
        assert_eq!(window.admit(100, "a", 100, 60), Err(Refused::Replayed));
        assert_eq!(window.admit(101, "b", 101, 60), Ok(()));
        assert_eq!(window.admit(101, "c", 101, 60), Err(Refused::Full));
        // Sixty seconds on, the first entries age out and make room.
        assert_eq!(window.admit(170, "c", 170, 60), Ok(()));
        assert_eq!(window.len(), 1);
    }
}
