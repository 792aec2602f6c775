//! Period arithmetic on fixed instants in zones with and without clock
//! changes, and the thresholds and blocks that follow from spend.

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::*;

/// Central Europe: clocks go forward on the last Sunday of March at 02:00,
/// back on the last Sunday of October at 03:00.
fn berlin() -> TimeZone {
    TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap()
}

/// New York: forward on the second Sunday of March, back on the first of November.
fn new_york() -> TimeZone {
    TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap()
}

fn ms(rfc3339: &str) -> i64 {
    rfc3339.parse::<Timestamp>().unwrap().as_millisecond()
}

fn span(start: &str, end: &str) -> Bounds {
    Bounds { start_ms: ms(start), end_ms: ms(end) }
}

const HOUR: i64 = 3_600_000;

#[test]
fn a_day_is_local_midnight_to_midnight_and_23_or_25_hours_where_the_clocks_change() {
    let zone = berlin();
    let plain = bounds(BudgetPeriod::Day, ms("2025-06-10T12:00:00Z"), &zone);
    assert_eq!(plain, span("2025-06-09T22:00:00Z", "2025-06-10T22:00:00Z"));
    let spring = bounds(BudgetPeriod::Day, ms("2025-03-30T12:00:00Z"), &zone);
    assert_eq!(spring, span("2025-03-29T23:00:00Z", "2025-03-30T22:00:00Z"));
    assert_eq!(spring.end_ms - spring.start_ms, 23 * HOUR);
    let autumn = bounds(BudgetPeriod::Day, ms("2025-10-26T12:00:00Z"), &zone);
    assert_eq!(autumn.end_ms - autumn.start_ms, 25 * HOUR);
    // 23:30 UTC on the 9th of June is already the 10th in Berlin.
    let late = bounds(BudgetPeriod::Day, ms("2025-06-09T23:30:00Z"), &zone);
    assert_eq!(late.start_ms, ms("2025-06-09T22:00:00Z"));
}

#[test]
fn the_same_instant_is_in_different_days_in_different_zones() {
    let at = ms("2025-06-10T03:00:00Z");
    assert_eq!(bounds(BudgetPeriod::Day, at, &berlin()).start_ms, ms("2025-06-09T22:00:00Z"));
    assert_eq!(bounds(BudgetPeriod::Day, at, &new_york()).start_ms, ms("2025-06-09T04:00:00Z"));
    assert_eq!(bounds(BudgetPeriod::Day, at, &TimeZone::UTC).start_ms, ms("2025-06-10T00:00:00Z"));
    let india = TimeZone::posix("IST-5:30").unwrap();
    assert_eq!(bounds(BudgetPeriod::Day, at, &india).start_ms, ms("2025-06-09T18:30:00Z"));
}

#[test]
fn a_week_starts_on_monday_even_across_a_clock_change() {
    let zone = berlin();
    // Thursday 27 March 2025; the clocks change on Sunday the 30th.
    let week = bounds(BudgetPeriod::Week, ms("2025-03-27T10:00:00Z"), &zone);
    assert_eq!(week, span("2025-03-23T23:00:00Z", "2025-03-30T22:00:00Z"));
    assert_eq!(week.end_ms - week.start_ms, 7 * 24 * HOUR - HOUR);
    // Monday 00:00 is the new week; Sunday 23:59 the old one.
    let monday = ms("2025-03-30T22:00:00Z");
    assert_eq!(bounds(BudgetPeriod::Week, monday, &zone).start_ms, monday);
    assert_eq!(bounds(BudgetPeriod::Week, monday - 1, &zone).end_ms, monday);
    // A week that spans a month's end and a year's.
    let new_year = bounds(BudgetPeriod::Week, ms("2025-01-01T12:00:00Z"), &TimeZone::UTC);
    assert_eq!(new_year, span("2024-12-30T00:00:00Z", "2025-01-06T00:00:00Z"));
}

