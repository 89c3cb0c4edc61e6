//! The red-team suite: one test per known attack on work integrity, each running the attack
//! and asserting that it fails. (The work-integrity issue adds the rest; each test names the
//! hole it closes.)

use std::cell::Cell;
use std::collections::BTreeMap;

use gonka_inference::InferenceWrite;
use gonka_proto::inference::{StoredRecord, WorkRecord};
use gonka_sdk::{BlockContext, Delta, Module, Result, StateRead};

/// Committed state that counts every row it hands out.
struct Counting {
    rows: BTreeMap<Vec<u8>, Vec<u8>>,
    read: Cell<usize>,
}

impl StateRead for Counting {
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read.set(self.read.get() + 1);
        Ok(self.rows.get(key).cloned())
    }
    fn prefix_raw(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let rows: Vec<_> = self
            .rows
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.read.set(self.read.get() + rows.len());
        Ok(rows)
    }
}

fn record(n: usize) -> StoredRecord {
    StoredRecord {
        record: Some(WorkRecord {
            inference_id: format!("{n:064x}"),
            executor_node: "node-0".into(),
            ..Default::default()
        }),
        executor_host: "gonka1host".into(),
        cost: "1".into(),
        ..Default::default()
    }
}

/// Rows the disputes sampler reads from committed state in a block that stores 3 records,
/// when the epoch already holds `stored` records sampled in earlier blocks.
fn rows_read_by_the_sampler(stored: usize) -> usize {
    let empty = Counting {
        rows: BTreeMap::new(),
        read: Cell::new(0),
    };
    let mut earlier = Delta::new(&empty);
    for n in 0..stored {
        earlier.put_record(&record(n));
    }
    earlier.take_new_records().unwrap();
    let (writes, _) = earlier.into_parts();
    let committed = Counting {
        rows: writes
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect(),
        read: Cell::new(0),
    };
    let mut block = Delta::new(&committed);
    for n in stored..stored + 3 {
        block.put_record(&record(n));
    }
    let ctx = BlockContext {
        chain_id: "attacks".into(),
        height: 7,
        time_seconds: 0,
        time_nanos: 0,
        block_hash: [7; 32],
    };
    committed.read.set(0);
    let sampler = gonka_disputes::Disputes;
    sampler.end_block(&ctx, &mut block).unwrap();
    sampler.begin_block(&ctx, &mut block).unwrap();
    committed.read.get()
}

/// Attack: fill an epoch with work records so that every later block's FinalizeBlock does
/// more work (the sampler used to reload every record of the epoch in each `end_block`,
/// quadratic over an epoch). The sampler now drains x/inference's queue of the block's own
/// records: what it reads does not grow with the epoch.
#[test]
fn filling_an_epoch_with_records_does_not_make_later_blocks_read_more() {
    let small = rows_read_by_the_sampler(10);
    let full = rows_read_by_the_sampler(2_000);
    assert_eq!(
        full, small,
        "the sampler read {small} committed rows with 10 records in the epoch and {full} with 2,000"
    );
}
