//! State access for modules: raw traits, typed extensions, and forkable write layers.
//!
//! Reads go down a chain of layers (transaction fork -> block -> committed store); writes
//! stay in the top layer until the caller merges it, so nothing is ever undone by hand.

use std::collections::BTreeMap;

use gonka_store::{ChangeSet, Store};
use prost::Message;

use crate::{ErrorCode, Event, Result, SdkError};

/// Read access to state.
pub trait StateRead {
    /// Raw value under `key`.
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// At most `limit` `(key, value)` whose key starts with `prefix` and is at least `start`,
    /// in ascending key order: one page of a prefix scan, without reading the rows after it
    /// (what paginated queries use, see [`crate::Pager`]).
    fn range_raw(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Every `(key, value)` whose key starts with `prefix`, in ascending key order: the
    /// whole range (one read, as far as gas is concerned).
    fn prefix_raw(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.range_raw(prefix, prefix, usize::MAX)
    }
}

/// Write access to state plus the event sink of the current execution.
pub trait StateWrite: StateRead {
    /// Sets `key` to `value`.
    fn put_raw(&mut self, key: Vec<u8>, value: Vec<u8>);
    /// Removes `key`.
    fn delete_raw(&mut self, key: Vec<u8>);
    /// Records an event; it is kept only if this execution's writes are kept.
    fn emit(&mut self, event: Event);
}

/// Typed reads of protobuf values.
pub trait StateReadExt: StateRead {
    /// Decodes the protobuf value under `key`.
    fn get_proto<M: Message + Default>(&self, key: &[u8]) -> Result<Option<M>> {
        self.get_raw(key)?
            .map(|bytes| decode(key, &bytes))
            .transpose()
    }

    /// Decodes every protobuf value under `prefix`, in key order.
    fn prefix_proto<M: Message + Default>(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, M)>> {
        self.prefix_raw(prefix)?
            .into_iter()
            .map(|(key, bytes)| decode(&key, &bytes).map(|value| (key, value)))
            .collect()
    }
}

impl<T: StateRead + ?Sized> StateReadExt for T {}

/// Typed writes of protobuf values.
pub trait StateWriteExt: StateWrite {
    /// Encodes `value` under `key`.
    fn put_proto<M: Message>(&mut self, key: Vec<u8>, value: &M) {
        self.put_raw(key, value.encode_to_vec());
    }
}

impl<T: StateWrite + ?Sized> StateWriteExt for T {}

/// Decodes a stored value, naming its key and type in the error.
pub(crate) fn decode<M: Message + Default>(key: &[u8], bytes: &[u8]) -> Result<M> {
    M::decode(bytes).map_err(|e| {
        SdkError::Decode.err(format!(
            "stored value under {} is not a valid {}: {e}",
            String::from_utf8_lossy(key),
            std::any::type_name::<M>()
        ))
    })
}

fn internal(e: anyhow::Error) -> crate::Error {
    SdkError::Internal.err(format!("store failure: {e:#}"))
}

impl StateRead for Store {
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get(key).map_err(internal)
    }
    fn range_raw(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.range(prefix, start, limit).map_err(internal)
    }
}

/// The committed state at a past height, read through the authenticated tree: what a module
/// query asked at `--height` answers from. Point reads only: the tree is keyed by hash, so
/// prefix scans (list queries) exist at the latest height alone.
#[derive(Clone, Copy)]
pub struct StoreAt<'a> {
    store: &'a Store,
    version: u64,
}

impl<'a> StoreAt<'a> {
    /// `store` as it was at committed `version`.
    pub fn new(store: &'a Store, version: u64) -> StoreAt<'a> {
        StoreAt { store, version }
    }
}

impl StateRead for StoreAt<'_> {
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.get_at(key, self.version).map_err(internal)
    }
    fn range_raw(&self, _: &[u8], _: &[u8], _: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Err(SdkError::UnknownQuery.err(format!(
            "lists are kept at the latest height only, not at height {}: ask without a height, or ask for one item",
            self.version
        )))
    }
}

/// Reads `writes` on top of `parent`, shared by [`Overlay`] and [`Delta`].
fn layered_get(parent: &dyn StateRead, writes: &ChangeSet, key: &[u8]) -> Result<Option<Vec<u8>>> {
    match writes.get(key) {
        Some(value) => Ok(value.clone()),
        None => parent.get_raw(key),
    }
}

