//! The admin API's types in TypeScript, for the dashboard: generated from
//! the Rust types the API serializes (ts-rs reads their serde attributes),
//! committed as `ui/src/lib/contract.ts`, and checked here so the two cannot
//! drift apart. Run `SWITCHYARD_BLESS=1 cargo test -p switchyard-core --lib
//! contract` after changing one of these types.

use std::path::PathBuf;

use ts_rs::{Config, TS};

use crate::admin::config::{ConfigView, KeyNeed, ProviderEntry, RouteEntry, Setting, Settings};
use crate::admin::live::{ProviderStats, Snapshot, SnapshotKind, StatsView, StreamMessage};
use crate::admin::{Spend, SpendTotals};
use crate::config::edit::{ModelAlias, ProviderForm};
use crate::ground::outcome::AttemptOutcome;
use crate::ground::outcome::Reason;
use crate::ground::outcome::RequestOutcome;
use crate::history::record::{AttemptDropped, AttemptRecord, AttemptTranslation};
use crate::history::store::{Bucket, Page, RequestDetail, RequestSummary, SpendRow};
use crate::policy::breaker::BreakerState;
use crate::protocol::usage::Usage;
use crate::telemetry::events::{Envelope, EventKind, GatewayEvent, PassiveHealth, RequestBrief};
use crate::telemetry::health::{ModelView, ProbeResult, ProviderState, ProviderStateName, ProviderView, Windows};
use crate::telemetry::stats::{Today, Window};
use crate::upstream::keys::{KeyStatus, KeySummary};

const HEADER: &str = "\
// The admin API's types, generated from the Rust types that serialize them
// (crates/core/src/contract.rs). Do not edit: change the Rust type, then run
//   SWITCHYARD_BLESS=1 cargo test -p switchyard-core --lib contract
// `cargo test` fails while this file differs from a fresh generation.
";

