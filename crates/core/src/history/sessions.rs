//! Sessions on record: a coding agent's conversation, summed from its
//! request rows ([`crate::session`] says how a request's session is found).
//! The SQL is the same for both backends ([`session_sql!`], expanded in each
//! backend's module as `sql_common!` is) and always bounded by time, so that
//! a list reads the days it shows and a session's rows are reached by the
//! `(session, started_at)` index.

use serde::{Deserialize, Serialize};

use super::pricing::Prices;
use super::store::RequestSummary;

/// How far back a list looks when no `since` is given.
pub const DEFAULT_WINDOW_MS: i64 = 7 * 86_400_000;
/// How far back one session is looked for when no `since` is given.
pub const DETAIL_WINDOW_MS: i64 = 30 * 86_400_000;
pub(super) const DEFAULT_PAGE: u32 = 50;
pub const MAX_PAGE: u32 = 500;
/// The most requests a session's timeline carries; its figures count them all.
pub const MAX_TIMELINE: u32 = 2000;

/// The coding tools known by their user agents' product tokens: the name
/// shown, then the prefixes that are theirs (the same as the Tools view's).
const KNOWN: &[(&str, &[&str])] = &[
    ("claude-code", &["claude-cli/", "claude-code/"]),
    ("codex", &["codex_exec/", "codex_cli_rs/", "codex-"]),
    ("gemini-cli", &["GeminiCLI/", "GeminiCLI-"]),
];

/// Filters for listing sessions; all optional, text matched exactly.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SessionFilter {
    /// A client's name as [`client_of`] gives it (`claude-code`, `codex`, …).
    pub client: Option<String>,
    /// Sessions with at least one request for this model.
    pub model: Option<String>,
    /// Sessions with at least one request answered by this provider.
    pub provider: Option<String>,
    pub member: Option<String>,
    /// Unix ms, inclusive; [`DEFAULT_WINDOW_MS`] ago when absent.
    pub since: Option<i64>,
    /// Unix ms, exclusive.
    pub until: Option<i64>,
    /// From a previous page's `next_cursor`.
    pub cursor: Option<String>,
    pub limit: Option<u32>,
}

/// One session's figures, summed over its requests in the window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SessionSummary {
    pub id: String,
    /// The coding tool, from its requests' user agent (in a list, the
    /// greatest of them if they differ; in a session's detail, its latest).
    pub client: Option<String>,
    pub client_version: Option<String>,
    pub user_agent: Option<String>,
    pub first_at: i64,
    pub last_at: i64,
    pub requests: i64,
    /// Requests whose newest message was the user's own input, not an
    /// agent's follow-up after tool calls. A request recorded before turns
    /// were told apart counts as one.
    pub turns: i64,
    /// All input tokens, cache reads included.
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: i64,
    /// Input tokens written to the provider's prompt cache (Anthropic's
    /// cache creation); 0 for providers that report none.
    pub cache_write_tokens: i64,
    /// `cache_read_tokens / input_tokens`; null without input.
    pub cache_hit_rate: Option<f64>,
    /// Null when no request had a known price.
    pub cost_usd: Option<f64>,
    pub fallbacks: i64,
    /// Requests that did not end ok.
    pub errors: i64,
    /// The members whose keys made its requests, by name; empty when every
    /// request was the owner's (or the gateway has no members).
    pub members: Vec<String>,
}

/// A page of sessions, newest last request first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SessionPage {
    pub sessions: Vec<SessionSummary>,
    pub next_cursor: Option<String>,
}

/// A provider and model that served a session, with its share.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SessionProvider {
    pub provider: String,
    pub model: String,
    pub requests: i64,
    pub cache_read_tokens: i64,
}

/// A session with what served it and its requests, oldest first.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SessionDetail {
    #[serde(flatten)]
    pub summary: SessionSummary,
    /// What the provider's prompt cache saved: the cache-read tokens at the
    /// input price, less what they cost. Null without a known price.
    pub cache_saved_usd: Option<f64>,
    pub providers: Vec<SessionProvider>,
    /// The provider and model of its latest request: what serves it now.
    pub provider: Option<String>,
    pub model: Option<String>,
    /// Its latest requests (at most the `limit` asked, oldest first).
    pub timeline: Vec<RequestSummary>,
}

