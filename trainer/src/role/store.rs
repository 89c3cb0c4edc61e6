//! The trainer's files: per job and round, the blobs it serves its peers and verifiers and
//! what it needs to go on after a restart; per completed job, the trained model. Every file is written to a temporary name, synced
//! and renamed, so a crash leaves either the whole file or none.

use std::io;
use std::path::{Path, PathBuf};

use crate::{Hash, RoundCommitment};

/// The blobs of one round, by the name they are stored and served under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blob {
    /// The agreed weights the round started from.
    StartWeights,
    /// The outer momentum the round started from (not served).
    StartMomentum,
    /// This worker's weights after its inner steps.
    EndWeights,
    /// This worker's pseudo-gradient (start − end).
    PseudoGradient,
    /// This worker's inner optimizer state after its inner steps.
    OptimizerState,
    /// This worker's commitment (not served).
    Commitment,
}

impl Blob {
    /// Every blob peers and verifiers may fetch.
    pub const SERVED: [Blob; 4] = [
        Blob::StartWeights,
        Blob::EndWeights,
        Blob::PseudoGradient,
        Blob::OptimizerState,
    ];

    /// Its file and URL name.
    pub fn name(self) -> &'static str {
        match self {
            Blob::StartWeights => "start-weights",
            Blob::StartMomentum => "start-momentum",
            Blob::EndWeights => "end-weights",
            Blob::PseudoGradient => "pseudo-gradient",
            Blob::OptimizerState => "optimizer-state",
            Blob::Commitment => "commitment",
        }
    }

    /// The served blob named `name`.
    pub fn served(name: &str) -> Option<Blob> {
        Self::SERVED.into_iter().find(|b| b.name() == name)
    }
}

/// Rounds of files kept per job behind the open one: enough for peers still averaging the
/// last round and for verifiers of recent ones (a verification deadline is a few blocks).
pub const KEEP_ROUNDS: u64 = 8;

/// The trainer's directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store in `dir` (created).
    pub fn open(dir: &Path) -> io::Result<Store> {
        std::fs::create_dir_all(dir)?;
        Ok(Store {
            dir: dir.to_path_buf(),
        })
    }

    fn job_dir(&self, job: u64) -> PathBuf {
        self.dir.join(format!("job-{job:020}"))
    }

    fn path(&self, job: u64, round: u64, blob: Blob) -> PathBuf {
        self.job_dir(job)
            .join(format!("round-{round:020}"))
            .join(format!("{}.bin", blob.name()))
    }

    fn model_path(&self, job: u64) -> PathBuf {
        self.job_dir(job).join("model.gnkw")
    }

    /// Writes a blob durably.
    pub fn put(&self, job: u64, round: u64, blob: Blob, bytes: &[u8]) -> io::Result<()> {
        write_durably(&self.path(job, round, blob), bytes)
    }

    /// Writes the job's trained model (gonka-model's weights file) durably.
    pub fn put_model(&self, job: u64, bytes: &[u8]) -> io::Result<()> {
        write_durably(&self.model_path(job), bytes)
    }

    /// The job's trained model, if stored.
    pub fn model(&self, job: u64) -> io::Result<Option<Vec<u8>>> {
        read_if_present(&self.model_path(job))
    }

    /// A blob, if stored.
    pub fn get(&self, job: u64, round: u64, blob: Blob) -> io::Result<Option<Vec<u8>>> {
        read_if_present(&self.path(job, round, blob))
    }

    /// Removes the job's rounds before `round − KEEP_ROUNDS`.
    pub fn prune(&self, job: u64, round: u64) -> io::Result<()> {
        let Some(keep_from) = round.checked_sub(KEEP_ROUNDS) else {
            return Ok(());
        };
        let entries = match std::fs::read_dir(self.job_dir(job)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let old = name
                .to_str()
                .and_then(|n| n.strip_prefix("round-"))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|r| r < keep_from);
            if old {
                std::fs::remove_dir_all(entry.path())?;
            }
        }
        Ok(())
    }
}

/// Writes `bytes` to a temporary name, syncs, renames to `path` and syncs its directory.
fn write_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().expect("a store path has a directory");
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

fn read_if_present(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A commitment as stored: the four hashes, then the loss (u64 LE).
pub fn commitment_to_bytes(c: &RoundCommitment) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 * 32 + 8);
    for hash in [
        c.weights_hash,
        c.optimizer_state_hash,
        c.data_indices_hash,
        c.pseudo_gradient_hash,
    ] {
        out.extend_from_slice(&hash);
    }
    out.extend_from_slice(&c.loss_micro_nats.to_le_bytes());
    out
}

/// A stored commitment; `None` if the bytes are not one.
pub fn commitment_from_bytes(bytes: &[u8]) -> Option<RoundCommitment> {
    if bytes.len() != 4 * 32 + 8 {
        return None;
    }
    let hash = |i: usize| -> Hash { bytes[i * 32..(i + 1) * 32].try_into().expect("32 bytes") };
    Some(RoundCommitment {
        weights_hash: hash(0),
        optimizer_state_hash: hash(1),
        data_indices_hash: hash(2),
        pseudo_gradient_hash: hash(3),
        loss_micro_nats: u64::from_le_bytes(bytes[128..136].try_into().expect("8 bytes")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_and_old_rounds_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.get(1, 1, Blob::EndWeights).unwrap(), None);
        for round in 1..=12 {
            store
                .put(1, round, Blob::EndWeights, &[round as u8])
                .unwrap();
        }
        store.put_model(1, b"weights").unwrap();
        store.prune(1, 12).unwrap();
        assert_eq!(store.model(1).unwrap(), Some(b"weights".to_vec()));
        assert_eq!(store.model(2).unwrap(), None);
        assert_eq!(store.get(1, 3, Blob::EndWeights).unwrap(), None);
        assert_eq!(store.get(1, 4, Blob::EndWeights).unwrap(), Some(vec![4]));
        assert_eq!(store.get(1, 12, Blob::EndWeights).unwrap(), Some(vec![12]));
    }

    #[test]
    fn commitments_round_trip() {
        let c = RoundCommitment {
            weights_hash: [1; 32],
            optimizer_state_hash: [2; 32],
            data_indices_hash: [3; 32],
            pseudo_gradient_hash: [4; 32],
            loss_micro_nats: 2_345_678,
        };
        assert_eq!(commitment_from_bytes(&commitment_to_bytes(&c)), Some(c));
        assert_eq!(commitment_from_bytes(&[0; 10]), None);
        assert_eq!(Blob::served("end-weights"), Some(Blob::EndWeights));
        assert_eq!(Blob::served("commitment"), None, "not served");
    }
}