/// One page of `writes` over `parent`: the parent's rows are read a window at a time, and
/// each window is merged with the writes that fall inside it, until `limit` rows survive or
/// the prefix ends. A window whose rows were all deleted by `writes` just moves the start on.
fn layered_range(
    parent: &dyn StateRead,
    writes: &ChangeSet,
    prefix: &[u8],
    start: &[u8],
    limit: usize,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut from = start.max(prefix).to_vec();
    while out.len() < limit {
        let want = limit - out.len();
        let rows = parent.range_raw(prefix, &from, want)?;
        // Where this window ends (inclusive); `None`: the parent has nothing after it.
        let end = (rows.len() == want).then(|| rows[rows.len() - 1].0.clone());
        let mut window: BTreeMap<Vec<u8>, Vec<u8>> = rows.into_iter().collect();
        for (key, value) in writes.range(from.clone()..) {
            if !key.starts_with(prefix) || end.as_ref().is_some_and(|end| key > end) {
                break;
            }
            match value {
                Some(value) => window.insert(key.clone(), value.clone()),
                None => window.remove(key),
            };
        }
        out.extend(window.into_iter().take(limit - out.len()));
        match end {
            // The next window starts right after this one's last key.
            Some(mut end) => {
                end.push(0);
                from = end;
            }
            None => break,
        }
    }
    Ok(out)
}

/// A read-only view of uncommitted `writes` over `parent` (the check state, or genesis
/// state that is committed together with the first block).
pub struct Overlay<'a> {
    parent: &'a dyn StateRead,
    writes: &'a ChangeSet,
}

impl<'a> Overlay<'a> {
    /// Views `writes` on top of `parent`.
    pub fn new(parent: &'a dyn StateRead, writes: &'a ChangeSet) -> Self {
        Self { parent, writes }
    }
}

impl StateRead for Overlay<'_> {
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        layered_get(self.parent, self.writes, key)
    }
    fn range_raw(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        layered_range(self.parent, self.writes, prefix, start, limit)
    }
}

/// A writable layer over `parent`. Fork it to run something that may fail; merge the fork
/// back with [`Delta::absorb`] only if it succeeded.
pub struct Delta<'a> {
    parent: &'a dyn StateRead,
    writes: ChangeSet,
    events: Vec<Event>,
}

impl<'a> Delta<'a> {
    /// An empty layer over `parent`.
    pub fn new(parent: &'a dyn StateRead) -> Self {
        Self {
            parent,
            writes: ChangeSet::new(),
            events: Vec::new(),
        }
    }

    /// A child layer whose reads see this layer's writes.
    pub fn fork(&self) -> Delta<'_> {
        Delta::new(self)
    }

    /// Splits the layer into its writes and events.
    pub fn into_parts(self) -> (ChangeSet, Vec<Event>) {
        (self.writes, self.events)
    }

    /// Applies a child's writes and events on top of this layer.
    pub fn absorb(&mut self, (writes, events): (ChangeSet, Vec<Event>)) {
        self.writes.extend(writes);
        self.events.extend(events);
    }

    /// Takes the events recorded so far, leaving the writes in place.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}

impl StateRead for Delta<'_> {
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        layered_get(self.parent, &self.writes, key)
    }
    fn range_raw(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        layered_range(self.parent, &self.writes, prefix, start, limit)
    }
}

impl StateWrite for Delta<'_> {
    fn put_raw(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.writes.insert(key, Some(value));
    }
    fn delete_raw(&mut self, key: Vec<u8>) {
        self.writes.insert(key, None);
    }
    fn emit(&mut self, event: Event) {
        self.events.push(event);
    }
}

/// Committed state held in memory: a stand-in for the store in unit tests, attack tests and
/// benchmarks. It counts the rows it hands out ([`MemoryState::rows_read`]), so a test can
/// show that some work reads a bounded part of the state.
#[derive(Debug, Default)]
pub struct MemoryState {
    rows: BTreeMap<Vec<u8>, Vec<u8>>,
    rows_read: std::cell::Cell<usize>,
}

impl MemoryState {
    /// State holding the writes of `changes` (deletions dropped).
    pub fn from_changes(changes: ChangeSet) -> Self {
        let rows = changes
            .into_iter()
            .filter_map(|(key, value)| value.map(|value| (key, value)))
            .collect();
        Self {
            rows,
            rows_read: Default::default(),
        }
    }

