//! The node's API port (`gonkad start --api-listen`): the gRPC endpoint stock Cosmos clients
//! speak (cosmpy, Go clients, grpcurl), backed by the node's CometBFT RPC (`--node`), and on
//! the same port the REST routes ([`crate::rest`]) for requests without the gRPC content type.
//!
//! As in the Cosmos SDK, a gRPC query is an ABCI query: the method's full name
//! (`/cosmos.bank.v1beta1.Query/Balance`, `/gonka.stake.v1.Query/...`) is the query path and
//! the request message its data, so every query the app answers over `abci_query` is
//! answered here by the same code, with no second implementation. The tx service's
//! `BroadcastTx`, `GetTx` and `GetTxsEvent`, and `cosmos.consensus.v1.Query/Params` (which the app cannot
//! answer: they are the node's) go to CometBFT's `broadcast_tx_sync`, `tx`,
//! `tx_search` and `consensus_params`, as do the `cosmos.base.tendermint.v1beta1.Service` calls
//! `GetLatestBlock`, `GetBlockByHeight`, `GetSyncing` and `GetNodeInfo`, answered with the
//! standard Cosmos messages.
//!
//! A request with the `x-cosmos-block-height` header (gRPC metadata or an HTTP header, as
//! Cosmos nodes take it) is answered from the state committed at that height: queries of
//! single items work at any committed height, lists only at the latest.
//!
//! Transport: HTTP/2 without TLS (h2c, "prior knowledge"), as Cosmos nodes serve gRPC on
//! 9090; gRPC framing by hand (uncompressed messages only; a compressed one is refused with
//! `UNIMPLEMENTED`). Bounds: a request message is at most [`MAX_MESSAGE`] bytes, a
//! connection at most [`MAX_STREAMS`] concurrent calls; the node's own limits apply behind.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Result;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use cosmos_sdk_proto::cosmos::base::abci::v1beta1::TxResponse;
use cosmos_sdk_proto::cosmos::base::tendermint::v1beta1::{
    GetBlockByHeightRequest, GetLatestBlockResponse, GetSyncingResponse,
};
use cosmos_sdk_proto::cosmos::tx::v1beta1::{
    BroadcastTxRequest, BroadcastTxResponse, GetTxRequest, GetTxResponse, GetTxsEventRequest,
    GetTxsEventResponse, Tx,
};
use gonka_client::rpc::QueryError;
use gonka_client::Client;
use gonka_client::TxRejected;
use http_body::Frame;
use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use sha2::{Digest, Sha256};
use tendermint_rpc::Client as _;

use crate::Global;

/// Largest request message accepted (a tx is far smaller; the node bounds it again).
pub const MAX_MESSAGE: usize = 4 << 20;
/// Concurrent calls per connection.
pub const MAX_STREAMS: u32 = 64;

/// A gRPC status: its code and message.
#[derive(Debug)]
pub(crate) struct Status {
    pub code: u32,
    pub message: String,
}

const UNKNOWN: u32 = 2;
pub(crate) const INVALID_ARGUMENT: u32 = 3;
pub(crate) const NOT_FOUND: u32 = 5;
pub(crate) const UNIMPLEMENTED: u32 = 12;
pub(crate) const INTERNAL: u32 = 13;
pub(crate) const UNAVAILABLE: u32 = 14;

impl Status {
    pub fn new(code: u32, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
        }
    }

    /// The status of a failed ABCI query: its code mapped the way Cosmos clients read it
    /// ("not found" is `NOT_FOUND`, an unknown path `UNIMPLEMENTED`), its log the message.
    pub fn of(error: anyhow::Error) -> Status {
        let Some(query) = error.downcast_ref::<QueryError>() else {
            return Status::new(UNAVAILABLE, format!("{error:#}"));
        };
        let log = &query.log;
        let code = if log.contains("no module answers query path") {
            UNIMPLEMENTED
        } else if log.contains("not found")
            || log.contains("NotFound")
            || log.contains("does not exist")
        {
            NOT_FOUND
        } else if log.contains("not a valid") || log.contains("decode") {
            INVALID_ARGUMENT
        } else {
            UNKNOWN
        };
        Status::new(code, format!("{} {}: {log}", query.codespace, query.code))
    }
}

