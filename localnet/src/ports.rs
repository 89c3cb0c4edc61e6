//! The port scheme: every node owns a block of ten consecutive loopback ports.
//!
//! Node `i` owns `base_port + 10*i ..= base_port + 10*i + 9`:
//!
//! | offset | use |
//! |---|---|
//! | 0 | CometBFT P2P (`[p2p] laddr`) |
//! | 1 | CometBFT RPC (`[rpc] laddr`) |
//! | 2 | ABCI: the app listens, CometBFT connects (`proxy_app`) |
//! | 3 | CometBFT Prometheus metrics (`[instrumentation] prometheus_listen_addr`) |
//! | 4..=8 | reserved for other per-node services (sidecar, OpenAI endpoint, ...) |
//! | 9 | the app's Prometheus metrics (`gonkad start --metrics-listen`) |
//!
//! The default base (26700) keeps a 10-node network (26700..=26799) clear of CometBFT's own
//! defaults (26656..=26660) and below Linux's ephemeral range (32768+), so outgoing connections
//! never steal a localnet port.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::sync::Mutex;

use anyhow::{bail, Result};

/// Number of ports in each node's block.
pub const PORTS_PER_NODE: u16 = 10;
/// Offset of the CometBFT P2P port inside a node's block.
pub const P2P_OFFSET: u16 = 0;
/// Offset of the CometBFT RPC port inside a node's block.
pub const RPC_OFFSET: u16 = 1;
/// Offset of the app's ABCI listen port inside a node's block.
pub const ABCI_OFFSET: u16 = 2;
/// Offset of the CometBFT Prometheus port inside a node's block.
pub const PROMETHEUS_OFFSET: u16 = 3;
/// First offset free for other per-node services (sidecar and the like); offsets up to 9 are
/// reserved for them.
pub const FIRST_EXTRA_OFFSET: u16 = 4;
/// Offset of the node's API port (`gonkad start --api-listen`): gRPC and REST, where stock Cosmos clients
/// query and broadcast.
pub const API_OFFSET: u16 = 7;
/// Offset of the app's Prometheus metrics port (`gonkad start --metrics-listen`).
pub const APP_METRICS_OFFSET: u16 = 9;
/// Base port used when the caller does not choose one.
pub const DEFAULT_BASE_PORT: u16 = 26700;

/// The loopback ports of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodePorts {
    /// First port of the node's block of [`PORTS_PER_NODE`] ports.
    pub block_start: u16,
    /// CometBFT P2P listen port.
    pub p2p: u16,
    /// CometBFT RPC listen port.
    pub rpc: u16,
    /// Port the app listens on for CometBFT's ABCI connections.
    pub abci: u16,
    /// CometBFT Prometheus metrics port.
    pub prometheus: u16,
}

impl NodePorts {
    /// Ports of node `index` for a network whose first block starts at `base_port`.
    /// Fails if the node's block would run past port 65535.
    pub fn for_node(base_port: u16, index: usize) -> Result<NodePorts> {
        let start = u32::from(base_port) + u32::from(PORTS_PER_NODE) * index as u32;
        let end = start + u32::from(PORTS_PER_NODE) - 1;
        if end > u32::from(u16::MAX) {
            bail!(
                "node {index} would need ports {start}..={end} with base port {base_port}, \
                 but ports end at 65535; choose a lower base port or fewer validators"
            );
        }
        let start = start as u16;
        Ok(NodePorts {
            block_start: start,
            p2p: start + P2P_OFFSET,
            rpc: start + RPC_OFFSET,
            abci: start + ABCI_OFFSET,
            prometheus: start + PROMETHEUS_OFFSET,
        })
    }

    /// The ports CometBFT or the app bind, in offset order.
    pub fn bound(&self) -> [u16; 4] {
        [self.p2p, self.rpc, self.abci, self.prometheus]
    }

    /// The port of the app's Prometheus metrics.
    pub fn app_metrics(&self) -> u16 {
        self.block_start + APP_METRICS_OFFSET
    }

    /// The port of the node's API (gRPC and REST).
    pub fn api(&self) -> u16 {
        self.block_start + API_OFFSET
    }

    /// Port `offset` of this node's block, for services beyond the four above
    /// (`offset` in `FIRST_EXTRA_OFFSET..PORTS_PER_NODE`).
    pub fn extra(&self, offset: u16) -> Option<u16> {
        (FIRST_EXTRA_OFFSET..PORTS_PER_NODE)
            .contains(&offset)
            .then_some(self.block_start + offset)
    }
}

