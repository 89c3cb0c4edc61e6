// The gonka explorer: a single-page app over the server it came from (`gonkad explorer`):
// `/rpc/<method>` is CometBFT's RPC, `/cosmos/...` and `/gonka/<module>/v1/<query>` the node's
// REST routes. Chain data is always inserted as text (textContent, attributes), never as HTML.
'use strict';

const GNK = 1000000000n;
const ADDRESS = /^gonka1[02-9ac-hj-np-z]{38,58}$/;
const HASH = /^[0-9a-fA-F]{64}$/;
const JOB_STATUS = ['unspecified', 'forming', 'running', 'completed', 'cancelled'];
const CHECKPOINT_STATUS = ['unspecified', 'submitted', 'closed', 'accepted', 'verifying', 'verified', 'disputed', 'faulted', 'upheld', 'undecided'];

// ---------------------------------------------------------------- DOM and formatting

/** An element with attributes (`class`, anything else as an attribute) and children (nodes or text). */
function h(tag, attrs, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'class') element.className = value;
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

function link(href, text, attrs) { return h('a', Object.assign({ href }, attrs || {}), text); }
function short(text) { text = String(text); return text.length > 16 ? text.slice(0, 10) + '…' + text.slice(-4) : text; }
function accountLink(address) { return address ? link('#/account/' + encodeURIComponent(address), short(address), { title: address, class: 'mono' }) : '—'; }
function blockLink(height) { return Number(height) > 0 ? link('#/block/' + Number(height), String(height)) : String(height ?? '—'); }
function txLink(hash) { return link('#/tx/' + hash, short(hash), { title: hash, class: 'mono' }); }
function inferenceLink(id) { return id ? link('#/inference/' + encodeURIComponent(id), short(id), { title: id, class: 'mono' }) : '—'; }

/** An ngnk integer (string) as GNK, exactly (BigInt: no rounding). */
function gnk(ngnk) {
  const text = String(ngnk ?? '').replace(/ngnk$/, '');
  if (!/^\d+$/.test(text)) return text || '—';
  const n = BigInt(text);
  const fraction = (n % GNK).toString().padStart(9, '0').replace(/0+$/, '');
  return (n / GNK).toLocaleString('en-US') + (fraction ? '.' + fraction : '') + ' GNK';
}

/** Coins (`[{denom, amount}]`) as text, ngnk in GNK. */
function coins(list) {
  return list.map((c) => (c.denom === 'ngnk' ? gnk(c.amount) : c.amount + c.denom)).join(', ') || '0';
}

function percent(part, total) {
  const p = BigInt(part || 0), t = BigInt(total || 0);
  if (t === 0n) return '—';
  return (Number((p * 100000n) / t) / 1000).toFixed(2) + '%';
}

function isBytes(value) {
  return Array.isArray(value) && value.length >= 8 && value.every((b) => Number.isInteger(b) && b >= 0 && b <= 255);
}
function hex(bytes) { return bytes.map((b) => b.toString(16).padStart(2, '0')).join(''); }

/** A value with its byte arrays as hex, for display. */
function normalize(value) {
  if (isBytes(value)) return hex(value);
  if (Array.isArray(value)) return value.map(normalize);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalize(v)]));
  return value;
}

/** One field's value as a node: addresses, heights and inference ids become links. */
function show(name, value) {
  value = normalize(value);
  if (value === null || value === undefined || value === '') return h('span', { class: 'muted' }, '—');
  if (typeof value === 'string' && ADDRESS.test(value)) return accountLink(value);
  if (typeof value === 'string' && name === 'inference_id') return inferenceLink(value);
  if ((name === 'height' || name.endsWith('_height')) && /^\d+$/.test(String(value))) return blockLink(value);
  if (Array.isArray(value) && value.length && value.every((c) => c && typeof c === 'object' && 'denom' in c && 'amount' in c)) {
    return coins(value);
  }
  if (Array.isArray(value) && value.every((v) => typeof v === 'string' && ADDRESS.test(v))) {
    return h('span', {}, value.map((v, i) => [i ? ', ' : '', accountLink(v)]));
  }
  if (typeof value === 'object') return h('pre', {}, JSON.stringify(value, null, 2));
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  return h('span', { class: typeof value === 'string' && value.length > 40 ? 'mono' : '' }, String(value));
}

/** An object's fields as a definition list. */
function fields(object, id) {
  const list = h('dl', { class: 'fields', id });
  for (const [name, value] of Object.entries(object || {})) list.append(h('dt', {}, name), h('dd', { 'data-field': name }, show(name, value)));
  return list;
}

