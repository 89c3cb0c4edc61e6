//! Stock Cosmos clients: the standard MsgSend type URL and the standard gRPC-over-ABCI
//! query paths with the standard protobuf types.

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
use gonka_client::sign;
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
        MIN_FEE,
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