#[test]
fn a_month_ends_at_the_next_months_first_midnight() {
    let zone = new_york();
    let jan = bounds(BudgetPeriod::Month, ms("2025-01-31T23:59:59Z"), &zone);
    assert_eq!(jan, span("2025-01-01T05:00:00Z", "2025-02-01T05:00:00Z"));
    // 02:00 UTC on 1 February is still 31 January in New York.
    assert_eq!(bounds(BudgetPeriod::Month, ms("2025-02-01T02:00:00Z"), &zone), jan);
    let leap = bounds(BudgetPeriod::Month, ms("2024-02-15T12:00:00Z"), &TimeZone::UTC);
    assert_eq!(leap, span("2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"));
    // March in New York: begins in winter time, ends in summer time.
    let march = bounds(BudgetPeriod::Month, ms("2025-03-20T12:00:00Z"), &zone);
    assert_eq!(march, span("2025-03-01T05:00:00Z", "2025-04-01T04:00:00Z"));
}

#[test]
fn a_day_whose_midnight_is_skipped_starts_when_the_clocks_resume() {
    // Brazil until 2019: clocks went from 00:00 to 01:00 on the first
    // Sunday of November, so 4 November 2018 had no midnight.
    let zone = TimeZone::posix("<-03>3<-02>,M11.1.0/0,M2.3.0/0").unwrap();
    let day = bounds(BudgetPeriod::Day, ms("2018-11-04T15:00:00Z"), &zone);
    assert_eq!(day, span("2018-11-04T03:00:00Z", "2018-11-05T02:00:00Z"));
}

fn budget(name: &str, scope: BudgetScope, period: BudgetPeriod, limit: f64, action: BudgetAction) -> Budget {
    Budget { name: name.into(), scope, period, limit_usd: limit, action }
}

fn thresholds(crossings: &[Crossing]) -> Vec<(String, u8)> {
    crossings.iter().map(|c| (c.budget.clone(), c.threshold)).collect()
}

#[test]
fn thresholds_are_announced_once_each_per_period_and_the_highest_reached_at_once() {
    let zone = berlin();
    let daily = budget("daily", BudgetScope::All, BudgetPeriod::Day, 10.0, BudgetAction::Warn);
    let budgets = Budgets::new(zone, std::slice::from_ref(&daily));
    let t = ms("2025-06-10T08:00:00Z");
    let record = |cost: f64, at: i64| thresholds(&budgets.record("a", "m", None, cost, at, at));
    assert_eq!(record(4.0, t), []);
    assert_eq!(record(1.0, t + 1), [("daily".to_string(), 50)]);
    assert_eq!(record(1.0, t + 2), [], "50% is said once");
    assert_eq!(record(4.0, t + 3), [("daily".to_string(), 100)], "80 and 100 at once: only 100");
    assert_eq!(record(4.0, t + 4), [], "past 100 nothing more");
    // The next day starts over at local midnight (22:00 UTC in summer).
    let tomorrow = ms("2025-06-10T22:00:00Z");
    assert_eq!(record(8.0, tomorrow), [("daily".to_string(), 80)]);
    assert_eq!(budgets.rows(tomorrow)[0].spent_usd, 8.0);
}

#[test]
fn scopes_count_only_their_provider_or_model() {
    let list = [
        budget("openai", BudgetScope::Provider("openai".into()), BudgetPeriod::Month, 10.0, BudgetAction::Warn),
        budget("gpt", BudgetScope::Model("gpt-4o".into()), BudgetPeriod::Week, 10.0, BudgetAction::Warn),
        budget("all", BudgetScope::All, BudgetPeriod::Day, 100.0, BudgetAction::Warn),
    ];
    let budgets = Budgets::new(TimeZone::UTC, &list);
    let t = ms("2025-06-10T08:00:00Z");
    budgets.record("openai", "gpt-4o-mini", None, 3.0, t, t);
    budgets.record("azure", "gpt-4o", None, 2.0, t, t);
    budgets.record("openai", "gpt-4o", None, 1.0, t, t);
    let spent: Vec<f64> = budgets.rows(t).iter().map(|r| r.spent_usd).collect();
    assert_eq!(spent, [4.0, 3.0, 6.0]);
}

#[test]
fn a_request_counts_in_the_period_it_started_in() {
    let daily = budget("d", BudgetScope::All, BudgetPeriod::Day, 10.0, BudgetAction::Warn);
    let budgets = Budgets::new(TimeZone::UTC, &[daily]);
    let midnight = ms("2025-06-11T00:00:00Z");
    // Started a second before midnight, finished after: yesterday's, as the rollups count it.
    budgets.record("a", "m", None, 5.0, midnight - 1000, midnight + 1000);
    assert_eq!(budgets.rows(midnight + 1000)[0].spent_usd, 0.0);
}

