//! Settlement for transfer agents, hosts and watchers: escrow messages, building a batch's
//! Merkle sum tree and its `MsgSettleBatch`, co-signing it, and proofs for challenges.

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};
use cosmrs::Any;
use gonka_bls_crypto::{aggregate, SecretKey, Signature};
use gonka_proto::batch::{leaf_charge, leaf_node, record_work, SumNode, SumTree};
use gonka_proto::inference::WorkRecord;
use gonka_proto::settlement::{
    msg_challenge_batch::Kind, BatchLeaf, HostTotal, LeafProof, MsgChallengeBatch, MsgCloseEscrow,
    MsgDemandLeaf, MsgDisputeLeaf, MsgOpenEscrow, MsgProvideLeaf, MsgSettleBatch, MsgTopUpEscrow,
    NodeProof, RequesterTotal,
};
use gonka_proto::signing::batch_sign_bytes;

use crate::tx::any_of;

/// Seconds below the chain's `max_record_age_secs` at which a transfer agent stops batching a
/// record and a host stops co-signing it: a batch's block time may be later than their
/// clocks, and a leaf past the age voids its batch.
pub const RECORD_AGE_MARGIN_SECS: u64 = 60;

/// `/gonka.settlement.v1.MsgOpenEscrow`.
pub fn msg_open_escrow(
    requester: &str,
    transfer_agent: &str,
    amount: u128,
    expires_at: u64,
) -> Any {
    any_of(&MsgOpenEscrow {
        requester: requester.into(),
        transfer_agent: transfer_agent.into(),
        amount: amount.to_string(),
        expires_at,
    })
}

/// `/gonka.settlement.v1.MsgTopUpEscrow` (`expires_at` 0 keeps the expiry).
pub fn msg_top_up_escrow(
    requester: &str,
    transfer_agent: &str,
    amount: u128,
    expires_at: u64,
) -> Any {
    any_of(&MsgTopUpEscrow {
        requester: requester.into(),
        transfer_agent: transfer_agent.into(),
        amount: amount.to_string(),
        expires_at,
    })
}

/// `/gonka.settlement.v1.MsgCloseEscrow`.
pub fn msg_close_escrow(requester: &str, transfer_agent: &str) -> Any {
    any_of(&MsgCloseEscrow {
        requester: requester.into(),
        transfer_agent: transfer_agent.into(),
    })
}

/// `/gonka.settlement.v1.MsgSettleBatch`.
pub fn msg_settle_batch(msg: &MsgSettleBatch) -> Any {
    any_of(msg)
}

/// `/gonka.settlement.v1.MsgChallengeBatch`.
pub fn msg_challenge_batch(challenger: &str, batch_id: u64, kind: Kind) -> Any {
    any_of(&MsgChallengeBatch {
        challenger: challenger.into(),
        batch_id,
        kind: Some(kind),
    })
}

/// `/gonka.settlement.v1.MsgDemandLeaf`: `challenger` makes leaf `index` of `batch_id` public,
/// depositing `deposit` ngnk.
pub fn msg_demand_leaf(challenger: &str, batch_id: u64, index: u64, deposit: u128) -> Any {
    any_of(&MsgDemandLeaf {
        challenger: challenger.into(),
        batch_id,
        index,
        deposit: deposit.to_string(),
    })
}

/// `/gonka.settlement.v1.MsgProvideLeaf`: the answer to a leaf demand.
pub fn msg_provide_leaf(sender: &str, batch_id: u64, proof: LeafProof) -> Any {
    any_of(&MsgProvideLeaf {
        sender: sender.into(),
        batch_id,
        proof: Some(proof),
    })
}

/// `/gonka.settlement.v1.MsgDisputeLeaf`: `requester` disputes the answer `proof`'s leaf of
/// batch `batch_id` commits to, depositing `deposit` ngnk (for a leaf not on chain as a work
/// record; one that is is disputed with `msg_open_dispute`).
pub fn msg_dispute_leaf(requester: &str, batch_id: u64, proof: LeafProof, deposit: u128) -> Any {
    any_of(&MsgDisputeLeaf {
        requester: requester.into(),
        batch_id,
        proof: Some(proof),
        deposit: deposit.to_string(),
    })
}

