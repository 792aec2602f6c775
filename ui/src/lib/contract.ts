// The admin API's types, generated from the Rust types that serialize them
// (crates/core/src/contract.rs). Do not edit: change the Rust type, then run
//   SWITCHYARD_BLESS=1 cargo test -p switchyard-core --lib contract
// `cargo test` fails while this file differs from a fresh generation.

export type RequestOutcome = "ok" | "provider_error" | "error" | "rejected" | "failed" | "canceled";

export type AttemptOutcome = "ok" | "http_error" | "connect_error" | "transport_error" | "timeout" | "stream_error" | "stream_dropped" | "mid_stream_failure" | "canceled" | "skipped" | "hedged";

export type Reason = "first" | "retry" | "fallback" | "probe" | "hedge" | "resume";

export type BreakerState = "closed" | "open" | "half_open";

export type ProviderStateName = "healthy" | "unknown" | "degraded" | "rate_limited" | "open" | "disabled" | "no_key" | "unreachable";

export type PassiveHealth = "healthy" | "unhealthy";

export type KeyStatus = "ok" | "revoked" | "cooling";

export type EventKind = "request_finished" | "fallback" | "breaker" | "health" | "key_revoked" | "key_cooling" | "provider_toggled" | "config_reloaded" | "alert";

export type CacheStatus = "hit" | "miss" | "stale" | "bypass";

export type Usage = { 
/**
 * All input tokens, cached ones (read and written) included.
 */
input_tokens: number | null, output_tokens: number | null, 
/**
 * Input tokens read from the provider's prompt cache.
 */
cached_tokens: number | null, 
/**
 * Input tokens written to the provider's prompt cache (Anthropic's
 * `cache_creation_input_tokens`, OpenRouter's `cache_write_tokens`);
 * OpenAI and Gemini report none.
 */
cache_write_tokens: number | null, };

export type Window = { requests: number, success_rate: number | null, requests_per_minute: number, latency_p50_ms: number | null, latency_p95_ms: number | null, latency_p99_ms: number | null, ttft_p50_ms: number | null, ttft_p95_ms: number | null, fallbacks_in: number, fallbacks_out: number, };

export type Windows = { m1: Window, m5: Window, m60: Window, };

export type Today = { input_tokens: number, output_tokens: number, cost_usd: number, };

export type KeySummary = { label: string, 
/**
 * The last four characters, to tell keys apart.
 */
last4: string, status: KeyStatus, detail: string | null, };

export type ModelView = { model: string, stats: Windows, };

export type ProviderState = { state: ProviderStateName, 
/**
 * When a rate limit or an open breaker ends (Unix ms), if known.
 */
until_ms: number | null, detail: string | null, };

export type QueueView = { 
/**
 * Requests waiting in line now.
 */
depth: number, 
/**
 * Places in line (`max_queue`); 0: no queue, a full provider is passed over.
 */
max_queue: number, in_flight: number, 
/**
 * `max_concurrency`; null: no cap.
 */
max_concurrency: number | null, 
/**
 * Key leases held now (for keys that allow only so many requests at once).
 */
leases: number, 
/**
 * A moving average of recent waits in line; null when nobody was
 * served from the queue in the last few minutes.
 */
recent_wait_ms: number | null, 
/**
 * Served from the queue, and refused (full, or not in time), since start.
 */
served: number, refused: number, };

export type LastProbe = { 
/**
 * When it was sent (Unix ms).
 */
at_ms: number, 
/**
 * Whether it succeeded.
 */
ok: boolean, 
/**
 * Why it failed: no answer (then the provider is unreachable), or the
 * status it got.
 */
error: string | null, 
/**
 * When the next one is due (Unix ms); later while the provider stays down.
 */
next_ms: number | null, };

export type ProviderView = { name: string, kind: string, base_url: string, enabled: boolean, breaker: BreakerState, passive_healthy: boolean, stats: Windows, models: Array<ModelView>, today: Today, keys: Array<KeySummary>, probe: boolean, 
/**
 * The last active probe, if any (absent from a gateway older than it).
 */
last_probe: LastProbe | null, 
/**
 * Absent from a gateway older than the queue: read as empty.
 */
queue: QueueView, state: ProviderStateName, 
/**
 * When a rate limit or an open breaker ends (Unix ms), if known.
 */
until_ms: number | null, detail: string | null, };

