//! What the TA knows about the network: the ML nodes it may route to (address, models,
//! capacity, the key their receipts must verify with), the models' prices, and the other
//! transfer agents.
//!
//! With a chain the registry is a snapshot of the chain's inference registry, refreshed in the
//! background ([`refresh_from_chain`]); without one (tests, benches) it is the static node list
//! of the configuration and every model is free.

use std::collections::BTreeMap;

use gonka_proto::inference as pb;

use super::routing::NodeInfo;
use super::TaNodeConfig;
use gonka_client::http as upstream;
use gonka_client::Chain;

/// A node the TA can forward to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredNode {
    /// Routing attributes.
    pub info: NodeInfo,
    /// `host:port` of its HTTP endpoint.
    pub authority: String,
    /// Its registered response key (SEC1), empty when unknown (no chain).
    pub pubkey: Vec<u8>,
    /// Its registered host, whom its receipts name (empty without a chain).
    pub host: String,
}

/// The chain's terms for a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelTerms {
    /// Price per token in ngnk.
    pub price_per_token: u128,
    /// Least VRAM a node must have to serve it.
    pub min_vram_mib: u64,
    /// For a model validated by log-probabilities: the alternatives per position its
    /// receipts' scored outputs carry (`None`: validated by exact answers).
    pub logprob_top_k: Option<u32>,
    /// Work units per token (the table's value, 0 counting as 1), which its leaves carry.
    pub work_per_token: u64,
}

/// A snapshot of the network as the TA routes on it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registry {
    /// Nodes by id.
    pub nodes: BTreeMap<String, RegisteredNode>,
    /// Priced models by id; `None` without a chain (every model free, any node model accepted).
    pub models: Option<BTreeMap<String, ModelTerms>>,
    /// Registered transfer agents.
    pub transfer_agents: Vec<pb::TransferAgent>,
    /// Most tokens one record may claim, which bounds `max_tokens` (0: no limit, no chain).
    pub max_tokens_per_record: u64,
}

impl Registry {
    /// The static registry of a chain-less TA.
    pub fn from_config(nodes: &[TaNodeConfig]) -> Result<Registry, String> {
        let mut registry = Registry::default();
        for n in nodes {
            registry.nodes.insert(
                n.id.clone(),
                RegisteredNode {
                    info: NodeInfo {
                        id: n.id.clone(),
                        models: n.models.clone(),
                        vram_mib: n.vram_mib,
                        bandwidth_mbps: n.bandwidth_mbps,
                        max_concurrency: n.max_concurrency,
                    },
                    authority: upstream::authority(&n.url)?,
                    pubkey: Vec::new(),
                    host: String::new(),
                },
            );
        }
        Ok(registry)
    }

    /// The registry of the chain's state. Nodes whose endpoint is not `http://HOST:PORT` are
    /// skipped with a warning (the TA speaks plain HTTP to ML nodes); models with a malformed
    /// price are skipped likewise.
    pub fn from_chain(
        models: Vec<pb::Model>,
        nodes: Vec<pb::Node>,
        transfer_agents: Vec<pb::TransferAgent>,
        params: &pb::Params,
    ) -> Registry {
        let mut terms = BTreeMap::new();
        for m in models {
            match m.price_per_token.parse::<u128>() {
                Ok(price_per_token) => {
                    terms.insert(
                        m.id,
                        ModelTerms {
                            price_per_token,
                            min_vram_mib: m.min_vram_mib,
                            logprob_top_k: (m.validation == "logprobs").then_some(m.logprob_top_k),
                            work_per_token: m.work_per_token,
                        },
                    );
                }
                Err(_) => {
                    tracing::warn!(model = %m.id, price = %m.price_per_token, "skipping a model with a malformed price")
                }
            }
        }
        let mut registered = BTreeMap::new();
        for n in nodes {
            let authority = match upstream::authority(&n.endpoint) {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(node = %n.id, error = %e, "skipping a node the TA cannot reach");
                    continue;
                }
            };
            registered.insert(
                n.id.clone(),
                RegisteredNode {
                    info: NodeInfo {
                        id: n.id,
                        models: n.models,
                        vram_mib: n.vram_mib,
                        bandwidth_mbps: n.bandwidth_mbps,
                        max_concurrency: u32::try_from(n.max_concurrency).unwrap_or(u32::MAX),
                    },
                    authority,
                    pubkey: n.pubkey,
                    host: n.host,
                },
            );
        }
        Registry {
            nodes: registered,
            models: Some(terms),
            transfer_agents,
            max_tokens_per_record: params.max_tokens_per_record,
        }
    }

    /// Whether some node serves `model` (and, with a chain, the chain prices it).
    pub fn serves(&self, model: &str) -> bool {
        let priced = self.models.as_ref().is_none_or(|m| m.contains_key(model));
        priced
            && self
                .nodes
                .values()
                .any(|n| n.info.models.iter().any(|m| m == model))
    }

    /// The terms of `model`: free and without a VRAM floor when there is no chain.
    pub fn terms(&self, model: &str) -> ModelTerms {
        self.models
            .as_ref()
            .and_then(|m| m.get(model).copied())
            .unwrap_or(ModelTerms {
                price_per_token: 0,
                min_vram_mib: 0,
                logprob_top_k: None,
                work_per_token: 0,
            })
    }

    /// Model ids clients may ask for: the chain's model table, or the nodes' models.
    pub fn model_ids(&self) -> Vec<String> {
        match &self.models {
            Some(models) => models.keys().cloned().collect(),
            None => {
                let mut ids: Vec<String> = self
                    .nodes
                    .values()
                    .flat_map(|n| n.info.models.iter().cloned())
                    .collect();
                ids.sort();
                ids.dedup();
                ids
            }
        }
    }
}

