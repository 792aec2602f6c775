import { describe, expect, it } from 'vitest';
import type { BudgetRow } from './api';
import { budgetBar } from './budgets';

const row = (spent: number, action: 'warn' | 'block' = 'warn'): BudgetRow => ({
  name: 'daily',
  scope: 'provider:openai',
  period: 'day',
  action,
  limit_usd: 20,
  spent_usd: spent,
  fraction: spent / 20,
  period_start_ms: 0,
  resets_at_ms: 86_400_000,
  blocking: action === 'block' && spent >= 20,
  team: false,
});
const at = () => 'midnight';

describe('budget bars', () => {
  it('fill with the spend and change tone at 80% and at the limit', () => {
    expect(budgetBar(row(12.4), at)).toEqual({ width: 62, tone: 'ok', label: '$12.40 of $20.00 (62%)', status: 'Resets midnight' });
    expect(budgetBar(row(16), at).tone).toBe('warn');
    const over = budgetBar(row(30), at);
    expect([over.width, over.tone, over.status]).toEqual([100, 'bad', 'Over the limit (warn only); resets midnight']);
  });

  it('say when a blocking budget lets requests through again', () => {
    expect(budgetBar(row(20, 'block'), at).status).toBe('Blocking provider:openai until midnight');
  });
});
