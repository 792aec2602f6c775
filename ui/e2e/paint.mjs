// The dashboard's first paint of each view, from the Performance measures
// the views record (src/lib/paint.svelte.ts): each view is loaded afresh,
// so a figure runs from the start of the page to the frame after the view's
// data is on screen. Used by the browser test (dashboard.mjs) and, on its
// own, by the history benchmark against a filled database:
//
//   SWITCHYARD_BASE=http://127.0.0.1:PORT SWITCHYARD_ADMIN_TOKEN=… node e2e/paint.mjs
//
// which signs in with the admin token and prints `PAINT_BENCH {json}`.

import { chromium } from 'playwright-core';
import { pathToFileURL } from 'node:url';

export const VIEWS = ['overview', 'live', 'requests', 'sessions', 'spend', 'providers', 'tools', 'settings'];
const WAIT = 10_000;

/** Milliseconds to each view's first paint (and a request's, given its id), loading each afresh. */
export async function firstPaints(page, base, requestId) {
  const routes = VIEWS.map((v) => [v, v]);
  if (requestId) routes.push(['requests/item', `requests/${encodeURIComponent(requestId)}`]);
  const paints = {};
  for (const [name, path] of routes) {
    // A new document each time: a hash change alone would not load the page.
    await page.goto('about:blank');
    await page.goto(`${base}/ui/#/${path}`);
    const handle = await page.waitForFunction(
      (measure) => performance.getEntriesByName(measure, 'measure')[0]?.duration,
      `view:${name}`,
      { timeout: WAIT },
    );
    paints[name] = await handle.jsonValue();
  }
  return paints;
}

async function main() {
  const base = process.env.SWITCHYARD_BASE;
  const token = process.env.SWITCHYARD_ADMIN_TOKEN;
  if (!base || !token) throw new Error('SWITCHYARD_BASE and SWITCHYARD_ADMIN_TOKEN must be set');
  const admin = async (path, method = 'GET') => {
    const r = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${token}` } });
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status}`);
    return r.json();
  };
  const { path } = await admin('/admin/session', 'POST');
  const newest = (await admin('/admin/requests?limit=1')).requests[0]?.id;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  try {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await page.goto(`${base}${path}`);
    await page.waitForURL((u) => u.pathname === '/ui/' && !u.search.includes('ticket'), { timeout: WAIT });
    // Once to warm the browser's cache of the bundle, as a returning user has it; then timed.
    await firstPaints(page, base, newest);
    console.log(`PAINT_BENCH ${JSON.stringify(await firstPaints(page, base, newest))}`);
  } finally {
    await browser.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await main();
