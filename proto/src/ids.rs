//! Shape rules of identifiers (and the few node limits) that both the chain and the sidecar
//! roles check, so a node refuses at start what the chain would refuse at registration.

/// Whether `id` is a valid ML node id: 1 to 64 of `[A-Za-z0-9._-]` (so it never holds the
/// `/` of the chain's index keys).
pub fn is_valid_node_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// What [`is_valid_node_id`] asks for, for error messages.
pub const NODE_ID_RULE: &str = "1 to 64 characters of A-Z, a-z, 0-9, '.', '_', '-'";

/// Most requests an ML node may declare it serves at once (`max_concurrency`): the chain
/// refuses a registration above it and the ML node's command line does not offer more, so a
/// node cannot declare a capacity that would draw all of a transfer agent's traffic.
pub const MAX_NODE_CONCURRENCY: u64 = 4096;

/// Ids of models trained on chain start with this, followed by the training job's id: x/pol
/// publishes them, x/inference's genesis refuses any other model under the prefix, and an
/// ML node serving one loads the weights whose SHA-256 the model table holds.
pub const TRAINED_MODEL_PREFIX: &str = "pol/job-";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids() {
        assert!(is_valid_node_id("gpu-node_1.a"));
        assert!(is_valid_node_id(&"x".repeat(64)));
        for bad in ["", "has space", "a/b", &"x".repeat(65)] {
            assert!(!is_valid_node_id(bad), "{bad:?}");
        }
    }
}
