//! The node's REST (LCD) routes wallets and explorers call, in the Cosmos JSON shapes
//! (snake_case fields, 64-bit integers as strings, bytes as base64, `Any` as `{"@type", ...}`),
//! served on the same port as gRPC ([`crate::grpc`]; HTTP/1.1, or HTTP/2 without the gRPC
//! content type). Each route is the gRPC call of the same name — the same ABCI query or node
//! call — with its answer rendered as JSON, so there is still one implementation:
//!
//! | route | answers |
//! |---|---|
//! | `GET /cosmos/bank/v1beta1/balances/{address}` | `AllBalances` (`pagination.key`, `pagination.limit`) |
//! | `GET /cosmos/bank/v1beta1/balances/{address}/by_denom?denom=` | `Balance` |
//! | `GET /cosmos/bank/v1beta1/supply/by_denom?denom=` | `SupplyOf` |
//! | `GET /cosmos/bank/v1beta1/denoms_metadata` | `DenomsMetadata` |
//! | `GET /cosmos/auth/v1beta1/accounts/{address}` | `Account` (a `BaseAccount`) |
//! | `POST /cosmos/tx/v1beta1/simulate` `{"tx_bytes"}` or `{"tx"}` (proto-JSON) | `Simulate` |
//! | `POST /cosmos/tx/v1beta1/txs` `{"tx_bytes","mode"}` | `BroadcastTx` |
//! | `GET /cosmos/tx/v1beta1/txs/{hash}` | `GetTx` (`tx` with its messages decoded, and `tx_response`) |
//! | `GET /cosmos/tx/v1beta1/txs?query=&page=&limit=&order_by=` | `GetTxsEvent` (or `events=` repeated, as before SDK 0.50) |
//! | `GET /cosmos/consensus/v1/params` | the consensus `Params` (block size and gas limits) |
//! | `GET /cosmos/base/tendermint/v1beta1/syncing` | `GetSyncing` |
//! | `GET /cosmos/base/tendermint/v1beta1/blocks/{latest,H}` | `GetLatestBlock`, `GetBlockByHeight` |
//! | `GET /cosmos/base/tendermint/v1beta1/node_info` | `GetNodeInfo` (id, network, version, moniker; the app version and the Cosmos SDK API version it follows) |
//! | `GET /gonka/{module}/v1/{query}?field=value` | the module query `/{module}/{query}` (its JSON as `gonkad query --output json` prints it) |
//!
//! Errors are the gRPC status as Cosmos gateways render it, `{"code", "message", "details"}`,
//! with the matching HTTP status (404 for `NOT_FOUND`, 400 for `INVALID_ARGUMENT`, 501 for
//! an unknown route). Request bodies are bounded by [`crate::grpc::MAX_MESSAGE`].

use base64::Engine as _;
use bytes::Bytes;
use cosmos_sdk_proto::cosmos::auth::v1beta1::{
    BaseAccount, QueryAccountRequest, QueryAccountResponse,
};
use cosmos_sdk_proto::cosmos::bank::v1beta1::{
    QueryAllBalancesRequest, QueryAllBalancesResponse, QueryBalanceRequest, QueryBalanceResponse,
    QueryDenomsMetadataRequest, QueryDenomsMetadataResponse, QuerySupplyOfRequest,
    QuerySupplyOfResponse,
};
use cosmos_sdk_proto::cosmos::base::abci::v1beta1::TxResponse;
use cosmos_sdk_proto::cosmos::base::query::v1beta1::{PageRequest, PageResponse};
use cosmos_sdk_proto::cosmos::base::tendermint::v1beta1::{
    GetLatestBlockResponse, GetNodeInfoResponse, GetSyncingResponse,
};
use cosmos_sdk_proto::cosmos::base::v1beta1::Coin;
use cosmos_sdk_proto::cosmos::tx::v1beta1::{
    BroadcastTxRequest, BroadcastTxResponse, GetTxRequest, GetTxResponse, GetTxsEventRequest,
    GetTxsEventResponse, SimulateRequest, SimulateResponse, Tx,
};
use gonka_client::Client;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use prost::Message;
use serde_json::{json, Value};