/// Checks that `validators` nodes fit above `base_port` and returns their ports.
pub fn ports_for_network(base_port: u16, validators: usize) -> Result<Vec<NodePorts>> {
    if base_port == 0 {
        bail!("base port 0 is not a port; choose one such as {DEFAULT_BASE_PORT}");
    }
    (0..validators)
        .map(|i| NodePorts::for_node(base_port, i))
        .collect()
}

/// Port ranges already handed out by [`find_free_base_port`] in this process, so that tests
/// running in parallel threads never receive overlapping ranges.
static CLAIMED: Mutex<Vec<(u16, u16)>> = Mutex::new(Vec::new());

/// Finds a base port at or above `start` such that every port the nodes of a `validators`-node
/// network bind is free on 127.0.0.1 right now, and that no earlier call in this process
/// returned an overlapping range. Meant for tests that run several localnets; another process
/// can still take a port between this check and the start of the network.
pub fn find_free_base_port(validators: usize, start: u16) -> Result<u16> {
    let span = u32::from(PORTS_PER_NODE) * validators.max(1) as u32;
    let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
    let mut base = u32::from(start.max(1));
    while base + span - 1 <= u32::from(u16::MAX) {
        let end = (base + span - 1) as u16;
        let candidate = base as u16;
        let overlaps = claimed.iter().any(|&(lo, hi)| candidate <= hi && lo <= end);
        if !overlaps && all_free(candidate, validators)? {
            claimed.push((candidate, end));
            return Ok(candidate);
        }
        base += span;
    }
    bail!("no free block of {span} ports for {validators} nodes found on 127.0.0.1 from port {start} up")
}

fn all_free(base_port: u16, validators: usize) -> Result<bool> {
    for ports in ports_for_network(base_port, validators)? {
        for port in ports.bound() {
            let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
            if TcpListener::bind(addr).is_err() {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ports_follow_the_documented_scheme() {
        let p0 = NodePorts::for_node(26700, 0).unwrap();
        assert_eq!(
            (p0.p2p, p0.rpc, p0.abci, p0.prometheus),
            (26700, 26701, 26702, 26703)
        );
        let p3 = NodePorts::for_node(26700, 3).unwrap();
        assert_eq!(
            (p3.p2p, p3.rpc, p3.abci, p3.prometheus),
            (26730, 26731, 26732, 26733)
        );
        assert_eq!(p3.extra(4), Some(26734));
        assert_eq!(p3.extra(9), Some(26739));
        assert_eq!(p3.extra(3), None);
        assert_eq!(p3.extra(10), None);
    }

    #[test]
    fn ports_are_distinct_across_a_network() {
        let nodes = ports_for_network(DEFAULT_BASE_PORT, 10).unwrap();
        let mut all: Vec<u16> = nodes.iter().flat_map(|p| p.bound()).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
        assert!(*all.last().unwrap() < 26800);
    }

    #[test]
    fn port_overflow_is_an_error() {
        assert!(NodePorts::for_node(65526, 0).is_ok());
        let err = NodePorts::for_node(65530, 0).unwrap_err().to_string();
        assert!(err.contains("65535"), "{err}");
        assert!(ports_for_network(65500, 4).is_err());
        assert!(ports_for_network(0, 1).is_err());
    }

    #[test]
    fn free_base_ports_never_overlap_within_a_process() {
        let a = find_free_base_port(4, 21000).unwrap();
        let b = find_free_base_port(4, 21000).unwrap();
        assert!(a >= 21000 && b >= 21000);
        assert!(b >= a + 40 || a >= b + 40, "{a} and {b} overlap");
    }

    #[test]
    fn free_base_port_skips_ports_in_use() {
        let first = find_free_base_port(2, 22000).unwrap();
        // Occupy the RPC port of node 0 in the block right after `first`'s range.
        let next_block = first + 20;
        let busy_port = next_block + RPC_OFFSET;
        let _busy = TcpListener::bind(("127.0.0.1", busy_port)).unwrap();
        let found = find_free_base_port(2, next_block).unwrap();
        assert_ne!(found, next_block);
        let ports = ports_for_network(found, 2).unwrap();
        assert!(ports.iter().all(|p| !p.bound().contains(&busy_port)));
    }
}