export type ProbeResult = { provider: string, ok: boolean, status: number | null, duration_ms: number, error: string | null, breaker: BreakerState, };

export type TryResult = { 
/**
 * Its id in the history (`GET /admin/requests/{id}` shows its attempts).
 */
request_id: string, model: string, status: number, 
/**
 * The model's answer, when it gave one.
 */
answer: string | null, 
/**
 * Why there is no answer.
 */
error: string | null, };

export type ProviderStats = { name: string, state: ProviderStateName, stats: Windows, models: Array<ModelView>, today: Today, queue: QueueView, };

export type HistoryStatus = { 
/**
 * `sqlite` or `postgres`.
 */
backend: string, 
/**
 * `keeping_up`, `catching_up` (replaying the spool after a burst) or
 * `behind` (the database is out of reach; records wait in the spool).
 */
state: string, 
/**
 * Completed requests in the spool not yet in the database.
 */
spooled: number, spool_bytes: number, 
/**
 * The spool's bound (`[history] spool_max_size_mb`).
 */
spool_limit_bytes: number, 
/**
 * Records that could not be spooled, held in memory.
 */
pending: number, 
/**
 * How long the writer has been behind, in milliseconds (0 while it keeps up).
 */
lag_ms: number, 
/**
 * The last commit, in Unix milliseconds.
 */
last_commit_ms: number | null, 
/**
 * Records that could not be written, ever.
 */
lost: number, 
/**
 * Why the last write failed, while behind.
 */
error: string | null, };

export type StatsView = { providers: Array<ProviderStats>, cost_today_usd: number, last_event_id: number, 
/**
 * History records dropped because the writer fell behind.
 */
history_records_lost: number, 
/**
 * Whether the history keeps up; absent when history is off.
 */
history: HistoryStatus | null, };

export type RequestSummary = { id: string, correlation_id: string, started_at: number, finished_at: number, user_agent: string | null, endpoint: string, model: string | null, streamed: boolean, outcome: RequestOutcome, status: number | null, provider: string | null, provider_model: string | null, 
/**
 * Attempts made (the detail view lists them as `attempts`).
 */
attempt_count: number, fallback: boolean, duration_ms: number, ttft_ms: number | null, usage: Usage, cost_usd: number | null, error_code: string | null, error: string | null, 
/**
 * What the response cache did; null when it was not consulted.
 */
cache: CacheStatus | null, 
/**
 * For an answer from the cache: what it would have cost from the provider.
 */
saved_usd: number | null, 
/**
 * The team instance that served it; null for a gateway alone.
 */
instance: string | null, 
/**
 * The member whose key made it; null for the owner.
 */
member: string | null, 
/**
 * The conversation it is part of; null when refused before its body.
 */
session: string | null, 
/**
 * True when its newest message was the user's own input, false for an
 * agent's follow-up after tool calls; null when not known.
 */
turn: boolean | null, 
/**
 * The device a member's joined gateway sent it from; null otherwise.
 */
device: string | null, };

export type AttemptRow = { seq: number, provider: string, key_label: string | null, model: string, reason: Reason, fallback_from: string | null, started_at: number, 
/**
 * Start relative to the request's start.
 */
offset_ms: number, timeout_ms: number | null, 
/**
 * Backoff slept just before this attempt.
 */
backoff_ms: number, duration_ms: number | null, ttfb_ms: number | null, ttft_ms: number | null, status: number | null, outcome: AttemptOutcome, retry_after_ms: number | null, breaker_state: BreakerState | null, error: string | null, usage: Usage, };

export type Format = "chat" | "responses" | "messages" | "gemini";

export type AttemptTranslation = { seq: number, client: Format, provider: Format, };

export type AttemptDropped = { seq: number, fields: Array<string>, };

export type Strategy = "ordered" | "latency" | "least_busy" | "cheapest" | "weighted";

export type Routing = { strategy: Strategy, 
/**
 * Place in the strategy's order for this request, 0 first.
 */
rank: number, 
/**
 * Put first to take a fresh measure of it, not for its figures
 * (`latency`'s exploration share).
 */
explored: boolean, 
/**
 * Recent time to first token (streams) or latency, in ms; none
 * before the first answer.
 */
latency_ms: number | null, 
/**
 * Requests in flight to the provider.
 */
in_flight: number | null, 
/**
 * The estimated cost of this request at the provider's prices.
 */
usd: number | null, 
/**
 * The provider's weight in the chain.
 */
weight: number | null, };