/// The client and its version named by a user agent: a known tool by its
/// name, else the agent's first product token.
pub fn client_of(user_agent: &str) -> (Option<String>, Option<String>) {
    let product = user_agent.split_whitespace().next().unwrap_or("");
    if product.is_empty() {
        return (None, None);
    }
    let version = product.split('/').nth(1).filter(|v| !v.is_empty()).map(str::to_string);
    let name = KNOWN
        .iter()
        .find(|(_, prefixes)| prefixes.iter().any(|p| product.starts_with(p)))
        .map_or_else(|| product.split('/').next().unwrap_or(product).to_string(), |(name, _)| name.to_string());
    (Some(name), version)
}

/// The user-agent prefixes a client filter matches.
pub(super) fn client_prefixes(client: &str) -> Vec<String> {
    KNOWN
        .iter()
        .find(|(name, _)| *name == client)
        .map_or_else(|| vec![format!("{client}/")], |(_, prefixes)| prefixes.iter().map(|p| p.to_string()).collect())
}

/// What the cache reads of these rows saved, at each model's input price.
pub(super) fn cache_saved(prices: &Prices, providers: &[SessionProvider]) -> Option<f64> {
    let mut saved = None;
    for p in providers.iter().filter(|p| p.cache_read_tokens > 0) {
        if let Some(price) = prices.find(&p.provider, &p.model) {
            let per_token = (price.input - price.cached.unwrap_or(price.input)) / 1_000_000.0;
            *saved.get_or_insert(0.0) += p.cache_read_tokens as f64 * per_token;
        }
    }
    saved
}

pub(super) fn hit_rate(input: i64, cache_read: i64) -> Option<f64> {
    (input > 0).then(|| cache_read as f64 / input as f64)
}

pub(super) fn page_size(filter: &SessionFilter) -> u32 {
    filter.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE)
}

/// The members named by a session's rows, from the database's list of
/// them (distinct names joined by commas: a name has none of its own).
pub(super) fn members_of(joined: Option<&str>) -> Vec<String> {
    let mut names: Vec<String> =
        joined.unwrap_or("").split(',').filter(|n| !n.is_empty()).map(str::to_string).collect();
    names.sort();
    names.dedup();
    names
}