#[test]
fn a_block_budget_refuses_its_scope_past_the_limit_until_the_period_resets() {
    let list = [
        budget("a-daily", BudgetScope::Provider("a".into()), BudgetPeriod::Day, 1.0, BudgetAction::Block),
        budget("warn-only", BudgetScope::All, BudgetPeriod::Day, 0.5, BudgetAction::Warn),
    ];
    let budgets = Budgets::new(berlin(), &list);
    let t = ms("2025-06-10T08:00:00Z");
    assert_eq!(budgets.admit("a", "m", t), Ok(()));
    budgets.record("a", "m", None, 1.0, t, t);
    let blocked = budgets.admit("a", "m", t).unwrap_err();
    assert_eq!(blocked.budget, "a-daily");
    assert_eq!(blocked.resets_at_ms, ms("2025-06-10T22:00:00Z"));
    assert!(blocked.to_string().contains("resets at 2025-06-10T22:00:00Z"), "{blocked}");
    assert_eq!(budgets.admit("b", "m", t), Ok(()), "another provider is outside the scope; warn never blocks");
    assert!(budgets.rows(t)[0].blocking && !budgets.rows(t)[1].blocking);
    assert_eq!(budgets.admit("a", "m", blocked.resets_at_ms), Ok(()), "a new day");
}

#[test]
fn of_several_blocking_budgets_the_one_that_resets_last_is_named() {
    let list = [
        budget("day", BudgetScope::All, BudgetPeriod::Day, 1.0, BudgetAction::Block),
        budget("month", BudgetScope::Model("m".into()), BudgetPeriod::Month, 1.0, BudgetAction::Block),
    ];
    let budgets = Budgets::new(TimeZone::UTC, &list);
    let t = ms("2025-06-10T08:00:00Z");
    budgets.record("a", "m", None, 2.0, t, t);
    let blocked = budgets.admit("a", "m", t).unwrap_err();
    assert_eq!((blocked.budget.as_str(), blocked.resets_at_ms), ("month", ms("2025-07-01T00:00:00Z")));
    assert_eq!(budgets.admit("a", "other", t).unwrap_err().budget, "day");
}

#[test]
fn spend_on_record_seeds_the_periods_and_what_it_passed_is_not_announced_again() {
    let daily = budget("d", BudgetScope::Provider("a".into()), BudgetPeriod::Day, 10.0, BudgetAction::Warn);
    let budgets = Budgets::new(TimeZone::UTC, &[daily]);
    let t = ms("2025-06-10T08:00:00Z");
    assert!(budgets.take_seed() && !budgets.take_seed(), "seeded once");
    for (period, within) in budgets.periods(t) {
        let rows = [("a".to_string(), "m".to_string(), 6.0), ("b".to_string(), "m".to_string(), 50.0)];
        budgets.seed(period, within, &rows, t);
    }
    assert_eq!(budgets.rows(t)[0].spent_usd, 6.0);
    assert_eq!(thresholds(&budgets.record("a", "m", None, 1.0, t, t)), [], "50% was passed before the restart");
    assert_eq!(thresholds(&budgets.record("a", "m", None, 1.0, t, t)), [("d".to_string(), 80)]);
    // A seed read for a period that has since ended is dropped.
    let stale = Bounds { start_ms: 0, end_ms: 1 };
    budgets.seed(BudgetPeriod::Day, stale, &[("a".into(), "m".into(), 99.0)], t);
    assert_eq!(budgets.rows(t)[0].spent_usd, 8.0);
}

#[test]
fn a_reload_keeps_spend_and_what_unchanged_budgets_announced() {
    let warn = budget("d", BudgetScope::All, BudgetPeriod::Day, 10.0, BudgetAction::Warn);
    let budgets = Budgets::new(TimeZone::UTC, std::slice::from_ref(&warn));
    let t = ms("2025-06-10T08:00:00Z");
    assert_eq!(thresholds(&budgets.record("a", "m", None, 6.0, t, t)), [("d".to_string(), 50)]);
    let added = budget("new", BudgetScope::All, BudgetPeriod::Week, 4.0, BudgetAction::Block);
    budgets.configure(&[warn, added], t);
    let rows = budgets.rows(t);
    assert_eq!((rows[1].spent_usd, rows[1].blocking), (6.0, true), "spent before the budget existed counts");
    assert_eq!(thresholds(&budgets.record("a", "m", None, 0.1, t, t)), [], "neither says again what it passed");
    assert_eq!(thresholds(&budgets.record("a", "m", None, 2.0, t, t)), [("d".to_string(), 80)]);
}

