//! A gateway joined to a team's gateway (`kind = "switchyard"`): a
//! member's requests go through the team in their own format, with the
//! member's key; the team's refusals (a revoked key, a spent budget) are
//! the answer, never served by this gateway's own providers; a team's
//! gateway that cannot answer is replaced by them only when the team
//! allows it. The team's `/v1/models` offers a member what it may ask for.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::{
    chat_hi, header, http, keys_for, messages_hi, request_id, ConfigText, TestGateway, ADMIN_TOKEN,
};

/// A dollar a token: one request is over any small budget.
const PRICES: &str = "[[prices]]\nprovider = \"p\"\nmodel = \"*\"\ninput = 1000000\noutput = 1000000\n";

/// The team's gateway: provider `p` serving `m` (OpenAI) and
/// `claude-sonnet` (Anthropic), priced, with members.
async fn team(members: &str) -> (SimProvider, TestGateway) {
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let config = ConfigText::new()
        .raw(members)
        .provider(&p, "openai", &["m", "other"])
        .provider_at("p-an", &p.base_url(), "anthropic", &["claude-sonnet"])
        .raw(PRICES);
    (p, TestGateway::start(config.build(), keys_for(&["p", "p-an"])).await)
}

async fn add(team: &TestGateway, member: Value) -> String {
    let r = http().post(team.url("/admin/members")).bearer_auth(ADMIN_TOKEN).json(&member).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    r.json::<Value>().await.unwrap()["key"].as_str().unwrap().to_string()
}

/// The member's own gateway: its provider `own` serving the same models,
/// and the team's gateway at `team_url` joined with `key`.
async fn joined(team_url: &str, key: &str, allow: bool) -> (SimProvider, TestGateway) {
    let own = SimProvider::start("own", Script::ok()).await.unwrap();
    let config = ConfigText::new().provider(&own, "openai", &["m", "claude-sonnet"]).raw(&format!(
        "\n[[providers]]\nname = \"team\"\nkind = \"switchyard\"\nbase_url = {team_url:?}\n\
             models = [\"m\", \"claude-sonnet\"]\ndevice = \"laptop\"\nallow_local_fallback = {allow}\n"
    ));
    let keys = keys_for(&["own"]).with("team", "main", key);
    (own, TestGateway::start(config.build(), keys).await)
}

fn origin(gw: &TestGateway) -> String {
    gw.base_url().trim_end_matches("/v1").to_string()
}

#[tokio::test]
async fn a_members_requests_go_through_the_team_in_their_own_format() {
    let (p, team) = team("").await;
    let al = add(&team, json!({ "name": "al", "models": "m, claude-sonnet" })).await;
    let (own, gw) = joined(&origin(&team), &al, true).await;

    // The team's offer: what al may ask for, and its word on falling back.
    let r = http().get(team.url("/v1/models")).bearer_auth(&al).send().await.unwrap();
    assert_eq!(header(&r, "x-switchyard-allow-local-fallback"), "true");
    let offered: Value = r.json().await.unwrap();
    let ids: Vec<&str> = offered["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["m", "claude-sonnet"], "`other` is not al's: {offered}");

    // Chat and Messages, each passed on as sent: no translation on the way.
    let r = gw.post("/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-provider")), (200, "team"));
    assert_eq!(p.requests().last().unwrap().path, "/v1/chat/completions");
    let r = gw.post("/v1/messages", &messages_hi("claude-sonnet")).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-provider")), (200, "team"));
    let asked = p.requests().last().unwrap().clone();
    assert_eq!(asked.path, "/v1/messages", "the team's anthropic provider, the client's own format");
    assert!(asked.headers.contains_key("anthropic-version"), "the client's family headers went along");
    assert!(
        !asked.headers.contains_key("x-switchyard-device"),
        "the device is the team's to record, not its providers'"
    );
    assert_eq!(own.calls(), 0);

    // On the team's record, the requests are al's, from the laptop.
    team.recorded(2).await;
    let rows = team.admin("/admin/requests?member=al").await;
    let devices: Vec<&str> =
        rows["requests"].as_array().unwrap().iter().map(|r| r["device"].as_str().unwrap()).collect();
    assert_eq!(devices, ["laptop", "laptop"], "{rows}");
    let from_laptop = team.admin("/admin/requests?device=laptop").await;
    assert_eq!(from_laptop["requests"].as_array().unwrap().len(), 2, "{from_laptop}");
    let elsewhere = team.admin("/admin/requests?device=desktop").await;
    assert!(elsewhere["requests"].as_array().unwrap().is_empty(), "{elsewhere}");
}

