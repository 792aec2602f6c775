//! Every instance's events on every instance's live feed, so one dashboard
//! or `switchyard tail` shows the team: this instance's own go on a Redis
//! stream in small batches, the others' come back from it.
//!
//! The stream is capped (`MAXLEN ~`), so it holds the last few thousand
//! events whoever reads it; events are a view, not a record (the history
//! is the record), and one missed while Redis is out of reach is not sent
//! again.

use std::sync::Arc;
use std::time::Duration;

use redis::streams::StreamReadOptions;
use redis::{AsyncCommands, Value};
use switchyard_core::gateway::Inbound;
use switchyard_core::telemetry::Envelope;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::decode::{self, Dropped, Kind, Why};
use crate::RedisTeam;

/// Events written at once, and how long the first of a batch may wait.
const BATCH: usize = 100;
const LINGER: Duration = Duration::from_millis(20);
/// About how many events the stream keeps.
const KEEP: usize = 5000;
/// How long one blocking read waits for news.
const BLOCK: Duration = Duration::from_secs(1);

/// Writes this instance's events to the team's stream.
pub async fn fan_out(team: Arc<RedisTeam>, gateway: Inbound, stop: CancellationToken) {
    let mut rx = gateway.events();
    let key = team.keys.events();
    loop {
        let first = tokio::select! {
            () = stop.cancelled() => return,
            e = rx.recv() => e,
        };
        let mut batch: Vec<Arc<Envelope>> = match first {
            Ok(e) => vec![e],
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        let deadline = tokio::time::Instant::now() + LINGER;
        while batch.len() < BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Ok(e)) => batch.push(e),
                Ok(Err(RecvError::Lagged(_))) => continue,
                Ok(Err(RecvError::Closed)) | Err(_) => break,
            }
        }
        // Only this instance's own: the others' came from the stream.
        batch.retain(|e| e.instance.is_none());
        let Some(mut con) = team.background().filter(|_| !batch.is_empty()) else { continue };
        let mut pipe = redis::pipe();
        for e in &batch {
            let event = serde_json::to_string(&e.event).unwrap_or_default();
            let at = e.at_ms.to_string();
            let fields =
                [("i", team.id.as_str()), ("n", team.name.as_str()), ("a", at.as_str()), ("e", event.as_str())];
            pipe.xadd_maxlen(&key, redis::streams::StreamMaxlen::Approx(KEEP), "*", &fields).ignore();
        }
        if let Err(e) = pipe.query_async::<()>(&mut con).await {
            debug!("team: events not passed on: {e}");
        }
    }
}

/// Reads the other instances' events from the team's stream into this
/// instance's live feed, on a connection of its own (a blocking read would
/// stall a shared one). The reply is read untyped and each entry decoded
/// on its own ([`decode::stream_entries`], [`decode::event`]): an entry
/// this version cannot read is dropped and passed, never read again.
pub async fn fan_in(client: redis::Client, team: Arc<RedisTeam>, gateway: Inbound, stop: CancellationToken) {
    let key = team.keys.events();
    let mut last = "$".to_string();
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(BLOCK * 3));
    while !stop.is_cancelled() {
        let mut con = match client.get_multiplexed_async_connection_with_config(&config).await {
            Ok(con) => con,
            Err(_) => {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(200)) => continue,
                }
            }
        };
        let options = StreamReadOptions::default().block(BLOCK.as_millis() as usize).count(BATCH * 2);
        loop {
            let (keys, ids) = ([key.as_str()], [last.as_str()]);
            let read = tokio::select! {
                () = stop.cancelled() => return,
                r = con.xread_options::<_, _, Value>(&keys, &ids, &options) => r,
            };
            let entries = match &read {
                Ok(reply) => decode::stream_entries(reply),
                Err(e) => {
                    debug!("team: reading the team's events: {e}");
                    None
                }
            };
            let Some(entries) = entries else {
                if read.is_ok() {
                    decode::report(&Dropped { kind: Kind::Event, why: Why::Form });
                }
                // An error that stays (the key is not a stream) is not
                // asked again at once, on a connection after another.
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(200)) => break,
                }
            };
            for entry in entries {
                last.clone_from(&entry.id);
                let fields = entry.fields.ok_or(Dropped { kind: Kind::Event, why: Why::Form });
                match fields.and_then(|fields| decode::event(&team.id, &fields)) {
                    Ok(Some(heard)) => gateway.take_event(&heard.name, heard.at_ms, heard.event),
                    // This instance's own, on its feed already.
                    Ok(None) => {}
                    Err(dropped) => decode::report(&dropped),
                }
            }
        }
    }
}