use crate::grpc::{self, Status, INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn coin(c: &Coin) -> Value {
    json!({"denom": c.denom, "amount": c.amount})
}

fn pagination(p: Option<&PageResponse>) -> Value {
    match p {
        Some(p) => json!({
            "next_key": (!p.next_key.is_empty()).then(|| b64(&p.next_key)),
            "total": p.total.to_string(),
        }),
        None => Value::Null,
    }
}

fn tx_response(r: &TxResponse) -> Value {
    // The tx itself, as `GetTx` and `GetTxsEvent` carry it in `tx_response.tx` too.
    let tx = r.tx.as_ref().and_then(|any| {
        let mut json = tx_json(&grpc::block_tx(&any.value).ok()?);
        json["@type"] = json!("/cosmos.tx.v1beta1.Tx");
        Some(json)
    });
    let events: Vec<Value> = r
        .events
        .iter()
        .map(|e| {
            let attributes: Vec<Value> = e
                .attributes
                .iter()
                .map(|a| json!({"key": a.key, "value": a.value, "index": a.index}))
                .collect();
            json!({"type": e.r#type, "attributes": attributes})
        })
        .collect();
    json!({
        "height": r.height.to_string(),
        "txhash": r.txhash,
        "codespace": r.codespace,
        "code": r.code,
        "data": r.data,
        "raw_log": r.raw_log,
        "logs": [],
        "info": r.info,
        "gas_wanted": r.gas_wanted.to_string(),
        "gas_used": r.gas_used.to_string(),
        "tx": tx,
        "timestamp": r.timestamp,
        "events": events,
    })
}

/// A tx in the Cosmos JSON shape, its messages decoded by type URL
/// ([`gonka_proto::tx_messages`]; a type no module accepts keeps its bytes as `value`).
fn tx_json(tx: &Tx) -> Value {
    let body = tx.body.clone().unwrap_or_default();
    let messages: Vec<Value> = body
        .messages
        .iter()
        .map(
            |any| match gonka_proto::tx_messages::to_json(&any.type_url, &any.value) {
                Some(Ok(json)) => crate::output::to_json(&json),
                _ => json!({"@type": any.type_url, "value": b64(&any.value)}),
            },
        )
        .collect();
    let auth_info = tx.auth_info.clone().unwrap_or_default();
    let signer_infos: Vec<Value> = auth_info
        .signer_infos
        .iter()
        .map(|info| {
            json!({
                "public_key": info.public_key.as_ref().map(|k| json!({"@type": k.type_url, "key": pub_key(k)})),
                "sequence": info.sequence.to_string(),
            })
        })
        .collect();
    let fee = auth_info.fee.unwrap_or_default();
    json!({
        "body": {
            "messages": messages,
            "memo": body.memo,
            "timeout_height": body.timeout_height.to_string(),
        },
        "auth_info": {
            "signer_infos": signer_infos,
            "fee": {
                "amount": fee.amount.iter().map(coin).collect::<Vec<_>>(),
                "gas_limit": fee.gas_limit.to_string(),
                "payer": fee.payer,
                "granter": fee.granter,
            },
        },
        "signatures": tx.signatures.iter().map(|s| b64(s)).collect::<Vec<_>>(),
    })
}

/// The base64 key of a `cosmos.crypto.secp256k1.PubKey` `Any` (`{ bytes key = 1 }`).
fn pub_key(any: &cosmos_sdk_proto::Any) -> String {
    cosmos_sdk_proto::cosmos::crypto::secp256k1::PubKey::decode(any.value.as_slice())
        .map(|p| b64(&p.key))
        .unwrap_or_default()
}

/// A block as the tendermint service's REST route shows it (hashes in base64).
fn block_json(r: &GetLatestBlockResponse) -> Value {
    let block = r.block.clone().unwrap_or_default();
    let header = block.header.unwrap_or_default();
    let time = header
        .time
        .and_then(|t| tendermint::Time::try_from(t).ok())
        .map(|t| t.to_rfc3339());
    let id = |b: Option<&tendermint_proto::types::BlockId>| json!({"hash": b.map(|b| b64(&b.hash)).unwrap_or_default()});
    let txs: Vec<String> = block
        .data
        .map(|d| d.txs.iter().map(|t| b64(t)).collect())
        .unwrap_or_default();
    json!({
        "block_id": id(r.block_id.as_ref()),
        "block": {
            "header": {
                "chain_id": header.chain_id,
                "height": header.height.to_string(),
                "time": time,
                "last_block_id": id(header.last_block_id.as_ref()),
                "data_hash": b64(&header.data_hash),
                "validators_hash": b64(&header.validators_hash),
                "next_validators_hash": b64(&header.next_validators_hash),
                "app_hash": b64(&header.app_hash),
                "proposer_address": b64(&header.proposer_address),
            },
            "data": {"txs": txs},
        },
    })
}

/// The HTTP status a gRPC status code maps to, as Cosmos's gateway maps it.
fn http_status(code: u32) -> StatusCode {
    match code {
        INVALID_ARGUMENT => StatusCode::BAD_REQUEST,
        NOT_FOUND => StatusCode::NOT_FOUND,
        UNIMPLEMENTED => StatusCode::NOT_IMPLEMENTED,
        grpc::UNAVAILABLE => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The query string's `name` parameter, form-decoded.
fn param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// A module query's request from the query string: `field=value` pairs, each value taken as
/// a JSON number or boolean when it is one (`epoch=5`), else as text; `pagination.key` and
/// `pagination.limit` fill the request's page.
fn request_json(query: &str) -> Value {
    let mut request = serde_json::Map::new();
    for (key, text) in form_urlencoded::parse(query.as_bytes()) {
        let value = match serde_json::from_str::<Value>(&text) {
            Ok(v @ (Value::Number(_) | Value::Bool(_))) => v,
            _ => Value::String(text.to_string()),
        };
        match key.strip_prefix("pagination.") {
            Some("key") => {
                let key = base64::engine::general_purpose::STANDARD
                    .decode(text.as_bytes())
                    .unwrap_or_default();
                request.entry("pagination").or_insert_with(|| json!({}))["key"] = json!(key);
            }
            Some(field) => {
                request.entry("pagination").or_insert_with(|| json!({}))[field] = value;
            }
            None => {
                request.insert(key.into_owned(), value);
            }
        }
    }
    Value::Object(request)
}

fn decode<M: Message + Default>(bytes: &[u8]) -> Result<M, Status> {
    M::decode(bytes)
        .map_err(|e| Status::new(grpc::INTERNAL, format!("the answer does not decode: {e}")))
}

/// A POSTed JSON body.
fn body_json(body: &[u8]) -> Result<Value, Status> {
    serde_json::from_slice(body)
        .map_err(|e| Status::new(INVALID_ARGUMENT, format!("the body is not JSON: {e}")))
}

/// `tx_bytes` of a POSTed JSON body.
fn tx_bytes(json: &Value) -> Result<Vec<u8>, Status> {
    let text = get(json, "tx_bytes").as_str().ok_or_else(|| {
        Status::new(
            INVALID_ARGUMENT,
            "the body carries no \"tx_bytes\" (base64 of a TxRaw)",
        )
    })?;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| Status::new(INVALID_ARGUMENT, format!("tx_bytes is not base64: {e}")))
}

/// The field `name` (snake_case) of a proto-JSON object, which clients may also spell in
/// lowerCamelCase.
fn get<'a>(object: &'a Value, name: &str) -> &'a Value {
    match &object[name] {
        Value::Null => {
            let mut camel = String::with_capacity(name.len());
            let mut upper = false;
            for c in name.chars() {
                match (c, upper) {
                    ('_', _) => upper = true,
                    (c, true) => {
                        camel.push(c.to_ascii_uppercase());
                        upper = false;
                    }
                    (c, false) => camel.push(c),
                }
            }
            &object[camel.as_str()]
        }
        value => value,
    }
}

/// A 64-bit integer of proto-JSON: a string of digits, or a number.
fn uint(value: &Value) -> Result<u64, Status> {
    match value {
        Value::Null => Some(0),
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| {
        Status::new(
            INVALID_ARGUMENT,
            format!("{value} is not an unsigned integer"),
        )
    })
}

fn coins_from_json(value: &Value) -> Result<Vec<Coin>, Status> {
    let bad = || Status::new(INVALID_ARGUMENT, format!("{value} is not a list of coins"));
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|c| {
                Ok(Coin {
                    denom: c["denom"].as_str().ok_or_else(bad)?.to_string(),
                    amount: c["amount"].as_str().ok_or_else(bad)?.to_string(),
                })
            })
            .collect(),
        _ => Err(bad()),
    }
}

