//! The recorder's write-ahead journal: append-only files beside the TA's database that make a
//! group of served requests durable with one sequential append and one `fdatasync`.
//!
//! Why: a durable redb commit of a group rewrites the B-tree pages of five tables and the
//! database header, scattered over the file, before its `fsync`; measured on this project's
//! machine that took 0.6 ms at 100 req/s, most of the latency a transfer agent added to a
//! request in chain mode, against about 0.2 ms for appending the same bytes to a file. So
//! the [`recorder`](crate::recorder) appends each group here (durable: the requests are
//! answered), and a separate thread applies groups to the database in larger transactions
//! without a durable commit, committing durably every [`CHECKPOINT`].
//!
//! Crash safety: every applied transaction also writes the sequence number of the last frame
//! it holds into the database ([`mark_applied`]). A redb commit without durability is lost
//! in a crash unless a later durable commit persisted it, and then its sequence number was
//! persisted with it. So on start, [`Journal::open`] returns the frames after the
//! database's applied number, and the recorder applies them again, durably, before anything
//! else: every request that was answered is in the database exactly once.
//!
//! Files: the journal is a directory of segments, each named by the sequence number of its
//! first frame (20 digits, so names sort in order). Appends go to the last segment; past
//! [`SEGMENT_BYTES`] the next append starts a new one (and syncs the directory, so the new
//! file survives a crash). A segment whose every frame the database holds durably is
//! deleted ([`release`]); the last one never is.
//!
//! Frame: `len: u32 LE ‖ seq: u64 LE ‖ check: 8 bytes ‖ payload (len bytes)`, where `check`
//! is the first 8 bytes of SHA-256(`seq ‖ payload`). A crash during an append leaves at
//! most a torn last frame, which was never acknowledged: reading stops at the first frame
//! that is short or fails its check, and the segment is cut there.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use redb::{Database, TableDefinition, WriteTransaction};
use sha2::{Digest, Sha256};

/// The journal's applied mark: one row, the sequence number of the last frame applied.
const APPLIED: TableDefinition<&str, u64> = TableDefinition::new("journal_applied");
const APPLIED_KEY: &str = "applied";

/// A segment takes no more appends once it holds this many bytes.
pub const SEGMENT_BYTES: u64 = 4 << 20;

/// How often the applier commits the database durably (and releases segments). Short, so
/// each durable commit has little to flush: a long one (1 s and more were tried) made the
/// journal's appends wait behind a flush of megabytes on the same disk (p99 of 25 ms at
/// 1,000 req/s).
pub const CHECKPOINT: Duration = Duration::from_millis(250);

/// The applier writes to the database at most this often (each time, every group waiting).
pub const APPLY_INTERVAL: Duration = Duration::from_millis(50);

/// Largest payload a frame may hold (a request body is bounded far below this).
const MAX_FRAME: usize = 64 << 20;

const HEADER: usize = 4 + 8 + 8;

fn check(seq: u64, payload: &[u8]) -> [u8; 8] {
    let mut hasher = Sha256::new();
    hasher.update(seq.to_le_bytes());
    hasher.update(payload);
    let digest = hasher.finalize();
    digest[..8]
        .try_into()
        .expect("a SHA-256 digest has 32 bytes")
}

/// The journal, appended to by one writer.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    /// The last segment, appended to.
    file: File,
    /// Bytes in the last segment.
    len: u64,
    /// Sequence number of the next frame.
    next_seq: u64,
}

/// A frame read back: its sequence number and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Its sequence number.
    pub seq: u64,
    /// What was appended.
    pub payload: Vec<u8>,
}

/// The segments in `dir` as (first sequence number, path), in order.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in
        std::fs::read_dir(dir).with_context(|| format!("listing the journal {}", dir.display()))?
    {
        let path = entry?.path();
        let first = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(first) = first {
            out.push((first, path));
        }
    }
    out.sort();
    Ok(out)
}

fn segment_path(dir: &Path, first_seq: u64) -> PathBuf {
    dir.join(format!("{first_seq:020}.log"))
}

/// Makes the directory's entries (a new segment, a deleted one) durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing the journal directory {}", dir.display()))
}

