//! The red-team suite: one test per known attack on work integrity, each running the attack
//! and asserting that it fails. (The work-integrity issue adds the rest; each test names the
//! hole it closes.)

use gonka_inference::InferenceWrite;
use gonka_proto::inference::{QueryRecordsRequest, QueryRecordsResponse, StoredRecord, WorkRecord};
use gonka_proto::query::page::{PageRequest, MAX_BYTES, MAX_LIMIT};
use gonka_proto::query::{inference as q, Query};
use gonka_sdk::{BlockContext, Delta, MemoryState, Module};
use prost::Message;

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

/// Committed state holding `count` work records of epoch 0, each with a model name of
/// `padding` bytes (so records can be made large).
fn epoch_of_records(count: usize, padding: usize) -> MemoryState {
    let empty = MemoryState::default();
    let mut state = Delta::new(&empty);
    for n in 0..count {
        let mut stored = record(n);
        stored.record.as_mut().unwrap().model = "m".repeat(padding);
        state.put_record(&stored);
    }
    MemoryState::from_changes(state.into_parts().0)
}

/// Asks `/inference/records` of epoch 0 for "everything" (the largest limit a request can
/// carry) and returns the answer's encoded size and the response.
fn ask_for_every_record(state: &MemoryState) -> (usize, QueryRecordsResponse) {
    let request = QueryRecordsRequest {
        epoch: 0,
        executor: String::new(),
        pagination: Some(PageRequest {
            key: Vec::new(),
            limit: u64::MAX,
        }),
    };
    let answer = gonka_inference::Inference
        .query(q::Records::PATH, &request.encode_to_vec(), state)
        .unwrap()
        .unwrap();
    (
        answer.len(),
        QueryRecordsResponse::decode(answer.as_slice()).unwrap(),
    )
}

/// Attack (issue 10, hole 13): ask a list query (`/inference/records`, `/disputes/list`, ...)
/// for everything, so that one `abci_query` makes the node read the whole list into memory
/// and ship it in one answer; a spammer who grows the list grows every such answer. Every
/// list query now reads one page by a range scan: at most `MAX_LIMIT` items whatever limit
/// the request names, the rows after the page unread, and at most `MAX_BYTES` of items.
#[test]
fn an_unbounded_list_query_answers_one_bounded_page() {
    let max = MAX_LIMIT as usize;
    let state = epoch_of_records(3 * max, 0);
    state.reset_reads();
    let (bytes, page) = ask_for_every_record(&state);
    assert_eq!(
        page.records.len(),
        max,
        "a request for everything gets one full page"
    );
    // The page's index rows and records, and the one index row that says the list goes on:
    // nothing of the other 2,000 records.
    assert_eq!(state.rows_read(), 2 * max + 1);
    let next_key = page.pagination.unwrap().next_key;
    assert!(!next_key.is_empty(), "the page says where the list goes on");
    assert!(bytes <= MAX_BYTES + 64, "{bytes} bytes");

    // Large items: the page stops at the byte bound long before the row limit.
    let state = epoch_of_records(max, 16 * 1024);
    let (bytes, page) = ask_for_every_record(&state);
    assert!(bytes <= MAX_BYTES + 64, "{bytes} bytes");
    assert!(
        page.records.len() < max / 10,
        "{} records",
        page.records.len()
    );
    assert!(!page.pagination.unwrap().next_key.is_empty());
}