#[test]
fn levels_follow_the_thresholds() {
    assert_eq!(
        [level(0.0, 10.0), level(4.99, 10.0), level(5.0, 10.0), level(8.0, 10.0), level(12.0, 10.0)],
        [0, 0, 50, 80, 100]
    );
}

#[test]
fn the_team_counts_each_covering_budget_in_its_own_counter_per_period() {
    let list = [
        budget("a-daily", BudgetScope::Provider("a".into()), BudgetPeriod::Day, 1.5, BudgetAction::Block),
        budget("all-weekly", BudgetScope::All, BudgetPeriod::Week, 10.0, BudgetAction::Warn),
        budget("b-daily", BudgetScope::Provider("b".into()), BudgetPeriod::Day, 1.0, BudgetAction::Block),
    ];
    let budgets = Budgets::new(berlin(), &list);
    let t = ms("2025-06-10T08:00:00Z");
    let covering = budgets.covering("a", "m", 0.25, t);
    let names: Vec<&str> = covering.iter().map(|c| c.budget.name.as_str()).collect();
    assert_eq!(names, ["a-daily", "all-weekly"], "only the budgets whose scope covers the attempt");
    let day = &covering[0].ask;
    assert_eq!(day.limit_micros, Some(1_500_000));
    assert_eq!(day.estimate_micros, 250_000);
    let start = ms("2025-06-09T22:00:00Z");
    assert_eq!(day.counter, format!("a-daily|provider:a|day|{start}"), "named by budget, scope, period and start");
    assert!(day.expires_at_ms > ms("2025-06-10T22:00:00Z"), "outlives its period");
    assert_eq!(covering[1].ask.limit_micros, None, "a warn budget is counted, never refuses");
    // Tomorrow is another counter.
    let tomorrow = budgets.covering("a", "m", 0.25, t + 24 * HOUR);
    assert_ne!(tomorrow[0].ask.counter, day.counter);
    // A refusal names the budget, the team's spend and the reset.
    let blocked = covering[0].blocked(1_600_000);
    assert_eq!((blocked.budget.as_str(), blocked.spent_usd), ("a-daily", 1.6));
    assert_eq!(blocked.resets_at_ms, ms("2025-06-10T22:00:00Z"));
    // Seeding reads the ledger's own count for the period.
    budgets.record("a", "m", None, 0.75, t, t);
    assert_eq!(budgets.spent(&BudgetScope::All, BudgetPeriod::Week, covering[1].bounds, t), 0.75);
    let all = budgets.every_counter(t);
    assert_eq!(all.len(), 3);
    assert!(all.iter().all(|c| c.ask.limit_micros.is_none() && c.ask.estimate_micros == 0));
}

fn member_budget(name: &str, period: BudgetPeriod, limit: f64) -> Budget {
    budget(&format!("member:{name}"), BudgetScope::Member(name.into()), period, limit, BudgetAction::Block)
}

#[test]
fn a_members_requests_in_flight_hold_its_budget_until_their_cost_is_recorded() {
    let budgets = Budgets::new(TimeZone::UTC, &[]);
    let t = ms("2025-06-10T08:00:00Z");
    assert_eq!(budgets.reserve("al", 5.0, t), Ok(None), "no budget, nothing held");
    budgets.set_members(&[member_budget("al", BudgetPeriod::Day, 1.0)], t);
    let first = budgets.reserve("al", 0.6, t).unwrap().unwrap();
    let second = budgets.reserve("al", 0.6, t).unwrap().unwrap();
    let third = budgets.reserve("al", 0.6, t).unwrap_err();
    assert_eq!((third.scope.as_str(), third.spent_usd), ("member:al", 1.2), "two in flight fill it");
    assert_eq!(third.resets_at_ms, ms("2025-06-11T00:00:00Z"));
    assert!(budgets.reserve("bo", 0.6, t).unwrap().is_none(), "another member is not held back");
    // The first costs less than estimated: recorded, then given back.
    budgets.record("p", "m", Some("al"), 0.1, t, t);
    budgets.release(&first, t);
    budgets.release(&second, t);
    let fourth = budgets.reserve("al", 0.6, t).unwrap().unwrap();
    budgets.record("p", "m", Some("al"), 0.95, t, t);
    budgets.release(&fourth, t);
    assert!(budgets.reserve("al", 0.0, t).is_err(), "spent 1.05 of 1");
    assert!(budgets.reserve("al", 0.0, ms("2025-06-11T00:00:00Z")).is_ok(), "a new day");
}