/// A served request as its transfer agent settles it: the signed record, the host of its
/// executor node and what the host is paid.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    /// The record, signed by the requester and the executor.
    pub record: WorkRecord,
    /// The executor node's host.
    pub host: String,
    /// ngnk the host is paid: tokens x the model's price.
    pub cost: u128,
    /// The model's `work_per_token` in the chain's model table (0 counts as 1): the host's
    /// work for it is its tokens times this ([`gonka_proto::batch::record_work`]).
    pub work_per_token: u64,
}

/// What the chain's model table says of a model that a host checks its leaves by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelTerms {
    /// ngnk per token.
    pub price_per_token: u128,
    /// Work units per token (0 counts as 1).
    pub work_per_token: u64,
}

impl Served {
    /// The served request `leaf` commits to; `None` if it carries no record or a malformed
    /// cost.
    pub fn of_leaf(leaf: &BatchLeaf) -> Option<Served> {
        Some(Served {
            record: leaf.record.clone()?,
            host: leaf.executor_host.clone(),
            cost: gonka_proto::batch::parse_decimal(&leaf.cost)?,
            work_per_token: leaf.work_per_token,
        })
    }

    /// The leaf that carries this served request, its batch chaining fields unset (the
    /// inverse of [`Served::of_leaf`]).
    pub fn to_leaf(&self) -> BatchLeaf {
        BatchLeaf {
            record: Some(self.record.clone()),
            executor_host: self.host.clone(),
            cost: self.cost.to_string(),
            work_per_token: self.work_per_token,
            ..BatchLeaf::default()
        }
    }
}

/// A batch with its tree: what the transfer agent keeps to serve leaves and proofs.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The leaves, in tree order.
    pub leaves: Vec<BatchLeaf>,
    /// The sum tree over them.
    pub tree: SumTree,
    /// The message, without its host signature.
    pub msg: MsgSettleBatch,
}

/// Why a leaf has no node.
const MALFORMED_LEAF: &str = "a leaf's cost or commission is malformed, or its work overflows";

impl Batch {
    /// Builds batch `number` of `transfer_agent`: sorts the records by (requester, inference
    /// id), chains each host's leaves with running totals, and computes the tree and lines.
    /// Fails on an empty batch, an inference id given twice or an overflow.
    pub fn build(transfer_agent: &str, number: u64, mut served: Vec<Served>) -> Result<Batch> {
        ensure!(!served.is_empty(), "a batch needs at least one record");
        served.sort_by(|a, b| {
            (&a.record.requester, &a.record.inference_id)
                .cmp(&(&b.record.requester, &b.record.inference_id))
        });
        if let Some(pair) = served
            .windows(2)
            .find(|w| w[0].record.inference_id == w[1].record.inference_id)
        {
            bail!("inference {} is served twice", pair[0].record.inference_id);
        }
        // host -> (index + 1 of its last leaf, work, payout)
        let mut running: BTreeMap<String, (u64, u64, u128)> = BTreeMap::new();
        let mut leaves = Vec::with_capacity(served.len());
        for (index, item) in served.into_iter().enumerate() {
            let own = record_work(&item.record, item.work_per_token)
                .context("the record's work overflows")?;
            let (previous, work, payout) = running.get(&item.host).copied().unwrap_or_default();
            let work = work.checked_add(own).context("host work overflows")?;
            let payout = payout
                .checked_add(item.cost)
                .context("host payout overflows")?;
            running.insert(item.host.clone(), (index as u64 + 1, work, payout));
            leaves.push(BatchLeaf {
                record: Some(item.record),
                executor_host: item.host,
                cost: item.cost.to_string(),
                host_previous: previous,
                host_work: work,
                host_payout: payout.to_string(),
                work_per_token: item.work_per_token,
            });
        }
        Batch::from_leaves(transfer_agent, number, leaves)
    }