type Body =
    StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// The HTTP response of a gRPC call: headers, the message framed (if any), trailers.
fn respond(answer: Result<Vec<u8>, Status>) -> Response<Body> {
    let mut frames = Vec::new();
    let mut trailers = hyper::HeaderMap::new();
    match answer {
        Ok(message) => {
            let mut framed = BytesMut::with_capacity(5 + message.len());
            framed.put_u8(0);
            framed.put_u32(message.len() as u32);
            framed.put_slice(&message);
            frames.push(Ok(Frame::data(framed.freeze())));
            trailers.insert("grpc-status", "0".parse().expect("a valid header"));
        }
        Err(status) => {
            trailers.insert(
                "grpc-status",
                status.code.to_string().parse().expect("digits"),
            );
            // Percent-encoded as the gRPC spec asks, so any text is a valid header value.
            let message: String = status
                .message
                .bytes()
                .map(|b| match b {
                    b' '..=b'~' if b != b'%' => (b as char).to_string(),
                    _ => format!("%{b:02X}"),
                })
                .collect();
            trailers.insert("grpc-message", message.parse().expect("printable ASCII"));
        }
    }
    frames.push(Ok(Frame::trailers(trailers)));
    Response::builder()
        .header("content-type", "application/grpc")
        .body(StreamBody::new(futures_util::stream::iter(frames)))
        .expect("a valid response")
}

/// A REST answer: `json` with `status`.
fn json_response(status: hyper::StatusCode, json: &serde_json::Value) -> Response<Body> {
    let frames = vec![Ok(Frame::data(Bytes::from(json.to_string())))];
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(StreamBody::new(futures_util::stream::iter(frames)))
        .expect("a valid response")
}

/// The one message of a unary gRPC request body.
fn unframe(mut body: Bytes) -> Result<Bytes, Status> {
    if body.len() < 5 {
        return Err(Status::new(
            INVALID_ARGUMENT,
            "the request holds no gRPC message",
        ));
    }
    let compressed = body.get_u8();
    let len = body.get_u32() as usize;
    if compressed != 0 {
        return Err(Status::new(
            UNIMPLEMENTED,
            "compressed messages are not supported; send them uncompressed",
        ));
    }
    if len != body.len() {
        return Err(Status::new(
            INVALID_ARGUMENT,
            "one unary message per call, whose length matches its prefix",
        ));
    }
    Ok(body)
}

fn decode<M: Message + Default>(bytes: &[u8], what: &str) -> Result<M, Status> {
    M::decode(bytes).map_err(|e| Status::new(INVALID_ARGUMENT, format!("not a valid {what}: {e}")))
}

/// `BroadcastTx`: CheckTx through CometBFT's `broadcast_tx_sync` (every mode; Cosmos SDK 0.50
/// dropped the blocking one); a refused tx is a `TxResponse` with its code, as in Cosmos.
pub(crate) async fn broadcast(client: &Client, message: &[u8]) -> Result<Vec<u8>, Status> {
    let request: BroadcastTxRequest = decode(message, "cosmos.tx.v1beta1.BroadcastTxRequest")?;
    let hash = tendermint::Hash::Sha256(Sha256::digest(&request.tx_bytes).into());
    let answer = match client.http().broadcast_tx_sync(request.tx_bytes).await {
        Ok(answer) => answer,
        // A duplicate is a refused tx, as Cosmos nodes answer it, not a transport failure.
        Err(e) => match TxRejected::of_rpc_error(&e) {
            Some(duplicate) => {
                let response = BroadcastTxResponse {
                    tx_response: Some(TxResponse {
                        txhash: hash.to_string(),
                        code: duplicate.code,
                        codespace: duplicate.codespace,
                        raw_log: duplicate.log,
                        ..Default::default()
                    }),
                };
                return Ok(response.encode_to_vec());
            }
            None => {
                return Err(Status::new(
                    UNAVAILABLE,
                    format!("the node did not answer: {e}"),
                ))
            }
        },
    };
    let response = BroadcastTxResponse {
        tx_response: Some(TxResponse {
            txhash: answer.hash.to_string(),
            code: answer.code.value(),
            codespace: answer.codespace,
            raw_log: answer.log,
            data: hex::encode_upper(answer.data),
            ..Default::default()
        }),
    };
    Ok(response.encode_to_vec())
}