#[test]
fn a_members_budget_counts_only_its_requests_and_survives_a_reload_of_the_config() {
    let all = budget("all", BudgetScope::All, BudgetPeriod::Month, 100.0, BudgetAction::Warn);
    let budgets = Budgets::new(TimeZone::UTC, std::slice::from_ref(&all));
    let t = ms("2025-06-10T08:00:00Z");
    budgets.set_members(&[member_budget("al", BudgetPeriod::Week, 2.0)], t);
    budgets.record("p", "m", Some("al"), 1.5, t, t);
    budgets.record("p", "m", Some("bo"), 3.0, t, t);
    budgets.record("p", "m", None, 4.0, t, t);
    budgets.configure(std::slice::from_ref(&all), t);
    let rows = budgets.rows(t);
    let spent: Vec<(&str, f64)> = rows.iter().map(|r| (r.scope.as_str(), r.spent_usd)).collect();
    assert_eq!(spent, [("all", 8.5), ("member:al", 1.5)]);
    assert_eq!(budgets.admit("p", "m", t), Ok(()), "a member's budget never blocks an attempt");
    let counters = budgets.member_counter("al", 0.25, t);
    assert_eq!(counters.len(), 1);
    assert_eq!(counters[0].ask.limit_micros, Some(2_000_000));
    assert_eq!(counters[0].ask.estimate_micros, 250_000);
    assert!(budgets.member_counter("bo", 0.25, t).is_empty());
    assert_eq!(budgets.covering("p", "m", 0.25, t).len(), 1, "attempts reserve only the config's");
    assert_eq!(budgets.every_counter(t).len(), 2, "the team keeps every counter seeded");
    budgets.set_members(&[], t);
    assert_eq!(budgets.rows(t).len(), 1, "a member's budget taken away is gone");
}

#[test]
fn a_members_spend_on_record_is_seeded_and_still_blocks() {
    let budgets = Budgets::new(TimeZone::UTC, &[]);
    let t = ms("2025-06-10T08:00:00Z");
    for (period, within) in budgets.periods(t) {
        budgets.seed_members(period, within, &[("al".to_string(), 2.0)], t);
    }
    budgets.set_members(&[member_budget("al", BudgetPeriod::Month, 2.0)], t);
    let blocked = budgets.reserve("al", 0.0, t).unwrap_err();
    assert_eq!((blocked.budget.as_str(), blocked.spent_usd), ("member:al", 2.0));
}

#[test]
fn in_a_team_the_alerts_follow_the_team_s_counter_not_this_instance_s_part() {
    let t = ms("2025-06-10T12:00:00Z");
    let b = budget("shared", BudgetScope::All, BudgetPeriod::Day, 1.0, BudgetAction::Warn);
    let budgets = Budgets::new(TimeZone::UTC, &[b]);
    budgets.alert_by_team(true);
    // This instance's own part crosses 50%: counted, raised by nobody here.
    assert!(budgets.record("a", "m", None, 0.6, t, t).is_empty());
    let counted = |micros| vec![(budgets.every_counter(t).remove(0), micros)];
    // The team has spent $0.85: the highest threshold reached, once.
    let at_85 = counted(850_000);
    let crossed = budgets.crossed_by_team(&at_85, t);
    assert_eq!(crossed.iter().map(|(_, c)| c.threshold).collect::<Vec<_>>(), vec![80]);
    assert!(crossed[0].0.ask.counter.starts_with("shared|"), "claimed by its counter");
    assert!(budgets.crossed_by_team(&at_85, t).is_empty(), "not again");
    assert_eq!(budgets.crossed_by_team(&counted(1_000_000), t)[0].1.threshold, 100);
    // Out of the team's reach, this instance's ledger raises what it sees
    // and has not raised yet.
    budgets.alert_by_team(false);
    assert!(budgets.record("a", "m", None, 0.6, t, t).is_empty(), "100% was announced already");
}
