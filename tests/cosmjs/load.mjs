// A stock-client load generator for cli/benches/load.rs: what many wallets do at once, with
// stock cosmjs. Each sender pre-signs its txs (bank sends signed offline with
// SigningStargateClient, or CometBFT kvstore `key=value` txs), then submits them in order,
// one `broadcastTxSync` per tx to node `sender % nodes`, a refused tx retried after 20 ms.
//
// node load.mjs JOB.json
//   JOB: {urls, per_sender, sends?: {chain_id, mnemonics, gas, fee_ngnk, recipient},
//         key_values?: {senders, size}}
// Prints `{"signed": N}` once every tx is built, waits for a line on stdin, submits, and
// prints one JSON line: {accepted, rejected, submit_seconds, cpu_seconds, samples: [[HASH, ms]]}
// (every 10th accepted tx's hash and the wall-clock ms it was sent at).
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { DirectSecp256k1HdWallet } from "@cosmjs/proto-signing";
import { SigningStargateClient } from "@cosmjs/stargate";
import { connectComet } from "@cosmjs/tendermint-rpc";
import { toHex } from "@cosmjs/encoding";
import { TxRaw } from "cosmjs-types/cosmos/tx/v1beta1/tx";

const job = JSON.parse(readFileSync(process.argv[2], "utf8"));

/** Every sender's txs, in order. */
async function build() {
  if (job.sends) {
    const s = job.sends;
    const fee = { amount: [{ denom: "ngnk", amount: String(s.fee_ngnk) }], gas: String(s.gas) };
    return Promise.all(
      s.mnemonics.map(async (mnemonic, number) => {
        const wallet = await DirectSecp256k1HdWallet.fromMnemonic(mnemonic, { prefix: "gonka" });
        const [{ address }] = await wallet.getAccounts();
        const client = await SigningStargateClient.offline(wallet);
        const send = {
          typeUrl: "/cosmos.bank.v1beta1.MsgSend",
          value: { fromAddress: address, toAddress: s.recipient, amount: [{ denom: "ngnk", amount: "1" }] },
        };
        const txs = [];
        for (let sequence = 0; sequence < job.per_sender; sequence++) {
          const raw = await client.sign(address, [send], fee, "", {
            accountNumber: BigInt(number),
            sequence,
            chainId: s.chain_id,
          });
          txs.push(TxRaw.encode(raw).finish());
        }
        return txs;
      }),
    );
  }
  const { senders, size } = job.key_values;
  return Array.from({ length: senders }, (_, s) =>
    Array.from({ length: job.per_sender }, (_, n) =>
      new TextEncoder().encode(`s${s}n${n}=`.padEnd(size, "v")),
    ),
  );
}

const txs = await build();
const clients = await Promise.all(job.urls.map((url) => connectComet(url)));
console.log(JSON.stringify({ signed: txs.reduce((n, list) => n + list.length, 0) }));
const lines = createInterface({ input: process.stdin });
await new Promise((go) => lines.once("line", go));

let accepted = 0;
let rejected = 0;
const samples = [];
const cpuBefore = process.cpuUsage();
const started = performance.now();
const progress = setInterval(
  () => console.error(`  accepted ${accepted} of ${txs.length * job.per_sender}`),
  2000,
);
await Promise.all(
  txs.map(async (list, sender) => {
    const client = clients[sender % clients.length];
    for (let n = 0; n < list.length; n++) {
      for (let tries = 1; ; tries++) {
        const sent = Date.now();
        let refusal;
        try {
          const reply = await client.broadcastTxSync({ tx: list[n] });
          if (reply.code === 0) {
            accepted++;
            if (n % 10 === 0) samples.push([toHex(reply.hash).toUpperCase(), sent]);
            break;
          }
          refusal = `code ${reply.code}: ${reply.log}`;
        } catch (error) {
          // An earlier try got in after all (its answer was lost).
          if (String(error).includes("already exists in cache")) {
            accepted++;
            break;
          }
          refusal = String(error);
        }
        // A full mempool (or a busy node) refuses for now: try again, a while (1,500 tries,
        // 20 ms apart), so a stuck node ends the run.
        rejected++;
        if (tries === 1500) {
          console.error(`  sender ${sender} gives up at its tx ${n}: ${refusal}`);
          return;
        }
        await new Promise((wake) => setTimeout(wake, 20));
      }
    }
  }),
);
const submitSeconds = (performance.now() - started) / 1e3;
clearInterval(progress);
const cpu = process.cpuUsage(cpuBefore);
console.log(
  JSON.stringify({
    accepted,
    rejected,
    submit_seconds: submitSeconds,
    cpu_seconds: (cpu.user + cpu.system) / 1e6,
    samples,
  }),
);
lines.close();
for (const client of clients) client.disconnect();
