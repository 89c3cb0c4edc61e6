// Drives the explorer in headless Chromium as a person would and prints what each page showed,
// as one JSON object, for tests/e2e/explorer.rs to compare with what it read over RPC.
//
// node browse.mjs EXPLORER_URL PLAN_JSON SCREENSHOT_PNG
// PLAN_JSON: {"tx": hash, "epoch": n or null, "dispute": id or null, "unknown": hash, "chromium": path}
import puppeteer from 'puppeteer-core';

const [base, planText, screenshot] = process.argv.slice(2);
const plan = JSON.parse(planText);
const browser = await puppeteer.launch({
  executablePath: plan.chromium,
  headless: true,
  // Chromium's sandbox needs user namespaces, which containers (and CI runners as root) lack.
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const report = { errors: [], pages: {} };
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1300, height: 1000 });
  page.on('pageerror', (e) => report.errors.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') report.errors.push(`console: ${m.text()} (${page.url()})`); });
  const text = (selector) => page.$eval(selector, (e) => e.textContent.trim());
  const field = (list, name) => text(`#${list} dd[data-field="${name}"]`);
  const open = async (hash, selector) => {
    await page.goto(`${base}/#${hash}`, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector(`${selector}, #error`, { timeout: 20000 });
    if (await page.$('#error')) throw new Error(`${hash}: ${await text('#error')}`);
  };
  const search = async (query, selector) => {
    await page.$eval('#search', (e) => { e.value = ''; });
    await page.type('#search', query);
    await page.click('#search-form button');
    await page.waitForSelector(`${selector}, #error`, { timeout: 20000 });
  };

  // Home: the latest height moves on without a reload.
  await open('/', '#latest-blocks');
  const first = Number(await text('#home-height'));
  await page.waitForFunction((h) => Number(document.getElementById('home-height').textContent) > h, { timeout: 20000 }, first);
  report.pages.home = { first, later: Number(await text('#home-height')), blocks: (await page.$$('#latest-blocks tbody tr')).length };

  // The test's tx, found by hash through the search box, with its decoded message.
  await search(plan.tx, '#tx-fields');
  report.pages.tx = {
    url: page.url(),
    hash: await field('tx-fields', 'hash'),
    result: await field('tx-fields', 'result'),
    memo: await field('tx-fields', 'memo'),
    type: await text('#message-0 h3'),
    to: await page.$eval('#message-0 dd[data-field="to_address"] a', (a) => a.title),
    amount: await page.$eval('#message-0 dd[data-field="amount"]', (e) => e.textContent),
    // The memo is markup a stranger wrote: it must show as text and never run.
    injected: await page.evaluate(() => window.__pwned === 1 || document.querySelector('main img') !== null),
  };

  // The recipient's account lists the transfer it received.
  await open(`/account/${report.pages.tx.to}`, '#account-fields');
  report.pages.account = {
    received: await page.$$eval('#account-received tbody tr a[title]', (links) => links.map((a) => a.title)),
  };

  await open('/validators', '#validators');
  report.pages.validators = await page.$$eval('#validators tbody tr', (rows) => rows.map((r) => {
    const cells = [...r.querySelectorAll('td')];
    return { moniker: cells[0].textContent, operator: cells[1].querySelector('a').title, power: cells[6].textContent };
  }));

  if (plan.epoch !== null) {
    await open(`/epoch/${plan.epoch}`, '#epoch-fields');
    report.pages.epoch = {
      emission: await field('epoch-rewards', 'emission'),
      distributed: await field('epoch-rewards', 'distributed'),
      total_work: await field('epoch-rewards', 'total_work'),
      participants: await page.$$eval('#epoch-participants tbody tr', (rows) => rows.map((r) => ({
        operator: r.querySelector('a').title, amount: r.querySelectorAll('td')[2].textContent,
      }))),
    };
  }

  if (plan.dispute !== null) {
    await open(`/dispute/${plan.dispute}`, '#dispute-fields');
    report.pages.dispute = {
      status: await field('dispute-fields', 'status'),
      slashed: await page.$eval('#dispute-fields dd[data-field="slashed"] a', (a) => a.title),
      slashed_amount: await field('dispute-fields', 'slashed_amount'),
      payouts: (await page.$$('#dispute-payouts tbody tr')).length,
    };
  }

  // Every page kind renders without an error.
  report.pages.rendered = {};
  for (const [hash, selector] of [['/blocks', '#blocks'], ['/epochs', '#epochs'], ['/work', '#nodes'], ['/disputes', '#disputes'], ['/training', '#jobs'], ['/bls', '#bls-keys'], [`/block/${report.pages.home.first}`, '#block-fields']]) {
    await open(hash, selector);
    report.pages.rendered[hash] = true;
  }

  await search(plan.unknown, '#not-found');
  report.pages.unknown = await text('#not-found');

  await open('/', '#latest-blocks');
  await page.screenshot({ path: screenshot, fullPage: true });
  report.screenshot = screenshot;
} catch (e) {
  report.failure = String(e && e.stack || e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
