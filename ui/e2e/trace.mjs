// End-to-end: a request's trace id in the dashboard's request detail, in
// Debian's Chromium against a real `switchyard serve`. Started by
// crates/cli/tests/dashboard.rs, which puts a traced and an untraced
// request in the history before the gateway starts; this script drives
// the page.
//
// Environment: SWITCHYARD_LINK (a one-time sign-in link from
// `switchyard open --print`), SWITCHYARD_BASE, SHOTS_DIR (screenshots go
// there), TRACE_ID, TRACED_ID and UNTRACED_ID (the two requests' ids).

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const link = env('SWITCHYARD_LINK');
const base = env('SWITCHYARD_BASE');
const shots = env('SHOTS_DIR');
const trace = env('TRACE_ID');
const traced = env('TRACED_ID');
const untraced = env('UNTRACED_ID');
const WAIT = 10_000;

mkdirSync(shots, { recursive: true });

function check(ok, message) {
  if (!ok) throw new Error(`check failed: ${message}`);
  console.log(`ok - ${message}`);
}

/** Opens a request's detail and waits until it shows that request. */
async function detail(page, id) {
  // A new document each time: a hash change alone would keep the last detail a moment.
  await page.goto('about:blank');
  await page.goto(`${base}/ui/#/requests/${encodeURIComponent(id)}`);
  const aside = page.locator('aside[aria-label="Request detail"]');
  await aside.locator('.facts dd', { hasText: id }).first().waitFor({ timeout: WAIT });
  return aside;
}

async function shot(page, name) {
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(shots, `${name}.png`) });
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
  ],
});
const errors = [];
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  // What the copy button wrote is read back from the clipboard itself.
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(e.message));

  await page.goto(link);
  await page.waitForURL((u) => u.pathname === '/ui/' && !u.search.includes('ticket'), { timeout: WAIT });

  // A traced request: its trace id on a line of its own, in monospace, with a copy button.
  const aside = await detail(page, traced);
  const line = aside.locator('[data-trace]');
  await line.waitFor({ timeout: WAIT });
  check((await line.locator('dt').innerText()).trim() === 'Trace', 'the traced request’s detail has a Trace line');
  const shown = line.locator('[data-trace-id]');
  check((await shown.innerText()).trim() === trace, `showing its trace id (${await shown.innerText()})`);
  const font = await shown.evaluate((e) => getComputedStyle(e).fontFamily);
  check(font.endsWith('monospace'), `in monospace (${font})`);
  const copy = line.getByRole('button', { name: 'Copy trace id' });
  await copy.click();
  await line.getByRole('button', { name: 'Copy trace id' }).filter({ hasText: 'Copied' }).waitFor({ timeout: WAIT });
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  check(copied === trace, `its copy button puts the trace id on the clipboard (${copied})`);
  await shot(page, 'request-trace');

  // A request without one: no Trace line at all.
  const plain = await detail(page, untraced);
  await plain.getByText('Attempt timeline').waitFor({ timeout: WAIT });
  check((await plain.locator('[data-trace]').count()) === 0, 'an untraced request’s detail has no Trace line');
  check(!(await plain.locator('.facts').innerText()).includes('Trace'), 'nor the word');

  // The trace id pasted into the list's search finds its request, and only it.
  await page.goto('about:blank');
  await page.goto(`${base}/ui/#/requests`);
  await page.locator(`[role="row"][id="row-${untraced}"]`).waitFor({ timeout: WAIT });
  await page.getByLabel('Search by id', { exact: true }).fill(trace);
  await page.waitForFunction(
    (id) => {
      const rows = [...document.querySelectorAll('[role="row"][id^="row-"]')];
      return rows.length === 1 && rows[0].id === `row-${id}`;
    },
    traced,
    { timeout: WAIT },
  );
  check(true, 'the trace id in the search box finds the traced request alone');

  check(errors.length === 0, `no script errors in the page${errors.length ? `: ${errors.join('; ')}` : ''}`);
} finally {
  await browser.close();
}
