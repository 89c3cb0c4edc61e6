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

/// Pagination of list queries (`gonka.base.v1.PageRequest` / `PageResponse`): the limits
/// every module's list queries apply.
pub mod page {
    pub use crate::base::{PageRequest, PageResponse};

    /// Rows a page reads when the request names no limit (or 0).
    pub const DEFAULT_LIMIT: u64 = 100;
    /// Most rows one page reads; a larger `limit` is clamped to it (not refused), so a client
    /// asking for everything gets a full page and a `next_key` to go on from.
    pub const MAX_LIMIT: u64 = 1_000;
    /// Most bytes of items one page carries: a page stops before the item that would cross
    /// it (a single item larger than this still goes out alone), so a response stays bounded
    /// even when items are large.
    pub const MAX_BYTES: usize = 1 << 20;

    /// The number of rows a page of `request` reads: the default for none or 0, clamped to
    /// [`MAX_LIMIT`].
    pub fn limit(request: Option<&PageRequest>) -> u64 {
        match request.map_or(0, |p| p.limit) {
            0 => DEFAULT_LIMIT,
            limit => limit.min(MAX_LIMIT),
        }
    }
}

/// A paginated list query: its request carries a `PageRequest` and its response a
/// `PageResponse` beside the listed items, so a client can follow `next_key` to the end
/// (`gonka_client::Client::query_all`).
pub trait ListQuery: Query {
    /// One listed item.
    type Item;
    /// The request's page.
    fn page(request: &mut Self::Request) -> &mut Option<page::PageRequest>;
    /// The key of the next page; empty once the list is complete.
    fn next_key(response: &Self::Response) -> &[u8];
    /// The items of one page.
    fn items(response: Self::Response) -> Vec<Self::Item>;
}

/// Implements [`ListQuery`] for queries whose messages have a `pagination` field each and
/// list their items in `field`.
macro_rules! lists {
    ($( $query:ty: $field:ident => $item:ty; )*) => {
        $(
            impl ListQuery for $query {
                type Item = $item;
                fn page(request: &mut Self::Request) -> &mut Option<page::PageRequest> {
                    &mut request.pagination
                }
                fn next_key(response: &Self::Response) -> &[u8] {
                    response.pagination.as_ref().map_or(&[], |p| &p.next_key)
                }
                fn items(response: Self::Response) -> Vec<$item> {
                    response.$field
                }
            }
        )*
    };
}

lists! {
    bank::Balances: balances => crate::bank::Coin;
    stake::Participants: participants => crate::stake::Participant;
    stake::Unbonding: entries => crate::stake::UnbondingEntry;
    stake::Work: credits => crate::stake::WorkCredit;
    rewards::Epoch: participants => crate::rewards::ParticipantReward;
    rewards::Participant: rewards => crate::rewards::ParticipantReward;
    inference::Models: models => crate::inference::Model;
    inference::Nodes: nodes => crate::inference::Node;
    inference::TransferAgents: transfer_agents => crate::inference::TransferAgent;
    inference::Records: records => crate::inference::StoredRecord;
    disputes::List: disputes => crate::disputes::Dispute;
    disputes::Participant: disputes => crate::disputes::Dispute;
    disputes::Pending: work => crate::disputes::PendingWork;
    disputes::RevealsDue: reveals => crate::disputes::RevealDue;
    bls::Keys: keys => crate::bls::BlsKey;
    pol::Jobs: jobs => crate::pol::TrainingJob;
    pol::Checkpoints: checkpoints => crate::pol::Checkpoint;
}

/// A module query reached by its path with JSON in and out (the node's REST routes): the
/// request's protobuf bytes from its JSON form and the response's JSON form from its bytes,
/// through the messages' serde forms (the same JSON `gonkad query --output json` prints).
#[derive(Debug, Clone, Copy)]
pub struct JsonRoute {
    /// The `abci_query` path.
    pub path: &'static str,
    /// The request's protobuf bytes from its JSON form.
    pub request: fn(serde_json::Value) -> Result<Vec<u8>, String>,
    /// The response's JSON form from its protobuf bytes.
    pub response: fn(&[u8]) -> Result<serde_json::Value, String>,
}

/// [`JsonRoute::request`] of `M`.
pub fn request_from_json<M: prost::Message + serde::de::DeserializeOwned>(
    json: serde_json::Value,
) -> Result<Vec<u8>, String> {
    serde_json::from_value::<M>(json)
        .map(|m| m.encode_to_vec())
        .map_err(|e| e.to_string())
}

