//! Protobuf types of gonka-rs, generated at build time from `proto/gonka/**/*.proto`.
//!
//! Every message also derives serde, so genesis files and `--output json` use the same
//! field names as the wire format. Type URLs follow `/gonka.<module>.v1.<Message>`.

/// Generated code carries no doc comments of its own beyond the .proto comments.
#[allow(missing_docs, clippy::all)]
pub mod gonka {
    /// `gonka.auth.v1`: accounts and transaction parameters.
    pub mod auth {
        /// Version 1 of the auth protocol.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.auth.v1.rs"));
        }
    }
    /// `gonka.epochs.v1`: epochs and their boundaries.
    pub mod epochs {
        /// Version 1 of the epochs protocol.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.epochs.v1.rs"));
        }
    }
    /// `gonka.stake.v1`: participants, stake, work ledger.
    pub mod stake {
        /// Version 1 of the stake protocol.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.stake.v1.rs"));
        }
    }
    /// `gonka.rewards.v1`: emission and work-proportional rewards.
    pub mod rewards {
        /// Version 1 of the rewards protocol.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.rewards.v1.rs"));
        }
    }
    /// `gonka.inference.v1`: ML nodes, transfer agents, models and work records.
    pub mod inference {
        /// Version 1 of the inference protocol.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.inference.v1.rs"));
        }
    }
    /// `gonka.disputes.v1`: validation of work records, disputes and slashing.
    pub mod disputes {
        /// Version 1 of the disputes protocol.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.disputes.v1.rs"));
        }
    }
    /// `gonka.bls.v1`: participants' BLS keys.
    pub mod bls {
        /// Version 1 of the bls protocol.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.bls.v1.rs"));
        }
    }
    /// `gonka.settlement.v1`: escrows, committed work batches and their challenges.
    pub mod settlement {
        /// Version 1 of the settlement protocol.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.settlement.v1.rs"));
        }
    }
    /// `gonka.pol.v1`: training jobs and their proof-of-learning checkpoints.
    pub mod pol {
        /// Version 1 of the pol protocol.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.pol.v1.rs"));
        }
    }
    /// `gonka.base.v1`: messages every module shares (pagination of list queries).
    pub mod base {
        /// Version 1 of the shared messages.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.base.v1.rs"));
        }
    }
    /// `gonka.bank.v1`: balances, transfers and supply.
    pub mod bank {
        /// Version 1 of the bank protocol.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/gonka.bank.v1.rs"));
        }
    }
}

pub use gonka::{
    auth::v1 as auth, bank::v1 as bank, base::v1 as base, bls::v1 as bls, disputes::v1 as disputes,
    epochs::v1 as epochs, inference::v1 as inference, pol::v1 as pol, rewards::v1 as rewards,
    settlement::v1 as settlement, stake::v1 as stake,
};

pub use prost::Name;

pub mod address;
pub mod batch;
pub mod ecdsa;
pub mod gas;
pub mod ids;
pub mod query;
pub mod scored;
pub mod signing;
pub mod tx_messages;