/// Expands, for a database `$db`, its way `$by_time` to make a scan walk
/// the time index and its aggregate `$members` of a group's distinct
/// `r.member` joined by commas, the session queries over `requests r`.
/// Uses `SUMMARY_COLUMNS` and `summary` of `sql_common!`, expanded beside it.
macro_rules! session_sql {
    ($db:ty, $by_time:literal, $members:literal) => {
        const SESSION_COLUMNS: &str = concat!(
            $members,
            " AS members, r.session AS session, MIN(r.started_at) AS first_at,
            MAX(r.started_at) AS last_at, COUNT(*) AS requests, MAX(r.user_agent) AS user_agent,
            CAST(COALESCE(SUM(r.input_tokens), 0) AS BIGINT) AS input_tokens,
            CAST(COALESCE(SUM(r.output_tokens), 0) AS BIGINT) AS output_tokens,
            CAST(COALESCE(SUM(r.cached_tokens), 0) AS BIGINT) AS cached_tokens,
            CAST(COALESCE(SUM(r.cache_write_tokens), 0) AS BIGINT) AS cache_write_tokens,
            CAST(SUM(CASE WHEN r.turn = FALSE THEN 0 ELSE 1 END) AS BIGINT) AS turns,
            SUM(r.cost_usd) AS cost_usd,
            CAST(SUM(CASE WHEN r.fallback = TRUE THEN 1 ELSE 0 END) AS BIGINT) AS fallbacks,
            CAST(SUM(CASE WHEN r.outcome <> 'ok' THEN 1 ELSE 0 END) AS BIGINT) AS errors"
        );

        fn session_row(r: &<$db as sqlx::Database>::Row) -> Result<super::sessions::SessionSummary, StoreError> {
            use sqlx::Row as _;
            let user_agent: Option<String> = r.try_get("user_agent")?;
            let (client, client_version) =
                user_agent.as_deref().map(super::sessions::client_of).unwrap_or((None, None));
            let requests: i64 = r.try_get("requests")?;
            let input_tokens: i64 = r.try_get("input_tokens")?;
            let cache_read_tokens: i64 = r.try_get("cached_tokens")?;
            let members: Option<String> = r.try_get("members")?;
            Ok(super::sessions::SessionSummary {
                id: r.try_get("session")?,
                client,
                client_version,
                user_agent,
                first_at: r.try_get("first_at")?,
                last_at: r.try_get("last_at")?,
                requests,
                turns: r.try_get("turns")?,
                input_tokens,
                output_tokens: r.try_get("output_tokens")?,
                cache_read_tokens,
                cache_write_tokens: r.try_get("cache_write_tokens")?,
                cache_hit_rate: super::sessions::hit_rate(input_tokens, cache_read_tokens),
                cost_usd: r.try_get("cost_usd")?,
                fallbacks: r.try_get("fallbacks")?,
                errors: r.try_get("errors")?,
                members: super::sessions::members_of(members.as_deref()),
            })
        }

        /// The time bounds on `r`: every session query reads only its days.
        fn session_bound(q: &mut QueryBuilder<$db>, since: i64, until: Option<i64>) {
            q.push(" AND r.started_at >= ").push_bind(since);
            if let Some(u) = until {
                q.push(" AND r.started_at < ").push_bind(u);
            }
        }

        /// The list's query: the window's rows, walked by the time index
        /// (`$by_time`: a session index would walk every session on record),
        /// grouped by session, newest last request first.
        fn sessions_query(
            select: &str,
            filter: &super::sessions::SessionFilter,
            now: i64,
        ) -> Result<QueryBuilder<$db>, StoreError> {
            let limit = super::sessions::page_size(filter);
            let since = filter.since.unwrap_or(now - super::sessions::DEFAULT_WINDOW_MS);
            let mut q =
                QueryBuilder::<$db>::new(format!("{select} FROM requests r {} WHERE r.session IS NOT NULL", $by_time));
            session_bound(&mut q, since, filter.until);
            if let Some(m) = &filter.member {
                q.push(" AND r.member = ").push_bind(m.clone());
            }
            q.push(" GROUP BY r.session HAVING 1 = 1");
            // Facets of a session: any of its requests in the window has it.
            if let Some(m) = &filter.model {
                q.push(" AND SUM(CASE WHEN r.model = ").push_bind(m.clone()).push(" THEN 1 ELSE 0 END) > 0");
            }
            if let Some(p) = &filter.provider {
                q.push(" AND SUM(CASE WHEN r.provider = ").push_bind(p.clone()).push(" THEN 1 ELSE 0 END) > 0");
            }
            if let Some(c) = &filter.client {
                q.push(" AND (1 = 0");
                for prefix in super::sessions::client_prefixes(c) {
                    q.push(" OR substr(MAX(r.user_agent), 1, CAST(").push_bind(prefix.chars().count() as i64);
                    q.push(" AS INTEGER)) = ").push_bind(prefix);
                }
                q.push(")");
            }
            if let Some(cursor) = &filter.cursor {
                let (at, id) = parse_cursor(cursor)?;
                q.push(" AND (MAX(r.started_at) < ").push_bind(at);
                q.push(" OR MAX(r.started_at) = ").push_bind(at).push(" AND r.session < ").push_bind(id).push(")");
            }
            q.push(" ORDER BY last_at DESC, session DESC LIMIT ").push_bind(i64::from(limit) + 1);
            Ok(q)
        }

        /// Sessions with a request in the window, newest last request first.
        pub(crate) async fn list_sessions(
            pool: &sqlx::Pool<$db>,
            filter: &super::sessions::SessionFilter,
            now: i64,
        ) -> Result<super::sessions::SessionPage, StoreError> {
            let limit = super::sessions::page_size(filter);
            let mut q = sessions_query(&format!("SELECT {SESSION_COLUMNS}"), filter, now)?;
            let rows = q.build().fetch_all(pool).await?;
            let mut sessions: Vec<super::sessions::SessionSummary> =
                rows.iter().map(session_row).collect::<Result<_, _>>()?;
            let next_cursor = if sessions.len() > limit as usize {
                sessions.truncate(limit as usize);
                sessions.last().map(|s| format!("{}:{}", s.last_at, s.id))
            } else {
                None
            };
            Ok(super::sessions::SessionPage { sessions, next_cursor })
        }

        /// One session's figures, what served it and its latest requests.
        pub(crate) async fn one_session(
            pool: &sqlx::Pool<$db>,
            id: &str,
            window: (i64, Option<i64>),
            timeline: u32,
            prices: Option<&super::pricing::Prices>,
        ) -> Result<Option<super::sessions::SessionDetail>, StoreError> {
            use sqlx::Row as _;
            let (since, until) = window;
            let mut q =
                QueryBuilder::<$db>::new(format!("SELECT {SESSION_COLUMNS} FROM requests r WHERE r.session = "));
            q.push_bind(id.to_string());
            session_bound(&mut q, since, until);
            q.push(" GROUP BY r.session");
            let Some(row) = q.build().fetch_optional(pool).await? else { return Ok(None) };
            let mut figures = session_row(&row)?;

            let mut q = QueryBuilder::<$db>::new(
                "SELECT r.provider AS provider, COALESCE(r.provider_model, '') AS model, COUNT(*) AS requests,
                CAST(COALESCE(SUM(r.cached_tokens), 0) AS BIGINT) AS cached_tokens
                FROM requests r WHERE r.provider IS NOT NULL AND r.session = ",
            );
            q.push_bind(id.to_string());
            session_bound(&mut q, since, until);
            q.push(" GROUP BY r.provider, r.provider_model ORDER BY requests DESC, provider, model");
            let providers = q
                .build()
                .fetch_all(pool)
                .await?
                .iter()
                .map(|r| {
                    Ok(super::sessions::SessionProvider {
                        provider: r.try_get("provider")?,
                        model: r.try_get("model")?,
                        requests: r.try_get("requests")?,
                        cache_read_tokens: r.try_get("cached_tokens")?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;

            let mut q =
                QueryBuilder::<$db>::new(format!("SELECT {SUMMARY_COLUMNS} FROM requests r WHERE r.session = "));
            q.push_bind(id.to_string());
            session_bound(&mut q, since, until);
            q.push(" ORDER BY r.started_at DESC, r.id DESC LIMIT ").push_bind(i64::from(timeline.max(1)));
            let mut requests: Vec<RequestSummary> =
                q.build().fetch_all(pool).await?.iter().map(summary).collect::<Result<_, _>>()?;
            requests.reverse();
            let latest = requests.last();
            let (provider, model) = (
                latest.and_then(|r| r.provider.clone()),
                latest.and_then(|r| r.provider_model.clone().or_else(|| r.model.clone())),
            );
            // The client is the latest request's, as the list shows it.
            if let Some(ua) = latest.and_then(|r| r.user_agent.clone()) {
                (figures.client, figures.client_version) = super::sessions::client_of(&ua);
                figures.user_agent = Some(ua);
            }
            if timeline == 0 {
                requests.clear();
            }
            Ok(Some(super::sessions::SessionDetail {
                summary: figures,
                cache_saved_usd: prices.and_then(|p| super::sessions::cache_saved(p, &providers)),
                providers,
                provider,
                model,
                timeline: requests,
            }))
        }

        /// Requests, tokens and cost per user agent since `since`, for the
        /// spend by client.
        pub(crate) async fn agent_spend(
            pool: &sqlx::Pool<$db>,
            since: i64,
        ) -> Result<Vec<(Option<String>, i64, i64, i64, Option<f64>)>, StoreError> {
            use sqlx::Row as _;
            let mut q = QueryBuilder::<$db>::new(
                "SELECT r.user_agent AS user_agent, COUNT(*) AS requests,
                CAST(COALESCE(SUM(r.input_tokens), 0) AS BIGINT) AS input_tokens,
                CAST(COALESCE(SUM(r.output_tokens), 0) AS BIGINT) AS output_tokens,
                SUM(r.cost_usd) AS cost_usd FROM requests r WHERE 1 = 1",
            );
            session_bound(&mut q, since, None);
            q.push(" GROUP BY r.user_agent");
            q.build()
                .fetch_all(pool)
                .await?
                .iter()
                .map(|r| {
                    Ok((
                        r.try_get("user_agent")?,
                        r.try_get("requests")?,
                        r.try_get("input_tokens")?,
                        r.try_get("output_tokens")?,
                        r.try_get("cost_usd")?,
                    ))
                })
                .collect()
        }
    };
}

pub(crate) use session_sql;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_named_from_their_user_agents() {
        let named = |ua: &str| client_of(ua);
        assert_eq!(named("claude-cli/2.1.197 (external, cli)"), (Some("claude-code".into()), Some("2.1.197".into())));
        assert_eq!(named("codex_exec/0.171.0 (Debian; x86_64)"), (Some("codex".into()), Some("0.171.0".into())));
        assert_eq!(
            named("GeminiCLI/0.61.0/gemini-2.5 (linux; x64)"),
            (Some("gemini-cli".into()), Some("0.61.0".into()))
        );
        assert_eq!(
            named("GeminiCLI-tui/0.61.0/gemini-2.5-pro (linux; x64; terminal)").0.as_deref(),
            Some("gemini-cli")
        );
        assert_eq!(named("aider/0.86"), (Some("aider".into()), Some("0.86".into())));
        assert_eq!(named(""), (None, None));
        assert_eq!(client_prefixes("codex").len(), 3);
        assert_eq!(client_prefixes("aider"), ["aider/"]);
    }
}
