//! Team members end to end: each request is its member's, in the rows and
//! in the spend; a member's limits (budget, models) refuse in the client's
//! protocol with no upstream call while the other members are served; a
//! revoked or expired key is refused at once; wrong keys from one address
//! are throttled; no key is ever written anywhere in the data directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{json, Value};
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::{chat_hi, header, http, keys_for, messages_hi, ConfigText, TestGateway, ADMIN_TOKEN};

async fn sim(name: &str) -> SimProvider {
    SimProvider::start(name, Script::ok()).await.unwrap()
}

/// A dollar a token: one request is over any small budget.
const PRICES: &str = "[[prices]]\nprovider = \"p\"\nmodel = \"*\"\ninput = 1000000\noutput = 1000000\n";

/// One OpenAI-kind provider `p` serving `models`, priced, and a high
/// per-client rate so that only the members' own limits refuse.
async fn gateway(models: &[&str]) -> (SimProvider, TestGateway) {
    let p = sim("p").await;
    let config = ConfigText::new()
        .provider(&p, "openai", models)
        .provider_at("p-an", &p.base_url(), "anthropic", &["claude-sonnet"])
        .raw(PRICES)
        .raw("[server]\nrate_limit_per_minute = 100000\n");
    let gw = TestGateway::start(config.build(), keys_for(&["p", "p-an"])).await;
    (p, gw)
}

