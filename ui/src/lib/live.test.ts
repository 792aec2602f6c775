import { describe as group, expect, it } from 'vitest';
import type { Api, LiveEvent, ProviderView } from './api';
import { describe, Live, mergeFeed } from './live.svelte';

group('feed lines', () => {
  it('say what happened in words', () => {
    const base = { id: 1, at_ms: 0 };
    expect(describe({ ...base, type: 'fallback', request_id: 'r1', model: 'gpt-4o', from: 'openai', to: 'groq', reason: 'HTTP 503' })).toBe(
      'gpt-4o fell back from openai to groq: HTTP 503',
    );
    expect(describe({ ...base, type: 'breaker', provider: 'groq', from: 'closed', to: 'open', reason: '5 failures' })).toBe(
      'groq breaker closed → open: 5 failures',
    );
    expect(describe({ ...base, type: 'provider_toggled', provider: 'groq', enabled: false })).toBe('groq disabled');
    expect(describe({ ...base, type: 'config_reloaded', ok: false, error: 'x.toml:3:1' })).toContain('x.toml:3:1');
    const alert = { ...base, type: 'alert', kind: 'breaker_open', subject: 'groq', title: 'groq: breaker open', message: '5 failures.' } as const;
    expect(describe({ ...alert, suppressed: 0 })).toBe('groq: breaker open: 5 failures.');
    expect(describe({ ...alert, suppressed: 3 })).toBe('groq: breaker open: 5 failures. (3 more like it held back)');
  });
});

group('feed', () => {
  it('takes the snapshot\'s recent changes, newest first, once each', () => {
    const e = (id: number, type = 'breaker') => ({ id, at_ms: id, type }) as LiveEvent;
    const feed = mergeFeed([e(5)], [e(3), e(4, 'request_finished'), e(5)]);
    expect(feed.map((x) => x.id)).toEqual([5, 3]);
  });
});

group('start', () => {
  // A stand-in for the gateway's API: counts the providers asked for; the stream never answers.
  function api() {
    const calls = { providers: 0 };
    const fake = {
      providers: async () => {
        calls.providers += 1;
        return [] as ProviderView[];
      },
      follow: () => new Promise<void>(() => {}),
    } as unknown as Api;
    return { fake, calls };
  }

  it('shows the providers it was started with without asking again', () => {
    const { fake, calls } = api();
    const first = [{ name: 'openai' }] as ProviderView[];
    const live = new Live(fake);
    live.start(first);
    expect(live.providers).toEqual(first);
    expect(live.loaded).toBe(true);
    expect(calls.providers).toBe(0);
    live.stop();
  });

  it('asks for the providers when started with none', () => {
    const { fake, calls } = api();
    const live = new Live(fake);
    live.start();
    expect(calls.providers).toBe(1);
    live.stop();
  });
});
