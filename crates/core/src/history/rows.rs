//! What both SQL backends share: the request list's query, built from a
//! filter with bound parameters only, and the readers of its rows. One
//! text, expanded in each backend's module for its own row and query
//! types ([`sql_common`]), so the two cannot drift apart; the SQL is what
//! SQLite and PostgreSQL both read the same way.

/// Expands, for a database `$db` with rows `$row`, and `$facet_join`,
/// how a facet entry `f` reaches its request `r` in that database's SQL:
/// `SUMMARY_COLUMNS`,
/// `push_pieces`, `list_query`, and the row readers `summary`, `attempt`,
/// `translation`, `dropped`, `client`.
macro_rules! sql_common {
    ($db:ty, $row:ty, $facet_join:literal) => {
        const SUMMARY_COLUMNS: &str = "r.id, r.correlation_id, r.started_at, r.finished_at, r.user_agent, r.endpoint,
            r.model, r.streamed, r.outcome, r.status, r.provider, r.provider_model, r.attempts, r.fallback, r.duration_ms,
            r.ttft_ms, r.input_tokens, r.output_tokens, r.cached_tokens, r.cost_usd, r.error_code, r.error, r.cache,
            r.saved_usd, r.instance, r.member, r.session, r.cache_write_tokens, r.turn, r.device";

        /// `SELECT columns FROM rollups` over [`spend_pieces`], joined by `UNION ALL`.
        fn push_pieces(q: &mut QueryBuilder<$db>, columns: &str, bucket: Bucket, since: i64) {
            for (i, (span, from, to)) in spend_pieces(bucket, since).into_iter().enumerate() {
                if i > 0 {
                    q.push(" UNION ALL ");
                }
                q.push(format!("SELECT {columns} FROM rollups WHERE span = ")).push_bind(span);
                q.push(" AND start >= ").push_bind(from).push(" AND start < ").push_bind(to);
            }
        }

        fn usage_row(r: &$row) -> Result<Usage, sqlx::Error> {
            let counts = [r.try_get("input_tokens")?, r.try_get("output_tokens")?, r.try_get("cached_tokens")?];
            Ok(Usage::from_columns(counts).with_cache_writes(r.try_get("cache_write_tokens")?))
        }

        /// A column that holds one of the values of a serde enum (`outcome`, `reason`).
        fn named<T: serde::de::DeserializeOwned>(r: &$row, column: &str) -> Result<T, StoreError> {
            let text: String = r.try_get(column)?;
            from_name(column, text)
        }

        /// A nullable column of a serde enum's values (`cache`).
        fn maybe_named<T: serde::de::DeserializeOwned>(r: &$row, column: &str) -> Result<Option<T>, StoreError> {
            r.try_get::<Option<String>, _>(column)?.map(|text| from_name(column, text)).transpose()
        }

        /// `select` (columns of `requests r`) with the filter's conditions, newest
        /// first, one row more than a page (to tell whether another follows). A
        /// filter that selects few rows walks its facet entries (`f`), and every
        /// other filter is checked on the rows it reaches; otherwise the rows are
        /// walked by the time index.
        fn list_query(select: &str, filter: &RequestFilter) -> Result<QueryBuilder<$db>, StoreError> {
            let driving = driving_facet(filter);
            let mut q = QueryBuilder::<$db>::new(select);
            // Time and order are the facet entry's when it drives: its key.
            let t = match driving {
                Some((facet, value)) => {
                    q.push(concat!(" FROM request_facets f ", $facet_join, " WHERE f.facet = "))
                        .push_bind(facet.code())
                        .push(" AND f.value = ")
                        .push_bind(value.to_string());
                    "f"
                }
                None => {
                    q.push(" FROM requests r WHERE 1 = 1");
                    "r"
                }
            };
            let others = |facet: Facet| driving.map(|(f, _)| f) != Some(facet);
            // The filter's time bounds on every table the query reads, not
            // only the one that orders it: each is then planned over the
            // days (the partitions, on PostgreSQL) within them alone.
            let bound = |q: &mut QueryBuilder<$db>, alias: &str| {
                if let Some(s) = filter.since {
                    q.push(format!(" AND {alias}.started_at >= ")).push_bind(s);
                }
                if let Some(u) = filter.until {
                    q.push(format!(" AND {alias}.started_at < ")).push_bind(u);
                }
            };
            // Facets that do not drive are looked up per row, by their key.
            let has_facet = |q: &mut QueryBuilder<$db>, facet: Facet, value: &str| {
                q.push(" AND EXISTS (SELECT 1 FROM request_facets g WHERE g.facet = ")
                    .push_bind(facet.code())
                    .push(" AND g.value = ")
                    .push_bind(value.to_string())
                    .push(" AND g.started_at = r.started_at AND g.id = r.id");
                bound(q, "g");
                q.push(")");
            };
            if let Some(p) = filter.provider.as_deref().filter(|_| others(Facet::Provider)) {
                has_facet(&mut q, Facet::Provider, p);
            }
            if let Some(m) = filter.model.as_deref().filter(|_| others(Facet::Model)) {
                has_facet(&mut q, Facet::Model, m);
            }
            if let Some(m) = &filter.member {
                q.push(" AND r.member = ").push_bind(m.clone());
            }
            if let Some(d) = &filter.device {
                q.push(" AND r.device = ").push_bind(d.clone());
            }
            if let Some(s) = &filter.session {
                q.push(" AND r.session = ").push_bind(s.clone());
            }
            if let Some(o) = filter.outcome {
                q.push(" AND r.outcome = ").push_bind(o.as_str().to_string());
            }
            if filter.failed {
                q.push(" AND r.outcome <> 'ok'");
            }
            if filter.fallback {
                q.push(" AND r.fallback = TRUE");
            }
            if let Some(c) = filter.cache.filter(|_| others(Facet::Cache)) {
                q.push(" AND r.cache = ").push_bind(c.as_str().to_string());
            }
            if let Some(text) = filter.search.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
                q.push(" AND (r.correlation_id = ").push_bind(text.to_string());
                // Stored in lowercase, as `traceparent` writes it; some
                // tracing backends show it in capitals.
                q.push(" OR r.trace_id = ").push_bind(text.to_ascii_lowercase());
                q.push(" OR substr(r.id, 1, CAST(").push_bind(text.chars().count() as i64);
                q.push(" AS INTEGER)) = ").push_bind(text.to_string()).push(")");
            }
            if let Some(c) = &filter.correlation_id {
                // The same as `correlation_id = c`, spelled so that each half has
                // its index: the partial one on correlation ids that differ from
                // the request's own, and the primary key for the one that does not.
                q.push(" AND (r.correlation_id = ").push_bind(c.clone()).push(" AND r.correlation_id <> r.id");
                q.push(" OR r.id = ").push_bind(c.clone()).push(" AND r.correlation_id = ").push_bind(c.clone()).push(")");
            }
            bound(&mut q, t);
            if t != "r" {
                bound(&mut q, "r");
            }
            if let Some(cursor) = &filter.cursor {
                let (at, id) = parse_cursor(cursor)?;
                q.push(format!(" AND ({t}.started_at, {t}.id) < (")).push_bind(at).push(", ").push_bind(id).push(")");
            }
            q.push(format!(" ORDER BY {t}.started_at DESC, {t}.id DESC LIMIT ")).push_bind(i64::from(page_size(filter)) + 1);
            Ok(q)
        }

        fn summary(r: &$row) -> Result<RequestSummary, StoreError> {
            Ok(RequestSummary {
                id: r.try_get("id")?,
                correlation_id: r.try_get("correlation_id")?,
                started_at: r.try_get("started_at")?,
                finished_at: r.try_get("finished_at")?,
                user_agent: r.try_get("user_agent")?,
                endpoint: r.try_get("endpoint")?,
                model: r.try_get("model")?,
                streamed: r.try_get("streamed")?,
                outcome: named(r, "outcome")?,
                status: r.try_get("status")?,
                provider: r.try_get("provider")?,
                provider_model: r.try_get("provider_model")?,
                attempts: r.try_get("attempts")?,
                fallback: r.try_get("fallback")?,
                duration_ms: r.try_get("duration_ms")?,
                ttft_ms: r.try_get("ttft_ms")?,
                usage: usage_row(r)?,
                cost_usd: r.try_get("cost_usd")?,
                error_code: r.try_get("error_code")?,
                error: r.try_get("error")?,
                cache: maybe_named(r, "cache")?,
                saved_usd: r.try_get("saved_usd")?,
                instance: r.try_get("instance")?,
                member: r.try_get("member")?,
                session: r.try_get("session")?,
                turn: r.try_get("turn")?,
                device: r.try_get("device")?,
            })
        }

        fn client(r: &$row) -> Result<Client, StoreError> {
            Ok(Client {
                user_agent: r.try_get("user_agent")?,
                requests: r.try_get("requests")?,
                last_at: r.try_get("last_at")?,
                last_id: r.try_get("last_id")?,
                last_model: r.try_get("last_model")?,
                last_outcome: r.try_get("last_outcome")?,
            })
        }

        fn translation(r: &$row) -> Option<AttemptTranslation> {
            let text: String = r.try_get::<Option<String>, _>("translated").ok()??;
            let seq = u32::try_from(r.try_get::<i64, _>("seq").ok()?).ok()?;
            AttemptTranslation::from_column(seq, &text)
        }

        fn dropped(r: &$row) -> Option<AttemptDropped> {
            let text: String = r.try_get::<Option<String>, _>("dropped").ok()??;
            let seq = u32::try_from(r.try_get::<i64, _>("seq").ok()?).ok()?;
            Some(AttemptDropped { seq, fields: serde_json::from_str(&text).ok()? })
        }

        fn routing(r: &$row) -> Option<AttemptRouting> {
            let bytes: Vec<u8> = r.try_get::<Option<Vec<u8>>, _>("routing").ok()??;
            let seq = u32::try_from(r.try_get::<i64, _>("seq").ok()?).ok()?;
            AttemptRouting::from_column(seq, &bytes)
        }

        fn attempt(r: &$row) -> Result<AttemptRecord, StoreError> {
            let small = |column: &str| -> Result<Option<u16>, StoreError> {
                Ok(r.try_get::<Option<i64>, _>(column)?.and_then(|n| u16::try_from(n).ok()))
            };
            Ok(AttemptRecord {
                seq: u32::try_from(r.try_get::<i64, _>("seq")?).unwrap_or(u32::MAX),
                provider: r.try_get("provider")?,
                key_label: r.try_get("key_label")?,
                model: r.try_get("model")?,
                reason: named(r, "reason")?,
                fallback_from: r.try_get("fallback_from")?,
                started_at_ms: r.try_get("started_at")?,
                offset_ms: r.try_get("offset_ms")?,
                timeout_ms: r.try_get("timeout_ms")?,
                backoff_ms: r.try_get("backoff_ms")?,
                duration_ms: r.try_get("duration_ms")?,
                ttfb_ms: r.try_get("ttfb_ms")?,
                ttft_ms: r.try_get("ttft_ms")?,
                status: small("status")?,
                outcome: named(r, "outcome")?,
                retry_after_ms: r.try_get("retry_after_ms")?,
                breaker_state: r.try_get("breaker_state")?,
                error: r.try_get("error")?,
                usage: usage_row(r)?,
            })
        }
    };
}

pub(crate) use sql_common;
