import { describe, expect, it } from 'vitest';
import type { RequestSummary } from './api';
import { cacheCurve, cacheText, clientText, costCurve, membersText, polyline, turnText, withMembers } from './sessions';

describe('a session’s members', () => {
  it('are named, or a dash when every request was the owner’s', () => {
    expect(membersText({ members: ['al', 'bo'] })).toBe('al, bo');
    expect(membersText({ members: [] })).toBe('—');
  });

  it('make a column only when some session has one', () => {
    expect(withMembers([{ members: [] }, { members: ['al'] }])).toBe(true);
    expect(withMembers([{ members: [] }])).toBe(false);
    expect(withMembers([])).toBe(false);
  });
});

const row = (at: number, cost: number | null, input: number, cached: number): RequestSummary =>
  ({ started_at: at, cost_usd: cost, usage: { input_tokens: input, output_tokens: 1, cached_tokens: cached } }) as RequestSummary;

describe('a session’s curves', () => {
  const timeline = [row(0, 0.5, 100, 0), row(10, null, 100, 50), row(20, 0.25, 200, 150)];

  it('adds up cost, an unpriced request adding nothing', () => {
    expect(costCurve(timeline).map((p) => p.value)).toEqual([0.5, 0.5, 0.75]);
  });

  it('is the cache hit rate so far after each request', () => {
    expect(cacheCurve(timeline).map((p) => p.value)).toEqual([0, 0.25, 0.5]);
  });

  it('draws time across and values up from the bottom', () => {
    expect(polyline([{ at: 0, value: 0 }, { at: 10, value: 2 }], 100, 50)).toBe('0.0,50.0 100.0,0.0');
    expect(polyline([{ at: 5, value: 0.5 }], 100, 50, 1)).toBe('100.0,25.0');
    expect(polyline([], 100, 50)).toBe('');
  });

  it('names the client with its version', () => {
    expect(clientText({ client: 'codex', client_version: '0.171.0' })).toBe('codex 0.171.0');
    expect(clientText({ client: null, client_version: null })).toBe('—');
  });
});

describe('a session’s requests', () => {
  it('tells the user’s turns from tool follow-ups', () => {
    expect(turnText({ turn: true })).toBe('turn');
    expect(turnText({ turn: false })).toBe('tool results');
    expect(turnText({ turn: null })).toBe('—');
  });

  it('shows cache reads and writes', () => {
    const usage = { input_tokens: 5000, output_tokens: 1, cached_tokens: 1200, cache_write_tokens: 3400 };
    expect(cacheText({ usage })).toBe('1,200 / 3,400');
    expect(cacheText({ usage: { ...usage, cache_write_tokens: null } })).toBe('1,200 / —');
  });
});
