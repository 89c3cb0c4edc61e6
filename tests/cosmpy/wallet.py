"""Stock cosmpy against gonka over a node's gRPC or REST (`gonkad start --api-listen`): read the
node's info, read a balance, send tokens with a simulated gas limit, wait for the tx and read
the recipient's balance. Prints one JSON
report for tests/e2e/cosmpy.rs.

Usage: wallet.py URL CHAIN_ID MIN_GAS_PRICE RECIPIENT AMOUNT, the sender's private key
(hex) in GONKA_PRIVATE_KEY.
"""

import json
import os
import sys
from datetime import timedelta

import grpc

from cosmpy.aerial.client import LedgerClient, NetworkConfig
from cosmpy.aerial.client.bank import create_bank_send_msg
from cosmpy.aerial.client.utils import prepare_basic_transaction
from cosmpy.aerial.tx import Transaction
from cosmpy.aerial.wallet import LocalWallet
from cosmpy.crypto.keypairs import PrivateKey


def main() -> None:
    url, chain_id, gas_price, recipient, amount = sys.argv[1:6]
    client = LedgerClient(
        NetworkConfig(
            chain_id=chain_id,
            url=url,
            fee_minimum_gas_price=float(gas_price),
            fee_denomination="ngnk",
            staking_denomination="ngnk",
        )
    )
    wallet = LocalWallet(
        PrivateKey(bytes.fromhex(os.environ["GONKA_PRIVATE_KEY"])), prefix="gonka"
    )
    sender = str(wallet.address())
    node = client.query_node_info()
    before = client.query_bank_balance(sender, "ngnk")
    account = client.query_account(sender)
    try:
        client.query_account("gonka1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqrk8pql")
        unknown = "found"
    except grpc.RpcError as error:
        unknown = error.code().name
    except RuntimeError as error:  # cosmpy's REST client: the HTTP status in the message
        unknown = "NOT_FOUND" if "Response: 404" in str(error) else str(error)
    tx = client.send_tokens(recipient, int(amount), "ngnk", wallet, memo="cosmpy")
    tx.wait_to_complete(timeout=timedelta(seconds=60))
    result = tx.response
    # One signed tx broadcast twice: the second is refused, as Cosmos nodes refuse a duplicate.
    twice = Transaction()
    twice.add_message(create_bank_send_msg(wallet.address(), sender, 1, "ngnk"))
    twice = prepare_basic_transaction(client, twice, wallet)
    client.broadcast_tx(twice).wait_to_complete(timeout=timedelta(seconds=60))
    try:
        client.broadcast_tx(twice)
        duplicate = "accepted"
    except Exception as error:  # pylint: disable=broad-except
        duplicate = str(error)
    print(
        json.dumps(
            {
                "sender": sender,
                "appName": node.app_name,
                "cosmosSdkVersion": str(node.cosmos_sdk_version),
                "balanceBefore": before,
                "accountNumber": account.number,
                "sequence": account.sequence,
                "unknownAccount": unknown,
                "hash": result.hash,
                "height": result.height,
                "code": result.code,
                "gasWanted": result.gas_wanted,
                "gasUsed": result.gas_used,
                "recipientBalance": client.query_bank_balance(recipient, "ngnk"),
                "latestHeight": client.query_height(),
                "chainId": client.query_chain_id(),
                "txInBlock": result.hash in client.query_block(result.height).tx_hashes,
                "duplicate": duplicate,
            }
        )
    )


if __name__ == "__main__":
    main()