#[tokio::test]
async fn the_teams_refusal_is_the_answer_never_served_here() {
    let (p, team) = team("").await;
    let al = add(&team, json!({ "name": "al", "budget": "0.5/day" })).await;
    let (own, gw) = joined(&origin(&team), &al, true).await;
    assert_eq!(gw.post("/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    team.recorded(1).await;

    // Over the member's budget: the team's 429, with its reset time.
    let r = gw.post("/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "x-switchyard-error"), "budget_exceeded");
    assert!(!header(&r, "x-switchyard-budget-reset").is_empty());
    let id = request_id(&r);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "budget_exceeded");
    let d = gw.detail(&id).await;
    assert_eq!(d["attempts"].as_array().unwrap().len(), 1, "one attempt, at the team: {d}");
    assert_eq!(d["attempts"][0]["error"], "over the team's budget", "said so on this gateway's record: {d}");

    // Revoked: the team's 401, and again: the team is not cooled down or
    // passed over for it.
    let r = http().post(team.url("/admin/members/al/revoke")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    for _ in 0..2 {
        let r = gw.post("/v1/chat/completions", &chat_hi("m")).await;
        assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-error")), (401, "key_revoked"));
        let d = gw.detail(&request_id(&r)).await;
        assert_eq!(d["attempts"][0]["error"], "revoked by the team", "{d}");
    }
    assert_eq!(own.calls(), 0, "never served by this gateway's own provider");
    assert_eq!(p.calls(), 1);
}

#[tokio::test]
async fn a_team_that_cannot_answer_is_replaced_here_only_when_it_allows() {
    // Nothing listens where the team's gateway was.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", gone.local_addr().unwrap());
    drop(gone);
    let (own, allowed) = joined(&url, "sy-m-anything", true).await;
    let r = allowed.post("/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-provider")), (200, "own"));
    assert_eq!(own.calls(), 1);

    let (own, forbidden) = joined(&url, "sy-m-anything", false).await;
    let r = forbidden.post("/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!(r.status(), 502, "{:?}", r.headers());
    let text = r.text().await.unwrap();
    assert!(text.contains("team") && text.contains("allows no fallback"), "names the team and why: {text}");
    assert_eq!(own.calls(), 0);
}

#[tokio::test]
async fn the_teams_models_answer_a_refused_key_in_the_callers_format() {
    let (_p, team) = team("[members]\nallow_local_fallback = false\n").await;
    let al = add(&team, json!({ "name": "al" })).await;
    let r = http().get(team.url("/v1/models")).bearer_auth(&al).send().await.unwrap();
    assert_eq!(header(&r, "x-switchyard-allow-local-fallback"), "false");
    let r = http().post(team.url("/admin/members/al/revoke")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = http()
        .get(team.url("/v1/models"))
        .header("x-api-key", &al)
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.json::<Value>().await.unwrap()["type"], "error", "Anthropic's error shape");
}

#[tokio::test]
async fn the_teams_word_is_heard_within_seconds_and_kept_while_it_is_down() {
    let (_p, team) = team("").await;
    let al = add(&team, json!({ "name": "al" })).await;
    let own = SimProvider::start("own", Script::ok()).await.unwrap();
    let config = ConfigText::new()
        .raw("[server]\nprobe_every = \"100ms\"\n")
        .provider(&own, "openai", &["m", "other"])
        .raw(&format!(
            "\n[[providers]]\nname = \"team\"\nkind = \"switchyard\"\nbase_url = {:?}\nmodels = [\"m\", \"other\"]\n",
            origin(&team)
        ));
    let gw = TestGateway::start(config.build(), keys_for(&["own"]).with("team", "main", &al)).await;
    let served = |r: &reqwest::Response| header(r, "x-switchyard-provider").to_string();
    assert_eq!(served(&gw.post("/v1/chat/completions", &chat_hi("other")).await), "team");

    // The team stops offering `other` and forbids falling back.
    let text = std::fs::read_to_string(team.config_file()).unwrap();
    let changed = format!("[members]\nallow_local_fallback = false\n{}", text.replace(", \"other\" = \"other\"", ""));
    assert_ne!(changed.len(), text.len() + "[members]\nallow_local_fallback = false\n".len(), "`other` went");
    std::fs::write(team.config_file(), changed).unwrap();
    let r = http().post(team.url("/admin/reload")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());

    // Heard at the next probes: `other` is no longer the team's.
    let mut heard = false;
    for _ in 0..100 {
        if served(&gw.post("/v1/chat/completions", &chat_hi("other")).await) == "own" {
            heard = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(heard, "the team's new word was never heard");

    // The team's gateway gone: its word, kept, still forbids falling back.
    drop(team);
    let before = own.calls();
    let r = gw.post("/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!(r.status(), 502);
    assert_eq!(own.calls(), before, "no fallback: the team's word holds while it is down");
}
