// Drives Debian's Chromium (puppeteer-core) against a real gateway: run by web/inboxui_test.go.
// Env: BASE (http://host:port of the gateway), SVC (a service token), USER (the demo user),
// OTHER (a page on another, allowed origin embedding the bundle), SHOT (screenshot path or ""),
// MEASURE=1 (also measure; results printed as "measure ..." lines). Exits 1 on the first failure.
import puppeteer from 'puppeteer-core';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const { BASE, SVC, USER, OTHER, SHOT, MEASURE } = process.env;
let seq = 0;

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

async function send(title) {
  const r = await fetch(BASE + '/graphql', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + SVC },
    body: JSON.stringify({
      query: 'mutation S($i: SendNotificationInput!) { sendNotification(input: $i) { accepted } }',
      variables: { i: { idempotencyKey: `k${Date.now()}-${seq++}`, recipients: [USER], type: 'issue_comment.created',
        title, body: `Body of ${title}`, actor: { id: 'octocat', name: 'The Octocat' },
        actions: [{ label: 'View', url: 'https://example.com/' + seq }] } },
    }),
  });
  const b = await r.json();
  if (!b.data || b.data.sendNotification.accepted !== 1) fail('send: ' + JSON.stringify(b));
}

const items = (sel) => `(() => [...document.querySelector('${sel}').shadowRoot.querySelectorAll('li[data-id]')])()`;
const count = (page, sel = '#feed') => page.evaluate(`${items(sel)}.length`);
const titles = (page, sel = '#feed') => page.evaluate(`${items(sel)}.map(l => l.querySelector('[part=title]').textContent)`);

