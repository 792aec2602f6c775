import { chromium } from 'playwright-core';
const [link, out, id, width = '1280', height = '800', dark = ''] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage({ viewport: { width: +width, height: +height }, colorScheme: dark ? 'dark' : 'light' });
page.on('console', (m) => console.log('console:', m.type(), m.text()));
page.on('response', (r) => { if (r.status() >= 400) console.log('HTTP', r.status(), r.url()); });
page.on('pageerror', (e) => console.log('pageerror:', e.message));
await page.goto(link);
await page.waitForTimeout(1000);
for (const v of ['overview', 'live', 'spend', 'settings', `requests/${id}`]) {
  await page.goto(new URL(`/ui/#/${v}`, link).toString());
  await page.waitForTimeout(1200);
  await page.screenshot({ path: `${out}/${v.split('/')[0]}${dark}.png` });
}
await browser.close();