/// `GetTx`: an included tx by hash, from CometBFT's index, with its result and events.
pub(crate) async fn get_tx(client: &Client, message: &[u8]) -> Result<Vec<u8>, Status> {
    let request: GetTxRequest = decode(message, "cosmos.tx.v1beta1.GetTxRequest")?;
    let hash: tendermint::Hash = request.hash.to_uppercase().parse().map_err(|_| {
        Status::new(
            INVALID_ARGUMENT,
            format!("{:?} is not a tx hash (64 hex digits)", request.hash),
        )
    })?;
    let found = match client.http().tx(hash, false).await {
        Ok(found) => found,
        Err(e) if e.to_string().contains("not found") => {
            return Err(Status::new(NOT_FOUND, format!("tx not found: {hash}")))
        }
        Err(e) => {
            return Err(Status::new(
                UNAVAILABLE,
                format!("the node did not answer: {e}"),
            ))
        }
    };
    let (tx_response, tx) = indexed_tx(found)?;
    let response = GetTxResponse {
        tx_response: Some(tx_response),
        tx: Some(tx),
    };
    Ok(response.encode_to_vec())
}

/// A tx CometBFT indexed, as the tx service answers it: its `TxResponse` and decoded `Tx`.
fn indexed_tx(found: tendermint_rpc::endpoint::tx::Response) -> Result<(TxResponse, Tx), Status> {
    let tx = block_tx(&found.tx)?;
    let result = found.tx_result;
    let events = result
        .events
        .into_iter()
        .map(|event| tendermint_proto::abci::Event {
            r#type: event.kind,
            attributes: event
                .attributes
                .iter()
                .map(|a| tendermint_proto::abci::EventAttribute {
                    key: String::from_utf8_lossy(a.key_bytes()).into_owned(),
                    value: String::from_utf8_lossy(a.value_bytes()).into_owned(),
                    index: a.index(),
                })
                .collect(),
        })
        .collect();
    let tx_response = TxResponse {
        height: found.height.value() as i64,
        txhash: found.hash.to_string(),
        codespace: result.codespace,
        code: result.code.value(),
        data: hex::encode_upper(&result.data),
        raw_log: result.log,
        info: result.info,
        gas_wanted: result.gas_wanted,
        gas_used: result.gas_used,
        tx: Some(cosmos_sdk_proto::Any {
            type_url: "/cosmos.tx.v1beta1.Tx".into(),
            value: found.tx.clone(),
        }),
        events,
        ..Default::default()
    };
    Ok((tx_response, tx))
}

/// A block's tx as a `Tx`: a signed tx as it is; the beacon tx a proposer puts first in its
/// block (no Cosmos tx: see `gonka_bls::beacon`) as an unsigned tx whose one message is the
/// `gonka.bls.v1.BeaconTx`, so explorers show it like any other.
pub(crate) fn block_tx(bytes: &[u8]) -> Result<Tx, Status> {
    match bytes.strip_prefix(gonka_bls::beacon::TX_PREFIX) {
        Some(beacon) => Ok(Tx {
            body: Some(cosmos_sdk_proto::cosmos::tx::v1beta1::TxBody {
                messages: vec![cosmos_sdk_proto::Any {
                    type_url: format!(
                        "/{}",
                        <gonka_proto::bls::BeaconTx as prost::Name>::full_name()
                    ),
                    value: beacon.to_vec(),
                }],
                ..Default::default()
            }),
            ..Default::default()
        }),
        None => decode(bytes, "cosmos.tx.v1beta1.Tx"),
    }
}

/// Most txs one `GetTxsEvent` page holds (CometBFT's own `tx_search` cap).
pub(crate) const MAX_TXS_PER_PAGE: u64 = 100;