function pct(a, p) {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

const browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage'] });
try {
  for (let i = 1; i <= 25; i++) await send(`Seed ${String(i).padStart(2, '0')}`);
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 800 });
  page.on('pageerror', (e) => fail('page error: ' + e.message));
  page.on('console', (m) => console.log('console: ' + m.text()));

  // Render: 20 items (page-size default), newest first, with actor, relative time, action.
  await page.goto(BASE + '/demo');
  try {
    await page.waitForFunction(`${items('#feed')}.length === 20`, { timeout: 10000 });
  } catch (e) {
    fail('first render: ' + (await page.evaluate(`(() => { const f = document.querySelector('#feed'); return f.shadowRoot ? f.shadowRoot.textContent : 'no shadow root' })()`)));
  }
  let t = await titles(page);
  if (t[0] !== 'Seed 25' || t[19] !== 'Seed 06') fail('order: ' + t.join(','));
  const meta = await page.evaluate(`${items('#feed')}[0].querySelector('[part=meta]').textContent`);
  if (!meta.includes('The Octocat') || !/now|second|minute/.test(meta)) fail('meta: ' + meta);
  const action = await page.evaluate(`${items('#feed')}[0].querySelector('[part=actions] a').textContent`);
  if (action !== 'View') fail('action: ' + action);

  // The bell's badge over the subscription, announced in an aria-live region.
  await page.waitForFunction(`document.querySelector('#bell').unread === 25`, { timeout: 5000 });
  const live = await page.evaluate(`document.querySelector('#bell').shadowRoot.querySelector('[aria-live]').textContent`);
  if (live !== '25 unread notifications') fail('aria-live: ' + live);

  // Paging: Load more through the cursor, no duplicates.
  await page.evaluate(`document.querySelector('#feed').shadowRoot.querySelector('[part~=load-more]').click()`);
  await page.waitForFunction(`${items('#feed')}.length === 25`, { timeout: 5000 });
  t = await titles(page);
  if (new Set(t).size !== 25 || t[24] !== 'Seed 01') fail('paging: ' + t.join(','));
  if (await page.evaluate(`!!document.querySelector('#feed').shadowRoot.querySelector('[part~=load-more]')`)) fail('load more after the last page');

  // Live: a new notification at the top and the bell moves within 2 s.
  const t0 = Date.now();
  await send('Live one');
  await page.waitForFunction(`${items('#feed')}[0].querySelector('[part=title]').textContent === 'Live one' && document.querySelector('#bell').unread === 26`, { timeout: 2000 });
  console.log(`live update in ${Date.now() - t0} ms`);

  // A dropped socket (terminated as a network drop is) reconnects: what was sent during the
  // gap shows at the top once it is back, the bell follows, and the list stays consistent.
  await page.evaluate(`document.querySelector('#feed').client.ws.terminate()`);
  await send('After reconnect');
  await page.waitForFunction(`${items('#feed')}[0].querySelector('[part=title]').textContent === 'After reconnect' && document.querySelector('#bell').unread === 27`, { timeout: 10000 });
  if (new Set(await titles(page)).size !== 27) fail('duplicates after reconnect');
  await page.evaluate(`[...${items('#feed')}[0].querySelectorAll('button')].find(b => b.textContent.trim() === 'Archive').click()`);
  await page.waitForFunction(`document.querySelector('#bell').unread === 26 && ${items('#feed')}.length === 26`, { timeout: 3000 });

  // Mark read: the dot goes and the badge follows; then unread again.
  const btn = (i, label) => `[...${items('#feed')}[${i}].querySelectorAll('button')].find(b => b.textContent.trim() === '${label}').click()`;
  await page.evaluate(btn(0, 'Mark read'));
  await page.waitForFunction(`${items('#feed')}[0].querySelector('[part=unread-dot]').classList.contains('read') && document.querySelector('#bell').unread === 25`, { timeout: 3000 });
  await page.evaluate(btn(0, 'Mark unread'));
  await page.waitForFunction(`document.querySelector('#bell').unread === 26`, { timeout: 3000 });

  // Archive: the item leaves the list and shows under Archived.
  await page.evaluate(btn(1, 'Archive'));
  await page.waitForFunction(`${items('#feed')}.length === 25 && document.querySelector('#bell').unread === 25`, { timeout: 3000 });
  if ((await titles(page)).includes('Seed 25')) fail('archived item still listed');
  await page.evaluate(`document.querySelector('#feed').shadowRoot.querySelector('#tab-archived').click()`);
  await page.waitForFunction(`${items('#feed')}.length === 2`, { timeout: 3000 });
  if ((await titles(page)).join() !== 'After reconnect,Seed 25') fail('archived tab: ' + (await titles(page)).join());
  // Snooze 1 h from the All tab: it leaves the list and the badge.
  await page.evaluate(`document.querySelector('#feed').shadowRoot.querySelector('#tab-all').click()`);
  await page.waitForFunction(`${items('#feed')}.length === 20`, { timeout: 3000 });
  await page.evaluate(btn(2, 'Snooze 1 h'));
  await page.waitForFunction(`${items('#feed')}.length === 19 && document.querySelector('#bell').unread === 24`, { timeout: 3000 });

  // Keyboard: arrows move between items, Enter fires inbox-item-click with the id.
  await page.evaluate(`window.clicked = []; document.addEventListener('inbox-item-click', e => window.clicked.push(e.detail.id))`);
  await page.evaluate(`${items('#feed')}[0].focus()`);
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowUp');
  const focused = await page.evaluate(`document.querySelector('#feed').shadowRoot.activeElement.dataset.id`);
  const second = await page.evaluate(`${items('#feed')}[1].dataset.id`);
  if (focused !== second) fail('arrows: focus on ' + focused);
  await page.keyboard.press('Enter');
  const clicked = await page.evaluate('window.clicked');
  if (clicked.length !== 1 || clicked[0] !== second) fail('Enter: ' + JSON.stringify(clicked));

  // The bell's popover: opens on click with a feed, Escape closes it and focus returns.
  await page.evaluate(`document.querySelector('#bell').shadowRoot.querySelector('button').click()`);
  await page.waitForFunction(`(() => { const f = document.querySelector('#bell').shadowRoot.querySelector('inbox-feed'); return f && f.shadowRoot.querySelectorAll('li[data-id]').length > 0 })()`, { timeout: 5000 });

  // axe-core: no serious or critical violation, popover open.
  await page.evaluate(axeSource);
  const res = await page.evaluate(`axe.run(document, { resultTypes: ['violations'] })`);
  const bad = res.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  if (bad.length) fail('axe: ' + JSON.stringify(bad.map((v) => [v.id, v.impact, v.nodes.length, v.nodes[0] && v.nodes[0].target])));
  console.log(`axe: ${res.violations.length} violations, none serious or critical`);
  if (SHOT) await page.screenshot({ path: SHOT });

  await page.evaluate(`document.querySelector('#bell').shadowRoot.querySelector('inbox-feed').shadowRoot.querySelector('li[data-id]').focus()`);
  await page.keyboard.press('Escape');
  await page.waitForFunction(`!document.querySelector('#bell').open`, { timeout: 2000 });

  // Another origin on the allowed list loads the module, queries and subscribes.
  const other = await browser.newPage();
  other.on('pageerror', (e) => fail('cross-origin page error: ' + e.message));
  await other.goto(OTHER);
  if (new URL(OTHER).origin === new URL(BASE).origin) fail('OTHER is same-origin');
  await other.waitForFunction(`document.querySelector('#feed') && document.querySelector('#feed').shadowRoot && ${items('#feed')}.length === 20 && document.querySelector('#bell').unread === 24`, { timeout: 10000 });

  // A batch of ten comments closes (maxItems) into one item that reads "Ann and 9 others".
  for (let i = 0; i < 10; i++) {
    const r = await fetch(BASE + '/graphql', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + SVC },
      body: JSON.stringify({
        query: 'mutation S($i: SendNotificationInput!) { sendNotification(input: $i) { accepted } }',
        variables: { i: { idempotencyKey: `batch${Date.now()}-${seq++}`, recipients: [USER], type: 'comment', title: 'Ten comments',
          actor: i === 0 ? { id: 'ann', name: 'Ann' } : { id: `c${i}`, name: `Commenter ${i}` },
          batch: { key: 'post-1', window: '1h', maxItems: 10 } } },
      }),
    });
    const b = await r.json();
    if (!b.data || b.data.sendNotification.accepted !== 1) fail('batched send: ' + JSON.stringify(b));
  }
  try {
    // page is a background tab since `other` opened: requestAnimationFrame (the default
    // polling) barely runs there, so poll on an interval.
    await page.waitForFunction(`${items('#feed')}[0].querySelector('[part=title]').textContent === 'Ten comments'`, { timeout: 5000, polling: 50 });
  } catch (e) {
    fail('the closed batch is not first in the feed; titles: ' + (await titles(page)).slice(0, 5).join(', '));
  }
  const batchMeta = await page.evaluate(`${items('#feed')}[0].querySelector('[part=meta]').textContent`);
  if (!batchMeta.includes('Ann and 9 others')) fail('batched meta: ' + batchMeta);

  if (MEASURE === '1') {
    const runs = [];
    for (let i = 0; i < 5; i++) {
      const p = await browser.newPage();
      const s = Date.now();
      await p.goto(BASE + '/demo');
      await p.waitForFunction(`document.querySelector('#feed').shadowRoot && ${items('#feed')}.length === 20`, { timeout: 10000 });
      runs.push(Date.now() - s);
      await p.close();
    }
    console.log(`measure first-render-20 median ${pct(runs, 50)} ms of ${runs.join(',')}`);
    const delays = [];
    for (let i = 0; i < 50; i++) {
      const title = `Measure ${i}`;
      const s = Date.now();
      await send(title);
      await page.waitForFunction(`${items('#feed')}[0].querySelector('[part=title]').textContent === '${title}'`, { timeout: 5000, polling: 'mutation' });
      delays.push(Date.now() - s);
    }
    console.log(`measure live-update p50 ${pct(delays, 50)} ms p99 ${pct(delays, 99)} ms over 50 sends (send call included)`);
    // 1,000 loaded items: synthesized into the feed's state (the same render path as pages).
    const p = await browser.newPage();
    await p.goto(BASE + '/demo');
    await p.waitForFunction(`${items('#feed')}.length === 20`, { timeout: 10000 });
    await p.evaluate(`(() => { const f = document.querySelector('#feed'); const base = f._items[0];
      f._items = Array.from({ length: 1000 }, (_, i) => ({ ...base, id: 'm' + i, title: 'Item ' + i })); })()`);
    await p.waitForFunction(`${items('#feed')}.length === 1000`, { timeout: 10000 });
    const cdp = await p.createCDPSession();
    await cdp.send('HeapProfiler.collectGarbage');
    const m = await p.metrics();
    const nodes = await p.evaluate(`(() => { let n = document.querySelectorAll('*').length; for (const el of document.querySelectorAll('*')) if (el.shadowRoot) n += el.shadowRoot.querySelectorAll('*').length; return n; })()`);
    console.log(`measure 1000-items heap ${(m.JSHeapUsedSize / 1048576).toFixed(1)} MB, ${nodes} elements (Nodes metric ${m.Nodes})`);
  }
  console.log('ok');
} finally {
  await browser.close();
}