/// [`JsonRoute::response`] of `M`.
pub fn response_to_json<M: prost::Message + Default + serde::Serialize>(
    bytes: &[u8],
) -> Result<serde_json::Value, String> {
    let message = M::decode(bytes).map_err(|e| e.to_string())?;
    serde_json::to_value(&message).map_err(|e| e.to_string())
}

/// The module query at `path` (`/<module>/<query>`), for the REST routes.
pub fn json_route(path: &str) -> Option<JsonRoute> {
    [
        auth::ROUTES,
        bank::ROUTES,
        epochs::ROUTES,
        stake::ROUTES,
        rewards::ROUTES,
        inference::ROUTES,
        bls::ROUTES,
        settlement::ROUTES,
        disputes::ROUTES,
        pol::ROUTES,
    ]
    .into_iter()
    .flatten()
    .find(|route| route.path == path)
    .copied()
}

/// Declares marker types implementing [`Query`] for the messages of one proto package, and
/// the package's [`JsonRoute`]s.
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

        /// This package's queries with JSON in and out.
        pub const ROUTES: &[$crate::query::JsonRoute] = &[
            $(
                $crate::query::JsonRoute {
                    path: $path,
                    request: $crate::query::request_from_json::<$crate::$package::$request>,
                    response: $crate::query::response_to_json::<$crate::$package::$response>,
                },
            )*
        ];
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
        /// The balances of an address, by denom (paginated).
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
        /// The participants, by operator (paginated).
        Participants = "/stake/participants": QueryParticipantsRequest => QueryParticipantsResponse;
        /// One participant.
        Participant = "/stake/participant": QueryParticipantRequest => QueryParticipantResponse;
        /// Unbonding entries (of one operator, or all), by completion epoch (paginated).
        Unbonding = "/stake/unbonding": QueryUnbondingRequest => QueryUnbondingResponse;
        /// The work ledger of an epoch, by operator (paginated).
        Work = "/stake/work": QueryWorkRequest => QueryWorkResponse;
        /// Stake parameters.
        Params = "/stake/params": QueryParamsRequest => QueryParamsResponse;
    }
}

/// Queries of x/rewards.
pub mod rewards {
    queries! { rewards;
        /// How an epoch was settled, with its participants' rewards (paginated).
        Epoch = "/rewards/epoch": QueryEpochRewardsRequest => QueryEpochRewardsResponse;
        /// The rewards of one participant, by epoch (paginated).
        Participant = "/rewards/participant": QueryParticipantRewardsRequest => QueryParticipantRewardsResponse;
        /// Rewards parameters.
        Params = "/rewards/params": QueryParamsRequest => QueryParamsResponse;
    }
}

/// Queries of x/inference.
pub mod inference {
    queries! { inference;
        /// The model table, by id (paginated).
        Models = "/inference/models": QueryModelsRequest => QueryModelsResponse;
        /// Registered ML nodes (of one host, or all), by id (paginated).
        Nodes = "/inference/nodes": QueryNodesRequest => QueryNodesResponse;
        /// One ML node.
        Node = "/inference/node": QueryNodeRequest => QueryNodeResponse;
        /// Registered transfer agents, by address (paginated).
        TransferAgents = "/inference/transfer_agents": QueryTransferAgentsRequest => QueryTransferAgentsResponse;
        /// One settled work record.
        Record = "/inference/record": QueryRecordRequest => QueryRecordResponse;
        /// The work records of an epoch, by inference id (paginated).
        Records = "/inference/records": QueryRecordsRequest => QueryRecordsResponse;
        /// Inference parameters.
        Params = "/inference/params": QueryParamsRequest => QueryParamsResponse;
    }
}