impl Journal {
    /// Opens (or creates) the journal in the directory `dir` for the database `db`.
    /// Returns it with the frames not yet applied to `db`, in order (a torn last frame is
    /// cut off); appends go to a new segment.
    pub fn open(dir: &Path, db: &Database) -> Result<(Journal, Vec<Frame>)> {
        let applied = applied(db)?;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the journal {}", dir.display()))?;
        let mut frames = Vec::new();
        let mut last_seq = applied;
        for (_, path) in segments(dir)? {
            let mut bytes = Vec::new();
            File::open(&path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .with_context(|| format!("reading the journal segment {}", path.display()))?;
            let mut at = 0usize;
            while let Some((frame, end)) = read_frame(&bytes, at) {
                last_seq = last_seq.max(frame.seq);
                if frame.seq > applied {
                    frames.push(frame);
                }
                at = end;
            }
            if at < bytes.len() {
                tracing::warn!(
                    segment = %path.display(),
                    cut = bytes.len() - at,
                    "a journal segment ends in a torn frame (a crash during an append); it was never acknowledged and is cut off"
                );
                let file = OpenOptions::new().write(true).open(&path)?;
                file.set_len(at as u64)?;
                file.sync_all()?;
            }
        }
        let next_seq = last_seq + 1;
        let file = Self::create_segment(dir, next_seq)?;
        let journal = Journal {
            dir: dir.to_path_buf(),
            file,
            len: 0,
            next_seq,
        };
        Ok((journal, frames))
    }

    fn create_segment(dir: &Path, first_seq: u64) -> Result<File> {
        let path = segment_path(dir, first_seq);
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("creating the journal segment {}", path.display()))?;
        sync_dir(dir)?;
        Ok(file)
    }

    /// Appends one frame per payload and makes them durable; returns the last one's
    /// sequence number.
    pub fn append(&mut self, payloads: &[Vec<u8>]) -> Result<u64> {
        if self.len >= SEGMENT_BYTES {
            self.file = Self::create_segment(&self.dir, self.next_seq)?;
            self.len = 0;
        }
        let mut buffer = Vec::with_capacity(payloads.iter().map(|p| HEADER + p.len()).sum());
        let mut seq = self.next_seq;
        for payload in payloads {
            let len = u32::try_from(payload.len())
                .ok()
                .filter(|&n| n as usize <= MAX_FRAME)
                .context("a journal frame is larger than the journal takes")?;
            buffer.extend_from_slice(&len.to_le_bytes());
            buffer.extend_from_slice(&seq.to_le_bytes());
            buffer.extend_from_slice(&check(seq, payload));
            buffer.extend_from_slice(payload);
            seq += 1;
        }
        self.file
            .write_all(&buffer)
            .and_then(|()| self.file.sync_data())
            .context("appending to the journal")?;
        self.next_seq = seq;
        self.len += buffer.len() as u64;
        Ok(seq - 1)
    }
}

/// Deletes the segments of the journal in `dir` whose every frame is at most `applied` (the
/// database holds them durably); never the last segment.
pub fn release(dir: &Path, applied: u64) -> Result<()> {
    let segments = segments(dir)?;
    let mut deleted = false;
    for pair in segments.windows(2) {
        let ((_, path), (next_first, _)) = (&pair[0], &pair[1]);
        if *next_first <= applied + 1 {
            std::fs::remove_file(path)
                .with_context(|| format!("deleting the journal segment {}", path.display()))?;
            deleted = true;
        }
    }
    if deleted {
        sync_dir(dir)?;
    }
    Ok(())
}

/// The frame at `at` of `bytes` and where the next begins, `None` if none is complete.
fn read_frame(bytes: &[u8], at: usize) -> Option<(Frame, usize)> {
    let header = bytes.get(at..at.checked_add(HEADER)?)?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
    let seq = u64::from_le_bytes(header[4..12].try_into().ok()?);
    if len > MAX_FRAME {
        return None;
    }
    let end = at + HEADER + len;
    let payload = bytes.get(at + HEADER..end)?;
    (check(seq, payload) == header[12..20]).then(|| {
        (
            Frame {
                seq,
                payload: payload.to_vec(),
            },
            end,
        )
    })
}

/// The sequence number of the last frame applied to `db` (0 for none).
pub fn applied(db: &Database) -> Result<u64> {
    let tx = db.begin_write()?;
    tx.open_table(APPLIED)?;
    tx.commit()?;
    let read = db.begin_read()?;
    let table = read.open_table(APPLIED)?;
    Ok(table.get(APPLIED_KEY)?.map_or(0, |v| v.value()))
}

