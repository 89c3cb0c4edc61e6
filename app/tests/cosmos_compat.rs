//! Stock Cosmos clients: the standard MsgSend type URL, the standard gRPC-over-ABCI query
//! paths with the standard protobuf types, and gas estimation by `Simulate`.

mod common;

use common::*;
use cosmrs::proto::cosmos::auth::v1beta1::{
    BaseAccount, QueryAccountRequest, QueryAccountResponse,
};
use cosmrs::proto::cosmos::bank::v1beta1::{
    MsgSend, QueryAllBalancesRequest, QueryAllBalancesResponse, QueryBalanceRequest,
    QueryBalanceResponse,
};
use cosmrs::proto::cosmos::base::v1beta1::Coin;
use cosmrs::proto::cosmos::crypto::secp256k1::PubKey;
use cosmrs::proto::cosmos::tx::signing::v1beta1::SignMode;
use cosmrs::proto::cosmos::tx::v1beta1::{
    mode_info, AuthInfo, Fee, ModeInfo, SignerInfo, SimulateRequest, SimulateResponse, Tx, TxBody,
};
use gonka_client::{msg_send, sign, GasAdjustment, GasFee};
use gonka_proto::query::{cosmos::Simulate, Query};
use prost::Message;

#[test]
fn cosmos_msg_send_and_standard_queries_work() {
    let mut fx = Fixture::new();
    let (alice, bob) = (key("alice"), key("bob"));
    let msg = cosmrs::Any {
        type_url: "/cosmos.bank.v1beta1.MsgSend".into(),
        value: MsgSend {
            from_address: alice.address().into(),
            to_address: bob.address().into(),
            amount: vec![Coin {
                denom: "ngnk".into(),
                amount: "777".into(),
            }],
        }
        .encode_to_vec(),
    };
    let block = fx.chain.next_block(vec![sign(
        alice,
        vec![msg],
        &signer("alice", 0),
        tx_fee(),
        "",
    )
    .unwrap()]);
    assert_eq!(block.tx_results[0].code, 0, "{}", block.tx_results[0].log);

    let response = fx.chain.query(
        "/cosmos.bank.v1beta1.Query/Balance",
        QueryBalanceRequest {
            address: bob.address().into(),
            denom: "ngnk".into(),
        }
        .encode_to_vec(),
    );
    assert_eq!(response.code, 0, "{}", response.log);
    let balance = QueryBalanceResponse::decode(response.value.as_ref())
        .unwrap()
        .balance
        .unwrap();
    assert_eq!(balance.amount, (START_BALANCE + 777).to_string());

    let response = fx.chain.query(
        "/cosmos.bank.v1beta1.Query/AllBalances",
        QueryAllBalancesRequest {
            address: alice.address().into(),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let all = QueryAllBalancesResponse::decode(response.value.as_ref()).unwrap();
    assert_eq!(
        all.balances,
        vec![Coin {
            denom: "ngnk".into(),
            amount: (START_BALANCE - 777 - MIN_FEE).to_string()
        }]
    );

    let response = fx.chain.query(
        "/cosmos.auth.v1beta1.Query/Account",
        QueryAccountRequest {
            address: alice.address().into(),
        }
        .encode_to_vec(),
    );
    assert_eq!(response.code, 0, "{}", response.log);
    let any = QueryAccountResponse::decode(response.value.as_ref())
        .unwrap()
        .account
        .unwrap();
    assert_eq!(any.type_url, "/cosmos.auth.v1beta1.BaseAccount");
    let account = BaseAccount::decode(any.value.as_slice()).unwrap();
    assert_eq!(
        (
            account.address.as_str(),
            account.account_number,
            account.sequence
        ),
        (alice.address(), 0, 1)
    );
    let pub_key = PubKey::decode(account.pub_key.unwrap().value.as_slice()).unwrap();
    assert_eq!(pub_key.key, alice.public_key().to_bytes());

    // Unknown accounts answer the way cosmjs recognises as "no account".
    let stranger = gonka_auth::module_address("nobody");
    let response = fx.chain.query(
        "/cosmos.auth.v1beta1.Query/Account",
        QueryAccountRequest { address: stranger }.encode_to_vec(),
    );
    assert_ne!(response.code, 0);
    assert!(
        response.log.contains("rpc error: code = NotFound"),
        "{}",
        response.log
    );
}

/// What wallets ask before a send: the supply, the native denom's metadata (its display unit
/// and exponent) and the auth parameters, with the standard types.
#[test]
fn supply_denom_metadata_and_auth_params_answer_with_the_standard_types() {
    use cosmrs::proto::cosmos::auth::v1beta1::{QueryParamsRequest, QueryParamsResponse};
    use cosmrs::proto::cosmos::bank::v1beta1::{
        QueryDenomMetadataRequest, QueryDenomMetadataResponse, QueryDenomsMetadataRequest,
        QueryDenomsMetadataResponse, QuerySupplyOfRequest, QuerySupplyOfResponse,
        QueryTotalSupplyRequest, QueryTotalSupplyResponse,
    };
    let mut fx = Fixture::new();
    fx.chain.next_block(vec![]);
    let ask = |path: &str, data: Vec<u8>| {
        let response = fx.chain.query(path, data);
        (
            response.code,
            response.codespace,
            response.log,
            response.value,
        )
    };
    let (code, _, log, value) = ask(
        "/cosmos.bank.v1beta1.Query/SupplyOf",
        QuerySupplyOfRequest {
            denom: "ngnk".into(),
        }
        .encode_to_vec(),
    );
    assert_eq!(code, 0, "{log}");
    let amount = QuerySupplyOfResponse::decode(value.as_ref())
        .unwrap()
        .amount
        .unwrap();
    assert_eq!(amount.denom, "ngnk");
    let supply = amount.amount;
    assert!(supply.parse::<u128>().unwrap() >= START_BALANCE);

    let (code, _, log, value) = ask(
        "/cosmos.bank.v1beta1.Query/TotalSupply",
        QueryTotalSupplyRequest::default().encode_to_vec(),
    );
    assert_eq!(code, 0, "{log}");
    let total = QueryTotalSupplyResponse::decode(value.as_ref()).unwrap();
    assert_eq!(
        total.supply,
        vec![Coin {
            denom: "ngnk".into(),
            amount: supply
        }]
    );

    let (code, _, log, value) = ask(
        "/cosmos.bank.v1beta1.Query/DenomMetadata",
        QueryDenomMetadataRequest {
            denom: "ngnk".into(),
        }
        .encode_to_vec(),
    );
    assert_eq!(code, 0, "{log}");
    let metadata = QueryDenomMetadataResponse::decode(value.as_ref())
        .unwrap()
        .metadata
        .unwrap();
    assert_eq!(
        (metadata.base.as_str(), metadata.display.as_str()),
        ("ngnk", "gnk")
    );
    let display = metadata
        .denom_units
        .iter()
        .find(|u| u.denom == metadata.display)
        .unwrap();
    assert_eq!(display.exponent, 9);
    let (code, codespace, log, _) = ask(
        "/cosmos.bank.v1beta1.Query/DenomMetadata",
        QueryDenomMetadataRequest {
            denom: "uatom".into(),
        }
        .encode_to_vec(),
    );
    assert_eq!((code, codespace.as_str()), (5, "bank"), "{log}");
    let (code, _, log, value) = ask(
        "/cosmos.bank.v1beta1.Query/DenomsMetadata",
        QueryDenomsMetadataRequest::default().encode_to_vec(),
    );
    assert_eq!(code, 0, "{log}");
    let all = QueryDenomsMetadataResponse::decode(value.as_ref()).unwrap();
    assert_eq!(all.metadatas, vec![metadata]);

    let (code, _, log, value) = ask(
        "/cosmos.auth.v1beta1.Query/Params",
        QueryParamsRequest::default().encode_to_vec(),
    );
    assert_eq!(code, 0, "{log}");
    let params = QueryParamsResponse::decode(value.as_ref())
        .unwrap()
        .params
        .unwrap();
    let ours = gonka_auth::default_params();
    assert_eq!(params.tx_sig_limit, 1);
    assert_eq!(params.tx_size_cost_per_byte, ours.tx_size_cost_per_byte);
    assert_eq!(
        params.sig_verify_cost_secp256k1,
        ours.sig_verify_cost_secp256k1
    );
}

/// Asks `/cosmos.tx.v1beta1.Service/Simulate` through the ABCI query path.
fn simulate(fx: &Fixture, tx_bytes: Vec<u8>) -> Result<SimulateResponse, (String, u32, String)> {
    let request = SimulateRequest {
        tx_bytes,
        ..Default::default()
    };
    let response = fx.chain.query(Simulate::PATH, request.encode_to_vec());
    if response.code != 0 {
        return Err((response.codespace, response.code, response.log));
    }
    Ok(<Simulate as Query>::Response::decode(response.value.as_ref()).unwrap())
}

/// What cosmjs `fee: "auto"` and `gonkad tx --gas auto` do: simulate, then sign with the gas
/// used times an adjustment. The simulation needs no signature (cosmjs sends an empty one
/// with an unspecified sign mode and no fee), reports the gas the signed tx then uses within
/// the adjustment, keeps nothing, and answers a tx that would fail with its error.
#[test]
fn simulate_estimates_the_gas_a_tx_uses_and_keeps_nothing() {
    let mut fx = Fixture::new();
    fx.chain.next_block(vec![]);
    let (alice, bob) = (key("alice"), key("bob"));
    let msgs = || vec![msg_send(alice.address(), bob.address(), 777)];
    let probe = sign(alice, msgs(), &signer("alice", 0), GasFee::SIMULATION, "").unwrap();
    let simulated = simulate(&fx, probe).unwrap();
    let gas = simulated.gas_info.unwrap();
    assert_eq!(gas.gas_wanted, 0);
    assert!(gas.gas_used > 10_000, "{gas:?}");
    let result = simulated.result.unwrap();
    assert!(
        result
            .events
            .iter()
            .any(|e| e.r#type == "transfer" && e.attributes.iter().any(|a| a.value == "777ngnk")),
        "{:?}",
        result.events
    );

    // A cosmjs simulation: a `Tx` (not `TxRaw`), SIGN_MODE_UNSPECIFIED, an empty signature.
    let cosmjs = Tx {
        body: Some(TxBody {
            messages: msgs(),
            ..Default::default()
        }),
        auth_info: Some(AuthInfo {
            signer_infos: vec![SignerInfo {
                public_key: Some(cosmrs::Any {
                    type_url: "/cosmos.crypto.secp256k1.PubKey".into(),
                    value: PubKey {
                        key: alice.public_key().to_bytes(),
                    }
                    .encode_to_vec(),
                }),
                mode_info: Some(ModeInfo {
                    sum: Some(mode_info::Sum::Single(mode_info::Single {
                        mode: SignMode::Unspecified as i32,
                    })),
                }),
                sequence: 0,
            }],
            fee: Some(Fee::default()),
            ..Default::default()
        }),
        signatures: vec![vec![]],
    };
    let cosmjs_gas = simulate(&fx, cosmjs.encode_to_vec())
        .unwrap()
        .gas_info
        .unwrap()
        .gas_used;
    // Only its size differs (no sign-doc hint), at 10 gas per byte.
    assert!(
        cosmjs_gas.abs_diff(gas.gas_used) < 1_000,
        "{cosmjs_gas} vs {gas:?}"
    );

    // Nothing was kept: sequence 0 is still next, no funds moved.
    assert_eq!(fx.balance(bob.address()), START_BALANCE);
    let limit = GasAdjustment::DEFAULT.apply(gas.gas_used);
    let fee = GasFee::at_price(limit, &min_gas_price()).unwrap();
    let tx = sign(alice, msgs(), &signer("alice", 0), fee, "").unwrap();
    let check = fx.chain.check_tx(tx.clone());
    assert_eq!(check.code, 0, "{}", check.log);
    assert_eq!(check.gas_wanted, limit as i64);
    // The signed tx is a few bytes longer (its fee and limit): a little more, within the
    // adjustment.
    assert!(
        (gas.gas_used as i64..=limit as i64).contains(&check.gas_used),
        "simulated {}, used {}, limit {limit}",
        gas.gas_used,
        check.gas_used
    );
    let block = fx.chain.next_block(vec![tx]);
    let executed = &block.tx_results[0];
    assert_eq!(executed.code, 0, "{}", executed.log);
    assert_eq!(
        (executed.gas_wanted, executed.gas_used),
        (check.gas_wanted, check.gas_used)
    );
    assert_eq!(fx.balance(bob.address()), START_BALANCE + 777);

    // A tx that would fail is answered with its error, as CheckTx would.
    let too_much = vec![msg_send(alice.address(), bob.address(), START_BALANCE)];
    let probe = sign(alice, too_much, &signer("alice", 1), GasFee::SIMULATION, "").unwrap();
    let (codespace, code, log) = simulate(&fx, probe).unwrap_err();
    assert_eq!((codespace.as_str(), code), ("bank", 4), "{log}");
    // So is a wrong sequence, which the simulation checks like CheckTx.
    let stale = sign(alice, msgs(), &signer("alice", 0), GasFee::SIMULATION, "").unwrap();
    assert_eq!(simulate(&fx, stale).unwrap_err().1, 7);
    // A request larger than any tx is refused before it is decoded.
    let (codespace, code, log) = simulate(&fx, vec![0; 9_000]).unwrap_err();
    assert_eq!((codespace.as_str(), code), ("sdk", 2), "{log}");
}

#[test]
fn module_queries_answer_at_a_past_height_and_lists_only_at_the_latest() {
    let mut fx = Fixture::new();
    let (alice, bob) = (key("alice"), key("bob"));
    let balance_at = |fx: &Fixture, height: i64| {
        let response = fx.chain.query_at(
            "/bank/balance",
            gonka_proto::bank::QueryBalanceRequest {
                address: bob.address().into(),
                denom: "ngnk".into(),
            }
            .encode_to_vec(),
            height,
        );
        assert_eq!(response.code, 0, "{}", response.log);
        // Height 0 asks for the latest, and the answer names it.
        let answered = if height == 0 {
            fx.chain.height() as i64
        } else {
            height
        };
        assert_eq!(response.height, answered);
        gonka_proto::bank::QueryBalanceResponse::decode(response.value.as_ref())
            .unwrap()
            .balance
            .unwrap()
            .amount
    };
    let send = |fx: &mut Fixture, sequence: u64| {
        let tx = sign(
            alice,
            vec![msg_send(alice.address(), bob.address(), 1_000)],
            &signer("alice", sequence),
            tx_fee(),
            "",
        )
        .unwrap();
        let block = fx.chain.next_block(vec![tx]);
        assert_eq!(block.tx_results[0].code, 0, "{}", block.tx_results[0].log);
        fx.chain.height() as i64
    };
    let first = send(&mut fx, 0);
    let second = send(&mut fx, 1);
    let (then, now) = (balance_at(&fx, first), balance_at(&fx, second));
    assert_eq!(
        now.parse::<u128>().unwrap() - then.parse::<u128>().unwrap(),
        1_000
    );
    assert_eq!(balance_at(&fx, 0), now);

    // A list at a past height is refused with a reason; so is a height not committed yet.
    let list = gonka_proto::bank::QueryAllBalancesRequest {
        address: bob.address().into(),
        ..Default::default()
    }
    .encode_to_vec();
    let past = fx.chain.query_at("/bank/balances", list.clone(), first);
    assert_ne!(past.code, 0);
    assert!(past.log.contains("latest height only"), "{}", past.log);
    assert_eq!(fx.chain.query_at("/bank/balances", list.clone(), 0).code, 0);
    let future = fx.chain.query_at("/bank/balances", list, second + 5);
    assert!(future.log.contains("not committed"), "{}", future.log);
}

#[test]
fn a_pruning_node_answers_within_its_window_and_says_what_it_pruned() {
    let mut fx = Fixture::new();
    fx.chain.app().set_retention(gonka_app::Retention {
        keep_versions: 10,
        keep_blocks: 0,
    });
    for _ in 0..30 {
        fx.chain.next_block(Vec::new());
    }
    let hash = fx.chain.app_hash();
    let request = |height: i64| {
        fx.chain.query_at(
            "/bank/balance",
            gonka_proto::bank::QueryBalanceRequest {
                address: key("alice").address().into(),
                denom: "ngnk".into(),
            }
            .encode_to_vec(),
            height,
        )
    };
    let latest = fx.chain.height() as i64;
    assert_eq!(
        request(latest - 9).code,
        0,
        "the window's oldest height answers"
    );
    let pruned = request(latest - 10);
    assert_ne!(pruned.code, 0);
    assert!(pruned.log.contains("pruned"), "{}", pruned.log);
    // Pruning is node-local: an archive node fed the same blocks has the same app hash.
    let mut archive = Fixture::new();
    for _ in 0..30 {
        archive.chain.next_block(Vec::new());
    }
    assert_eq!(archive.chain.app_hash(), hash);
}

#[test]
fn gas_used_is_the_same_whether_the_signature_was_checked_before_or_not() {
    let tx = || {
        let (alice, bob) = (key("alice"), key("bob"));
        sign(
            alice,
            vec![msg_send(alice.address(), bob.address(), 9)],
            &signer("alice", 0),
            tx_fee(),
            "cache",
        )
        .unwrap()
    };
    // Cold: nothing verified these bytes before FinalizeBlock.
    gonka_app::sig_cache::clear();
    let mut cold = Fixture::new();
    let cold_result = cold.chain.next_block(vec![tx()]).tx_results[0].clone();
    // Warm: CheckTx verified them first (and the cold chain's FinalizeBlock too).
    let mut warm = Fixture::new();
    assert_eq!(warm.chain.check_tx(tx()).code, 0);
    let warm_result = warm.chain.next_block(vec![tx()]).tx_results[0].clone();
    assert_eq!(cold_result.code, 0, "{}", cold_result.log);
    assert_eq!(
        warm_result, cold_result,
        "results, gas used included, are consensus data"
    );
    assert_eq!(warm.chain.app_hash(), cold.chain.app_hash());
}

/// `tx` with its signer's public key replaced by `pub_key` and signed again by alice over
/// the new sign doc: only the key's encoding is wrong.
fn with_pub_key(tx: Vec<u8>, pub_key: Vec<u8>) -> Vec<u8> {
    use cosmrs::proto::cosmos::tx::v1beta1::{SignDoc, TxRaw};
    let mut raw = TxRaw::decode(tx.as_slice()).unwrap();
    let mut auth_info = AuthInfo::decode(raw.auth_info_bytes.as_slice()).unwrap();
    let any = auth_info.signer_infos[0].public_key.as_mut().unwrap();
    any.value = PubKey { key: pub_key }.encode_to_vec();
    raw.auth_info_bytes = auth_info.encode_to_vec();
    let data = signer("alice", 0);
    let doc = SignDoc {
        body_bytes: raw.body_bytes.clone(),
        auth_info_bytes: raw.auth_info_bytes.clone(),
        chain_id: data.chain_id,
        account_number: data.account_number,
    };
    let signature = key("alice")
        .signing_key()
        .sign(&doc.encode_to_vec())
        .unwrap();
    raw.signatures = vec![signature.to_bytes().to_vec()];
    raw.encode_to_vec()
}

#[test]
fn public_keys_the_cosmos_sdk_refuses_are_refused_and_change_nothing() {
    let mut fx = Fixture::new();
    let (alice, bob) = (key("alice"), key("bob"));
    let send = || {
        sign(
            alice,
            vec![msg_send(alice.address(), bob.address(), 5)],
            &signer("alice", 0),
            tx_fee(),
            "",
        )
        .unwrap()
    };
    let uncompressed = k256::ecdsa::SigningKey::from_slice(&alice.secret_bytes())
        .unwrap()
        .verifying_key()
        .to_encoded_point(false)
        .as_bytes()
        .to_vec();
    // 33 bytes of a compressed key whose x (5) has no point on secp256k1.
    let mut not_a_point = vec![0u8; 33];
    not_a_point[0] = 2;
    not_a_point[32] = 5;
    for (name, pub_key, fragment) in [
        (
            "uncompressed",
            uncompressed,
            "compressed secp256k1 key of 33 bytes",
        ),
        ("not a point", not_a_point, "public key"),
    ] {
        let tx = with_pub_key(send(), pub_key);
        let checked = fx.chain.check_tx(tx.clone());
        assert_eq!(
            (checked.code, checked.codespace.as_str()),
            (gonka_auth::AuthError::InvalidPubKey as u32, "auth"),
            "{name}: {}",
            checked.log
        );
        assert!(checked.log.contains(fragment), "{name}: {}", checked.log);
        let block = fx.chain.next_block(vec![tx]);
        let result = &block.tx_results[0];
        assert_eq!(
            result.code,
            gonka_auth::AuthError::InvalidPubKey as u32,
            "{name}: {}",
            result.log
        );
    }
    // Nothing moved: alice's sequence 0 still signs, and her first good send goes through.
    let block = fx.chain.next_block(vec![send()]);
    assert_eq!(block.tx_results[0].code, 0, "{}", block.tx_results[0].log);
}
