//! Keys never leak: after a run with known dummy keys, none appears in the
//! database files, the log or any admin API response.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use secrecy::ExposeSecret;
use support::{client, Served};
use switchyard_sim::{Fault, Script, SimProvider};

const KEYS: [&str; 2] = ["sk-LEAKCHECK-primary-7f3a9c", "sk-LEAKCHECK-backup-b81e04"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_reaches_the_database_the_log_or_the_admin_api() {
    let primary = SimProvider::start(
        "primary",
        Script::ok()
            .then_once(Fault::status(401))
            .then_once(Fault::status(503))
            .then_once(Fault::status_with(429, &[("retry-after", "1")])),
    )
    .await
    .unwrap();
    let backup = SimProvider::start("backup", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(
        &config,
        format!(
            "[history]\nstore_bodies = true\n\n[policy]\nbackoff_base = \"1ms\"\n\n[[providers]]\nname = \"primary\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\n\n[[providers]]\nname = \"backup\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\n",
            primary.base_url(),
            backup.base_url()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let served = Served::start(
        &config,
        &data,
        &[("SWITCHYARD_KEY_PRIMARY", KEYS[0]), ("SWITCHYARD_KEY_BACKUP", KEYS[1]), ("RUST_LOG", "debug")],
    );
    let base = format!("http://{}", served.addr);
    let http = client();
    let mut ids = Vec::new();
    for stream in [false, true, false, true, false] {
        let r = http
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth("sk-client-side-not-a-provider-key")
            .json(&serde_json::json!({ "model": "m", "stream": stream, "messages": [{ "role": "user", "content": "hi" }] }))
            .send()
            .await
            .unwrap();
        ids.push(r.headers()["x-request-id"].to_str().unwrap().to_string());
        r.bytes().await.unwrap();
    }
    let admin = switchyard_token(&data);
    let mut answers = String::new();
    let mut paths = vec!["/admin/requests".to_string(), "/admin/keys".into(), "/admin/spend".into()];
    paths.extend(ids.iter().map(|id| format!("/admin/requests/{id}")));
    for path in paths {
        let r = http.get(format!("{base}{path}")).bearer_auth(&admin).send().await.unwrap();
        assert!(r.status().is_success(), "{path}");
        answers.push_str(&r.text().await.unwrap());
    }
    assert!(answers.contains("\"status\":\"revoked\""), "the 401 was seen: {answers}");
    let log = served.stop().join("\n");
    assert!(log.contains("key refused by the provider"), "the run exercised the revocation path");

    for key in KEYS {
        assert!(!answers.contains(key), "a key reached the admin API");
        assert!(!log.contains(key), "a key reached the log");
        for entry in std::fs::read_dir(&data).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            assert!(!contains(&bytes, key.as_bytes()), "a key reached {}", path.display());
        }
    }
}

fn switchyard_token(data: &std::path::Path) -> String {
    std::fs::read_to_string(data.join("admin-token"))
        .map(|t| secrecy::SecretString::from(t).expose_secret().trim().to_string())
        .unwrap()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