/** A table: `columns` are [header, (row) => cell, numeric?]. */
function table(columns, rows, id, empty) {
  if (!rows || rows.length === 0) return h('p', { class: 'muted', id }, empty || 'None yet.');
  return h('table', { id },
    h('thead', {}, h('tr', {}, columns.map(([title, , num]) => h('th', { class: num ? 'num' : null }, title)))),
    h('tbody', {}, rows.map((row) => h('tr', {}, columns.map(([, cell, num]) => h('td', { class: num ? 'num' : null }, cell(row)))))));
}

function card(label, value, id) { return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value', id }, value)); }
function section(title, ...content) { return h('section', {}, h('h2', {}, title), content); }

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) element.setAttribute(name, String(value));
  for (const child of children) element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return element;
}

/** A bar chart of `bars` ([label, value (Number), caption]) as inline SVG. */
function barChart(id, title, bars, color) {
  const width = 480, height = 200, left = 8, bottom = 22, top = 8;
  const max = Math.max(1, ...bars.map(([, v]) => v));
  const step = (width - left * 2) / Math.max(1, bars.length);
  const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': title });
  bars.forEach(([label, value, caption], i) => {
    const barHeight = ((height - bottom - top) * value) / max;
    const x = left + i * step + step * 0.15;
    const rect = svg('rect', { x, y: height - bottom - barHeight, width: step * 0.7, height: Math.max(0, barHeight), fill: color || '#2f5fd0' });
    rect.append(svg('title', {}, `${label}: ${caption}`));
    const middle = x + step * 0.35;
    chart.append(rect,
      svg('text', { x: middle, y: height - 6, 'text-anchor': 'middle', 'font-size': 11, fill: '#667085' }, label),
      svg('text', { x: middle, y: Math.max(top + 10, height - bottom - barHeight - 3), 'text-anchor': 'middle', 'font-size': 10, fill: '#1d232b' }, caption));
  });
  if (bars.length === 0) chart.append(svg('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', fill: '#667085' }, 'no data yet'));
  return h('div', { class: 'chart', id }, h('strong', {}, title), chart);
}

// ---------------------------------------------------------------- reading the chain

function query(params) {
  const entries = Object.entries(params || {}).filter(([, v]) => v !== undefined && v !== null);
  return entries.length ? '?' + entries.map(([k, v]) => encodeURIComponent(k) + '=' + encodeURIComponent(v)).join('&') : '';
}

