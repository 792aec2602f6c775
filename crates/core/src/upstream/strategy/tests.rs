//! Each strategy's order on providers with set figures, and the config
//! that chooses them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::{Config, Price};
use crate::secrets::MemoryStore;
use crate::telemetry::Telemetry;
use crate::upstream::provider::Provider;

const PROVIDERS: &str = r#"
[[providers]]
name = "a"
kind = "openai"
base_url = "http://127.0.0.1:1/v1"
auth = "none"
models = ["m"]

[[providers]]
name = "b"
kind = "openai"
base_url = "http://127.0.0.1:2/v1"
auth = "none"
models = ["m"]

[[providers]]
name = "c"
kind = "openai"
base_url = "http://127.0.0.1:3/v1"
auth = "none"
models = ["m"]
"#;

fn providers() -> Vec<Arc<Provider>> {
    let config = Config::parse(PROVIDERS, Path::new("t.toml")).unwrap();
    let telemetry = Arc::new(Telemetry::new(None));
    config.providers.into_iter().map(|p| Arc::new(Provider::load(p, &MemoryStore::new(), telemetry.clone()))).collect()
}

fn candidates(providers: &[Arc<Provider>]) -> Vec<Candidate<'_>> {
    providers
        .iter()
        .enumerate()
        .map(|(position, provider)| Candidate { provider, upstream_model: "m", position, routing: None })
        .collect()
}

fn ask(strategy: Strategy) -> Ask<'static> {
    Ask {
        strategy,
        streamed: false,
        input_tokens: 1000,
        output_tokens: 500,
        prices: None,
        max_latency: None,
        turn: 0,
        schedule: None,
    }
}