export type AttemptRouting = { seq: number, routing: Routing, };

export type RequestDetail = { 
/**
 * Its W3C trace id (32 lowercase hex digits), to find its spans in a
 * tracing backend; null when tracing was off.
 */
trace_id: string | null, request_body: string | null, response_body: string | null, attempts: Array<AttemptRow>, 
/**
 * The attempts sent in another format than the client's.
 */
translations: Array<AttemptTranslation>, 
/**
 * What each translated attempt left out or could not map.
 */
dropped: Array<AttemptDropped>, 
/**
 * Why the route's strategy put each attempt's provider where it did;
 * attempts in chain order (`ordered`) have none.
 */
routing: Array<AttemptRouting>, id: string, correlation_id: string, started_at: number, finished_at: number, user_agent: string | null, endpoint: string, model: string | null, streamed: boolean, outcome: RequestOutcome, status: number | null, provider: string | null, provider_model: string | null, 
/**
 * Attempts made (the detail view lists them as `attempts`).
 */
attempt_count: number, fallback: boolean, duration_ms: number, ttft_ms: number | null, usage: Usage, cost_usd: number | null, error_code: string | null, error: string | null, 
/**
 * What the response cache did; null when it was not consulted.
 */
cache: CacheStatus | null, 
/**
 * For an answer from the cache: what it would have cost from the provider.
 */
saved_usd: number | null, 
/**
 * The team instance that served it; null for a gateway alone.
 */
instance: string | null, 
/**
 * The member whose key made it; null for the owner.
 */
member: string | null, 
/**
 * The conversation it is part of; null when refused before its body.
 */
session: string | null, 
/**
 * True when its newest message was the user's own input, false for an
 * agent's follow-up after tool calls; null when not known.
 */
turn: boolean | null, 
/**
 * The device a member's joined gateway sent it from; null otherwise.
 */
device: string | null, };

export type CapturedBody = { 
/**
 * The body as text (lossy UTF-8), up to `body_limit`, then [`CUT_MARKER`].
 */
text: string, 
/**
 * Its full size in bytes.
 */
size: number, truncated: boolean, };

export type CapturedRequest = { method: string, 
/**
 * Path and query (credential parameters removed), or the upstream URL.
 */
path: string, 
/**
 * Credentials' values replaced by `[redacted]`.
 */
headers: Array<[string, string]>, body: CapturedBody | null, };

export type CapturedEvent = { 
/**
 * Milliseconds from the attempt's send to the event's arrival.
 */
at_ms: number, 
/**
 * The event's `event:` name, if it has one.
 */
event: string | null, 
/**
 * Its size in bytes.
 */
size: number, text: string, };

export type CapturedResponse = { status: number | null, headers: Array<[string, string]>, body: CapturedBody, 
/**
 * For an event stream: each event as it arrived.
 */
events: Array<CapturedEvent>, };

export type CapturedAttempt = { 
/**
 * The attempt's `seq` in the request's attempts.
 */
seq: number, request: CapturedRequest, response: CapturedResponse | null, 
/**
 * Secrets `[server] redact_outgoing` took out of the prompt.
 */
redacted: number, };

export type Captured = { client: CapturedRequest, attempts: Array<CapturedAttempt>, 
/**
 * What the client got: the answer in its own format, or the gateway's error.
 */
answer: CapturedResponse | null, };

export type Change = { 
/**
 * The JSON path it touched (`model`, `stream_options`), or `` for the whole body.
 */
field: string, 
/**
 * `changed`, `added`, `dropped`, `translated` or `redacted`.
 */
kind: string, reason: string, };

export type AttemptChanges = { seq: number, changes: Array<Change>, };

export type Inspection = { request_id: string, 
/**
 * The request this one replayed.
 */
replay_of: string | null, 
/**
 * The requests that replayed this one, oldest first.
 */
replays: Array<string>, captured: Captured, changes: Array<AttemptChanges>, };

export type ReplayAsk = { 
/**
 * Send it only to this provider.
 */
provider: string | null, 
/**
 * Send this body instead of the captured one.
 */
body: unknown, };

export type Replayed = { request_id: string, replay_of: string, status: number, 
/**
 * The answer's body as text (a stream: its events, as sent).
 */
body: string, };

export type SwitchState = { 
/**
 * Requests still to capture.
 */
remaining: number, 
/**
 * Unix ms until which every request is captured; 0: off.
 */
until_ms: number, };