    /// Rows handed out by `get_raw`, `range_raw` and `prefix_raw` since the last [`MemoryState::reset_reads`].
    pub fn rows_read(&self) -> usize {
        self.rows_read.get()
    }

    /// Starts counting rows read from zero.
    pub fn reset_reads(&self) {
        self.rows_read.set(0);
    }
}

impl StateRead for MemoryState {
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.rows_read.set(self.rows_read.get() + 1);
        Ok(self.rows.get(key).cloned())
    }

    fn range_raw(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let rows: Vec<_> = self
            .rows
            .range(start.max(prefix).to_vec()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .take(limit)
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        self.rows_read.set(self.rows_read.get() + rows.len());
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> MemoryState {
        MemoryState::from_changes(
            [("a/1", "x"), ("a/2", "y"), ("b/1", "z")]
                .into_iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), Some(v.as_bytes().to_vec())))
                .collect(),
        )
    }

    #[test]
    fn fork_sees_parent_writes_and_is_discarded_unless_absorbed() {
        let base = base();
        let mut block = Delta::new(&base);
        block.put_raw(b"a/3".to_vec(), b"w".to_vec());
        let (discarded, absorbed) = {
            let mut failing = block.fork();
            assert_eq!(failing.get_raw(b"a/3").unwrap(), Some(b"w".to_vec()));
            failing.delete_raw(b"a/1".to_vec());
            failing.emit(Event::new("dropped"));
            let discarded = failing.into_parts();
            let mut ok = block.fork();
            ok.put_raw(b"a/2".to_vec(), b"Y".to_vec());
            ok.emit(Event::new("kept"));
            (discarded, ok.into_parts())
        };
        drop(discarded);
        block.absorb(absorbed);
        assert_eq!(block.get_raw(b"a/1").unwrap(), Some(b"x".to_vec()));
        assert_eq!(block.get_raw(b"a/2").unwrap(), Some(b"Y".to_vec()));
        let (writes, events) = block.into_parts();
        assert_eq!(writes.len(), 2);
        assert_eq!(events, vec![Event::new("kept")]);
    }

    #[test]
    fn prefix_merges_layers_in_key_order() {
        let base = base();
        let mut delta = Delta::new(&base);
        delta.delete_raw(b"a/1".to_vec());
        delta.put_raw(b"a/0".to_vec(), b"n".to_vec());
        delta.put_raw(b"c/0".to_vec(), b"m".to_vec());
        let keys: Vec<_> = delta
            .prefix_raw(b"a/")
            .unwrap()
            .into_iter()
            .map(|(k, _)| String::from_utf8(k).unwrap())
            .collect();
        assert_eq!(keys, ["a/0", "a/2"]);
        let (writes, _) = delta.into_parts();
        let overlay = Overlay::new(&base, &writes);
        assert_eq!(overlay.prefix_raw(b"c/").unwrap().len(), 1);
        assert_eq!(overlay.get_raw(b"a/1").unwrap(), None);
    }

    /// A layered page equals the same page of the fully merged prefix, whatever the start
    /// and limit, including windows whose parent rows were all deleted above.
    #[test]
    fn range_pages_agree_with_the_merged_prefix() {
        let base = MemoryState::from_changes(
            (0..20u8)
                .map(|n| (format!("a/{n:02}").into_bytes(), Some(vec![n])))
                .collect(),
        );
        let mut delta = Delta::new(&base);
        for n in [0u8, 1, 2, 3, 4, 9, 15] {
            delta.delete_raw(format!("a/{n:02}").into_bytes());
        }
        delta.put_raw(b"a/03x".to_vec(), b"new".to_vec());
        delta.put_raw(b"a/99".to_vec(), b"last".to_vec());
        delta.put_raw(b"b/00".to_vec(), b"other prefix".to_vec());
        let all = delta.prefix_raw(b"a/").unwrap();
        for limit in 0..all.len() + 2 {
            for start in 0..all.len() + 1 {
                let from = all.get(start).map_or(b"a/zz".to_vec(), |(k, _)| k.clone());
                let page = delta.range_raw(b"a/", &from, limit).unwrap();
                let expected: Vec<_> = all.iter().skip(start).take(limit).cloned().collect();
                assert_eq!(page, expected, "start {start} limit {limit}");
            }
        }
        let child = delta.fork();
        assert_eq!(child.range_raw(b"a/", b"", 100).unwrap(), all);
    }
}