/// Reads the chain's registry.
pub async fn refresh_from_chain(chain: &Chain) -> anyhow::Result<Registry> {
    let (models, nodes, transfer_agents, params) = tokio::try_join!(
        chain.models(),
        chain.nodes(),
        chain.transfer_agents(),
        chain.inference_params()
    )?;
    Ok(Registry::from_chain(
        models,
        nodes,
        transfer_agents,
        &params,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, endpoint: &str, models: &[&str]) -> pb::Node {
        pb::Node {
            id: id.into(),
            host: "gonka1host".into(),
            models: models.iter().map(|m| m.to_string()).collect(),
            vram_mib: 80,
            bandwidth_mbps: 10,
            max_concurrency: 2,
            endpoint: endpoint.into(),
            pubkey: vec![2; 33],
            key_proof: Vec::new(),
        }
    }

    #[test]
    fn chain_registry_prices_models_and_skips_unreachable_nodes() {
        let models = vec![
            pb::Model {
                id: "a".into(),
                price_per_token: "3".into(),
                min_vram_mib: 40,
                ..pb::Model::default()
            },
            pb::Model {
                id: "bad".into(),
                price_per_token: "x".into(),
                ..pb::Model::default()
            },
        ];
        let nodes = vec![
            node("n1", "http://127.0.0.1:1", &["a"]),
            node("n2", "https://far.example", &["a"]),
            node("n3", "http://127.0.0.1:2", &["unpriced"]),
        ];
        let params = pb::Params {
            max_tokens_per_record: 7,
            payload_retention_blocks: 1,
        };
        let r = Registry::from_chain(models, nodes, vec![], &params);
        assert_eq!(r.nodes.keys().collect::<Vec<_>>(), ["n1", "n3"]);
        assert_eq!(r.nodes["n1"].authority, "127.0.0.1:1");
        assert!(r.serves("a"));
        assert!(!r.serves("unpriced"), "a model the chain does not price");
        assert!(!r.serves("bad"));
        assert_eq!(r.terms("a").price_per_token, 3);
        assert_eq!(r.model_ids(), ["a"]);
        assert_eq!(r.max_tokens_per_record, 7);
    }

    #[test]
    fn static_registry_accepts_node_models_for_free() {
        let config = TaNodeConfig {
            id: "n".into(),
            url: "http://127.0.0.1:9".into(),
            models: vec!["m2".into(), "m1".into()],
            vram_mib: 0,
            bandwidth_mbps: 0,
            max_concurrency: 1,
        };
        let r = Registry::from_config(&[config]).unwrap();
        assert!(r.serves("m1") && !r.serves("zz"));
        assert_eq!(r.model_ids(), ["m1", "m2"]);
        assert_eq!(r.terms("m1").price_per_token, 0);
    }
}