/// Queries of x/bls.
pub mod bls {
    queries! { bls;
        /// One participant's BLS key.
        Key = "/bls/key": QueryKeyRequest => QueryKeyResponse;
        /// Every registered BLS key, by address (paginated).
        Keys = "/bls/keys": QueryKeysRequest => QueryKeysResponse;
        /// One key generation round (0: the latest).
        Dkg = "/bls/dkg": QueryDkgRequest => QueryDkgResponse;
        /// One dealer's dealing in a round.
        Dealing = "/bls/dealing": QueryDealingRequest => QueryDealingResponse;
        /// The complaints about one dealer in a round.
        Complaints = "/bls/complaints": QueryComplaintsRequest => QueryComplaintsResponse;
        /// The group in force: the latest completed round.
        Group = "/bls/group": QueryGroupRequest => QueryGroupResponse;
        /// Bls parameters.
        Params = "/bls/params": QueryParamsRequest => QueryParamsResponse;
        /// The randomness beacon of one height.
        Beacon = "/bls/beacon": QueryBeaconRequest => QueryBeaconResponse;
        /// One epoch's certificate.
        Certificate = "/bls/certificate": QueryCertificateRequest => QueryCertificateResponse;
        /// The handover that vouches for one round's group key.
        Handover = "/bls/handover": QueryHandoverRequest => QueryHandoverResponse;
        /// The genesis signers: the trust root of the chain of group keys.
        GenesisSigners = "/bls/genesis_signers": QueryGenesisSignersRequest => QueryGenesisSignersResponse;
    }
}

/// Queries of x/settlement.
pub mod settlement {
    queries! { settlement;
        /// One escrow, by requester and transfer agent.
        Escrow = "/settlement/escrow": QueryEscrowRequest => QueryEscrowResponse;
        /// One settled batch, by id.
        Batch = "/settlement/batch": QueryBatchRequest => QueryBatchResponse;
        /// A transfer agent's last batch number.
        BatchNumber = "/settlement/batch_number": QueryBatchNumberRequest => QueryBatchNumberResponse;
        /// The open leaf demands on a transfer agent's batches, by batch then index (at most
        /// [`demands_limit`] of them).
        Demands = "/settlement/demands": QueryDemandsRequest => QueryDemandsResponse;
        /// Settlement parameters.
        Params = "/settlement/params": QueryParamsRequest => QueryParamsResponse;
    }

    /// Most demands one [`Demands`] answer carries (also its default): the query reads one
    /// index entry and one demand per answer row, so it stays cheap however many leaves of an
    /// agent's batches are demanded. An agent sees the next ones once it answered these.
    pub const MAX_DEMANDS: u64 = 100;

    /// The number of demands a [`Demands`] request with `limit` gets: [`MAX_DEMANDS`] for 0,
    /// else `limit` clamped to it.
    pub fn demands_limit(limit: u64) -> u64 {
        match limit {
            0 => MAX_DEMANDS,
            limit => limit.min(MAX_DEMANDS),
        }
    }
}

/// Queries of x/disputes.
pub mod disputes {
    queries! { disputes;
        /// One dispute.
        Dispute = "/disputes/dispute": QueryDisputeRequest => QueryDisputeResponse;
        /// Disputes by status, by id (paginated).
        List = "/disputes/list": QueryDisputesRequest => QueryDisputesResponse;
        /// The disputes a participant takes part in, by id (paginated).
        Participant = "/disputes/participant": QueryParticipantDisputesRequest => QueryParticipantDisputesResponse;
        /// The validations, then the dispute votes, a validator owes (paginated).
        Pending = "/disputes/pending": QueryPendingRequest => QueryPendingResponse;
        /// The records whose output a transfer agent must reveal now (paginated).
        RevealsDue = "/disputes/reveals_due": QueryRevealsDueRequest => QueryRevealsDueResponse;
        /// The validation of a sampled record.
        Validation = "/disputes/validation": QueryValidationRequest => QueryValidationResponse;
        /// Sampling statistics and reputation.
        Stats = "/disputes/stats": QueryStatsRequest => QueryStatsResponse;
        /// Disputes parameters.
        Params = "/disputes/params": QueryParamsRequest => QueryParamsResponse;
    }
}

/// Queries of x/pol.
pub mod pol {
    queries! { pol;
        /// One training job.
        Job = "/pol/job": QueryJobRequest => QueryJobResponse;
        /// Every training job, by id (paginated).
        Jobs = "/pol/jobs": QueryJobsRequest => QueryJobsResponse;
        /// The checkpoints of a job, by round then worker; round 0 lists every round (paginated).
        Checkpoints = "/pol/checkpoints": QueryCheckpointsRequest => QueryCheckpointsResponse;
        /// The checkpoints a validator must re-execute now, by job, round and worker (at most
        /// [`MAX_DUTIES`]).
        Duties = "/pol/duties": QueryDutiesRequest => QueryDutiesResponse;
        /// Pol parameters.
        Params = "/pol/params": QueryParamsRequest => QueryParamsResponse;
    }

