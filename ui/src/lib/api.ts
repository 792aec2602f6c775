// The one client of the admin API, for the browser (session cookie, same
// origin) and the desktop window (a session id in a header, from another
// origin, to which the SameSite=Strict cookie is never sent). Neither holds
// the admin token.

import { SseParser } from './sse';

// The types the gateway serializes come from its Rust types (contract.ts is
// generated from them); what is written here is only what the dashboard adds.

export type {
  AttemptChanges,
  Captured,
  CapturedAttempt,
  CapturedEvent,
  CapturedResponse,
  Change,
  Inspection,
  Replayed,
  AttemptOutcome,
  Bucket,
  BudgetRow,
  ConfigView,
  ModelAlias,
  ProviderEntry,
  ProviderForm,
  Spend,
  SpendRow,
  BreakerState,
  CacheStatus,
  Envelope,
  GatewayEvent,
  KeySummary,
  MemberSpend,
  MemberView,
  ProbeResult,
  ProviderStateName,
  ProviderView,
  QueueView,
  RequestDetail,
  RequestOutcome,
  RequestSummary,
  RoutesView,
  SessionDetail,
  SessionPage,
  SessionSummary,
  Share,
  Strategy,
  Snapshot,
  StreamMessage,
  TeamView,
  TryResult,
  Usage,
  Window as WindowStats,
} from './contract';
import type {
  AttemptRow,
  SwitchState,
  Inspection,
  ReplayAsk,
  Replayed,
  Bucket,
  BudgetRow,
  CacheStatus,
  ConfigView,
  ProviderForm,
  Spend,
  Envelope,
  MemberView,
  Page,
  ProbeResult,
  ProviderView,
  TryResult,
  RequestDetail,
  RequestOutcome,
  RoutesView,
  SessionDetail,
  SessionPage,
  Strategy,
  StreamMessage,
  TeamView,
} from './contract';

/** One attempt of a request, as the history keeps it. */
export type Attempt = AttemptRow;

/** An event from the gateway's live stream. */
export type LiveEvent = Envelope;

/** A finished request, as the live stream announces it. */
export type FinishedEvent = Extract<Envelope, { type: 'request_finished' }>;

export interface RequestFilter {
  provider?: string;
  model?: string;
  /** Only requests made with this member's key. */
  member?: string;
  /** Only requests of this session. */
  session?: string;
  outcome?: RequestOutcome;
  fallback?: boolean;
  /** What the response cache did. */
  cache?: CacheStatus;
  since?: string;
  correlation_id?: string;
  /** A request id, a prefix of one, a correlation id or a trace id. */
  q?: string;
  cursor?: string;
  limit?: number;
}

export interface SessionFilter {
  client?: string;
  model?: string;
  provider?: string;
  /** Only this member's requests, in the sessions they are in. */
  member?: string;
  since?: string;
  cursor?: string;
  limit?: number;
}

/** What `members add` takes, as text: `50/month`, `claude-*,gpt-4.1`, `90d`. */
export interface NewMember {
  name: string;
  budget?: string;
  rpm?: number;
  tpm?: number;
  models?: string;
  expires?: string;
}

/** A member with its new key, shown once. */
export interface IssuedKey {
  member: MemberView;
  key: string;
}

/** What went wrong, in words a person can act on. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }

  get needsSignIn(): boolean {
    return this.status === 401;
  }
}

/** The header that carries a session where the cookie cannot go. */
export const SESSION_HEADER = 'x-switchyard-session';

export interface ApiOptions {
  /** The gateway's origin; empty for the page's own. */
  base?: string;
  /** A dashboard session id (the desktop window); the browser uses its cookie. */
  session?: string;
  /** Asks for a fresh session when the gateway no longer knows this one (idle, revoked). */
  renew?: () => Promise<string>;
  fetch?: typeof fetch;
}

function query(params: object): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === '' || v === false || v === null) continue;
    q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

const enc = encodeURIComponent;