export type Member = { name: string, 
/**
 * Unique per process start.
 */
id: string, 
/**
 * When it started, in Unix milliseconds.
 */
started_at: number, version: string, 
/**
 * Where it listens.
 */
address: string, 
/**
 * Requests it has served since it started.
 */
requests: number, 
/**
 * Its last heartbeat, in Unix milliseconds (Redis's clock).
 */
seen_at: number, };

export type TeamView = { 
/**
 * Whether this gateway is in a team at all (`[team]`).
 */
enabled: boolean, 
/**
 * This instance's name.
 */
instance: string, 
/**
 * `connected`, or `degraded` while Redis is out of reach.
 */
state: string, 
/**
 * The Redis URL, its password redacted.
 */
redis: string | null, namespace: string | null, 
/**
 * Where the history is recorded: `sqlite` or `postgres`.
 */
history: string, 
/**
 * Whether the history keeps up (its spool, its lag); absent when off.
 */
history_status: HistoryStatus | null, 
/**
 * Every live instance, this one included, by name.
 */
members: Array<Member>, };

export type Page = { requests: Array<RequestSummary>, next_cursor: string | null, };

export type SessionPage = { sessions: Array<SessionSummary>, next_cursor: string | null, };

export type SessionProvider = { provider: string, model: string, requests: number, cache_read_tokens: number, };

export type SessionDetail = { 
/**
 * What the provider's prompt cache saved: the cache-read tokens at the
 * input price, less what they cost. Null without a known price.
 */
cache_saved_usd: number | null, providers: Array<SessionProvider>, 
/**
 * The provider and model of its latest request: what serves it now.
 */
provider: string | null, model: string | null, 
/**
 * Its latest requests (at most the `limit` asked, oldest first).
 */
timeline: Array<RequestSummary>, id: string, 
/**
 * The coding tool, from its requests' user agent (in a list, the
 * greatest of them if they differ; in a session's detail, its latest).
 */
client: string | null, client_version: string | null, user_agent: string | null, first_at: number, last_at: number, requests: number, 
/**
 * Requests whose newest message was the user's own input, not an
 * agent's follow-up after tool calls. A request recorded before turns
 * were told apart counts as one.
 */
turns: number, 
/**
 * All input tokens, cache reads included.
 */
input_tokens: number, output_tokens: number, 
/**
 * Input tokens read from the provider's prompt cache.
 */
cache_read_tokens: number, 
/**
 * Input tokens written to the provider's prompt cache (Anthropic's
 * cache creation); 0 for providers that report none.
 */
cache_write_tokens: number, 
/**
 * `cache_read_tokens / input_tokens`; null without input.
 */
cache_hit_rate: number | null, 
/**
 * Null when no request had a known price.
 */
cost_usd: number | null, fallbacks: number, 
/**
 * Requests that did not end ok.
 */
errors: number, 
/**
 * The members whose keys made its requests, by name; empty when every
 * request was the owner's (or the gateway has no members).
 */
members: Array<string>, };

export type Bucket = "day" | "hour" | "minute";

export type SpendRow = { bucket: string, provider: string, model: string, requests: number, 
/**
 * Requests that did not end ok.
 */
failed: number, fallbacks: number, input_tokens: number, output_tokens: number, cached_tokens: number, 
/**
 * Null when no request in the bucket had a known price.
 */
cost_usd: number | null, 
/**
 * What the answers from the cache would have cost (zero without any).
 */
saved_usd: number, };

export type SpendTotals = { today_usd: number, last_7_days_usd: number, last_30_days_usd: number, saved_today_usd: number, saved_last_7_days_usd: number, saved_last_30_days_usd: number, };

export type MemberSpend = { member: string, requests: number, cost_usd: number, input_tokens: number, output_tokens: number, };

