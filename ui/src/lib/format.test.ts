import { describe, expect, it } from 'vitest';
import { count, ms, outcomeTone, outcomeWords, percent, REQUEST_OUTCOMES, stateLine, until, usd } from './format';

describe('format', () => {
  it('durations', () => {
    expect(ms(null)).toBe('—');
    expect(ms(0.42)).toBe('0.42 ms');
    expect(ms(320.4)).toBe('320 ms');
    expect(ms(1530)).toBe('1.53 s');
    expect(ms(95_000)).toBe('1 min 35 s');
  });

  it('money keeps small amounts and never turns unknown into zero', () => {
    expect(usd(null)).toBe('—');
    expect(usd(0)).toBe('$0');
    expect(usd(0.000441)).toBe('$0.00044');
    expect(usd(0.0275)).toBe('$0.0275');
    expect(usd(0.5)).toBe('$0.5');
    expect(usd(12.345)).toBe('$12.35');
  });

  it('counts and rates', () => {
    expect(count(999)).toBe('999');
    expect(count(1234)).toBe('1.2k');
    expect(count(2_500_000)).toBe('2.5M');
    expect(percent(1)).toBe('100%');
    expect(percent(0.8636)).toBe('86.4%');
    expect(percent(null)).toBe('—');
  });

  it('states say until when', () => {
    const now = Date.UTC(2026, 0, 1, 12, 0, 0);
    expect(until(now + 42_000, now)).toBe('42 s');
    expect(until(now + 600_000, now)).toBe('10 min');
    expect(stateLine({ state: 'healthy', until_ms: null }, now)).toBe('Healthy');
    expect(stateLine({ state: 'open', until_ms: now + 42_000 }, now)).toMatch(/^Breaker open until .+ \(42 s\)$/);
    expect(stateLine({ state: 'no_key', until_ms: null }, now)).toBe('No key');
    expect(stateLine({ state: 'unreachable', until_ms: now + 30_000 }, now)).toBe('Unreachable · next probe in 30 s');
    expect(stateLine({ state: 'unknown', until_ms: null }, now)).toBe('Not checked yet');
  });
});

describe('outcomes', () => {
  it('are the ones the gateway sends, each in words', () => {
    expect(REQUEST_OUTCOMES).toEqual(['ok', 'provider_error', 'error', 'rejected', 'failed', 'canceled']);
    for (const o of REQUEST_OUTCOMES) expect(outcomeWords(o)).not.toContain('_');
  });

  it('tell a client that left from a failure', () => {
    expect(outcomeTone('canceled')).toBe('muted');
    expect(outcomeWords('canceled')).toBe('Client left');
    expect(outcomeTone('stream_dropped')).toBe('bad');
    expect(outcomeTone('skipped')).toBe('muted');
    expect(outcomeWords('skipped')).toBe('Skipped');
    expect(outcomeTone('ok')).toBe('ok');
  });
});