/// A `Tx` from its proto-JSON form (what older clients, cosmpy's REST client among them,
/// post to `simulate`). Messages are read by type URL ([`gonka_proto::tx_messages`]); keys
/// are `secp256k1` public keys.
fn tx_from_json(json: &Value) -> Result<Tx, Status> {
    use cosmos_sdk_proto::cosmos::tx::v1beta1::{
        mode_info, AuthInfo, Fee, ModeInfo, SignerInfo, TxBody,
    };
    let invalid = |message: String| Status::new(INVALID_ARGUMENT, message);
    let body = get(json, "body");
    let messages = get(body, "messages")
        .as_array()
        .ok_or_else(|| invalid("the tx has no body.messages".into()))?
        .iter()
        .map(|message| {
            let type_url = message["@type"]
                .as_str()
                .ok_or_else(|| invalid(format!("a message has no @type: {message}")))?;
            let value = gonka_proto::tx_messages::from_json(type_url, message.clone())
                .ok_or_else(|| invalid(format!("no module accepts {type_url}")))?
                .map_err(|e| {
                    invalid(format!(
                        "{type_url} does not read from this JSON ({e}); post tx_bytes instead"
                    ))
                })?;
            Ok(cosmos_sdk_proto::Any {
                type_url: type_url.into(),
                value,
            })
        })
        .collect::<Result<Vec<_>, Status>>()?;
    let auth_info = get(json, "auth_info");
    let signer_infos = get(auth_info, "signer_infos")
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|info| {
            let key = get(info, "public_key");
            let public_key = match key["@type"].as_str() {
                None => None,
                Some(type_url) => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(key["key"].as_str().unwrap_or_default())
                        .map_err(|e| invalid(format!("a public key is not base64: {e}")))?;
                    let key = cosmos_sdk_proto::cosmos::crypto::secp256k1::PubKey { key: bytes };
                    Some(cosmos_sdk_proto::Any {
                        type_url: type_url.into(),
                        value: key.encode_to_vec(),
                    })
                }
            };
            Ok(SignerInfo {
                public_key,
                // SIGN_MODE_DIRECT, the one mode this chain verifies.
                mode_info: Some(ModeInfo {
                    sum: Some(mode_info::Sum::Single(mode_info::Single { mode: 1 })),
                }),
                sequence: uint(get(info, "sequence"))?,
            })
        })
        .collect::<Result<Vec<_>, Status>>()?;
    let fee = get(auth_info, "fee");
    let signatures = get(json, "signatures")
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|s| {
            base64::engine::general_purpose::STANDARD
                .decode(s.as_str().unwrap_or_default())
                .map_err(|e| invalid(format!("a signature is not base64: {e}")))
        })
        .collect::<Result<Vec<_>, Status>>()?;
    Ok(Tx {
        body: Some(TxBody {
            messages,
            memo: get(body, "memo").as_str().unwrap_or_default().into(),
            timeout_height: uint(get(body, "timeout_height"))?,
            ..Default::default()
        }),
        auth_info: Some(AuthInfo {
            signer_infos,
            fee: Some(Fee {
                amount: coins_from_json(get(fee, "amount"))?,
                gas_limit: uint(get(fee, "gas_limit"))?,
                payer: get(fee, "payer").as_str().unwrap_or_default().into(),
                granter: get(fee, "granter").as_str().unwrap_or_default().into(),
            }),
            ..Default::default()
        }),
        signatures,
    })
}