    /// Most checkpoints one [`Duties`] answer carries: a validator sees the next ones once it
    /// answered these.
    pub const MAX_DUTIES: usize = 100;
}

/// Cosmos SDK services that wallets and explorers call, with the stock cosmos-sdk types.
pub mod cosmos {
    use cosmos_sdk_proto::cosmos::auth::v1beta1 as auth;
    use cosmos_sdk_proto::cosmos::bank::v1beta1 as bank;
    use cosmos_sdk_proto::cosmos::tx::v1beta1::{SimulateRequest, SimulateResponse};

    /// Query markers over the standard Cosmos request and response types.
    macro_rules! cosmos_queries {
        ($( $(#[$doc:meta])* $name:ident = $path:literal: $request:ty => $response:ty; )*) => {
            $(
                $(#[$doc])*
                #[derive(Debug, Clone, Copy)]
                pub struct $name;

                impl super::Query for $name {
                    const PATH: &'static str = $path;
                    type Request = $request;
                    type Response = $response;
                }
            )*
        };
    }

    cosmos_queries! {
        /// `/cosmos.tx.v1beta1.Service/Simulate`: runs a tx (`tx_bytes`) against the node's
        /// mempool state without checking its signature, keeps nothing, and reports the gas it
        /// used (what cosmjs `fee: "auto"` and `gonkad tx --gas auto` ask before signing).
        Simulate = "/cosmos.tx.v1beta1.Service/Simulate": SimulateRequest => SimulateResponse;
        /// An account as `BaseAccount` packed in an `Any`.
        AuthAccount = "/cosmos.auth.v1beta1.Query/Account": auth::QueryAccountRequest => auth::QueryAccountResponse;
        /// The auth parameters in Cosmos terms.
        AuthParams = "/cosmos.auth.v1beta1.Query/Params": auth::QueryParamsRequest => auth::QueryParamsResponse;
        /// One balance of an address.
        BankBalance = "/cosmos.bank.v1beta1.Query/Balance": bank::QueryBalanceRequest => bank::QueryBalanceResponse;
        /// Every balance of an address, paged by key.
        BankAllBalances = "/cosmos.bank.v1beta1.Query/AllBalances": bank::QueryAllBalancesRequest => bank::QueryAllBalancesResponse;
        /// The total supply of one denom.
        BankSupplyOf = "/cosmos.bank.v1beta1.Query/SupplyOf": bank::QuerySupplyOfRequest => bank::QuerySupplyOfResponse;
        /// The total supply of every denom, paged by key.
        BankTotalSupply = "/cosmos.bank.v1beta1.Query/TotalSupply": bank::QueryTotalSupplyRequest => bank::QueryTotalSupplyResponse;
        /// What wallets display of a denom.
        BankDenomMetadata = "/cosmos.bank.v1beta1.Query/DenomMetadata": bank::QueryDenomMetadataRequest => bank::QueryDenomMetadataResponse;
        /// The metadata of every denom.
        BankDenomsMetadata = "/cosmos.bank.v1beta1.Query/DenomsMetadata": bank::QueryDenomsMetadataRequest => bank::QueryDenomsMetadataResponse;
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
        check::<settlement::Batch>("settlement");
        check::<settlement::Demands>("settlement");
        check::<pol::Checkpoints>("pol");
    }

    #[test]
    fn page_limits_default_and_clamp() {
        let request = |limit| page::PageRequest { key: vec![], limit };
        assert_eq!(page::limit(None), page::DEFAULT_LIMIT);
        assert_eq!(page::limit(Some(&request(0))), page::DEFAULT_LIMIT);
        assert_eq!(page::limit(Some(&request(7))), 7);
        assert_eq!(page::limit(Some(&request(u64::MAX))), page::MAX_LIMIT);
    }

    #[test]
    fn demand_limits_default_and_clamp() {
        use settlement::{demands_limit, MAX_DEMANDS};
        assert_eq!(demands_limit(0), MAX_DEMANDS);
        assert_eq!(demands_limit(7), 7);
        assert_eq!(demands_limit(MAX_DEMANDS + 1), MAX_DEMANDS);
        assert_eq!(demands_limit(u64::MAX), MAX_DEMANDS);
    }
}