    /// The batch over `leaves` exactly as given (tests build cheating batches this way).
    pub fn from_leaves(transfer_agent: &str, number: u64, leaves: Vec<BatchLeaf>) -> Result<Batch> {
        let nodes = leaves
            .iter()
            .map(|leaf| leaf_node(leaf).context(MALFORMED_LEAF))
            .collect::<Result<Vec<_>>>()?;
        Batch::assemble(transfer_agent, number, leaves, nodes)
    }

    /// The batch over `leaves` whose tree is built on `nodes` (one per leaf, normally their
    /// [`leaf_node`]s): the lines are computed from the leaves' requesters, charges and host
    /// running totals.
    pub fn assemble(
        transfer_agent: &str,
        number: u64,
        leaves: Vec<BatchLeaf>,
        nodes: Vec<SumNode>,
    ) -> Result<Batch> {
        ensure!(leaves.len() == nodes.len(), "one node per leaf");
        let tree = SumTree::build(nodes).context("a batch holds 1 to 2^32 leaves")?;
        let mut requesters: BTreeMap<String, u128> = BTreeMap::new();
        let mut hosts: BTreeMap<String, HostTotal> = BTreeMap::new();
        for (index, leaf) in leaves.iter().enumerate() {
            let record = leaf.record.as_ref().context("a leaf carries its record")?;
            let charge = leaf_charge(leaf).context("a leaf's charge is malformed")?;
            *requesters.entry(record.requester.clone()).or_default() += charge;
            hosts.insert(
                leaf.executor_host.clone(),
                HostTotal {
                    host: leaf.executor_host.clone(),
                    work_units: leaf.host_work,
                    payout: leaf.host_payout.clone(),
                    last_index: index as u64,
                },
            );
        }
        let total: u128 = requesters.values().sum();
        let msg = MsgSettleBatch {
            transfer_agent: transfer_agent.into(),
            number,
            root: tree.root().to_vec(),
            total: total.to_string(),
            total_work: tree.top().work,
            record_count: leaves.len() as u64,
            requesters: requesters
                .into_iter()
                .map(|(requester, amount)| RequesterTotal {
                    requester,
                    amount: amount.to_string(),
                })
                .collect(),
            hosts: hosts.into_values().collect(),
            host_signature: Vec::new(),
        };
        Ok(Batch { leaves, tree, msg })
    }

    /// The hosts that must co-sign, ascending.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.msg.hosts.iter().map(|h| h.host.as_str())
    }

    /// Leaf `index` with its proof; `None` outside the batch.
    pub fn leaf_proof(&self, index: u64) -> Option<LeafProof> {
        Some(LeafProof {
            index,
            leaf: Some(self.leaves.get(usize::try_from(index).ok()?)?.clone()),
            siblings: self.siblings(0, index)?,
        })
    }

    /// The node at `(level, index)` with its proof.
    pub fn node_proof(&self, level: u32, index: u64) -> Option<NodeProof> {
        Some(NodeProof {
            level,
            index,
            node: Some(self.tree.node(level, index)?.to_proto()),
            siblings: self.siblings(level, index)?,
        })
    }

    fn siblings(&self, level: u32, index: u64) -> Option<Vec<gonka_proto::settlement::SumNode>> {
        Some(
            self.tree
                .proof(level, index)?
                .iter()
                .map(SumNode::to_proto)
                .collect(),
        )
    }

    /// The message with the hosts' aggregate signature (one signature per host, any order).
    pub fn signed(&self, host_signatures: &[Signature]) -> MsgSettleBatch {
        MsgSettleBatch {
            host_signature: aggregate(host_signatures).to_bytes().to_vec(),
            ..self.msg.clone()
        }
    }
}

/// A host's co-signature of `msg` on `chain_id` with its BLS key. A host signs only after
/// [`check_host_leaves`] accepted the leaves the transfer agent showed it.
pub fn cosign(key: &SecretKey, chain_id: &str, msg: &MsgSettleBatch) -> Signature {
    key.sign(&batch_sign_bytes(chain_id, msg))
}

