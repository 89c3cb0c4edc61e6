//! The store's ics23 proof verification ([`gonka_store::verify_membership`] and
//! [`gonka_store::verify_non_membership`]: what `gonkad query --prove` and light clients run
//! on a node's answer) with an arbitrary proof, root, key and value.
//!
//! Input: 32 bytes of root, a key length byte and the key, a value length byte and the
//! value, then the protobuf `CommitmentProof`. Shorter inputs are padded with zeros.
//!
//! Checked: no panic (in decoding or verifying); no proof proves both that a key has a value
//! and that it has none.

use prost::Message;

/// Takes `n` bytes off the front of `data` (fewer at its end).
fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let n = n.min(data.len());
    let (head, tail) = data.split_at(n);
    *data = tail;
    head
}

/// Verifies the proof `data` describes.
pub fn run(mut data: &[u8]) {
    let mut root = [0u8; 32];
    let head = take(&mut data, 32);
    root[..head.len()].copy_from_slice(head);
    let key_len = take(&mut data, 1).first().copied().unwrap_or(0);
    let key = take(&mut data, usize::from(key_len));
    let value_len = take(&mut data, 1).first().copied().unwrap_or(0);
    let value = take(&mut data, usize::from(value_len));
    let Ok(proof) = ics23::CommitmentProof::decode(data) else {
        return;
    };
    let member = gonka_store::verify_membership(&root, key, value, &proof);
    let absent = gonka_store::verify_non_membership(&root, key, &proof);
    assert!(
        !(member && absent),
        "one proof proves both key {key:x?} = {value:x?} and its absence under root {root:x?}"
    );
}