async function getJSON(path) {
  const response = await fetch(path, { cache: 'no-store' });
  let body;
  try { body = await response.json(); } catch { throw new Error(`${path}: HTTP ${response.status}`); }
  if (!response.ok || body.error) {
    const error = new Error(body.message || (body.error && (body.error.data || body.error.message)) || `HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

const rest = (path, params) => getJSON(path + query(params));
const gonka = (module, name, params) => getJSON(`/gonka/${module}/v1/${name}` + query(params));
const rpc = async (method, params) => (await getJSON(`/rpc/${method}` + query(params))).result;
const orNull = (promise) => promise.catch(() => null);
const txs = (eventQuery, limit) => rest('/cosmos/tx/v1beta1/txs', { query: eventQuery, order_by: 'ORDER_BY_DESC', limit: limit || 20 });

let names = { at: 0, byKey: new Map(), byAddress: new Map() };
/** Validators' monikers by consensus key (base64) and consensus address (hex), cached 30 s. */
async function validatorNames() {
  if (Date.now() - names.at < 30000) return names;
  const [participants, validators] = await Promise.all([gonka('stake', 'participants', { 'pagination.limit': 200 }), rpc('validators', { per_page: 100 })]);
  const byKey = new Map(participants.participants.map((p) => [p.consensus_pubkey, p]));
  const byAddress = new Map();
  for (const v of validators.validators) { const p = byKey.get(v.pub_key.value); if (p) byAddress.set(v.address, p); }
  names = { at: Date.now(), byKey, byAddress };
  return names;
}

function messageTypes(tx) {
  return ((tx && tx.body && tx.body.messages) || []).map((m) => m['@type'].split('.').pop()).join(', ') || '—';
}

function txRows(result) {
  return (result.tx_responses || []).map((r, i) => ({ response: r, tx: result.txs[i] }));
}

function txTable(result, id, empty) {
  return table([
    ['Hash', (r) => txLink(r.response.txhash)],
    ['Height', (r) => blockLink(r.response.height), true],
    ['Messages', (r) => messageTypes(r.tx)],
    ['Result', (r) => (r.response.code === 0 ? h('span', { class: 'ok' }, 'ok') : h('span', { class: 'bad' }, `${r.response.codespace} ${r.response.code}`))],
    ['Gas used', (r) => r.response.gas_used, true],
  ], txRows(result), id, empty || 'No transactions.');
}

async function blocksTable(top, count, id) {
  const [chain, known] = await Promise.all([rpc('blockchain', { minHeight: Math.max(1, top - count + 1), maxHeight: top }), validatorNames()]);
  return table([
    ['Height', (b) => blockLink(b.header.height), true],
    ['Time', (b) => new Date(b.header.time).toLocaleTimeString()],
    ['Txs', (b) => b.num_txs, true],
    ['Proposer', (b) => { const p = known.byAddress.get(b.header.proposer_address); return p ? p.moniker : short(b.header.proposer_address); }],
    ['Hash', (b) => h('span', { class: 'mono', title: b.block_id.hash }, short(b.block_id.hash))],
  ], chain.block_metas, id);
}

async function currentEpoch() { return (await gonka('epochs', 'current')).epoch; }

/** The settled epochs before `current`, newest first, with their rewards (at most `count`). */
async function settledEpochs(current, count) {
  const numbers = [];
  for (let n = current - 1; n >= 0 && numbers.length < count; n--) numbers.push(n);
  return Promise.all(numbers.map(async (n) => ({ number: n, rewards: await orNull(gonka('rewards', 'epoch', { epoch: n, 'pagination.limit': 200 })) })));
}

function epochCharts(epochs) {
  const settled = epochs.filter((e) => e.rewards && e.rewards.rewards).reverse();
  return [
    barChart('chart-work', 'Work per epoch (units)', settled.map((e) => [String(e.number), Number(e.rewards.rewards.total_work), String(e.rewards.rewards.total_work)]), '#1e8e3e'),
    barChart('chart-rewards', 'Rewards per epoch (GNK)', settled.map((e) => [String(e.number), Number(BigInt(e.rewards.rewards.distributed || 0) / 1000000n) / 1000, gnk(e.rewards.rewards.distributed)]), '#2f5fd0'),
  ];
}

// ---------------------------------------------------------------- pages

let onBlock = null; // the shown page's live refresh, called with each new height

async function home() {
  const status = await rpc('status');
  const height = Number(status.sync_info.latest_block_height);
  const [epoch, supply, known] = await Promise.all([currentEpoch(), orNull(rest('/cosmos/bank/v1beta1/supply/by_denom', { denom: 'ngnk' })), validatorNames()]);
  const participants = [...known.byKey.values()];
  const totalPower = participants.reduce((sum, p) => sum + BigInt(p.power || 0), 0n);
  const blocks = h('div', {}, await blocksTable(height, 10, 'latest-blocks'));
  // Signed txs of the last 500 blocks (the proposers' beacon txs have no message.action).
  const recent = (top) => txs(`tx.height>${Math.max(0, top - 500)} AND message.action EXISTS`, 10);
  const latest = h('div', {}, txTable(await recent(height), 'latest-txs'));
  onBlock = async (newHeight) => {
    blocks.replaceChildren(await blocksTable(newHeight, 10, 'latest-blocks'));
    latest.replaceChildren(txTable(await recent(newHeight), 'latest-txs'));
  };
  const epochs = await settledEpochs(Number(epoch.number), 10);
  return [
    h('h1', {}, 'Network'),
    h('div', { class: 'cards' },
      card('Chain', status.node_info.network),
      card('Latest block', String(height), 'home-height'),
      card('Epoch', `${epoch.number} (from block ${epoch.start_height})`),
      card('Validators', String(participants.filter((p) => !p.jailed && BigInt(p.power || 0) > 0n).length)),
      card('Total supply', supply ? gnk(supply.amount.amount) : '—')),
    h('div', { class: 'row' },
      epochCharts(epochs),
      barChart('chart-power', 'Voting power share (%)', participants.map((p) => [p.moniker || short(p.operator), Number(BigInt(p.power || 0) * 10000n / (totalPower || 1n)) / 100, percent(p.power, totalPower)]), '#8e44ad')),
    h('div', { class: 'row' }, section('Latest blocks', blocks), section('Latest transactions', latest)),
  ];
}

async function blocks(top) {
  const latest = Number((await rpc('status')).sync_info.latest_block_height);
  const from = Math.min(latest, Number(top) || latest);
  return [
    h('h1', {}, 'Blocks'),
    await blocksTable(from, 20, 'blocks'),
    h('div', { class: 'pager' },
      from < latest ? link('#/blocks/' + Math.min(latest, from + 20), '← newer') : null,
      from > 20 ? link('#/blocks/' + (from - 20), 'older →') : null),
  ];
}

async function block(height) {
  const [found, inBlock, known] = await Promise.all([rpc('block', { height }), txs(`tx.height=${Number(height)}`, 100), validatorNames()]);
  const header = found.block.header;
  const proposer = known.byAddress.get(header.proposer_address);
  return [
    h('h1', {}, `Block ${header.height}`),
    fields({
      hash: found.block_id.hash,
      time: header.time,
      proposer: proposer ? `${proposer.moniker} (${proposer.operator})` : header.proposer_address,
      transactions: String(found.block.data.txs ? found.block.data.txs.length : 0),
      app_hash: header.app_hash,
      last_block_height: String(Number(header.height) - 1),
      signatures: String(found.block.last_commit.signatures.filter((s) => s.signature).length),
    }, 'block-fields'),
    h('div', { class: 'pager' }, Number(header.height) > 1 ? link('#/block/' + (Number(header.height) - 1), '← previous') : null, link('#/block/' + (Number(header.height) + 1), 'next →')),
    section('Transactions', txTable(inBlock, 'block-txs', 'No transactions in this block.')),
  ];
}

async function tx(hash) {
  const { tx: decoded, tx_response: response } = await rest('/cosmos/tx/v1beta1/txs/' + hash.toUpperCase());
  const fee = decoded.auth_info.fee;
  return [
    h('h1', {}, 'Transaction'),
    fields({
      hash: response.txhash,
      result: response.code === 0 ? 'ok' : `failed: ${response.codespace} code ${response.code}`,
      log: response.code === 0 ? '' : response.raw_log,
      height: response.height,
      time: response.timestamp,
      gas: `${response.gas_used} used of ${response.gas_wanted}`,
      fee: coins(fee.amount),
      memo: decoded.body.memo,
    }, 'tx-fields'),
    section('Messages', decoded.body.messages.map((m, i) => h('div', { class: 'message', id: 'message-' + i }, h('h3', {}, m['@type']), fields(Object.fromEntries(Object.entries(m).filter(([k]) => k !== '@type')))))),
    section('Events', table([
      ['Type', (e) => e.type],
      ['Attributes', (e) => h('span', {}, e.attributes.map((a, i) => [i ? h('br') : null, `${a.key} = `, show(a.key, a.value)]))],
    ], response.events, 'tx-events', 'No events.')),
  ];
}

async function account(address) {
  if (!ADDRESS.test(address)) throw new Error(`${address} is not a gonka address (gonka1…)`);
  const [acct, balances, participant, rewards, disputes, sent, received] = await Promise.all([
    orNull(rest('/cosmos/auth/v1beta1/accounts/' + address)),
    rest('/cosmos/bank/v1beta1/balances/' + address),
    orNull(gonka('stake', 'participant', { operator: address })),
    orNull(gonka('rewards', 'participant', { operator: address, 'pagination.limit': 50 })),
    orNull(gonka('disputes', 'participant', { address, 'pagination.limit': 50 })),
    txs(`message.sender='${address}'`, 20),
    txs(`transfer.recipient='${address}'`, 20),
  ]);
  const p = participant && participant.participant;
  return [
    h('h1', {}, 'Account'),
    fields({
      address,
      balance: coins(balances.balances),
      account_number: acct ? acct.account.account_number : 'not on chain yet',
      sequence: acct ? acct.account.sequence : '—',
    }, 'account-fields'),
    p ? section('Participant (validator)', fields(p, 'participant-fields')) : null,
    rewards && rewards.rewards.length ? section('Rewards', table([
      ['Epoch', (r) => link('#/epoch/' + r.epoch, String(r.epoch)), true], ['Work', (r) => r.work, true], ['Reward', (r) => gnk(r.amount), true],
    ], rewards.rewards, 'account-rewards')) : null,
    disputes && disputes.disputes.length ? section('Disputes', disputeTable(disputes.disputes, 'account-disputes')) : null,
    section('Sent', txTable(sent, 'account-sent', 'No transactions sent.')),
    section('Received', txTable(received, 'account-received', 'No transfers received.')),
  ];
}

async function validators() {
  const [participants, set, epoch, params] = await Promise.all([
    gonka('stake', 'participants', { 'pagination.limit': 200 }), rpc('validators', { per_page: 100 }), currentEpoch(), gonka('stake', 'params')]);
  const previous = Math.max(0, Number(epoch.number) - 1);
  const work = await gonka('stake', 'work', { epoch: previous, 'pagination.limit': 200 });
  const units = new Map(work.credits.map((c) => [c.operator, BigInt(c.units)]));
  const totalWork = [...units.values()].reduce((a, b) => a + b, 0n);
  const power = new Map(set.validators.map((v) => [v.pub_key.value, BigInt(v.voting_power)]));
  const totalPower = [...power.values()].reduce((a, b) => a + b, 0n);
  const list = participants.participants;
  const totalBond = list.reduce((sum, p) => sum + BigInt(p.bonded), 0n);
  // Voting power at the start of each recent epoch, from CometBFT's validator set at that height.
  const recent = [];
  for (let n = Number(epoch.number); n >= 0 && recent.length < 6; n--) recent.push(n);
  const history = await Promise.all(recent.map(async (n) => {
    const e = n === Number(epoch.number) ? epoch : (await gonka('epochs', 'epoch', { number: n })).epoch;
    const at = await orNull(rpc('validators', { height: Math.max(1, Number(e.start_height)), per_page: 100 }));
    return { number: n, power: new Map(((at && at.validators) || []).map((v) => [v.pub_key.value, v.voting_power])) };
  }));
  return [
    h('h1', {}, 'Validators'),
    h('p', { class: 'muted' }, `Power mixes bonded stake (${percent(params.params.stake_weight_ppm, 1000000)}) and the previous epoch's verified work; a participant's share is capped at ${percent(params.params.max_power_share_ppm, 1000000)}. Work shown is epoch ${previous}'s.`),
    table([
      ['Moniker', (p) => p.moniker],
      ['Operator', (p) => accountLink(p.operator)],
      ['Bonded', (p) => gnk(p.bonded), true],
      ['Stake share', (p) => percent(p.bonded, totalBond), true],
      ['Work', (p) => String(units.get(p.operator) || 0n), true],
      ['Work share', (p) => percent(units.get(p.operator) || 0n, totalWork), true],
      ['Power', (p) => String(power.get(p.consensus_pubkey) || 0n), true],
      ['Power share', (p) => percent(power.get(p.consensus_pubkey) || 0n, totalPower), true],
      ['Jailed', (p) => (p.tombstoned ? h('span', { class: 'bad' }, 'for good (double signed)') : p.jailed ? h('span', { class: 'bad' }, `until epoch ${p.jailed_until_epoch}`) : 'no')],
    ], list, 'validators'),
    section('Voting power per epoch', table(
      [['Moniker', (p) => p.moniker]].concat(history.map((e) => [`epoch ${e.number}`, (p) => e.power.get(p.consensus_pubkey) || '0', true])),
      list, 'power-history')),
  ];
}

async function epochs() {
  const epoch = await currentEpoch();
  const settled = await settledEpochs(Number(epoch.number), 12);
  return [
    h('h1', {}, 'Epochs'),
    fields({ current_epoch: epoch.number, started_at_height: epoch.start_height }, 'epoch-current'),
    h('div', { class: 'row' }, epochCharts(settled)),
    section('Settled epochs', table([
      ['Epoch', (e) => link('#/epoch/' + e.number, String(e.number)), true],
      ['Emission', (e) => (e.rewards ? gnk(e.rewards.rewards.emission) : '—'), true],
      ['Fees', (e) => (e.rewards ? gnk(e.rewards.rewards.fees) : '—'), true],
      ['Distributed', (e) => (e.rewards ? gnk(e.rewards.rewards.distributed) : '—'), true],
      ['Total work', (e) => (e.rewards ? e.rewards.rewards.total_work : '—'), true],
    ], settled, 'epochs')),
  ];
}

async function epochPage(number) {
  const [info, rewards, work, certificate] = await Promise.all([
    gonka('epochs', 'epoch', { number }),
    orNull(gonka('rewards', 'epoch', { epoch: number, 'pagination.limit': 200 })),
    gonka('stake', 'work', { epoch: number, 'pagination.limit': 200 }),
    orNull(gonka('bls', 'certificate', { epoch: number })),
  ]);
  const paid = rewards ? rewards.participants : [];
  return [
    h('h1', {}, `Epoch ${number}`),
    fields(info.epoch, 'epoch-fields'),
    rewards ? section('Rewards', fields(rewards.rewards, 'epoch-rewards')) : h('p', { class: 'muted' }, 'Not settled yet: an epoch settles in its last block.'),
    section('Rewards per participant', table([
      ['Operator', (r) => accountLink(r.operator)], ['Work', (r) => r.work, true], ['Reward', (r) => gnk(r.amount), true],
    ], paid, 'epoch-participants')),
    paid.length ? barChart('chart-epoch-rewards', 'Reward per participant (GNK)', paid.map((r) => [short(r.operator).slice(0, 10), Number(BigInt(r.amount) / 1000000n) / 1000, gnk(r.amount)])) : null,
    section('Work credited', table([['Operator', (c) => accountLink(c.operator)], ['Units', (c) => c.units, true]], work.credits, 'epoch-work')),
    section('Certificate (BLS)', certificate ? fields(certificate.certificate, 'epoch-certificate') : h('p', { class: 'muted' }, 'No certificate: it is made in the block after the epoch\'s last.')),
  ];
}

async function work() {
  const epoch = await currentEpoch();
  const [models, nodes, agents, records, credits] = await Promise.all([
    gonka('inference', 'models', { 'pagination.limit': 100 }),
    gonka('inference', 'nodes', { 'pagination.limit': 200 }),
    gonka('inference', 'transfer_agents', { 'pagination.limit': 100 }),
    gonka('inference', 'records', { 'pagination.limit': 100 }),
    gonka('stake', 'work', { epoch: epoch.number, 'pagination.limit': 200 }),
  ]);
  // Work per host and model, from the records stored on chain (sampled or demanded leaves).
  const byHostModel = new Map();
  for (const r of records.records) {
    const key = `${r.executor_host}\u0000${r.record.model}`;
    const row = byHostModel.get(key) || { host: r.executor_host, model: r.record.model, records: 0, tokens: 0n, cost: 0n };
    row.records += 1;
    row.tokens += BigInt(r.record.prompt_tokens) + BigInt(r.record.completion_tokens);
    row.cost += BigInt(r.cost || 0);
    byHostModel.set(key, row);
  }
  return [
    h('h1', {}, 'Work'),
    section('Models', table([['Model', (m) => m.id], ['Price per token', (m) => gnk(m.price_per_token), true], ['Min VRAM (MiB)', (m) => m.min_vram_mib, true], ['Trained by job', (m) => (Number(m.trained_by_job) ? link('#/job/' + m.trained_by_job, String(m.trained_by_job)) : '—')]], models.models, 'models')),
    section('ML nodes by host', table([
      ['Host', (n) => accountLink(n.host)], ['Node', (n) => n.id], ['Models', (n) => n.models.join(', ')],
      ['VRAM (MiB)', (n) => n.vram_mib, true], ['Bandwidth (Mbit/s)', (n) => n.bandwidth_mbps, true], ['Concurrency', (n) => n.max_concurrency, true], ['Endpoint', (n) => n.endpoint],
    ], nodes.nodes.slice().sort((a, b) => (a.host < b.host ? -1 : a.host > b.host ? 1 : 0)), 'nodes')),
    section('Transfer agents', table([['Address', (t) => accountLink(t.address)], ['URL', (t) => t.url]], agents.transfer_agents, 'transfer-agents')),
    section(`Work credited in epoch ${epoch.number} (so far)`, table([['Host', (c) => accountLink(c.operator)], ['Units', (c) => c.units, true]], credits.credits, 'work-credits')),
    section('Recorded work per host and model', table([
      ['Host', (r) => accountLink(r.host)], ['Model', (r) => r.model], ['Records', (r) => r.records, true], ['Tokens', (r) => String(r.tokens), true], ['Cost', (r) => gnk(r.cost), true],
    ], [...byHostModel.values()], 'work-by-host')),
    section('Inference records', table([
      ['Inference', (r) => inferenceLink(r.record.inference_id)], ['Model', (r) => r.record.model], ['Executor', (r) => accountLink(r.executor_host)],
      ['Tokens', (r) => `${r.record.prompt_tokens} + ${r.record.completion_tokens}`, true], ['Cost', (r) => gnk(r.cost), true], ['Epoch', (r) => r.epoch, true], ['Height', (r) => blockLink(r.height), true],
    ], records.records, 'records', 'No records stored: a batch stores the leaves the chain samples or someone demands.')),
  ];
}

async function inference(id) {
  const [stored, validation, disputeList] = await Promise.all([
    gonka('inference', 'record', { inference_id: id }),
    orNull(gonka('disputes', 'validation', { inference_id: id })),
    gonka('disputes', 'list', { 'pagination.limit': 200 }),
  ]);
  const { record, ...settled } = stored.record;
  return [
    h('h1', {}, 'Inference'),
    fields(Object.assign({ inference_id: record.inference_id }, settled), 'inference-settlement'),
    section('Signed record', fields(record, 'inference-record')),
    section('Validation', validation && validation.validation ? fields(validation.validation, 'inference-validation') : h('p', { class: 'muted' }, 'Not sampled for validation.')),
    section('Disputes', disputeTable(disputeList.disputes.filter((d) => d.inference_id === record.inference_id), 'inference-disputes')),
  ];
}

function disputeTable(list, id) {
  return table([
    ['Id', (d) => link('#/dispute/' + d.id, String(d.id)), true], ['Inference', (d) => inferenceLink(d.inference_id)], ['Kind', (d) => d.kind],
    ['Status', (d) => d.status], ['Accuser', (d) => accountLink(d.accuser)], ['Executor', (d) => accountLink(d.executor_host)],
    ['Slashed', (d) => (d.slashed ? accountLink(d.slashed) : '—')], ['Slash', (d) => (d.slashed_amount ? gnk(d.slashed_amount) : '—'), true],
    ['Opened', (d) => blockLink(d.opened_height), true], ['Resolved', (d) => (Number(d.resolved_height) ? blockLink(d.resolved_height) : '—'), true],
  ], list, id, 'No disputes.');
}

async function disputes() {
  const [list, stats] = await Promise.all([gonka('disputes', 'list', { 'pagination.limit': 200 }), gonka('disputes', 'stats')]);
  return [
    h('h1', {}, 'Disputes'),
    fields({ validation_rate: percent(stats.current_rate_ppm, 1000000), disputes: String(list.disputes.length) }, 'dispute-stats'),
    section('All disputes', disputeTable(list.disputes.slice().reverse(), 'disputes')),
  ];
}

async function dispute(id) {
  const { dispute: d } = await gonka('disputes', 'dispute', { id });
  const { votes, payouts, ...rest } = d;
  return [
    h('h1', {}, `Dispute ${d.id}`),
    fields(rest, 'dispute-fields'),
    section('Votes', table([['Voter', (v) => accountLink(v.voter)], ['Supports executor', (v) => (v.supports_executor ? 'yes' : 'no')], ['Payload unavailable', (v) => (v.payload_unavailable ? 'yes' : 'no')], ['Height', (v) => blockLink(v.height), true]], votes, 'dispute-votes', 'No votes.')),
    section('Payouts', table([['To', (p) => accountLink(p.to)], ['Amount', (p) => gnk(p.amount), true], ['Reason', (p) => p.reason]], payouts, 'dispute-payouts', 'No payouts yet.')),
  ];
}

async function training() {
  const { jobs } = await gonka('pol', 'jobs', { 'pagination.limit': 100 });
  return [
    h('h1', {}, 'Training jobs'),
    table([
      ['Job', (j) => link('#/job/' + j.id, String(j.id)), true], ['Creator', (j) => accountLink(j.creator)], ['Status', (j) => JOB_STATUS[j.status] || j.status],
      ['Round', (j) => `${j.round} / ${j.outer_rounds}`, true], ['Workers', (j) => `${j.workers.length} / ${j.worker_count}`, true],
      ['Budget left', (j) => gnk(j.budget_left), true], ['Model', (j) => j.model_id || '—'],
    ], jobs.slice().reverse(), 'jobs', 'No training jobs.'),
  ];
}

async function job(id) {
  const [{ job: j }, checkpoints] = await Promise.all([gonka('pol', 'job', { id }), gonka('pol', 'checkpoints', { job_id: id, 'pagination.limit': 500 })]);
  const { workers, ...rest } = j;
  rest.status = JOB_STATUS[rest.status] || rest.status;
  return [
    h('h1', {}, `Training job ${j.id}`),
    fields(rest, 'job-fields'),
    section('Workers', table([['Host', (w) => accountLink(w.host)], ['Active', (w) => (w.active ? 'yes' : 'no')], ['Rounds paid', (w) => w.rounds_paid, true], ['Earned', (w) => gnk(w.earned), true]], workers, 'job-workers')),
    section('Checkpoints', table([
      ['Round', (c) => c.round, true], ['Worker', (c) => accountLink(c.worker)], ['Status', (c) => CHECKPOINT_STATUS[c.status] || c.status],
      ['Loss (nats)', (c) => (Number(c.loss_micro_nats) / 1e6).toFixed(4), true], ['Work units', (c) => c.work_units, true], ['Paid', (c) => gnk(c.paid), true],
      ['Verifier', (c) => accountLink(c.verifier)], ['Height', (c) => blockLink(c.height), true],
    ], checkpoints.checkpoints, 'job-checkpoints', 'No checkpoints yet.')),
  ];
}

async function bls() {
  const epoch = await currentEpoch();
  const numbers = [];
  for (let n = Number(epoch.number) - 1; n >= 0 && numbers.length < 10; n--) numbers.push(n);
  const [group, beacon, keys, certificates] = await Promise.all([
    orNull(gonka('bls', 'group')), orNull(gonka('bls', 'beacon')), gonka('bls', 'keys', { 'pagination.limit': 200 }),
    Promise.all(numbers.map(async (n) => ({ epoch: n, found: await orNull(gonka('bls', 'certificate', { epoch: n })) }))),
  ]);
  const round = group && group.round;
  return [
    h('h1', {}, 'BLS: group key, beacon and epoch certificates'),
    section('Group key in force', round ? fields({ round: round.id, status: round.status, threshold: `${round.threshold} of ${round.total_slots}`, members: String(round.members.length), finalized_height: round.finalized_height, group_pubkey: round.group_pubkey }, 'bls-group') : h('p', { class: 'muted' }, 'No group key yet.')),
    section('Randomness beacon', beacon ? fields(beacon.beacon, 'bls-beacon') : h('p', { class: 'muted' }, 'No beacon yet.')),
    section('Epoch certificates', table([
      ['Epoch', (c) => link('#/epoch/' + c.epoch, String(c.epoch)), true],
      ['Signed at', (c) => (c.found ? blockLink(c.found.certificate.signed_height) : '—'), true],
      ['Signers', (c) => (c.found ? String(c.found.certificate.signers.length) : '—'), true],
      ['Total work', (c) => (c.found && c.found.certificate.summary ? c.found.certificate.summary.total_work : '—'), true],
      ['Total rewards', (c) => (c.found && c.found.certificate.summary ? gnk(c.found.certificate.summary.total_rewards) : '—'), true],
    ], certificates, 'bls-certificates')),
    section('Registered keys', table([['Address', (k) => accountLink(k.address)], ['Registered at', (k) => blockLink(k.registered_height), true], ['Public key', (k) => h('span', { class: 'mono' }, short(normalize(k.pubkey)))]], keys.keys, 'bls-keys')),
  ];
}

async function search(text) {
  const q = text.trim();
  if (/^\d+$/.test(q)) { location.hash = '#/block/' + Number(q); return null; }
  if (ADDRESS.test(q)) { location.hash = '#/account/' + q; return null; }
  if (HASH.test(q)) {
    if (await orNull(rest('/cosmos/tx/v1beta1/txs/' + q.toUpperCase()))) { location.hash = '#/tx/' + q.toUpperCase(); return null; }
  }
  if (q && await orNull(gonka('inference', 'record', { inference_id: q.toLowerCase() }))) { location.hash = '#/inference/' + q.toLowerCase(); return null; }
  return [h('h1', {}, 'Search'), h('p', { id: 'not-found' }, `Nothing found for “${q}”: no block, transaction, account or inference has it.`)];
}

// ---------------------------------------------------------------- routing and live updates

const ROUTES = [
  [/^\/?$/, home], [/^\/blocks(?:\/(\d+))?$/, blocks], [/^\/block\/(\d+)$/, block], [/^\/tx\/([0-9A-Fa-f]{64})$/, tx],
  [/^\/account\/([^/]+)$/, account], [/^\/validators$/, validators], [/^\/epochs$/, epochs], [/^\/epoch\/(\d+)$/, epochPage],
  [/^\/work$/, work], [/^\/inference\/([^/]+)$/, inference], [/^\/disputes$/, disputes], [/^\/dispute\/(\d+)$/, dispute],
  [/^\/training$/, training], [/^\/job\/(\d+)$/, job], [/^\/bls$/, bls], [/^\/search\/(.*)$/, search],
];

let shown = 0; // the render whose result may still be shown
async function render() {
  const path = location.hash.replace(/^#/, '') || '/';
  const main = document.getElementById('main');
  const token = ++shown;
  onBlock = null;
  const match = ROUTES.map(([pattern, page]) => [path.match(pattern), page]).find(([m]) => m);
  try {
    if (!match) throw new Error(`No page ${path}.`);
    const nodes = await match[1](...match[0].slice(1).map((part) => (part === undefined ? undefined : decodeURIComponent(part))));
    if (nodes && token === shown) { main.replaceChildren(...nodes.flat(Infinity).filter(Boolean)); document.body.dataset.page = path; }
  } catch (error) {
    if (token === shown) main.replaceChildren(h('h1', {}, 'Not found'), h('p', { class: 'error', id: 'error' }, error.message));
  }
}

let latestHeight = 0;
async function poll() {
  try {
    const status = await rpc('status');
    document.getElementById('chain-id').textContent = status.node_info.network;
    const height = Number(status.sync_info.latest_block_height);
    if (height !== latestHeight) {
      latestHeight = height;
      document.getElementById('latest-height').textContent = String(height);
      const card = document.getElementById('home-height');
      if (card) card.textContent = String(height);
      if (onBlock) await onBlock(height).catch(() => {});
    }
  } catch {
    document.getElementById('latest-height').textContent = 'node unreachable';
  }
  setTimeout(poll, 1000);
}

document.getElementById('search-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const q = document.getElementById('search').value.trim();
  if (q) location.hash = '#/search/' + encodeURIComponent(q);
});
window.addEventListener('hashchange', render);
render();
poll();
