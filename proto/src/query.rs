//! The query contract: every `abci_query` path of the chain with its protobuf request and
//! response types, defined once. A module's router answers a [`Query`] with its handler
//! (`gonka_sdk::QueryRouter::on::<Q>`), and clients ask it by type
//! (`gonka_client::Client::query::<Q>`), so the two sides cannot disagree on a path or a
//! type.

/// One query: its path (`/<module>/<query>`) and its request and response messages.
pub trait Query {
    /// The `abci_query` path.
    const PATH: &'static str;
    /// The protobuf request sent as the query's data.
    type Request: prost::Message + Default;
    /// The protobuf response in the answer's value.
    type Response: prost::Message + prost::Name + Default;
}

/// Declares marker types implementing [`Query`] for the messages of one proto package.
macro_rules! queries {
    ($package:ident; $( $(#[$doc:meta])* $name:ident = $path:literal: $request:ident => $response:ident; )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $name;

            impl $crate::query::Query for $name {
                const PATH: &'static str = $path;
                type Request = $crate::$package::$request;
                type Response = $crate::$package::$response;
            }
        )*
    };
}

/// Queries of x/auth.
pub mod auth {
    queries! { auth;
        /// An account: number, sequence and public key.
        Account = "/auth/account": QueryAccountRequest => QueryAccountResponse;
        /// Transaction parameters (size limits, minimum gas price, gas costs).
        Params = "/auth/params": QueryParamsRequest => QueryParamsResponse;
    }
}

/// Queries of x/bank.
pub mod bank {
    queries! { bank;
        /// One balance of an address.
        Balance = "/bank/balance": QueryBalanceRequest => QueryBalanceResponse;
        /// Every balance of an address.
        Balances = "/bank/balances": QueryAllBalancesRequest => QueryAllBalancesResponse;
        /// The supply of a denom.
        Supply = "/bank/supply": QuerySupplyRequest => QuerySupplyResponse;
    }
}

/// Queries of x/epochs.
pub mod epochs {
    queries! { epochs;
        /// The running epoch and the parameters.
        Current = "/epochs/current": QueryCurrentRequest => QueryCurrentResponse;
        /// A finished or the running epoch.
        Epoch = "/epochs/epoch": QueryEpochRequest => QueryEpochResponse;
    }
}

/// Queries of x/stake.
pub mod stake {
    queries! { stake;
        /// Every participant.
        Participants = "/stake/participants": QueryParticipantsRequest => QueryParticipantsResponse;
        /// One participant.
        Participant = "/stake/participant": QueryParticipantRequest => QueryParticipantResponse;
        /// Unbonding entries (of one operator, or all).
        Unbonding = "/stake/unbonding": QueryUnbondingRequest => QueryUnbondingResponse;
        /// The work ledger of an epoch.
        Work = "/stake/work": QueryWorkRequest => QueryWorkResponse;
        /// Stake parameters.
        Params = "/stake/params": QueryParamsRequest => QueryParamsResponse;
    }
}

/// Queries of x/rewards.
pub mod rewards {
    queries! { rewards;
        /// How an epoch was settled.
        Epoch = "/rewards/epoch": QueryEpochRewardsRequest => QueryEpochRewardsResponse;
        /// Every reward of one participant.
        Participant = "/rewards/participant": QueryParticipantRewardsRequest => QueryParticipantRewardsResponse;
        /// Rewards parameters.
        Params = "/rewards/params": QueryParamsRequest => QueryParamsResponse;
    }
}

/// Queries of x/inference.
pub mod inference {
    queries! { inference;
        /// The model table.
        Models = "/inference/models": QueryModelsRequest => QueryModelsResponse;
        /// Registered ML nodes (of one host, or all).
        Nodes = "/inference/nodes": QueryNodesRequest => QueryNodesResponse;
        /// One ML node.
        Node = "/inference/node": QueryNodeRequest => QueryNodeResponse;
        /// Registered transfer agents.
        TransferAgents = "/inference/transfer_agents": QueryTransferAgentsRequest => QueryTransferAgentsResponse;
        /// One settled work record.
        Record = "/inference/record": QueryRecordRequest => QueryRecordResponse;
        /// The work records of an epoch.
        Records = "/inference/records": QueryRecordsRequest => QueryRecordsResponse;
        /// Inference parameters.
        Params = "/inference/params": QueryParamsRequest => QueryParamsResponse;
    }
}

/// Queries of x/disputes.
pub mod disputes {
    queries! { disputes;
        /// One dispute.
        Dispute = "/disputes/dispute": QueryDisputeRequest => QueryDisputeResponse;
        /// Disputes by status.
        List = "/disputes/list": QueryDisputesRequest => QueryDisputesResponse;
        /// The disputes a participant takes part in.
        Participant = "/disputes/participant": QueryParticipantDisputesRequest => QueryParticipantDisputesResponse;
        /// The validations a validator owes.
        Pending = "/disputes/pending": QueryPendingRequest => QueryPendingResponse;
        /// The validation of a sampled record.
        Validation = "/disputes/validation": QueryValidationRequest => QueryValidationResponse;
        /// Sampling statistics and reputation.
        Stats = "/disputes/stats": QueryStatsRequest => QueryStatsResponse;
        /// Disputes parameters.
        Params = "/disputes/params": QueryParamsRequest => QueryParamsResponse;
    }
}

/// Cosmos SDK services that wallets and explorers call, with the stock cosmos-sdk types.
pub mod cosmos {
    use cosmos_sdk_proto::cosmos::tx::v1beta1::{SimulateRequest, SimulateResponse};

    /// `/cosmos.tx.v1beta1.Service/Simulate`: runs a tx (`tx_bytes`) against the node's
    /// mempool state without checking its signature, keeps nothing, and reports the gas it
    /// used (what cosmjs `fee: "auto"` and `gonkad tx --gas auto` ask before signing).
    #[derive(Debug, Clone, Copy)]
    pub struct Simulate;

    impl super::Query for Simulate {
        const PATH: &'static str = "/cosmos.tx.v1beta1.Service/Simulate";
        type Request = SimulateRequest;
        type Response = SimulateResponse;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path is `/<module>/<query>` and names the module the marker lives in.
    #[test]
    fn paths_name_their_module() {
        fn check<Q: Query>(module: &str) {
            let rest = Q::PATH.strip_prefix('/').unwrap();
            let (prefix, name) = rest.split_once('/').unwrap();
            assert_eq!(prefix, module, "{}", Q::PATH);
            assert!(!name.is_empty() && !name.contains('/'), "{}", Q::PATH);
        }
        check::<auth::Account>("auth");
        check::<bank::Balances>("bank");
        check::<epochs::Epoch>("epochs");
        check::<stake::Work>("stake");
        check::<rewards::Participant>("rewards");
        check::<inference::TransferAgents>("inference");
        check::<disputes::Stats>("disputes");
    }
}
