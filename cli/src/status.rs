//! `gonkad status`: what the node reports about itself and the chain.

use anyhow::Result;
use serde_json::json;

use crate::Global;

/// Prints chain id, latest height and app hash, node id and sync state.
pub async fn run(global: &Global) -> Result<()> {
    let status = global.client()?.status().await?;
    let sync = &status.sync_info;
    let app_hash = hex::encode_upper(sync.latest_app_hash.as_bytes());
    global.output.print(
        json!({
            "chain_id": status.node_info.network.to_string(),
            "node_id": status.node_info.id.to_string(),
            "moniker": status.node_info.moniker.to_string(),
            "latest_block_height": sync.latest_block_height.value(),
            "latest_app_hash": app_hash,
            "latest_block_time": sync.latest_block_time.to_rfc3339(),
            "catching_up": sync.catching_up,
        }),
        || format!(
            "chain_id: {}\nnode_id: {}\nlatest_block_height: {}\nlatest_app_hash: {}\nlatest_block_time: {}\ncatching_up: {}",
            status.node_info.network,
            status.node_info.id,
            sync.latest_block_height,
            app_hash,
            sync.latest_block_time.to_rfc3339(),
            sync.catching_up
        ),
    );
    Ok(())
}