/// Adds a member through the admin API; returns its key.
async fn add(gw: &TestGateway, member: Value) -> String {
    let r = http().post(gw.url("/admin/members")).bearer_auth(ADMIN_TOKEN).json(&member).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let v: Value = r.json().await.unwrap();
    let key = v["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("sy-m-"), "{key}");
    key
}

async fn post_as(gw: &TestGateway, key: &str, path: &str, body: &Value) -> reqwest::Response {
    http().post(gw.url(path)).bearer_auth(key).json(body).send().await.unwrap()
}

async fn admin_post(gw: &TestGateway, path: &str) -> reqwest::Response {
    http().post(gw.url(path)).bearer_auth(ADMIN_TOKEN).send().await.unwrap()
}

#[tokio::test]
async fn two_members_split_the_requests_and_the_spend_exactly() {
    let (p, gw) = gateway(&["m"]).await;
    let al = add(&gw, json!({ "name": "al" })).await;
    let bo = add(&gw, json!({ "name": "bo" })).await;
    for key in [&al, &al, &bo] {
        let r = post_as(&gw, key, "/v1/chat/completions", &chat_hi("m")).await;
        assert_eq!(r.status(), 200);
    }
    assert_eq!(gw.recorded(3).await, 3);
    assert_eq!(p.calls(), 3);

    let spend = gw.admin("/admin/spend").await;
    let by: Vec<(String, i64, f64)> = spend["by_member"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (m["member"].as_str().unwrap().into(), m["requests"].as_i64().unwrap(), m["cost_usd"].as_f64().unwrap())
        })
        .collect();
    assert_eq!(by.iter().map(|(m, n, _)| (m.as_str(), *n)).collect::<Vec<_>>(), [("al", 2), ("bo", 1)], "{spend}");
    let (al_cost, bo_cost) = (by[0].2, by[1].2);
    assert!(bo_cost > 0.0 && (al_cost - 2.0 * bo_cost).abs() < 1e-9, "{spend}");
    let total: f64 = spend["rows"].as_array().unwrap().iter().filter_map(|r| r["cost_usd"].as_f64()).sum();
    assert!((total - al_cost - bo_cost).abs() < 1e-9, "the members' spend is all the spend: {spend}");
    let only_bo = gw.admin("/admin/spend?member=bo").await;
    assert_eq!(only_bo["by_member"].as_array().unwrap().len(), 1);

    let rows = gw.admin("/admin/requests?member=al").await;
    let members: Vec<&str> =
        rows["requests"].as_array().unwrap().iter().map(|r| r["member"].as_str().unwrap()).collect();
    assert_eq!(members, ["al", "al"]);
    let rows = gw.admin("/admin/requests?member=bo").await;
    assert_eq!(rows["requests"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn with_members_a_request_without_a_key_is_refused_and_on_record() {
    let (p, gw) = gateway(&["m"]).await;
    add(&gw, json!({ "name": "al" })).await;
    let r = gw.post("/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-error")), (401, "invalid_access_token"));
    assert_eq!(p.calls(), 0);
    gw.recorded(1).await;
    let rows = gw.admin("/admin/requests").await;
    assert_eq!(rows["requests"][0]["error_code"], "invalid_access_token", "{rows}");
}

#[tokio::test]
async fn a_member_over_its_budget_is_refused_while_the_other_is_served() {
    let (p, gw) = gateway(&["m"]).await;
    let al = add(&gw, json!({ "name": "al", "budget": "0.5/day" })).await;
    let bo = add(&gw, json!({ "name": "bo" })).await;
    assert_eq!(post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    // The cost is counted as the answer is recorded: refused at once.
    let refused = post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "x-should-retry"), "false");
    assert_eq!(header(&refused, "x-switchyard-error"), "budget_exceeded");
    let calls = p.calls();
    let v: Value = refused.json().await.unwrap();
    assert_eq!(v["error"]["code"], "budget_exceeded");
    assert!(v["error"]["message"].as_str().unwrap().contains("member:al"), "{v}");

    assert_eq!(post_as(&gw, &bo, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    assert_eq!(p.calls(), calls + 1, "bo is served; al's refusal called nobody");

    // The member's budget is among the budgets, spent and blocking; bo has none.
    let budgets = gw.admin("/admin/budgets").await;
    let rows = budgets.as_array().unwrap();
    let row = rows.iter().find(|b| b["scope"] == "member:al").unwrap_or_else(|| panic!("{budgets}"));
    assert_eq!((row["period"].as_str(), row["limit_usd"].as_f64()), (Some("day"), Some(0.5)), "{row}");
    assert!(row["spent_usd"].as_f64().unwrap() >= 0.5 && row["blocking"] == true, "{row}");
    assert!(rows.iter().all(|b| b["scope"] != "member:bo"), "{budgets}");
}

#[tokio::test]
async fn a_member_limited_to_claude_gets_a_403_for_gpt_in_its_own_protocol() {
    let (p, gw) = gateway(&["gpt-4.1"]).await;
    let al = add(&gw, json!({ "name": "al", "models": "claude-*" })).await;
    let r = post_as(&gw, &al, "/v1/chat/completions", &chat_hi("gpt-4.1")).await;
    assert_eq!(r.status(), 403);
    assert_eq!(header(&r, "x-should-retry"), "false");
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["error"]["type"].as_str(), v["error"]["code"].as_str()),
        (Some("permission_error"), Some("model_not_allowed"))
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("gpt-4.1"), "{v}");
    assert_eq!(p.calls(), 0, "no upstream call");

    // The same refusal in Anthropic's shape, for an Anthropic client.
    let r = http()
        .post(gw.url("/v1/messages"))
        .header("x-api-key", &al)
        .json(&messages_hi("gpt-4.1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!((v["type"].as_str(), v["error"]["type"].as_str()), (Some("error"), Some("permission_error")));
    // A model it may use is served.
    let r = http()
        .post(gw.url("/v1/messages"))
        .header("x-api-key", &al)
        .json(&messages_hi("claude-sonnet"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(p.calls(), 1);

    gw.recorded(3).await;
    let rows = gw.admin("/admin/requests?member=al&outcome=rejected").await;
    let codes: Vec<&str> =
        rows["requests"].as_array().unwrap().iter().map(|r| r["error_code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["model_not_allowed", "model_not_allowed"], "refusals are on record, as the member's");
}

#[tokio::test]
async fn a_members_requests_a_minute_are_refused_with_a_time_to_retry() {
    let (p, gw) = gateway(&["m"]).await;
    let al = add(&gw, json!({ "name": "al", "rpm": 2 })).await;
    let bo = add(&gw, json!({ "name": "bo" })).await;
    for _ in 0..2 {
        assert_eq!(post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    }
    let r = post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-error")), (429, "rate_limited"));
    let wait: u64 = header(&r, "retry-after").parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    assert_eq!(post_as(&gw, &bo, "/v1/chat/completions", &chat_hi("m")).await.status(), 200, "bo has no limit");
    assert_eq!(p.calls(), 3);
}

#[tokio::test]
async fn a_revoked_key_is_refused_at_once() {
    let (p, gw) = gateway(&["m"]).await;
    let al = add(&gw, json!({ "name": "al" })).await;
    assert_eq!(post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    assert_eq!(admin_post(&gw, "/admin/members/al/revoke").await.status(), 200);
    let r = post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-error")), (401, "key_revoked"));
    assert_eq!(header(&r, "x-should-retry"), "false");
    assert_eq!(p.calls(), 1);
    gw.recorded(2).await;
    let rows = gw.admin("/admin/requests?member=al").await;
    assert_eq!(rows["requests"][0]["error_code"], "key_revoked", "the refusal is on record as al's: {rows}");

    // A rotated key works again; the revoked one stays refused.
    let r = admin_post(&gw, "/admin/members/al/rotate").await;
    let fresh = r.json::<Value>().await.unwrap()["key"].as_str().unwrap().to_string();
    assert_eq!(post_as(&gw, &fresh, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    assert_eq!(post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await.status(), 401);
}

/// A change made beside the gateway (the CLI, another instance of a team)
/// is read within a second.
#[tokio::test]
async fn a_revocation_written_to_the_store_holds_within_a_second() {
    let (_p, gw) = gateway(&["m"]).await;
    let al = add(&gw, json!({ "name": "al" })).await;
    assert_eq!(post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    let revoked_at = tokio::time::Instant::now();
    switchyard_core::members::ops::revoke(&gw.store, "al", switchyard_core::history::now_ms()).await.unwrap();
    loop {
        let r = post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await;
        if r.status() == 401 {
            break;
        }
        assert!(revoked_at.elapsed() < Duration::from_millis(1500), "still served after {:?}", revoked_at.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A budget given to a member in the store behind the gateway's back (as
/// another instance or the CLI would) is in force within a second.
#[tokio::test]
async fn a_budget_written_to_the_store_holds_within_a_second() {
    let (_p, gw) = gateway(&["m"]).await;
    let al = add(&gw, json!({ "name": "al" })).await;
    assert_eq!(post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    let mut member = switchyard_core::members::ops::get(&gw.store, "al").await.unwrap();
    member.budget = Some(switchyard_core::members::Budget::parse("0.5/day").unwrap());
    gw.store.put_member(&member).await.unwrap();
    let changed_at = tokio::time::Instant::now();
    loop {
        let r = post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await;
        if r.status() == 429 {
            assert_eq!(header(&r, "x-switchyard-error"), "budget_exceeded");
            break;
        }
        assert!(changed_at.elapsed() < Duration::from_millis(1500), "still served after {:?}", changed_at.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_expired_key_is_refused() {
    let (p, gw) = gateway(&["m"]).await;
    let al = add(&gw, json!({ "name": "al", "expires": "1ms" })).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let r = post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-error")), (401, "key_expired"));
    assert_eq!(p.calls(), 0);
    let listed = gw.admin("/admin/members").await;
    assert_eq!(listed[0]["state"], "expired", "{listed}");
}

#[tokio::test]
async fn a_thousand_wrong_keys_from_one_address_are_throttled() {
    let (p, gw) = gateway(&["m"]).await;
    let al = add(&gw, json!({ "name": "al" })).await;
    let (mut wrong, mut throttled) = (0, 0);
    for i in 0..1000 {
        let guess = format!("sy-m-{i:064x}");
        let r = post_as(&gw, &guess, "/v1/chat/completions", &chat_hi("m")).await;
        match (r.status().as_u16(), header(&r, "x-switchyard-error")) {
            (401, "invalid_access_token") => wrong += 1,
            (429, "rate_limited") => throttled += 1,
            other => panic!("{other:?}"),
        }
    }
    let limit = switchyard_core::members::gate::WRONG_KEYS_PER_MINUTE;
    assert_eq!((wrong, throttled), (limit, 1000 - limit));
    // Throttled, the address's keys are not even looked at: a right one too.
    let r = post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after").parse::<u64>().unwrap() >= 1);
    assert_eq!(p.calls(), 0);
}

#[tokio::test]
async fn the_members_api_is_behind_the_admin_token() {
    let (_p, gw) = gateway(&["m"]).await;
    for (method, path) in [("GET", "/admin/members"), ("POST", "/admin/members"), ("POST", "/admin/members/al/revoke")]
    {
        let r = http()
            .request(method.parse().unwrap(), gw.url(path))
            .bearer_auth("sy-test-access-token")
            .json(&json!({ "name": "al" }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{method} {path}");
    }
    assert_eq!(gw.admin("/admin/members").await, json!([]), "nothing was added");
}

/// Every key issued, in full or its random part: nowhere in the data
/// directory (database, its WAL, the spool, the cache), whatever the
/// requests did.
#[tokio::test]
async fn no_issued_key_is_written_anywhere() {
    let (_p, gw) = gateway(&["m"]).await;
    let mut keys = Vec::new();
    keys.push(add(&gw, json!({ "name": "al", "budget": "100/month", "rpm": 1000 })).await);
    keys.push(add(&gw, json!({ "name": "bo", "models": "claude-*" })).await);
    let r = admin_post(&gw, "/admin/members/al/rotate").await;
    keys.push(r.json::<Value>().await.unwrap()["key"].as_str().unwrap().to_string());
    for key in &keys {
        post_as(&gw, key, "/v1/chat/completions", &chat_hi("m")).await;
        post_as(&gw, key, "/v1/chat/completions", &chat_hi("not-served")).await;
        post_as(&gw, key, "/v1/messages", &messages_hi("claude-sonnet")).await;
    }
    gw.recorded(9).await;
    gw.store.close().await;
    let dir = gw.config_file().parent().unwrap().to_path_buf();
    let mut files = 0;
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            files += 1;
            let bytes = std::fs::read(&path).unwrap();
            for key in &keys {
                let secret = &key["sy-m-".len()..];
                let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
                assert!(!found, "a key in {}", path.display());
            }
        }
    }
    assert!(files >= 2, "the database and the config were searched");
}

/// The official OpenAI and Anthropic Python SDKs (the workspace's `.venv`,
/// as `real_clients.rs` uses) with a member's key as their API key: each
/// sends it its own way (a bearer token, `x-api-key`), each is answered,
/// and every request is on record as the member's.
#[tokio::test]
async fn the_official_sdks_with_a_member_key_are_answered_and_attributed() {
    let (p, gw) = gateway(&["m"]).await;
    let key = add(&gw, json!({ "name": "sdk" })).await;
    let python = std::env::var_os("SWITCHYARD_TEST_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"));
    assert!(
        python.exists(),
        "the SDKs' Python: python3 -m venv .venv && .venv/bin/pip install -r tests/python/requirements.txt"
    );
    let script = r#"
import sys, anthropic, openai
base, key = sys.argv[1], sys.argv[2]
chat = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0).chat.completions.create(
    model="m", messages=[{"role": "user", "content": "hi"}])
print("openai", chat.choices[0].message.content is not None)
msg = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0).messages.create(
    model="claude-sonnet", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
print("anthropic", msg.content[0].type)
try:
    openai.OpenAI(base_url=base + "/v1", api_key="sy-m-" + "0" * 64, max_retries=0).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}])
    print("wrong key answered")
except openai.AuthenticationError as e:
    print("wrong key refused", e.status_code)
"#;
    let out = tokio::process::Command::new(&python)
        .args(["-c", script, &format!("http://{}", gw.addr), &key])
        .output()
        .await
        .expect("python runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(said.lines().collect::<Vec<_>>(), ["openai True", "anthropic text", "wrong key refused 401"], "{said}");
    assert_eq!(p.calls(), 2, "the wrong key reached no provider");
    assert_eq!(gw.recorded(3).await, 3);
    let rows = gw.admin("/admin/requests?member=sdk").await;
    assert_eq!(rows["requests"].as_array().unwrap().len(), 2, "both SDKs' requests are the member's: {rows}");
}

/// A budget with room for one request's estimate: eight of the member's
/// requests at once to a slow provider. Each reserves its estimated cost
/// (its prompt and `max_tokens` at the provider's prices) before it goes,
/// so the burst is not served in full before the first cost is known.
#[tokio::test]
async fn a_burst_of_a_members_requests_is_held_to_its_budget_while_they_run() {
    let p = SimProvider::start("p", Script::ok().latency(Duration::from_millis(300))).await.unwrap();
    let config =
        ConfigText::new().provider(&p, "openai", &["m"]).raw(PRICES).raw("[server]\nrate_limit_per_minute = 100000\n");
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    // About 20 prompt tokens and 8 output tokens at a dollar a token: one
    // request's estimate is well over $5.
    let al = add(&gw, json!({ "name": "al", "budget": "5/day" })).await;
    let body = json!({ "model": "m", "max_tokens": 8, "messages": [{ "role": "user", "content": "hi" }] });
    let burst = (0..8).map(|_| post_as(&gw, &al, "/v1/chat/completions", &body));
    let answers = futures_util::future::join_all(burst).await;
    let mut served = 0;
    for r in answers {
        match r.status().as_u16() {
            200 => served += 1,
            429 => {
                assert_eq!(header(&r, "x-switchyard-error"), "budget_exceeded");
                assert_eq!(header(&r, "x-should-retry"), "false");
                let v: Value = r.json().await.unwrap();
                assert!(v["error"]["message"].as_str().unwrap().contains("member:al"), "{v}");
            }
            other => panic!("{other}: {}", r.text().await.unwrap()),
        }
    }
    assert_eq!(served, 1, "a budget with room for one request served {served} of a burst of 8");
    assert_eq!(p.calls(), 1, "the refusals called nobody");
    assert_eq!(gw.recorded(8).await, 8, "every refusal is on record");
    let rows = gw.admin("/admin/requests?member=al").await;
    let refused = rows["requests"].as_array().unwrap().iter().filter(|r| r["error_code"] == "budget_exceeded").count();
    assert_eq!(refused, 7, "{rows}");
    // Once the one served is paid for, its reservation is given back:
    // the member's budget shows what it spent, not what it reserved.
    let budgets = gw.admin("/admin/budgets").await;
    let row = budgets.as_array().unwrap().iter().find(|b| b["scope"] == "member:al").unwrap().clone();
    let spent = row["spent_usd"].as_f64().unwrap();
    let cost: f64 = rows["requests"].as_array().unwrap().iter().filter_map(|r| r["cost_usd"].as_f64()).sum();
    assert!(cost > 5.0 && (spent - cost).abs() < 1e-9, "{row} against the rows' {cost}");
}

/// A member's spend is seeded from the history when the gateway starts: the
/// budget spent before a restart still refuses after it, at once.
#[tokio::test]
async fn a_members_budget_spent_before_a_restart_still_refuses_after_it() {
    let (p, gw) = gateway(&["m"]).await;
    let al = add(&gw, json!({ "name": "al", "budget": "5/day" })).await;
    let bo = add(&gw, json!({ "name": "bo", "budget": "1000/day" })).await;
    assert_eq!(post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    assert_eq!(post_as(&gw, &bo, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    gw.recorded(2).await;

    let gw = gw.restart(keys_for(&["p", "p-an"])).await;
    let refused = post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!(refused.status(), 429, "the spend on record still counts");
    assert_eq!(header(&refused, "x-switchyard-error"), "budget_exceeded");
    assert_eq!(header(&refused, "x-should-retry"), "false");
    assert_eq!(p.calls(), 2);
    assert_eq!(post_as(&gw, &bo, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    let budgets = gw.admin("/admin/budgets").await;
    let spent = |scope: &str| {
        let row = budgets.as_array().unwrap().iter().find(|b| b["scope"] == scope).unwrap();
        row["spent_usd"].as_f64().unwrap()
    };
    assert!(spent("member:al") > 5.0 && spent("member:bo") > spent("member:al"), "{budgets}");
}

/// The live feed names the member of each request: a member's request
/// finished carries its name, the owner's none.
#[tokio::test]
async fn the_live_feed_names_each_requests_member() {
    use futures_util::StreamExt;
    let (_p, gw) = gateway(&["m"]).await;
    let al = add(&gw, json!({ "name": "al" })).await;
    let r = http().get(gw.url("/admin/events")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    let mut body = r.bytes_stream();
    let mut text = String::new();
    let mut finished = async || loop {
        if let Some(end) = text.find("\n\n") {
            let event: String = text.drain(..end + 2).collect();
            if let Some(data) = event
                .lines()
                .find_map(|l| l.strip_prefix("data:"))
                .filter(|_| event.contains("event: request_finished"))
            {
                return serde_json::from_str::<Value>(data.trim()).unwrap();
            }
            continue;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(3), body.next()).await.unwrap().unwrap().unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    };
    assert_eq!(post_as(&gw, &al, "/v1/chat/completions", &chat_hi("m")).await.status(), 200);
    let event = finished().await;
    assert_eq!(event["request"]["member"], "al", "{event}");
    let wrong = post_as(&gw, "sy-m-wrong", "/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!(wrong.status(), 401);
    let event = finished().await;
    assert_eq!(event["request"]["member"], Value::Null, "a wrong key is nobody's: {event}");
}
