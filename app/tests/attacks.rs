//! The red-team suite: one test per known attack on work integrity, each running the attack
//! and asserting that it fails. (The work-integrity issue adds the rest; each test names the
//! hole it closes.)

use gonka_inference::InferenceWrite;
use gonka_proto::inference::{StoredRecord, WorkRecord};
use gonka_sdk::{BlockContext, Delta, MemoryState, Module};

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
    let empty = MemoryState::default();
    let mut earlier = Delta::new(&empty);
    for n in 0..stored {
        earlier.put_record(&record(n));
    }
    earlier.take_new_records().unwrap();
    let committed = MemoryState::from_changes(earlier.into_parts().0);
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
    committed.reset_reads();
    let sampler = gonka_disputes::Disputes;
    sampler.end_block(&ctx, &mut block).unwrap();
    sampler.begin_block(&ctx, &mut block).unwrap();
    committed.rows_read()
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
