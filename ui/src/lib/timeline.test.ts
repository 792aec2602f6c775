import { describe, expect, it } from 'vitest';
import type { Attempt } from './api';
import { layout, leftOut, tickStep } from './timeline';

function attempt(over: Partial<Attempt>): Attempt {
  return {
    seq: 1, provider: 'a', key_label: null, model: 'm', reason: 'first', fallback_from: null, started_at: 0,
    offset_ms: 0, timeout_ms: null, backoff_ms: 0, duration_ms: 100, ttfb_ms: 50, ttft_ms: null, status: 200,
    outcome: 'ok', retry_after_ms: null, breaker_state: 'closed', error: null,
    usage: { input_tokens: null, output_tokens: null, cached_tokens: null, cache_write_tokens: null }, ...over,
  };
}

describe('timeline layout', () => {
  it('places a retry after its backoff and a fallback hop on one axis', () => {
    const l = layout({
      duration_ms: 1000,
      ttft_ms: 700,
      attempts: [
        attempt({ seq: 1, outcome: 'http_error', status: 503, duration_ms: 100 }),
        attempt({ seq: 2, reason: 'retry', offset_ms: 300, backoff_ms: 200, duration_ms: 100, outcome: 'timeout' }),
        attempt({ seq: 3, provider: 'b', reason: 'fallback', fallback_from: 'a', offset_ms: 400, duration_ms: 600, ttft_ms: 300 }),
      ],
    });
    expect(l.span).toBe(1000);
    expect(l.bars.map((b) => b.left)).toEqual([0, 0.3, 0.4]);
    expect(l.bars[0].tone).toBe('bad');
    expect(l.bars[1].gap).toEqual({ left: 0.1, width: 0.2, ms: 200 });
    expect(l.bars[1].timedOut).toBe(true);
    expect(l.bars[2].fallback).toBe(true);
    expect(l.bars[2].label).toBe('b (fallback from a)');
    expect(l.bars[2].ttft).toBeCloseTo(0.7);
    expect(l.ttft).toBeCloseTo(0.7);
  });

  it('stretches the axis to an attempt that outlived the request record', () => {
    const l = layout({ duration_ms: 50, ttft_ms: null, attempts: [attempt({ duration_ms: 200 })] });
    expect(l.span).toBe(200);
    expect(l.bars[0].width).toBe(1);
  });

  it('keeps a zero-length attempt visible', () => {
    const l = layout({ duration_ms: 10, ttft_ms: null, attempts: [attempt({ duration_ms: 0, ttfb_ms: null })] });
    expect(l.bars[0].width).toBeGreaterThan(0);
  });

  it('chooses round tick steps', () => {
    expect(tickStep(1000)).toBe(200);
    expect(tickStep(1500)).toBe(500);
    expect(tickStep(12)).toBe(2.5);
    expect(layout({ duration_ms: 1000, ttft_ms: null, attempts: [] }).ticks.map((t) => t.label)).toEqual([
      '0 ms', '200 ms', '400 ms', '600 ms', '800 ms', '1 s',
    ]);
  });
});

describe('an attempt the client left', () => {
  it('is muted, not a failure', () => {
    const l = layout({ duration_ms: 100, ttft_ms: null, attempts: [attempt({ outcome: 'canceled', duration_ms: 100 })] });
    expect(l.bars[0].tone).toBe('muted');
  });
});

describe('an attempt skipped without a call', () => {
  it('is greyed, carries its reason, and is no hop', () => {
    const l = layout({
      duration_ms: 200,
      ttft_ms: null,
      attempts: [
        attempt({ seq: 1, outcome: 'http_error', status: 503, duration_ms: 100 }),
        attempt({
          seq: 2, provider: 'b', reason: 'fallback', fallback_from: 'a', offset_ms: 100, duration_ms: 0, ttfb_ms: null,
          status: null, outcome: 'skipped', error: '`tools`: the provider does not support tools',
        }),
        attempt({ seq: 3, provider: 'c', reason: 'fallback', fallback_from: 'a', offset_ms: 100, duration_ms: 100 }),
      ],
    });
    expect(l.bars[1].skipped).toBe(true);
    expect(l.bars[1].tone).toBe('muted');
    expect(l.bars[1].why).toBe('`tools`: the provider does not support tools');
    expect(l.bars[1].fallback).toBe(false);
    expect(l.bars[1].label).toBe('b (skipped)');
    expect(l.bars[2].fallback).toBe(true);
    expect(l.bars[0].skipped).toBe(false);
    expect(l.bars[0].why).toBeNull();
  });
});

describe('a hedged first byte', () => {
  it('lays the two attempts side by side, the one let go muted', () => {
    const l = layout({
      duration_ms: 400,
      ttft_ms: 350,
      attempts: [
        attempt({ seq: 1, outcome: 'hedged', status: null, ttfb_ms: null, duration_ms: 360, error: 'let go: b answered first' }),
        attempt({ seq: 2, provider: 'b', reason: 'hedge', offset_ms: 300, duration_ms: 100, ttft_ms: 50 }),
      ],
    });
    expect(l.bars.map((b) => b.label)).toEqual(['a', 'b (hedge)']);
    expect(l.bars.map((b) => b.tone)).toEqual(['muted', 'ok']);
    expect(l.bars[1].fallback).toBe(false);
    expect(l.bars[1].left).toBeCloseTo(0.75);
  });
});

describe('a resumed stream', () => {
  it('names the attempt that finished what the one before began', () => {
    const l = layout({
      duration_ms: 500,
      ttft_ms: 40,
      attempts: [
        attempt({ seq: 1, outcome: 'mid_stream_failure', duration_ms: 300, error: 'broke; resumed from 16 characters of text' }),
        attempt({ seq: 2, provider: 'b', reason: 'resume', fallback_from: 'a', offset_ms: 300, duration_ms: 200 }),
      ],
    });
    expect(l.bars.map((b) => b.label)).toEqual(['a', 'b (resumes the stream)']);
    expect(l.bars.map((b) => b.tone)).toEqual(['bad', 'ok']);
  });
});

describe('what a translation left out', () => {
  it('parts the drop table rows from what was new to the gateway, per attempt', () => {
    const d = {
      dropped: [
        { seq: 2, fields: ['top_k: the format has no such parameter', 'messages[0].content[1]: unmapped: a block of type `hologram`, left out'] },
      ],
    };
    expect(leftOut(d, 2)).toEqual({
      known: ['top_k: the format has no such parameter'],
      unmapped: ['messages[0].content[1]: a block of type `hologram`, left out'],
      redacted: null,
    });
    expect(leftOut(d, 1)).toEqual({ known: [], unmapped: [], redacted: null });
  });

  it('tells secrets taken out of the prompt from what the translation left out', () => {
    const d = { dropped: [{ seq: 1, fields: ['prompt: 3 secrets redacted (server.redact_outgoing)', 'top_k: none'] }] };
    expect(leftOut(d, 1)).toEqual({
      known: ['top_k: none'],
      unmapped: [],
      redacted: '3 secrets redacted (server.redact_outgoing)',
    });
  });
});