/// `cosmos.tx.v1beta1.Service/GetTxsEvent`: the txs matching a CometBFT event query
/// (`query`, or the older `events` joined with AND), by page (`page` from 1, `limit` at most
/// [`MAX_TXS_PER_PAGE`], default 100), oldest first unless `order_by` is `ORDER_BY_DESC`.
pub(crate) async fn get_txs_event(client: &Client, message: &[u8]) -> Result<Vec<u8>, Status> {
    let request: GetTxsEventRequest = decode(message, "cosmos.tx.v1beta1.GetTxsEventRequest")?;
    #[allow(deprecated)]
    let text = match (request.query.is_empty(), request.events.is_empty()) {
        (false, _) => request.query.clone(),
        (true, false) => request.events.join(" AND "),
        (true, true) => {
            return Err(Status::new(
                INVALID_ARGUMENT,
                "no query: give one such as `message.sender='gonka1...'` or `tx.height=5`",
            ))
        }
    };
    let query: tendermint_rpc::query::Query = text.parse().map_err(|e| {
        Status::new(
            INVALID_ARGUMENT,
            format!("{text:?} is not an event query: {e}"),
        )
    })?;
    let limit = match request.limit {
        0 => MAX_TXS_PER_PAGE,
        n => n.min(MAX_TXS_PER_PAGE),
    };
    let page = u32::try_from(request.page.max(1))
        .map_err(|_| Status::new(INVALID_ARGUMENT, "page is out of range"))?;
    let order = match request.order_by {
        2 => tendermint_rpc::Order::Descending,
        _ => tendermint_rpc::Order::Ascending,
    };
    let found = client
        .http()
        .tx_search(query, false, page, limit as u8, order)
        .await
        .map_err(|e| Status::new(UNAVAILABLE, format!("the node did not answer: {e}")))?;
    let mut response = GetTxsEventResponse {
        total: u64::from(found.total_count),
        ..Default::default()
    };
    for tx in found.txs {
        let (tx_response, tx) = indexed_tx(tx)?;
        response.tx_responses.push(tx_response);
        response.txs.push(tx);
    }
    Ok(response.encode_to_vec())
}

/// `cosmos.consensus.v1.QueryParamsResponse` (cosmos-sdk-proto does not export that
/// package): the consensus parameters wallets read the block gas limit from.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ConsensusParamsResponse {
    #[prost(message, optional, tag = "1")]
    pub params: Option<tendermint_proto::types::ConsensusParams>,
}

/// `cosmos.consensus.v1.Query/Params`: the node's current consensus parameters (CometBFT's,
/// set by the app at genesis).
pub(crate) async fn consensus_params(client: &Client) -> Result<Vec<u8>, Status> {
    let latest = client
        .http()
        .latest_consensus_params()
        .await
        .map_err(|e| Status::new(UNAVAILABLE, format!("the node did not answer: {e}")))?;
    let response = ConsensusParamsResponse {
        params: Some(latest.consensus_params.into()),
    };
    Ok(response.encode_to_vec())
}

/// `cosmos.base.tendermint.v1beta1.Service/GetLatestBlock` and `GetBlockByHeight`: the
/// block (with its id) from the node's RPC; `sdk_block` is left out (clients read `block`).
pub(crate) async fn block(client: &Client, height: Option<i64>) -> Result<Vec<u8>, Status> {
    let rpc = client.http();
    let unavailable = |e: tendermint_rpc::Error| {
        // CometBFT: "height H must be less than or equal to the current blockchain height".
        if e.to_string().contains("must be less than or equal") {
            Status::new(NOT_FOUND, format!("no such block: {e}"))
        } else {
            Status::new(UNAVAILABLE, format!("the node did not answer: {e}"))
        }
    };
    let answer = match height {
        None => rpc.latest_block().await.map_err(unavailable)?,
        Some(height) => {
            let height = tendermint::block::Height::try_from(height)
                .map_err(|e| Status::new(INVALID_ARGUMENT, format!("height {height}: {e}")))?;
            rpc.block(height).await.map_err(unavailable)?
        }
    };
    let response = GetLatestBlockResponse {
        block_id: Some(answer.block_id.into()),
        block: Some(answer.block.into()),
        sdk_block: None,
    };
    // GetBlockByHeightResponse has the same fields and tags.
    Ok(response.encode_to_vec())
}

/// `cosmos.base.tendermint.v1beta1.Service/GetSyncing`: whether the node is catching up.
pub(crate) async fn syncing(client: &Client) -> Result<Vec<u8>, Status> {
    let status = client
        .status()
        .await
        .map_err(|e| Status::new(UNAVAILABLE, format!("{e:#}")))?;
    Ok(GetSyncingResponse {
        syncing: status.sync_info.catching_up,
    }
    .encode_to_vec())
}

