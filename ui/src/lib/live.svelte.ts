// The dashboard's live state: providers (from the stream's snapshot,
// refreshed on events and every few seconds for their statistics), the
// feed of notable events, and finished requests as they arrive.

import type { Api, ApiError, FinishedEvent, LiveEvent, ProviderView, StreamMessage } from './api';
import type { EventKind } from './contract';

/** Events worth a line in the Live feed (requests have their own table). */
export const FEED_TYPES = new Set<EventKind>(['fallback', 'breaker', 'health', 'key_revoked', 'key_cooling', 'provider_toggled', 'config_reloaded', 'alert']);
const FEED_MAX = 500;
const REFRESH_MS = 5000;

export type RequestListener = (e: FinishedEvent) => void;

export class Live {
  providers = $state<ProviderView[]>([]);
  feed = $state<LiveEvent[]>([]);
  connected = $state(false);
  loaded = $state(false);
  error = $state<ApiError | null>(null);
  now = $state(Date.now());

  private listeners = new Set<RequestListener>();
  private abort = new AbortController();
  private refreshTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly api: Api) {}

  /**
   * Starts following. `first` is a providers answer the caller already has
   * (the sign-in check's): shown at once, rather than asked for again
   * before the first cards can paint; the next poll refreshes it.
   */
  start(first?: ProviderView[]): void {
    if (first) {
      this.providers = first;
      this.loaded = true;
    } else {
      void this.refresh();
    }
    void this.api.follow(
      (m) => this.receive(m),
      (connected, error) => {
        this.connected = connected;
        if (error) this.error = error;
      },
      this.abort.signal,
    );
    const tick = setInterval(() => {
      this.now = Date.now();
    }, 1000);
    const poll = setInterval(() => void this.refresh(), REFRESH_MS);
    this.abort.signal.addEventListener('abort', () => {
      clearInterval(tick);
      clearInterval(poll);
    });
  }

  stop(): void {
    this.abort.abort();
  }

  /** Called for every finished request; returns the unsubscribe. */
  onRequest(listener: RequestListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async refresh(): Promise<void> {
    try {
      this.providers = await this.api.providers();
      this.loaded = true;
      this.error = null;
    } catch (e) {
      this.error = e as ApiError;
    }
  }

  /** Puts a provider's new view in place (after a toggle or a reset). */
  replace(view: ProviderView): void {
    this.providers = this.providers.map((p) => (p.name === view.name ? view : p));
  }

  private soon(): void {
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      void this.refresh();
    }, 250);
  }

  private receive(m: StreamMessage): void {
    if (m.type === 'snapshot') {
      this.providers = m.providers;
      this.loaded = true;
      this.feed = mergeFeed(this.feed, m.recent ?? []);
      return;
    }
    const e = m;
    if (e.type === 'request_finished') {
      for (const l of this.listeners) l(e);
      return;
    }
    if (FEED_TYPES.has(e.type)) {
      this.feed = [e, ...this.feed].slice(0, FEED_MAX);
      this.soon();
    }
  }
}

/** Adds `older` events (oldest first) to the feed, newest first, without repeats. */
export function mergeFeed(feed: LiveEvent[], older: LiveEvent[]): LiveEvent[] {
  const seen = new Set(feed.map((e) => e.id));
  const extra = older.filter((e) => FEED_TYPES.has(e.type) && !seen.has(e.id));
  return [...feed, ...extra].sort((a, b) => b.id - a.id).slice(0, FEED_MAX);
}

/** The request that caused an event, if one did. */
export function requestOf(e: LiveEvent): string | undefined {
  return 'request_id' in e ? (e.request_id ?? undefined) : undefined;
}

/** A feed line in words. */
export function describe(e: LiveEvent): string {
  switch (e.type) {
    case 'fallback':
      return `${e.model || 'A request'} fell back from ${e.from} to ${e.to}: ${e.reason}`;
    case 'breaker':
      return `${e.provider} breaker ${e.from} → ${e.to}: ${e.reason}`;
    case 'health':
      return `${e.provider} became ${e.to}: ${e.reason}`;
    case 'key_revoked':
      return `${e.provider} refused key “${e.label}”: ${e.reason}`;
    case 'key_cooling': {
      const label = e.label ? ` key “${e.label}”` : '';
      return `${e.provider}${label} rate-limited until ${new Date(e.until_ms).toLocaleTimeString()}`;
    }
    case 'provider_toggled':
      return `${e.provider} ${e.enabled ? 'enabled' : 'disabled'}`;
    case 'config_reloaded':
      return e.ok ? 'Configuration reloaded' : `Configuration refused, the old one keeps serving: ${e.error ?? ''}`;
    case 'alert': {
      const more = e.suppressed > 0 ? ` (${e.suppressed} more like it held back)` : '';
      return `${e.title}: ${e.message}${more}`;
    }
    case 'request_finished':
      return `${e.request.model ?? 'A request'} finished: ${e.request.outcome}`;
  }
}
