//! The one way the app takes its locks.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, even if a panic poisoned it: a panic while holding the lock already
/// stopped consensus, and reads can still be served.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
