// A budget's progress bar in words and numbers: how full, in which tone,
// and when it starts over. The rows come from `/admin/budgets`.

import type { BudgetRow } from './api';
import { usd } from './format';

export interface BudgetBar {
  /** Width of the bar, 0 to 100. */
  width: number;
  /** `ok` below 80%, `warn` from 80%, `bad` once over (or blocking). */
  tone: 'ok' | 'warn' | 'bad';
  /** "$12.40 of $20.00 (62%)". */
  label: string;
  /** What happens now, and until when. */
  status: string;
}

export function budgetBar(row: BudgetRow, resetsAt: (ms: number) => string = localTime): BudgetBar {
  const pct = Math.max(0, row.fraction * 100);
  const tone = row.blocking || pct >= 100 ? 'bad' : pct >= 80 ? 'warn' : 'ok';
  const label = `${usd(row.spent_usd)} of ${usd(row.limit_usd)} (${Math.floor(pct)}%)`;
  const resets = resetsAt(row.resets_at_ms);
  const status = row.blocking
    ? `Blocking ${row.scope} until ${resets}`
    : pct >= 100
      ? `Over the limit (warn only); resets ${resets}`
      : `Resets ${resets}`;
  return { width: Math.min(100, pct), tone, label, status };
}

function localTime(ms: number): string {
  return new Date(ms).toLocaleString(undefined, { weekday: 'short', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}
