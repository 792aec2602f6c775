import { describe, expect, it } from 'vitest';
import type { FinishedEvent } from './api';
import { fromEvent, matches } from './brief';

const event: FinishedEvent = {
  id: 4, at_ms: 10_000, type: 'request_finished',
  request: {
    id: 'r1', endpoint: '/v1/chat/completions', model: 'm', provider: 'b', outcome: 'ok', status: 200,
    duration_ms: 250, ttft_ms: null, input_tokens: 3, output_tokens: 4, cost_usd: null, cache: 'miss',
    attempts: ['a:503', 'b:200'], member: null, session: null,
  },
};

describe('live rows', () => {
  it('become history rows with their fallback and timing', () => {
    const r = fromEvent(event);
    expect(r.started_at).toBe(9750);
    expect(r.attempt_count).toBe(2);
    expect(r.fallback).toBe(true);
    expect(r.usage.output_tokens).toBe(4);
    expect(r.instance).toBe(null);
    expect(fromEvent({ ...event, instance: 'gw-b' }).instance).toBe('gw-b');
  });

  it('join the table only when they match its filters', () => {
    const r = fromEvent(event);
    expect(matches(r, {})).toBe(true);
    expect(matches(r, { provider: 'b', fallback: true })).toBe(true);
    expect(matches(r, { provider: 'a' })).toBe(false);
    expect(matches(r, { outcome: 'error' })).toBe(false);
    expect(matches(r, { q: 'r' })).toBe(true);
    expect(matches(r, { q: 'x' })).toBe(false);
    expect(matches(r, { cache: 'miss' })).toBe(true);
    expect(matches(r, { cache: 'hit' })).toBe(false);
  });

  it('name their member, and a member filter keeps only that member’s', () => {
    const al = fromEvent({ ...event, request: { ...event.request, member: 'al' } });
    expect(al.member).toBe('al');
    expect(matches(al, { member: 'al' })).toBe(true);
    expect(matches(al, { member: 'bo' })).toBe(false);
    expect(matches(fromEvent(event), { member: 'al' })).toBe(false);
  });
});