/// The Cosmos SDK release whose gRPC and REST endpoints, tx format and sign modes the API
/// port follows: what `GetNodeInfo` reports as `cosmos_sdk_version` (gonka does not run the
/// Cosmos SDK; clients such as cosmpy parse this to pick the shapes they expect).
pub const COSMOS_SDK_API_VERSION: &str = "v0.50.0";

/// `cosmos.base.tendermint.v1beta1.Service/GetNodeInfo`: the node's CometBFT identity and the
/// application's version, with [`COSMOS_SDK_API_VERSION`].
pub(crate) async fn node_info(client: &Client) -> Result<Vec<u8>, Status> {
    use cosmos_sdk_proto::cosmos::base::tendermint::v1beta1::{GetNodeInfoResponse, VersionInfo};
    use cosmos_sdk_proto::tendermint::p2p::{
        DefaultNodeInfo, DefaultNodeInfoOther, ProtocolVersion,
    };
    let status = client
        .status()
        .await
        .map_err(|e| Status::new(UNAVAILABLE, format!("{e:#}")))?;
    let info = &status.node_info;
    Ok(GetNodeInfoResponse {
        default_node_info: Some(DefaultNodeInfo {
            protocol_version: Some(ProtocolVersion {
                p2p: info.protocol_version.p2p,
                block: info.protocol_version.block,
                app: info.protocol_version.app,
            }),
            default_node_id: info.id.to_string(),
            listen_addr: info.listen_addr.to_string(),
            network: info.network.to_string(),
            version: info.version.to_string(),
            channels: info.channels.to_string().into_bytes(),
            moniker: info.moniker.to_string(),
            other: Some(DefaultNodeInfoOther {
                tx_index: if bool::from(info.other.tx_index) {
                    "on"
                } else {
                    "off"
                }
                .into(),
                rpc_address: info.other.rpc_address.to_string(),
            }),
        }),
        application_version: Some(VersionInfo {
            name: "gonka".into(),
            app_name: "gonkad".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            cosmos_sdk_version: COSMOS_SDK_API_VERSION.into(),
            ..Default::default()
        }),
    }
    .encode_to_vec())
}

/// Answers one gRPC call.
async fn call(client: &Client, request: Request<Incoming>) -> Result<Vec<u8>, Status> {
    let path = request.uri().path().to_string();
    let body = Limited::new(request.into_body(), MAX_MESSAGE + 5)
        .collect()
        .await
        .map_err(|e| {
            Status::new(
                INVALID_ARGUMENT,
                format!("reading the request (at most {MAX_MESSAGE} bytes): {e}"),
            )
        })?
        .to_bytes();
    let message = unframe(body)?;
    match path.as_str() {
        "/cosmos.tx.v1beta1.Service/BroadcastTx" => broadcast(client, &message).await,
        "/cosmos.tx.v1beta1.Service/GetTx" => get_tx(client, &message).await,
        "/cosmos.tx.v1beta1.Service/GetTxsEvent" => get_txs_event(client, &message).await,
        "/cosmos.consensus.v1.Query/Params" => consensus_params(client).await,
        "/cosmos.base.tendermint.v1beta1.Service/GetLatestBlock" => block(client, None).await,
        "/cosmos.base.tendermint.v1beta1.Service/GetBlockByHeight" => {
            let request: GetBlockByHeightRequest = decode(
                &message,
                "cosmos.base.tendermint.v1beta1.GetBlockByHeightRequest",
            )?;
            block(client, Some(request.height)).await
        }
        "/cosmos.base.tendermint.v1beta1.Service/GetSyncing" => syncing(client).await,
        "/cosmos.base.tendermint.v1beta1.Service/GetNodeInfo" => node_info(client).await,
        _ => client
            .query_raw(&path, message.to_vec())
            .await
            .map_err(Status::of),
    }
}