/// Records in `tx` that every frame up to `seq` is applied.
pub fn mark_applied(tx: &WriteTransaction, seq: u64) -> Result<()> {
    tx.open_table(APPLIED)?.insert(APPLIED_KEY, seq)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> (tempfile::TempDir, Database) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("db.redb")).unwrap();
        (dir, db)
    }

    fn mark(db: &Database, seq: u64) {
        let tx = db.begin_write().unwrap();
        mark_applied(&tx, seq).unwrap();
        tx.commit().unwrap();
    }

    fn seqs(frames: &[Frame]) -> Vec<u64> {
        frames.iter().map(|f| f.seq).collect()
    }

    #[test]
    fn frames_come_back_in_order_until_marked_applied() {
        let (dir, db) = fixture();
        let path = dir.path().join("journal");
        let (mut journal, frames) = Journal::open(&path, &db).unwrap();
        assert!(frames.is_empty());
        assert_eq!(journal.append(&[b"a".to_vec(), b"bb".to_vec()]).unwrap(), 2);
        assert_eq!(journal.append(&[b"ccc".to_vec()]).unwrap(), 3);
        drop(journal);
        let (mut journal, frames) = Journal::open(&path, &db).unwrap();
        let got: Vec<(u64, &[u8])> = frames
            .iter()
            .map(|f| (f.seq, f.payload.as_slice()))
            .collect();
        assert_eq!(got, vec![(1, &b"a"[..]), (2, &b"bb"[..]), (3, &b"ccc"[..])]);
        // Sequence numbers go on in the new segment.
        assert_eq!(journal.append(&[b"d".to_vec()]).unwrap(), 4);
        drop(journal);
        // Frames up to 2 applied (in a transaction that was persisted): 3 and 4 come back.
        mark(&db, 2);
        let (_, frames) = Journal::open(&path, &db).unwrap();
        assert_eq!(seqs(&frames), vec![3, 4]);
    }

    #[test]
    fn released_segments_are_those_wholly_applied_and_never_the_last() {
        let (dir, db) = fixture();
        let path = dir.path().join("journal");
        let (mut journal, _) = Journal::open(&path, &db).unwrap();
        let big = vec![7u8; (SEGMENT_BYTES / 2) as usize];
        for _ in 0..5 {
            journal.append(std::slice::from_ref(&big)).unwrap();
        }
        // Segments: [1, 2], [3, 4], [5].
        assert_eq!(segments(&path).unwrap().len(), 3);
        release(&path, 3).unwrap();
        let left: Vec<u64> = segments(&path).unwrap().iter().map(|s| s.0).collect();
        assert_eq!(left, vec![3, 5], "frame 4 is not applied yet");
        release(&path, 5).unwrap();
        assert_eq!(segments(&path).unwrap().len(), 1, "the last segment stays");
        drop(journal);
        mark(&db, 3);
        let (_, frames) = Journal::open(&path, &db).unwrap();
        assert_eq!(seqs(&frames), vec![5]);
    }

    #[test]
    fn a_torn_last_frame_is_cut_and_the_ones_before_it_survive() {
        let (dir, db) = fixture();
        let path = dir.path().join("journal");
        let (mut journal, _) = Journal::open(&path, &db).unwrap();
        journal.append(&[b"first".to_vec()]).unwrap();
        journal.append(&[b"second".to_vec()]).unwrap();
        drop(journal);
        let (_, segment) = segments(&path).unwrap().remove(0);
        let full = std::fs::read(&segment).unwrap();
        for cut in 1..(HEADER + 6) {
            for (_, extra) in segments(&path).unwrap().into_iter().skip(1) {
                std::fs::remove_file(extra).unwrap();
            }
            std::fs::write(&segment, &full[..full.len() - cut]).unwrap();
            let (mut journal, frames) = Journal::open(&path, &db).unwrap();
            assert_eq!(seqs(&frames), vec![1], "cut {cut}");
            assert_eq!(frames[0].payload, b"first");
            assert_eq!(
                std::fs::metadata(&segment).unwrap().len(),
                (HEADER + 5) as u64
            );
            // What is appended next reads back after the good frame.
            assert_eq!(journal.append(&[b"third".to_vec()]).unwrap(), 2);
            drop(journal);
            let (_, frames) = Journal::open(&path, &db).unwrap();
            assert_eq!(seqs(&frames), vec![1, 2], "cut {cut}");
            assert_eq!(frames[1].payload, b"third");
        }
    }

    #[test]
    fn a_corrupted_frame_ends_the_segment() {
        let (dir, db) = fixture();
        let path = dir.path().join("journal");
        let (mut journal, _) = Journal::open(&path, &db).unwrap();
        journal
            .append(&[b"first".to_vec(), b"second".to_vec()])
            .unwrap();
        drop(journal);
        let (_, segment) = segments(&path).unwrap().remove(0);
        let mut bytes = std::fs::read(&segment).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&segment, &bytes).unwrap();
        let (_, frames) = Journal::open(&path, &db).unwrap();
        assert_eq!(seqs(&frames), vec![1]);
    }
}
