// What a Keplr-style wallet does, with stock cosmjs against a gonka node: a send with
// `fee: "auto"` (simulated gas), the tx found again by hash and by sender, the supply and the
// native denom's metadata. Prints one JSON object for tests/e2e/cosmjs.rs to check.
//
// node wallet.mjs RPC_URL GAS_PRICE RECIPIENT AMOUNT_NGNK   (mnemonic in GONKA_MNEMONIC)
import { DirectSecp256k1HdWallet } from "@cosmjs/proto-signing";
import {
  GasPrice,
  QueryClient,
  SigningStargateClient,
  setupBankExtension,
} from "@cosmjs/stargate";
import { connectComet } from "@cosmjs/tendermint-rpc";

const [rpc, gasPrice, recipient, amount] = process.argv.slice(2);
const wallet = await DirectSecp256k1HdWallet.fromMnemonic(process.env.GONKA_MNEMONIC, {
  prefix: "gonka",
});
const [{ address: sender }] = await wallet.getAccounts();
const client = await SigningStargateClient.connectWithSigner(rpc, wallet, {
  gasPrice: GasPrice.fromString(gasPrice),
});
const sent = await client.sendTokens(
  sender,
  recipient,
  [{ denom: "ngnk", amount }],
  "auto",
  "cosmjs e2e",
);
const found = await client.getTx(sent.transactionHash);
const bySender = await client.searchTx([{ key: "message.sender", value: sender }]);
const comet = await connectComet(rpc);
const bank = QueryClient.withExtensions(comet, setupBankExtension).bank;
const supply = await bank.supplyOf("ngnk");
const metadata = await bank.denomMetadata("ngnk");
const balance = await client.getBalance(recipient, "ngnk");
console.log(
  JSON.stringify({
    sender,
    code: sent.code,
    hash: sent.transactionHash,
    height: sent.height,
    gasUsed: Number(sent.gasUsed),
    gasWanted: Number(sent.gasWanted),
    foundHeight: found?.height ?? null,
    bySender: bySender.map((tx) => tx.hash),
    supply,
    display: metadata.display,
    exponent: metadata.denomUnits.find((u) => u.denom === metadata.display)?.exponent ?? null,
    recipientBalance: balance.amount,
  }),
);
comet.disconnect();
client.disconnect();