/// The leaf of `proof` if the proof leads to `msg`'s committed root and totals (what the
/// chain checks first of any leaf shown to it).
pub fn proven_leaf<'a>(msg: &MsgSettleBatch, proof: &'a LeafProof) -> Result<&'a BatchLeaf> {
    use gonka_proto::batch::{siblings_from_proto, verify_path, Committed};
    let committed = Committed::of(msg).context("root is not 32 bytes or total no decimal")?;
    let leaf = proof
        .leaf
        .as_ref()
        .context("a leaf proof carries no leaf")?;
    let node = leaf_node(leaf).context(MALFORMED_LEAF)?;
    let siblings = siblings_from_proto(&proof.siblings).context("a proof is malformed")?;
    verify_path(&committed, 0, proof.index, node, &siblings)
        .with_context(|| format!("leaf {} is not on the batch's tree", proof.index))?;
    Ok(leaf)
}

/// What a host checks before it co-signs `msg`: `leaves` (with their proofs) are exactly its
/// leaves — the chain from its line's last index back through `host_previous` — each on the
/// committed tree, each carrying a receipt the host's own node signed (`own_receipt`), each
/// paid `tokens × price` of its model and credited `tokens × work_per_token` (`terms`), and
/// the running totals add up to its line.
/// A host that co-signs only such batches is never slashed by a challenge: every leaf it
/// vouches for is its own work at its price, and its line is their sum.
pub fn check_host_leaves(
    msg: &MsgSettleBatch,
    host: &str,
    leaves: &[LeafProof],
    own_receipt: impl Fn(&WorkRecord) -> bool,
    terms: impl Fn(&str) -> Option<ModelTerms>,
) -> Result<()> {
    use gonka_proto::batch::parse_decimal;
    let line = msg
        .hosts
        .iter()
        .find(|l| l.host == host)
        .with_context(|| format!("the batch has no line for host {host}"))?;
    let mut by_index = BTreeMap::new();
    for proof in leaves {
        let leaf = proven_leaf(msg, proof)?;
        ensure!(
            by_index.insert(proof.index, leaf).is_none(),
            "leaf {} is shown twice",
            proof.index
        );
    }
    // Walk the host's chain from its last leaf back to its first.
    let (mut index, mut walked) = (line.last_index, 0usize);
    let (mut work, mut payout) = (
        line.work_units,
        parse_decimal(&line.payout).context("the host's payout is not a decimal")?,
    );
    loop {
        let leaf = by_index
            .get(&index)
            .with_context(|| format!("leaf {index} of the host's chain is not shown"))?;
        let record = leaf.record.as_ref().context("a leaf carries no record")?;
        ensure!(
            leaf.executor_host == host && own_receipt(record),
            "leaf {index} ({}) is not work of this host's nodes",
            record.inference_id
        );
        let tokens = record
            .prompt_tokens
            .checked_add(record.completion_tokens)
            .context("token counts overflow")?;
        let cost = parse_decimal(&leaf.cost).context("a leaf's cost is malformed")?;
        let terms = terms(&record.model)
            .with_context(|| format!("leaf {index}: model {} has no known price", record.model))?;
        let price = terms.price_per_token;
        ensure!(
            u128::from(tokens).checked_mul(price) == Some(cost),
            "leaf {index}: cost {cost} is not {tokens} tokens at {price}"
        );
        ensure!(
            leaf.work_per_token == terms.work_per_token,
            "leaf {index}: work_per_token {} is not model {}'s {}",
            leaf.work_per_token,
            record.model,
            terms.work_per_token
        );
        let own =
            record_work(record, terms.work_per_token).context("the record's work overflows")?;
        ensure!(
            leaf.host_work == work && parse_decimal(&leaf.host_payout) == Some(payout),
            "leaf {index}: the host's running totals are not what its line needs"
        );
        work = work
            .checked_sub(own)
            .context("the host's work does not add up")?;
        payout = payout
            .checked_sub(cost)
            .context("the host's payout does not add up")?;
        walked += 1;
        match leaf.host_previous {
            0 => break,
            previous if previous - 1 < index => index = previous - 1,
            _ => bail!("leaf {index}: host_previous does not point back"),
        }
    }
    ensure!(
        work == 0 && payout == 0,
        "the host's first leaf does not start its totals"
    );
    ensure!(
        walked == by_index.len(),
        "{} leaves are shown but the host's chain has {walked}",
        by_index.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(requester: &str, nonce: &str, tokens: u64) -> WorkRecord {
        WorkRecord {
            inference_id: format!("{requester}-{nonce}"),
            requester: requester.into(),
            model: "m".into(),
            prompt_tokens: tokens,
            completion_tokens: 1,
            commission: "2".into(),
            ..Default::default()
        }
    }

    /// The terms of a model at `price` and the reference model's work per token.
    fn priced(price: u128) -> ModelTerms {
        ModelTerms {
            price_per_token: price,
            work_per_token: 0,
        }
    }

    /// Six records over hosts h1 and h2 (h1 owns nonces starting with 'x').
    fn batch() -> Batch {
        let served = [
            ("a", "x1", 3),
            ("a", "y1", 4),
            ("b", "x2", 5),
            ("b", "x3", 6),
            ("c", "y2", 7),
            ("c", "x4", 8),
        ]
        .map(|(requester, nonce, tokens)| Served {
            record: record(requester, nonce, tokens),
            host: if nonce.starts_with('x') { "h1" } else { "h2" }.into(),
            cost: u128::from(tokens + 1) * 10,
            work_per_token: 0,
        })
        .to_vec();
        Batch::build("ta", 1, served).unwrap()
    }

    fn leaves_of(batch: &Batch, host: &str) -> Vec<LeafProof> {
        (0..batch.leaves.len() as u64)
            .filter(|&i| batch.leaves[i as usize].executor_host == host)
            .map(|i| batch.leaf_proof(i).unwrap())
            .collect()
    }

    fn check(batch: &Batch, host: &str, leaves: &[LeafProof]) -> Result<()> {
        let owns = |r: &WorkRecord| {
            r.inference_id
                .contains(if host == "h1" { "-x" } else { "-y" })
        };
        check_host_leaves(&batch.msg, host, leaves, owns, |m| {
            (m == "m").then_some(priced(10))
        })
    }

    #[test]
    fn an_honest_batch_passes_every_hosts_check() {
        let batch = batch();
        for host in ["h1", "h2"] {
            check(&batch, host, &leaves_of(&batch, host)).unwrap();
        }
    }

    #[test]
    fn a_host_refuses_what_it_would_be_blamed_for() {
        let batch = batch();
        let mine = leaves_of(&batch, "h1");
        // A leaf missing, a leaf of the other host, a leaf shown twice.
        assert!(check(&batch, "h1", &mine[1..]).is_err());
        let mut more = mine.clone();
        more.push(leaves_of(&batch, "h2")[0].clone());
        assert!(check(&batch, "h1", &more).is_err());
        let mut twice = mine.clone();
        twice.push(mine[0].clone());
        assert!(check(&batch, "h1", &twice).is_err());
        // An inflated line.
        let mut inflated = batch.clone();
        inflated.msg.hosts[0].work_units += 1;
        assert!(check(&inflated, "h1", &mine).is_err());
        // A leaf whose receipt is not the host's own.
        let owns_nothing =
            check_host_leaves(&batch.msg, "h1", &mine, |_| false, |_| Some(priced(10)));
        assert!(owns_nothing.is_err());
        // Paid below its price.
        let dearer = check_host_leaves(&batch.msg, "h1", &mine, |_| true, |_| Some(priced(11)));
        assert!(dearer.is_err());
        // Counted at another model's work per token than the chain's.
        let heavier = |_: &str| {
            Some(ModelTerms {
                work_per_token: 125,
                ..priced(10)
            })
        };
        let weighed = check_host_leaves(&batch.msg, "h1", &mine, |_| true, heavier);
        assert!(weighed.unwrap_err().to_string().contains("work_per_token"));
        // A leaf changed after the tree was built.
        let mut changed = mine.clone();
        changed[0].leaf.as_mut().unwrap().cost = "1".into();
        assert!(check(&batch, "h1", &changed).is_err());
    }
}