/// Serves gRPC for the node `client` talks to on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, client: Arc<Client>) -> Result<()> {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a gRPC connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let client = client.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let client = client.clone();
                async move {
                    let path = request.uri().path().to_string();
                    let grpc = request
                        .headers()
                        .get(hyper::header::CONTENT_TYPE)
                        .is_some_and(|t| t.as_bytes().starts_with(b"application/grpc"));
                    // Cosmos gateways' way to ask for a past height, on gRPC and REST alike.
                    let client = match (height_header(&request), grpc) {
                        (Ok(None), _) => client,
                        (Ok(Some(height)), _) => Arc::new((*client).clone().at_height(height)),
                        (Err(status), true) => return Ok(respond(Err(status))),
                        (Err(status), false) => {
                            let json = serde_json::json!({"code": status.code, "message": status.message, "details": []});
                            return Ok(json_response(hyper::StatusCode::BAD_REQUEST, &json));
                        }
                    };
                    if !grpc {
                        let (status, json) = crate::rest::answer(&client, request).await;
                        return Ok::<_, Infallible>(json_response(status, &json));
                    }
                    let answer = call(&client, request).await;
                    if let Err(status) = &answer {
                        tracing::debug!(%path, code = status.code, message = %status.message, "gRPC call failed");
                    }
                    Ok(respond(answer))
                }
            });
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder.http2().max_concurrent_streams(MAX_STREAMS);
            let served = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "API connection ended");
            }
        });
    }
}

/// The header clients name a past height in (`x-cosmos-block-height`, as Cosmos nodes read
/// it): queries of single items are answered from the state committed at that height.
pub const HEIGHT_HEADER: &str = "x-cosmos-block-height";

fn height_header<B>(request: &Request<B>) -> Result<Option<u64>, Status> {
    let Some(value) = request.headers().get(HEIGHT_HEADER) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .map(Some)
        .ok_or_else(|| {
            Status::new(
                INVALID_ARGUMENT,
                format!("{HEIGHT_HEADER} is not a height: {value:?}"),
            )
        })
}

/// Serves gRPC for `--node` on `listen` from a thread of its own; binds before returning, so
/// a taken address fails the start.
pub fn spawn(global: &Global, listen: SocketAddr) -> Result<()> {
    let client = Arc::new(global.client()?);
    crate::background::serve_in_thread("grpc", &listen.to_string(), move |listener| async move {
        if let Err(e) = serve(listener, client).await {
            tracing::error!(error = %format!("{e:#}"), "the gRPC server stopped");
        }
    })?;
    tracing::info!(%listen, node = %global.node, "serving gRPC");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_unframed_only_when_whole_and_uncompressed() {
        let framed = |flag: u8, len: u32, body: &[u8]| {
            let mut b = BytesMut::new();
            b.put_u8(flag);
            b.put_u32(len);
            b.put_slice(body);
            b.freeze()
        };
        assert_eq!(
            unframe(framed(0, 3, b"abc")).unwrap(),
            Bytes::from_static(b"abc")
        );
        assert_eq!(unframe(framed(0, 0, b"")).unwrap(), Bytes::new());
        assert_eq!(
            unframe(framed(1, 3, b"abc")).unwrap_err().code,
            UNIMPLEMENTED
        );
        assert_eq!(
            unframe(framed(0, 4, b"abc")).unwrap_err().code,
            INVALID_ARGUMENT
        );
        assert_eq!(
            unframe(framed(0, 2, b"abc")).unwrap_err().code,
            INVALID_ARGUMENT
        );
        assert_eq!(
            unframe(Bytes::from_static(b"\0\0")).unwrap_err().code,
            INVALID_ARGUMENT
        );
    }

    #[test]
    fn query_errors_map_to_the_codes_clients_read() {
        let error = |log: &str| {
            anyhow::Error::from(QueryError {
                codespace: "sdk".into(),
                code: 6,
                log: log.into(),
            })
        };
        assert_eq!(Status::of(error("account x not found")).code, NOT_FOUND);
        assert_eq!(
            Status::of(error("no module answers query path \"/x\"")).code,
            UNIMPLEMENTED
        );
        assert_eq!(
            Status::of(anyhow::anyhow!("connection refused")).code,
            UNAVAILABLE
        );
        let status = Status::of(error("account x not found"));
        assert_eq!(status.message, "sdk 6: account x not found");
    }
}