export type SessionSummary = { id: string, 
/**
 * The coding tool, from its requests' user agent (in a list, the
 * greatest of them if they differ; in a session's detail, its latest).
 */
client: string | null, client_version: string | null, user_agent: string | null, first_at: number, last_at: number, requests: number, 
/**
 * Requests whose newest message was the user's own input, not an
 * agent's follow-up after tool calls. A request recorded before turns
 * were told apart counts as one.
 */
turns: number, 
/**
 * All input tokens, cache reads included.
 */
input_tokens: number, output_tokens: number, 
/**
 * Input tokens read from the provider's prompt cache.
 */
cache_read_tokens: number, 
/**
 * Input tokens written to the provider's prompt cache (Anthropic's
 * cache creation); 0 for providers that report none.
 */
cache_write_tokens: number, 
/**
 * `cache_read_tokens / input_tokens`; null without input.
 */
cache_hit_rate: number | null, 
/**
 * Null when no request had a known price.
 */
cost_usd: number | null, fallbacks: number, 
/**
 * Requests that did not end ok.
 */
errors: number, 
/**
 * The members whose keys made its requests, by name; empty when every
 * request was the owner's (or the gateway has no members).
 */
members: Array<string>, };

export type ClientSpend = { 
/**
 * The client's name ([`client_of`]); null for requests without a user agent.
 */
client: string | null, requests: number, input_tokens: number, output_tokens: number, cost_usd: number, };

export type Spend = { bucket: Bucket, rows: Array<SpendRow>, totals: SpendTotals, 
/**
 * Each member's requests and spend since `since` (`member=` keeps one);
 * the owner's requests are in `rows` and in no member's.
 */
by_member: Array<MemberSpend>, 
/**
 * With `by=session`: the sessions with a request since `since`, the
 * costliest first; otherwise empty.
 */
by_session: Array<SessionSummary>, 
/**
 * With `by=client`: each client's requests and spend since `since`;
 * otherwise empty.
 */
by_client: Array<ClientSpend>, };

export type BudgetPeriod = "day" | "week" | "month";

export type BudgetAction = "warn" | "block";

export type BudgetRow = { name: string, 
/**
 * `all`, `provider:NAME`, `model:NAME` or `member:NAME` (a team member's).
 */
scope: string, period: BudgetPeriod, action: BudgetAction, limit_usd: number, spent_usd: number, 
/**
 * Spent over the limit: 1 is the limit.
 */
fraction: number, period_start_ms: number, resets_at_ms: number, 
/**
 * A `block` budget past its limit: requests in scope are refused.
 */
blocking: boolean, 
/**
 * Whether `spent_usd` is the team's (the shared counter, reservations
 * in flight included) rather than this instance's own ledger.
 */
team: boolean, };

export type MemberBudget = { limit_usd: number, period: BudgetPeriod, };

export type MemberState = "active" | "revoked" | "expired";

export type MemberRecord = { name: string, created_at_ms: number, expires_at_ms: number | null, revoked_at_ms: number | null, budget: MemberBudget | null, 
/**
 * Requests a minute.
 */
rpm: number | null, 
/**
 * Tokens a minute (estimated from the request's size, as the
 * providers' token buckets are).
 */
tpm: number | null, 
/**
 * Globs of the models the member may ask for (`claude-*`); empty: any.
 */
models: Array<string>, };

export type MemberView = { state: MemberState, name: string, created_at_ms: number, expires_at_ms: number | null, revoked_at_ms: number | null, budget: MemberBudget | null, 
/**
 * Requests a minute.
 */
rpm: number | null, 
/**
 * Tokens a minute (estimated from the request's size, as the
 * providers' token buckets are).
 */
tpm: number | null, 
/**
 * Globs of the models the member may ask for (`claude-*`); empty: any.
 */
models: Array<string>, };

export type ModelAlias = { client: string, upstream: string, };

export type ProviderForm = { kind: string, base_url: string, 
/**
 * Client-facing name → the provider's own name (the same when not an alias).
 */
models: Array<ModelAlias>, 
/**
 * `"key"` (the default) or `"none"`.
 */
auth: string | null, };

export type KeyNeed = "key" | "none";

export type ProviderEntry = { name: string, kind: string, base_url: string, models: Array<ModelAlias>, auth: KeyNeed, };

export type RouteEntry = { model: string, chain: Array<string>, strategy: Strategy, 
/**
 * Each chain entry's weight, on a weighted route that gives weights.
 */
weights: Array<number> | null, };

export type RouteForm = { chain: Array<string> | null, 
/**
 * `"ordered"`, `"latency"`, `"least_busy"`, `"cheapest"` or `"weighted"`.
 */
strategy: string | null, 
/**
 * A weight per chain entry (a weighted route), in chain order.
 */
weights: Array<number> | null, };

export type Share = { provider: string, 
/**
 * Requests it answered in the window.
 */
requests: number, 
/**
 * Its part of the route's answered requests, 0 to 1.
 */
share: number, };