/// Answers one REST call as (HTTP status, JSON).
pub async fn answer(client: &Client, request: Request<Incoming>) -> (StatusCode, Value) {
    match route(client, request).await {
        Ok(json) => (StatusCode::OK, json),
        Err(status) => (
            http_status(status.code),
            json!({"code": status.code, "message": status.message, "details": []}),
        ),
    }
}

async fn route(client: &Client, request: Request<Incoming>) -> Result<Value, Status> {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or_default().to_string();
    let body: Bytes = Limited::new(request.into_body(), grpc::MAX_MESSAGE)
        .collect()
        .await
        .map_err(|e| {
            Status::new(
                INVALID_ARGUMENT,
                format!(
                    "reading the request (at most {} bytes): {e}",
                    grpc::MAX_MESSAGE
                ),
            )
        })?
        .to_bytes();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let abci = |path: &'static str, message: Vec<u8>| async move {
        client.query_raw(path, message).await.map_err(Status::of)
    };
    match (&method, segments.as_slice()) {
        (&Method::GET, ["cosmos", "bank", "v1beta1", "balances", address]) => {
            let page = PageRequest {
                key: param(&query, "pagination.key")
                    .map(|k| base64::engine::general_purpose::STANDARD.decode(k).unwrap_or_default())
                    .unwrap_or_default(),
                limit: param(&query, "pagination.limit").and_then(|l| l.parse().ok()).unwrap_or(0),
                ..Default::default()
            };
            let request = QueryAllBalancesRequest {
                address: address.to_string(),
                pagination: Some(page),
                resolve_denom: false,
            };
            let r: QueryAllBalancesResponse =
                decode(&abci("/cosmos.bank.v1beta1.Query/AllBalances", request.encode_to_vec()).await?)?;
            let balances: Vec<Value> = r.balances.iter().map(coin).collect();
            Ok(json!({"balances": balances, "pagination": pagination(r.pagination.as_ref())}))
        }
        (&Method::GET, ["cosmos", "bank", "v1beta1", "balances", address, "by_denom"]) => {
            let request = QueryBalanceRequest {
                address: address.to_string(),
                denom: param(&query, "denom").unwrap_or_default(),
            };
            let r: QueryBalanceResponse =
                decode(&abci("/cosmos.bank.v1beta1.Query/Balance", request.encode_to_vec()).await?)?;
            Ok(json!({"balance": r.balance.as_ref().map(coin)}))
        }
        (&Method::GET, ["cosmos", "bank", "v1beta1", "supply", "by_denom"]) => {
            let request = QuerySupplyOfRequest {
                denom: param(&query, "denom").unwrap_or_default(),
            };
            let r: QuerySupplyOfResponse =
                decode(&abci("/cosmos.bank.v1beta1.Query/SupplyOf", request.encode_to_vec()).await?)?;
            Ok(json!({"amount": r.amount.as_ref().map(coin)}))
        }
        (&Method::GET, ["cosmos", "bank", "v1beta1", "denoms_metadata"]) => {
            let request = QueryDenomsMetadataRequest::default();
            let r: QueryDenomsMetadataResponse = decode(
                &abci("/cosmos.bank.v1beta1.Query/DenomsMetadata", request.encode_to_vec()).await?,
            )?;
            let metadatas: Vec<Value> = r
                .metadatas
                .iter()
                .map(|m| {
                    let units: Vec<Value> = m
                        .denom_units
                        .iter()
                        .map(|u| json!({"denom": u.denom, "exponent": u.exponent, "aliases": u.aliases}))
                        .collect();
                    json!({
                        "description": m.description, "denom_units": units, "base": m.base,
                        "display": m.display, "name": m.name, "symbol": m.symbol,
                        "uri": m.uri, "uri_hash": m.uri_hash,
                    })
                })
                .collect();
            Ok(json!({"metadatas": metadatas, "pagination": pagination(r.pagination.as_ref())}))
        }
        (&Method::GET, ["cosmos", "auth", "v1beta1", "accounts", address]) => {
            let request = QueryAccountRequest {
                address: address.to_string(),
            };
            let r: QueryAccountResponse =
                decode(&abci("/cosmos.auth.v1beta1.Query/Account", request.encode_to_vec()).await?)?;
            let any = r
                .account
                .ok_or_else(|| Status::new(NOT_FOUND, format!("account {address} not found")))?;
            let base: BaseAccount = decode(&any.value)?;
            let pub_key = base
                .pub_key
                .as_ref()
                .map(|k| json!({"@type": k.type_url, "key": pub_key(k)}));
            Ok(json!({"account": {
                "@type": any.type_url,
                "address": base.address,
                "pub_key": pub_key,
                "account_number": base.account_number.to_string(),
                "sequence": base.sequence.to_string(),
            }}))
        }
        (&Method::POST, ["cosmos", "tx", "v1beta1", "simulate"]) => {
            let json = body_json(&body)?;
            #[allow(deprecated)] // `tx`, which older clients post instead of tx_bytes
            let request = match &json["tx"] {
                Value::Null => SimulateRequest {
                    tx_bytes: tx_bytes(&json)?,
                    ..Default::default()
                },
                tx => SimulateRequest {
                    tx: Some(tx_from_json(tx)?),
                    ..Default::default()
                },
            };
            let r: SimulateResponse =
                decode(&abci("/cosmos.tx.v1beta1.Service/Simulate", request.encode_to_vec()).await?)?;
            let gas = r.gas_info.unwrap_or_default();
            let log = r.result.map(|result| result.log).unwrap_or_default();
            Ok(json!({
                "gas_info": {"gas_wanted": gas.gas_wanted.to_string(), "gas_used": gas.gas_used.to_string()},
                "result": {"data": "", "log": log, "events": []},
            }))
        }
        (&Method::POST, ["cosmos", "tx", "v1beta1", "txs"]) => {
            let request = BroadcastTxRequest {
                tx_bytes: tx_bytes(&body_json(&body)?)?,
                mode: 2, // BROADCAST_MODE_SYNC, whatever was asked (see grpc::broadcast)
            };
            let r: BroadcastTxResponse = decode(&grpc::broadcast(client, &request.encode_to_vec()).await?)?;
            Ok(json!({"tx_response": r.tx_response.as_ref().map(tx_response)}))
        }
        (&Method::GET, ["cosmos", "tx", "v1beta1", "txs", hash]) => {
            let request = GetTxRequest {
                hash: hash.to_string(),
            };
            let r: GetTxResponse = decode(&grpc::get_tx(client, &request.encode_to_vec()).await?)?;
            Ok(json!({
                "tx": r.tx.as_ref().map(tx_json),
                "tx_response": r.tx_response.as_ref().map(tx_response),
            }))
        }
        (&Method::GET, ["cosmos", "tx", "v1beta1", "txs"]) => {
            #[allow(deprecated)]
            let request = GetTxsEventRequest {
                query: param(&query, "query").unwrap_or_default(),
                events: form_urlencoded::parse(query.as_bytes())
                    .filter(|(key, _)| key == "events")
                    .map(|(_, value)| value.into_owned())
                    .collect(),
                page: param(&query, "page").and_then(|p| p.parse().ok()).unwrap_or(1),
                limit: param(&query, "limit").and_then(|l| l.parse().ok()).unwrap_or(0),
                order_by: match param(&query, "order_by").as_deref() {
                    Some("ORDER_BY_DESC" | "2") => 2,
                    _ => 0,
                },
                ..Default::default()
            };
            let r: GetTxsEventResponse =
                decode(&grpc::get_txs_event(client, &request.encode_to_vec()).await?)?;
            Ok(json!({
                "txs": r.txs.iter().map(tx_json).collect::<Vec<_>>(),
                "tx_responses": r.tx_responses.iter().map(tx_response).collect::<Vec<_>>(),
                "pagination": null,
                "total": r.total.to_string(),
            }))
        }
        (&Method::GET, ["cosmos", "base", "tendermint", "v1beta1", "blocks", which]) => {
            let height = match *which {
                "latest" => None,
                h => Some(h.parse::<i64>().map_err(|_| {
                    Status::new(INVALID_ARGUMENT, format!("{h:?} is not a height; use a number or `latest`"))
                })?),
            };
            let r: GetLatestBlockResponse = decode(&grpc::block(client, height).await?)?;
            Ok(block_json(&r))
        }
        (&Method::GET, ["cosmos", "base", "tendermint", "v1beta1", "node_info"]) => {
            let r: GetNodeInfoResponse = decode(&grpc::node_info(client).await?)?;
            let info = r.default_node_info.unwrap_or_default();
            let app = r.application_version.unwrap_or_default();
            Ok(json!({
                "default_node_info": {
                    "default_node_id": info.default_node_id,
                    "listen_addr": info.listen_addr,
                    "network": info.network,
                    "version": info.version,
                    "moniker": info.moniker,
                },
                "application_version": {
                    "name": app.name,
                    "app_name": app.app_name,
                    "version": app.version,
                    "cosmos_sdk_version": app.cosmos_sdk_version,
                },
            }))
        }
        (&Method::GET, ["cosmos", "consensus", "v1", "params"]) => {
            let r: grpc::ConsensusParamsResponse = decode(&grpc::consensus_params(client).await?)?;
            let params = r.params.unwrap_or_default();
            let block = params.block.unwrap_or_default();
            let validator = params.validator.unwrap_or_default();
            Ok(json!({"params": {
                "block": {"max_bytes": block.max_bytes.to_string(), "max_gas": block.max_gas.to_string()},
                "validator": {"pub_key_types": validator.pub_key_types},
            }}))
        }
        (&Method::GET, ["cosmos", "base", "tendermint", "v1beta1", "syncing"]) => {
            let r: GetSyncingResponse = decode(&grpc::syncing(client).await?)?;
            Ok(json!({"syncing": r.syncing}))
        }
        (&Method::GET, ["gonka", module, "v1", name]) => {
            let path = format!("/{module}/{name}");
            let route = gonka_proto::query::json_route(&path).ok_or_else(|| {
                Status::new(UNIMPLEMENTED, format!("no module query {path}"))
            })?;
            let message = (route.request)(request_json(&query))
                .map_err(|e| Status::new(INVALID_ARGUMENT, format!("the query parameters do not make a request of {path}: {e}")))?;
            let answer = client.query_raw(&path, message).await.map_err(Status::of)?;
            let json = (route.response)(&answer)
                .map_err(|e| Status::new(grpc::INTERNAL, format!("the answer does not decode: {e}")))?;
            Ok(crate::output::to_json(&json))
        }
        _ => Err(Status::new(
            UNIMPLEMENTED,
            format!("no REST route {method} {path}; see the routes in the README (gRPC serves every query)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_found_and_form_decoded() {
        let query = "denom=ibc%2F27A&pagination.limit=5&x=a+b";
        assert_eq!(param(query, "denom").as_deref(), Some("ibc/27A"));
        assert_eq!(param(query, "pagination.limit").as_deref(), Some("5"));
        assert_eq!(param(query, "x").as_deref(), Some("a b"));
        assert_eq!(param(query, "missing"), None);
        assert_eq!(param("x=100%", "x").as_deref(), Some("100%"));
    }

    #[test]
    fn module_requests_come_from_the_query_string() {
        let request = request_json(
            "address=gonka1x&epoch=5&ok=true&pagination.limit=2&pagination.key=AQI%3D",
        );
        assert_eq!(
            request,
            json!({"address": "gonka1x", "epoch": 5, "ok": true, "pagination": {"limit": 2, "key": [1, 2]}})
        );
        let bytes = (gonka_proto::query::json_route("/bank/balance")
            .unwrap()
            .request)(request_json("address=gonka1x&denom=ngnk"))
        .unwrap();
        let decoded =
            <gonka_proto::bank::QueryBalanceRequest as Message>::decode(bytes.as_slice()).unwrap();
        assert_eq!(
            (decoded.address.as_str(), decoded.denom.as_str()),
            ("gonka1x", "ngnk")
        );
        assert!(gonka_proto::query::json_route("/bank/nothing").is_none());
    }

    #[test]
    fn a_tx_read_back_from_its_json_is_the_same_tx() {
        use cosmos_sdk_proto::cosmos::tx::v1beta1::{
            mode_info, AuthInfo, Fee, ModeInfo, SignerInfo, TxBody,
        };
        let send = cosmos_sdk_proto::cosmos::bank::v1beta1::MsgSend {
            from_address: "gonka1a".into(),
            to_address: "gonka1b".into(),
            amount: vec![Coin {
                denom: "ngnk".into(),
                amount: "7".into(),
            }],
        };
        let key = cosmos_sdk_proto::cosmos::crypto::secp256k1::PubKey { key: vec![2; 33] };
        let tx = Tx {
            body: Some(TxBody {
                messages: vec![cosmos_sdk_proto::Any {
                    type_url: "/cosmos.bank.v1beta1.MsgSend".into(),
                    value: send.encode_to_vec(),
                }],
                memo: "m".into(),
                timeout_height: 9,
                ..Default::default()
            }),
            auth_info: Some(AuthInfo {
                signer_infos: vec![SignerInfo {
                    public_key: Some(cosmos_sdk_proto::Any {
                        type_url: "/cosmos.crypto.secp256k1.PubKey".into(),
                        value: key.encode_to_vec(),
                    }),
                    mode_info: Some(ModeInfo {
                        sum: Some(mode_info::Sum::Single(mode_info::Single { mode: 1 })),
                    }),
                    sequence: 4,
                }],
                fee: Some(Fee {
                    amount: vec![Coin {
                        denom: "ngnk".into(),
                        amount: "100".into(),
                    }],
                    gas_limit: 200_000,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            signatures: vec![vec![1; 64]],
        };
        assert_eq!(tx_from_json(&tx_json(&tx)).unwrap(), tx);
        let bad = json!({"body": {"messages": [{"@type": "/gonka.nothing.v1.MsgNone"}]}});
        assert_eq!(tx_from_json(&bad).unwrap_err().code, INVALID_ARGUMENT);
    }

    #[test]
    fn grpc_codes_become_the_gateways_http_statuses() {
        assert_eq!(http_status(NOT_FOUND), StatusCode::NOT_FOUND);
        assert_eq!(http_status(INVALID_ARGUMENT), StatusCode::BAD_REQUEST);
        assert_eq!(http_status(UNIMPLEMENTED), StatusCode::NOT_IMPLEMENTED);
        assert_eq!(http_status(2), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