/** The page's own origin, where there is a page. */
function here(): string {
  return typeof location === 'undefined' ? '' : location.origin;
}

export class Api {
  readonly base: string;
  private session?: string;
  private readonly renewer?: () => Promise<string>;
  private readonly fetcher: typeof fetch;

  constructor(options: ApiOptions = {}) {
    this.base = (options.base ?? '').replace(/\/$/, '');
    this.session = options.session;
    this.renewer = options.renew;
    this.fetcher = options.fetch ?? ((input, init) => fetch(input, init));
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.session ? { [SESSION_HEADER]: this.session, ...extra } : extra;
  }

  /** A fresh session after a 401, where one can be had; whether it was. */
  private async renew(): Promise<boolean> {
    if (!this.renewer) return false;
    try {
      this.session = await this.renewer();
      return true;
    } catch {
      return false;
    }
  }

  private async send(method: string, path: string, body?: unknown): Promise<Response> {
    try {
      return await this.fetcher(`${this.base}${path}`, {
        method,
        credentials: 'same-origin',
        headers: this.headers(body === undefined ? {} : { 'content-type': 'application/json' }),
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new ApiError(0, 'unreachable', `The gateway at ${this.base || here()} does not answer. Is Switchyard running?`);
    }
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let response = await this.send(method, path, body);
    if (response.status === 401 && (await this.renew())) response = await this.send(method, path, body);
    if (response.status === 204) return undefined as T;
    const text = await response.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      // Not JSON: reported below with the status.
    }
    if (response.ok && text && json === null) {
      throw new ApiError(response.status, 'not_json', `${this.base || here()}${path} answered with something other than JSON: is that the gateway's address?`);
    }
    if (!response.ok) {
      const error = (json as { error?: { code?: string; message?: string } } | null)?.error;
      throw new ApiError(
        response.status,
        error?.code ?? 'http_error',
        error?.message ?? `The gateway answered ${response.status} ${response.statusText}`.trim(),
      );
    }
    return json as T;
  }

  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  providers = () => this.get<ProviderView[]>('/admin/providers');
  team = () => this.get<TeamView>('/admin/team');
  setEnabled = (name: string, on: boolean) =>
    this.request<ProviderView>('POST', `/admin/providers/${enc(name)}/${on ? 'enable' : 'disable'}`);
  resetBreaker = (name: string) => this.request<ProviderView>('POST', `/admin/providers/${enc(name)}/breaker/reset`);
  probe = (name: string) => this.request<ProbeResult>('POST', `/admin/providers/${enc(name)}/probe`);
  /** A one-line "say hi" through the gateway (the first model a provider lists unless `model` is given). */
  tryIt = (model?: string) => this.request<TryResult>('POST', '/admin/try', model ? { model } : {});

  requests = (filter: RequestFilter) =>
    this.get<Page>(`/admin/requests${query(filter)}`);
  requestDetail = (id: string) => this.get<RequestDetail>(`/admin/requests/${enc(id)}`);
  /** What was captured of a request and every change the gateway made (404: nothing captured). */
  requestBodies = (id: string) => this.get<Inspection>(`/admin/requests/${enc(id)}/bodies`);
  /** Sends a captured request again, as it was, to one provider, or with another body. */
  replay = (id: string, ask: ReplayAsk) => this.request<Replayed>('POST', `/admin/requests/${enc(id)}/replay`, ask);
  /** What the capture switch is set to; and setting it (0 and 0: off). */
  captureSwitch = () => this.get<SwitchState>('/admin/capture');
  setCaptureSwitch = (state: SwitchState) => this.request<SwitchState>('PUT', '/admin/capture', state);
  /** The bug report for a request: one JSON document, secrets removed. */
  exportRequest = (id: string) => this.get<unknown>(`/admin/requests/${enc(id)}/export`);
  spend = (bucket: Bucket, since: string) => this.get<Spend>(`/admin/spend${query({ bucket, since })}`);
  /** The spend with its breakdown by client or by session since `since`. */
  spendBy = (by: 'client' | 'session', since: string) => this.get<Spend>(`/admin/spend${query({ bucket: 'day', since, by })}`);
  budgets = () => this.get<BudgetRow[]>('/admin/budgets');
  sessions = (filter: SessionFilter) => this.get<SessionPage>(`/admin/sessions${query(filter)}`);
  sessionDetail = (id: string) => this.get<SessionDetail>(`/admin/sessions/${enc(id)}`);

  members = () => this.get<MemberView[]>('/admin/members');
  /** Adds a member; the answer holds its key, the only time it is ever shown. */
  addMember = (member: NewMember) => this.request<IssuedKey>('POST', '/admin/members', member);
  rotateMember = (name: string) => this.request<IssuedKey>('POST', `/admin/members/${enc(name)}/rotate`);
  revokeMember = (name: string) => this.request<MemberView>('POST', `/admin/members/${enc(name)}/revoke`);
  removeMember = (name: string) => this.request<void>('DELETE', `/admin/members/${enc(name)}`);

  config = () => this.get<ConfigView>('/admin/config');
  putProvider = (name: string, form: ProviderForm) =>
    this.request<ConfigView>('PUT', `/admin/config/providers/${enc(name)}`, form);
  deleteProvider = (name: string) => this.request<ConfigView>('DELETE', `/admin/config/providers/${enc(name)}`);
  /** A chain in a new order; `weights` keeps a weighted route's weights with their providers. */
  putRoute = (model: string, chain: string[], weights?: number[]) =>
    this.request<ConfigView>('PUT', `/admin/config/routes/${enc(model)}`, weights ? { chain, weights } : { chain });
  setStrategy = (model: string, strategy: Strategy) =>
    this.request<ConfigView>('PUT', `/admin/config/routes/${enc(model)}`, { strategy });
  routes = () => this.get<RoutesView>('/admin/routes');
  deleteRoute = (model: string) => this.request<ConfigView>('DELETE', `/admin/config/routes/${enc(model)}`);
  patchSettings = (changes: Record<string, Record<string, unknown>>) =>
    this.request<ConfigView>('PATCH', '/admin/config/settings', changes);

  setKey = (provider: string, label: string, key: string) =>
    this.request<void>('PUT', `/admin/keys/${enc(provider)}/${enc(label)}`, { key });
  removeKey = (provider: string, label: string) =>
    this.request<unknown>('DELETE', `/admin/keys/${enc(provider)}/${enc(label)}`);

  login = (token: string) => this.request<void>('POST', '/ui/login', { token });
  logout = () => this.request<void>('POST', '/ui/logout');

  /**
   * Follows the live event stream until `signal` aborts, reconnecting with
   * Last-Event-ID after a drop. `onState` reports whether it is connected.
   */
  async follow(
    onMessage: (m: StreamMessage) => void,
    onState: (connected: boolean, error?: ApiError) => void,
    signal: AbortSignal,
  ): Promise<void> {
    let lastId: string | null = null;
    let delay = 500;
    while (!signal.aborted) {
      try {
        const headers = this.headers(lastId ? { 'last-event-id': lastId } : {});
        const response = await this.fetcher(`${this.base}/admin/events`, { headers, credentials: 'same-origin', signal });
        if (!response.ok || !response.body) {
          const error = new ApiError(response.status, 'events_unavailable', `The live stream answered ${response.status}`);
          if (response.status === 401 && (await this.renew())) continue;
          onState(false, error);
          if (response.status === 401) return;
          throw error;
        }
        onState(true);
        delay = 500;
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        const parser = new SseParser();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const m of parser.push(value)) {
            if (m.id) lastId = m.id;
            try {
              onMessage(JSON.parse(m.data));
            } catch {
              // A malformed message is skipped; the stream goes on.
            }
          }
        }
      } catch {
        if (signal.aborted) return;
      }
      onState(false);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  }
}
