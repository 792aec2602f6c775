//! Real coding CLIs through a member's own gateway joined to the team's:
//! Claude Code and Codex, pointed at the member's gateway only, run a tool
//! round trip served by the team's provider, on the team's record as the
//! member's, from the member's device. How the CLIs are installed and
//! driven: [`switchyard_tests::clis`].

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use switchyard_core::secrets::MemoryStore;
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::clis::{Client, Sandbox, SECRET};
use switchyard_tests::{http, keys_for, ConfigText, TestGateway, ADMIN_TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_and_codex_are_served_by_the_team_through_the_members_gateway() {
    for client in [Client::ClaudeCode, Client::Codex] {
        let sandbox = Sandbox::new();
        let plan = client.read_plan(&sandbox, &["notes.txt"]);
        // The team's gateway: its provider speaks the client's own API.
        let p = SimProvider::start("p", Script::agent().tool_plan(plan)).await.unwrap();
        let models = [format!("{}=up-model", client.model())];
        let models: Vec<&str> = models.iter().map(String::as_str).collect();
        let team =
            TestGateway::start(client.native().serve(ConfigText::new(), &p, &models).build(), keys_for(&["p"])).await;
        let r = http().post(team.url("/admin/members")).bearer_auth(ADMIN_TOKEN).json(&json!({ "name": "al" }));
        let al: Value = r.send().await.unwrap().json().await.unwrap();
        let al = al["key"].as_str().unwrap();

        // The member's gateway: the team joined, no provider of its own.
        let origin = team.base_url().trim_end_matches("/v1").to_string();
        let config = ConfigText::new().raw(&format!(
            "[[providers]]\nname = \"team\"\nkind = \"switchyard\"\nbase_url = {origin:?}\nmodels = [{:?}]\ndevice = \"laptop\"\n",
            client.model()
        ));
        let mine = TestGateway::start(config.build(), MemoryStore::new().with("team", "main", al)).await;

        let said = client.run(&sandbox, &mine, "Read notes.txt and tell me what it says.").await;
        assert!(said.contains(SECRET), "{client:?}: the answer quotes the file it read:\n{said}");
        assert!(p.calls() >= 2, "{client:?}: the tool call and the answer came from the team's provider");
        // Passed on in the client's own format, not translated twice.
        let native = p.requests().iter().all(|r| r.path == p.requests()[0].path);
        assert!(native, "{client:?}: {:?}", p.requests().iter().map(|r| r.path.clone()).collect::<Vec<_>>());

        team.recorded(2).await;
        let rows = team.admin("/admin/requests?member=al&device=laptop").await;
        let on_record = rows["requests"].as_array().unwrap();
        assert!(on_record.len() >= 2, "{client:?}: al's, from the laptop, on the team's record: {rows}");
        mine.recorded(2).await;
        let here = mine.admin("/admin/requests").await;
        let served: Vec<&str> =
            here["requests"].as_array().unwrap().iter().filter_map(|r| r["provider"].as_str()).collect();
        assert!(served.iter().all(|p| *p == "team"), "{client:?}: this gateway's record shows the team served: {here}");
    }
}