/// Every type in the file, each after the ones it names where that reads best.
fn declarations(cfg: &Config) -> Vec<String> {
    vec![
        // Outcomes and states.
        RequestOutcome::decl(cfg),
        AttemptOutcome::decl(cfg),
        Reason::decl(cfg),
        BreakerState::decl(cfg),
        ProviderStateName::decl(cfg),
        PassiveHealth::decl(cfg),
        KeyStatus::decl(cfg),
        EventKind::decl(cfg),
        crate::ground::outcome::CacheStatus::decl(cfg),
        // Providers.
        Usage::decl(cfg),
        Window::decl(cfg),
        Windows::decl(cfg),
        Today::decl(cfg),
        KeySummary::decl(cfg),
        ModelView::decl(cfg),
        ProviderState::decl(cfg),
        crate::telemetry::health::QueueView::decl(cfg),
        crate::telemetry::health::LastProbe::decl(cfg),
        ProviderView::decl(cfg),
        ProbeResult::decl(cfg),
        crate::admin::try_it::TryResult::decl(cfg),
        ProviderStats::decl(cfg),
        crate::history::HistoryStatus::decl(cfg),
        StatsView::decl(cfg),
        // History.
        RequestSummary::decl(cfg),
        AttemptRecord::decl(cfg),
        crate::protocol::Format::decl(cfg),
        AttemptTranslation::decl(cfg),
        AttemptDropped::decl(cfg),
        crate::upstream::strategy::Strategy::decl(cfg),
        crate::upstream::strategy::Routing::decl(cfg),
        crate::history::record::AttemptRouting::decl(cfg),
        RequestDetail::decl(cfg),
        // The inspector.
        crate::proxy::capture::CapturedBody::decl(cfg),
        crate::proxy::capture::CapturedRequest::decl(cfg),
        crate::proxy::capture::CapturedEvent::decl(cfg),
        crate::proxy::capture::CapturedResponse::decl(cfg),
        crate::proxy::capture::CapturedAttempt::decl(cfg),
        crate::proxy::capture::Captured::decl(cfg),
        crate::admin::inspector::Change::decl(cfg),
        crate::admin::inspector::AttemptChanges::decl(cfg),
        crate::admin::inspector::Inspection::decl(cfg),
        crate::admin::inspector::ReplayAsk::decl(cfg),
        crate::admin::inspector::Replayed::decl(cfg),
        crate::gateway::capture::SwitchState::decl(cfg),
        // The team.
        crate::team::Member::decl(cfg),
        crate::team::TeamView::decl(cfg),
        Page::decl(cfg),
        // Sessions.
        crate::history::SessionPage::decl(cfg),
        crate::history::SessionProvider::decl(cfg),
        crate::history::SessionDetail::decl(cfg),
        // Spend.
        Bucket::decl(cfg),
        SpendRow::decl(cfg),
        SpendTotals::decl(cfg),
        crate::members::MemberSpend::decl(cfg),
        crate::history::SessionSummary::decl(cfg),
        crate::admin::sessions::ClientSpend::decl(cfg),
        Spend::decl(cfg),
        crate::policy::BudgetPeriod::decl(cfg),
        crate::policy::BudgetAction::decl(cfg),
        crate::policy::BudgetRow::decl(cfg),
        // Team members (people with keys of their own).
        crate::members::Budget::decl(cfg),
        crate::members::MemberState::decl(cfg),
        crate::members::Member::decl(cfg),
        crate::members::ops::MemberView::decl(cfg),
        // Configuration.
        ModelAlias::decl(cfg),
        ProviderForm::decl(cfg),
        KeyNeed::decl(cfg),
        ProviderEntry::decl(cfg),
        RouteEntry::decl(cfg),
        crate::config::edit::RouteForm::decl(cfg),
        crate::upstream::strategy::Share::decl(cfg),
        crate::admin::routes::ChainEntry::decl(cfg),
        crate::admin::routes::RouteView::decl(cfg),
        crate::admin::routes::UnroutedView::decl(cfg),
        crate::admin::routes::RoutesView::decl(cfg),
        Setting::decl(cfg),
        Settings::decl(cfg),
        ConfigView::decl(cfg),
        // The live stream.
        crate::telemetry::AlertKind::decl(cfg),
        RequestBrief::decl(cfg),
        GatewayEvent::decl(cfg),
        Envelope::decl(cfg),
        SnapshotKind::decl(cfg),
        Snapshot::decl(cfg),
        StreamMessage::decl(cfg),
    ]
}

/// The file as it should be.
fn generate() -> String {
    // JSON numbers: the API's integers all fit in a double.
    let cfg = Config::new().with_large_int("number");
    let mut out = String::from(HEADER);
    for decl in declarations(&cfg) {
        out.push('\n');
        out.push_str("export ");
        out.push_str(decl.trim());
        out.push('\n');
    }
    out
}

fn committed() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../ui/src/lib/contract.ts")
}

#[test]
fn the_committed_typescript_matches_the_rust_types() {
    let fresh = generate();
    if std::env::var_os("SWITCHYARD_BLESS").is_some() {
        std::fs::write(committed(), &fresh).unwrap_or_else(|e| panic!("writing {}: {e}", committed().display()));
        return;
    }
    // Written beside the test's temp files too, for a diff by hand.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let fresh_path = dir.path().join("contract.ts");
    std::fs::write(&fresh_path, &fresh).unwrap_or_else(|e| panic!("writing {}: {e}", fresh_path.display()));
    let on_disk = std::fs::read_to_string(committed()).unwrap_or_default();
    assert!(
        on_disk == fresh,
        "ui/src/lib/contract.ts differs from the Rust types it is generated from.\n\
         Regenerate it: SWITCHYARD_BLESS=1 cargo test -p switchyard-core --lib contract\n\
         (then rebuild the dashboard: npm --prefix ui run build)"
    );
}