export type ChainEntry = { provider: string, 
/**
 * Its weight, on a weighted route that gives weights.
 */
weight: number | null, };

export type RouteView = { model: string, strategy: Strategy, chain: Array<ChainEntry>, 
/**
 * `cheapest`'s latency bound, in ms.
 */
max_latency_ms: number | null, 
/**
 * When a late first byte is hedged (`"300ms"`, `"p95"`), if it is.
 */
hedge_after: string | null, 
/**
 * The most of the route's requests in a minute that are hedged.
 */
hedge_max_share: number | null, split: Array<Share>, };

export type UnroutedView = { strategy: Strategy, split: Array<Share>, };

export type RoutesView = { routes: Array<RouteView>, 
/**
 * Models without a route of their own: `[policy]`'s strategy, over
 * every provider that lists the model.
 */
unrouted: UnroutedView, 
/**
 * How far back each split looks.
 */
split_window_s: number, };

export type Setting = string | number | number | boolean;

export type Settings = { server: { [key in string]: Setting }, policy: { [key in string]: Setting }, history: { [key in string]: Setting }, };

export type ConfigView = { 
/**
 * The file edits go to; null on the embedded default.
 */
path: string | null, editable: boolean, providers: Array<ProviderEntry>, routes: Array<RouteEntry>, settings: Settings, };

export type AlertKind = "budget_threshold" | "breaker_open" | "key_revoked" | "fallback_storm";

export type RequestBrief = { id: string, endpoint: string, model: string | null, provider: string | null, outcome: RequestOutcome, status: number | null, duration_ms: number, ttft_ms: number | null, input_tokens: number | null, output_tokens: number | null, cost_usd: number | null, 
/**
 * What the response cache did; null when it was not consulted.
 */
cache: CacheStatus | null, 
/**
 * `provider:status-or-outcome` per attempt, in order.
 */
attempts: Array<string>, 
/**
 * The member whose key made the request; null for the owner (or a
 * gateway without members). Absent from an older instance's events.
 */
member: string | null, 
/**
 * The session it belongs to ([`crate::session`]): in a team, the
 * other instances keep the session on the provider that served it.
 * Absent from an older instance's events.
 */
session: string | null, };

export type GatewayEvent = { "type": "request_finished", request: RequestBrief, } | { "type": "fallback", request_id: string, model: string | null, from: string, to: string, reason: string, } | { "type": "breaker", provider: string, from: BreakerState, to: BreakerState, reason: string, request_id?: string | null, } | { "type": "health", provider: string, from: PassiveHealth, to: PassiveHealth, reason: string, request_id?: string | null, } | { "type": "key_revoked", provider: string, label: string, reason: string, request_id?: string | null, } | { "type": "key_cooling", provider: string, label: string | null, until_ms: number, request_id?: string | null, } | { "type": "provider_toggled", provider: string, enabled: boolean, } | { "type": "config_reloaded", ok: boolean, error: string | null, } | { "type": "alert", kind: AlertKind, subject: string, title: string, message: string, suppressed: number, };

export type Envelope = { id: number, at_ms: number, 
/**
 * In team mode, the instance where it happened when that is another
 * one; absent for this instance's own events.
 */
instance?: string, } & ({ "type": "request_finished", request: RequestBrief, } | { "type": "fallback", request_id: string, model: string | null, from: string, to: string, reason: string, } | { "type": "breaker", provider: string, from: BreakerState, to: BreakerState, reason: string, request_id?: string | null, } | { "type": "health", provider: string, from: PassiveHealth, to: PassiveHealth, reason: string, request_id?: string | null, } | { "type": "key_revoked", provider: string, label: string, reason: string, request_id?: string | null, } | { "type": "key_cooling", provider: string, label: string | null, until_ms: number, request_id?: string | null, } | { "type": "provider_toggled", provider: string, enabled: boolean, } | { "type": "config_reloaded", ok: boolean, error: string | null, } | { "type": "alert", kind: AlertKind, subject: string, title: string, message: string, suppressed: number, });

export type SnapshotKind = "snapshot";

export type Snapshot = { type: SnapshotKind, last_event_id: number, providers: Array<ProviderView>, 
/**
 * The latest state changes, oldest first.
 */
recent: Array<Envelope>, };

export type StreamMessage = Snapshot | Envelope;