fn names<'a>(candidates: &'a [Candidate<'_>]) -> Vec<&'a str> {
    candidates.iter().map(|c| c.provider.name()).collect()
}

fn ordered_by<'a>(providers: &'a [Arc<Provider>], ask: &Ask<'_>) -> Vec<Candidate<'a>> {
    let mut c = candidates(providers);
    order(&mut c, ask);
    c
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn ordered_keeps_the_chain_and_notes_nothing() {
    let p = providers();
    p[0].recent().observe(false, ms(900));
    let c = ordered_by(&p, &ask(Strategy::Ordered));
    assert_eq!(names(&c), ["a", "b", "c"]);
    assert!(c.iter().all(|c| c.routing.is_none()));
}

#[test]
fn latency_puts_the_fastest_first_and_the_unmeasured_before_all() {
    let p = providers();
    p[0].recent().observe(false, ms(300));
    p[1].recent().observe(false, ms(40));
    let c = ordered_by(&p, &ask(Strategy::Latency));
    assert_eq!(names(&c), ["c", "b", "a"], "c was never measured: it goes first, to be");
    p[2].recent().observe(false, ms(100));
    let c = ordered_by(&p, &ask(Strategy::Latency));
    assert_eq!(names(&c), ["b", "c", "a"]);
    let first = c[0].routing.unwrap();
    assert_eq!(
        (first.strategy, first.rank, first.explored, first.latency_ms),
        (Strategy::Latency, 0, false, Some(40.0))
    );
    assert_eq!(c[2].routing.unwrap().rank, 2);
}

#[test]
fn latency_follows_a_provider_that_slows_down_within_a_few_answers() {
    let p = providers();
    p[0].recent().observe(false, ms(10));
    p[1].recent().observe(false, ms(50));
    p[2].recent().observe(false, ms(80));
    assert_eq!(names(&ordered_by(&p, &ask(Strategy::Latency)))[0], "a");
    p[0].recent().observe(false, ms(300));
    p[0].recent().observe(false, ms(300));
    assert_eq!(names(&ordered_by(&p, &ask(Strategy::Latency)))[0], "b", "two slow answers are enough");
}

#[test]
fn a_provider_that_failed_before_it_ever_answered_goes_last_until_it_answers() {
    let p = providers();
    p[1].recent().observe(false, ms(200));
    p[0].recent().failed(false);
    p[1].recent().failed(false);
    assert_eq!(names(&ordered_by(&p, &ask(Strategy::Latency))), ["c", "b", "a"], "b keeps its measure");
    assert_eq!(ordered_by(&p, &ask(Strategy::Latency))[2].routing.unwrap().latency_ms, Some(f64::INFINITY));
    p[0].recent().observe(false, ms(50));
    assert_eq!(names(&ordered_by(&p, &ask(Strategy::Latency))), ["c", "a", "b"], "one answer and it is measured");
}

#[test]
fn latency_judges_a_stream_by_its_first_token() {
    let p = providers();
    p[0].recent().observe(false, ms(10));
    p[0].recent().observe(true, ms(500));
    p[1].recent().observe(false, ms(200));
    p[1].recent().observe(true, ms(50));
    p[2].recent().observe(false, ms(300));
    let streamed = Ask { streamed: true, ..ask(Strategy::Latency) };
    assert_eq!(names(&ordered_by(&p, &streamed)), ["b", "c", "a"], "c has no stream measured: its latency stands in");
    assert_eq!(names(&ordered_by(&p, &ask(Strategy::Latency))), ["a", "b", "c"]);
}

#[test]
fn latency_explores_one_turn_in_twenty_each_other_provider_in_turn() {
    let p = providers();
    for (provider, took) in p.iter().zip([10, 50, 80]) {
        provider.recent().observe(false, ms(took));
    }
    let firsts: Vec<String> = (0..60)
        .map(|turn| ordered_by(&p, &Ask { turn, ..ask(Strategy::Latency) })[0].provider.name().to_string())
        .collect();
    let explored: Vec<(usize, &str)> =
        firsts.iter().enumerate().filter(|(_, n)| *n != "a").map(|(i, n)| (i, n.as_str())).collect();
    assert_eq!(explored, [(19, "b"), (39, "c"), (59, "b")]);
    let c = ordered_by(&p, &Ask { turn: 19, ..ask(Strategy::Latency) });
    assert_eq!(names(&c), ["b", "a", "c"], "the rest keep their order");
    assert!(c[0].routing.unwrap().explored && !c[1].routing.unwrap().explored);
}

#[test]
fn least_busy_goes_by_requests_in_flight_then_latency() {
    let p = providers();
    let _held = [p[0].capacity().try_enter().unwrap(), p[0].capacity().try_enter().unwrap()];
    let _one = p[2].capacity().try_enter().unwrap();
    let c = ordered_by(&p, &ask(Strategy::LeastBusy));
    assert_eq!(names(&c), ["b", "c", "a"]);
    assert_eq!(c.iter().map(|c| c.routing.unwrap().in_flight.unwrap()).collect::<Vec<_>>(), [0, 1, 2]);
    let _another = p[1].capacity().try_enter().unwrap();
    p[1].recent().observe(false, ms(90));
    p[2].recent().observe(false, ms(30));
    assert_eq!(names(&ordered_by(&p, &ask(Strategy::LeastBusy))), ["c", "b", "a"], "a tie goes to the faster");
}

fn price(provider: &str, input: f64) -> Price {
    Price { provider: Some(provider.into()), model: "m".into(), input, output: input, cached: None, cache_write: None }
}

#[test]
fn cheapest_goes_by_price_then_the_unpriced_and_past_the_bound_last() {
    let p = providers();
    let prices = crate::history::pricing::Prices::with_overrides(vec![price("a", 3.0), price("b", 1.0)]);
    let priced = Ask { prices: Some(&prices), ..ask(Strategy::Cheapest) };
    let c = ordered_by(&p, &priced);
    assert_eq!(names(&c), ["b", "a", "c"]);
    let usd = c[0].routing.unwrap().usd.unwrap();
    assert!((usd - 1500.0 / 1_000_000.0).abs() < 1e-12, "1000 in and 500 out at $1 per million: {usd}");
    assert_eq!(c[2].routing.unwrap().usd, None);
    p[1].recent().observe(false, ms(900));
    let bounded = Ask { max_latency: Some(ms(500)), ..priced };
    assert_eq!(names(&ordered_by(&p, &bounded)), ["a", "c", "b"], "b is cheap but slower than the bound");
    assert_eq!(names(&ordered_by(&p, &priced)), ["b", "a", "c"], "without a bound, speed does not count");
}

#[test]
fn a_weighted_round_is_exact_and_smooth() {
    let s = Schedule::new(&[5, 1, 1]);
    let round: Vec<usize> = (0..7).filter_map(|t| s.position(t)).collect();
    assert_eq!(round, [0, 0, 1, 0, 2, 0, 0]);
    let s = Schedule::new(&[90, 10]);
    let firsts: Vec<usize> = (0..2000).filter_map(|t| s.position(t)).collect();
    assert_eq!(firsts.iter().filter(|p| **p == 1).count(), 200);
    assert_eq!(s.position(10), s.position(0), "90:10 is 9:1, a round of ten");
    assert_eq!((s.weight(0), s.weight(1), s.weight(2)), (Some(90), Some(10), None));
}

#[test]
fn weighted_puts_the_provider_whose_turn_it_is_first_and_the_rest_in_chain_order() {
    let p = providers();
    let schedule = Schedule::new(&[1, 1, 2]);
    let turns: Vec<Vec<String>> = (0..4)
        .map(|turn| {
            let c = ordered_by(&p, &Ask { turn, schedule: Some(&schedule), ..ask(Strategy::Weighted) });
            names(&c).into_iter().map(String::from).collect()
        })
        .collect();
    assert_eq!(turns, [vec!["c", "a", "b"], vec!["a", "b", "c"], vec!["b", "a", "c"], vec!["c", "a", "b"]]);
    let c = ordered_by(&p, &Ask { turn: 0, schedule: Some(&schedule), ..ask(Strategy::Weighted) });
    assert_eq!(c[0].routing.unwrap().weight, Some(2));
}

#[test]
fn weighted_without_weights_goes_round_and_a_missing_turn_goes_to_the_first() {
    let p = providers();
    let firsts: Vec<String> = (0..4)
        .map(|turn| ordered_by(&p, &Ask { turn, ..ask(Strategy::Weighted) })[0].provider.name().to_string())
        .collect();
    assert_eq!(firsts, ["a", "b", "c", "a"]);
    // c's turn, but the plan left c out.
    let schedule = Schedule::new(&[1, 1, 8]);
    let mut c = candidates(&p);
    c.truncate(2);
    order(&mut c, &Ask { turn: 1, schedule: Some(&schedule), ..ask(Strategy::Weighted) });
    assert_eq!(names(&c), ["a", "b"]);
}

#[test]
fn routing_reads_as_a_line_only_when_asked() {
    let r = Routing { latency_ms: Some(212.4), rank: 0, ..Routing::by(Strategy::Latency) };
    assert_eq!(r.describe(), "latency, #1: 212 ms");
    let r = Routing { in_flight: Some(3), latency_ms: Some(80.0), rank: 1, ..Routing::by(Strategy::LeastBusy) };
    assert_eq!(r.describe(), "least_busy, #2: 80 ms, 3 in flight");
    let r = Routing { weight: Some(9), explored: false, ..Routing::by(Strategy::Weighted) };
    assert_eq!(r.describe(), "weighted, #1: weight 9");
    let r = Routing { explored: true, latency_ms: None, ..Routing::by(Strategy::Latency) };
    assert_eq!(r.describe(), "latency, #1: exploring");
}

fn route_config(route: &str) -> Result<Config, crate::config::ConfigError> {
    Config::parse(&format!("{PROVIDERS}\n[[routes]]\nmodel = \"m\"\n{route}\n"), Path::new("t.toml"))
}

#[test]
fn a_route_names_its_strategy_and_policy_sets_the_default() {
    let config = route_config("chain = [\"a\", \"b\"]\nstrategy = \"latency\"").unwrap();
    assert_eq!(config.routes[0].policy.strategy, Strategy::Latency);
    assert_eq!(config.policy.strategy, Strategy::Ordered);
    let text =
        format!("[policy]\nstrategy = \"least_busy\"\n{PROVIDERS}\n[[routes]]\nmodel = \"m\"\nchain = [\"a\"]\n");
    let config = Config::parse(&text, Path::new("t.toml")).unwrap();
    assert_eq!((config.policy.strategy, config.routes[0].policy.strategy), (Strategy::LeastBusy, Strategy::LeastBusy));
    let config = route_config("chain = [\"a\", \"b\"]\nstrategy = \"cheapest\"\nmax_latency = \"2s\"").unwrap();
    assert_eq!(config.routes[0].policy.max_latency, Some(Duration::from_secs(2)));
}

#[test]
fn weighted_entries_sit_beside_plain_names() {
    let config = route_config(
        "strategy = \"weighted\"\nchain = [{ provider = \"a\", weight = 9 }, { provider = \"b\", weight = 1 }, \"c\"]",
    )
    .unwrap();
    let route = &config.routes[0];
    assert_eq!(route.chain, ["a", "b", "c"]);
    assert_eq!(route.schedule.as_ref().map(Schedule::weights), Some(&[9, 1, 1][..]));
}

#[test]
fn broken_routing_config_names_file_line_and_field() {
    let cases = [
        ("chain = [\"a\"]\nstrategy = \"fastest\"", "t.toml:26:", "routes[0].strategy", "\"fastest\" is not"),
        (
            "chain = [{ provider = \"a\", weight = 0 }]\nstrategy = \"weighted\"",
            "t.toml:25:",
            "routes[0].chain[0].weight",
            "from 1 to 1000",
        ),
        ("chain = [{ provider = \"a\", weight = 2 }]", "t.toml:25:", "routes[0].chain", "set strategy = \"weighted\""),
        (
            "chain = [{ provider = \"z\", weight = 2 }]",
            "t.toml:25:",
            "routes[0].chain[0]",
            "no provider is named \"z\"",
        ),
        ("chain = [{ provider = \"a\", wieght = 2 }]", "t.toml:25:", "", "wieght"),
        ("chain = [\"a\"]\nmax_latency = \"soon\"", "t.toml:26:", "routes[0].max_latency", "not a duration"),
    ];
    for (route, at, field, message) in cases {
        let error = route_config(route).unwrap_err().to_string();
        assert!(error.starts_with(at) && error.contains(field) && error.contains(message), "{route}: {error}");
    }
    let error = Config::parse("[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n[providers.policy]\nstrategy = \"latency\"\n", Path::new("t.toml"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("providers[0].policy.strategy") && error.contains("is a request setting"), "{error}");
}

#[test]
fn a_route_keeps_its_split_over_the_window() {
    let state = RouteState::default();
    for _ in 0..9 {
        state.answered("a");
    }
    state.answered("b");
    let split = state.split();
    assert_eq!(split.iter().map(|s| (s.provider.as_str(), s.requests)).collect::<Vec<_>>(), [("a", 9), ("b", 1)]);
    assert!((split[0].share - 0.9).abs() < 1e-9);
}
