//! Each tool's edit on a user's real-looking file, and the byte-for-byte undo.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

struct Home {
    dir: tempfile::TempDir,
    data: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home { dir: tempfile::tempdir().unwrap(), data: tempfile::tempdir().unwrap() }
    }
    fn env(&self) -> Env {
        Env::new(
            self.dir.path().to_path_buf(),
            [("PATH".to_string(), self.dir.path().join("bin").display().to_string())],
        )
    }
    fn backups(&self) -> Backups {
        Backups::new(self.data.path())
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

fn target(token: Option<&str>) -> Target {
    Target {
        base: "http://127.0.0.1:4141".into(),
        token: token.map(|t| SecretString::from(t.to_string())),
        model: Some("sim-model".into()),
        status_line: None,
    }
}

/// Connects `tool` over the user's `files` and checks `expect` against each
/// file's new text, then disconnects and checks every byte came back.
fn round_trip(id: &str, files: &[(&str, &str)], token: Option<&str>, expect: impl Fn(&[String])) {
    let home = Home::new();
    let paths: Vec<PathBuf> = files.iter().map(|(rel, text)| home.write(rel, text)).collect();
    let tool = find(id).unwrap();
    let changed = connect(tool, &home.env(), &target(token), &home.backups()).unwrap();
    assert_eq!(changed.files.len(), tool.files.len());
    let after: Vec<String> = paths.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect();
    expect(&after);
    let status = status(tool, &home.env(), &home.backups());
    assert!(status.connected && !status.changed, "{status:?}");
    disconnect(tool, &home.backups(), false).unwrap();
    for (path, (_, before)) in paths.iter().zip(files) {
        assert_eq!(std::fs::read(path).unwrap(), before.as_bytes(), "{} restored byte for byte", path.display());
    }
    assert!(!status_of(&home, tool).connected);
    assert_eq!(std::fs::read_dir(home.data.path().join("tools")).unwrap().count(), 0, "no backups left behind");
}

fn status_of(home: &Home, tool: &'static Tool) -> ToolStatus {
    status(tool, &home.env(), &home.backups())
}

#[test]
fn claude_code_gets_env_entries_beside_the_users_settings() {
    let user = "{\n  \"theme\": \"dark\",\n  \"permissions\": { \"allow\": [\"Read\"] },\n  \"env\": {\n    \"DISABLE_TELEMETRY\": \"1\"\n  }\n}\n";
    round_trip("claude", &[(".claude/settings.json", user)], Some("sy-token"), |after| {
        let text = &after[0];
        assert!(text.starts_with("{\n  \"theme\": \"dark\",\n  \"permissions\": { \"allow\": [\"Read\"] },\n  \"env\": {\n    \"DISABLE_TELEMETRY\": \"1\",\n    \"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:4141\",\n"), "{text}");
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["env"]["ANTHROPIC_AUTH_TOKEN"], "sy-token");
        assert_eq!(v["env"]["ANTHROPIC_MODEL"], "sim-model");
    });
}

#[test]
fn codex_gets_a_provider_table_and_keeps_comments() {
    let user = "# my settings\nmodel = \"o3\" # favourite\napproval_policy = \"never\"\n\n[analytics]\nenabled = false\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n";
    round_trip("codex", &[(".codex/config.toml", user)], Some("sy-token"), |after| {
        let text = &after[0];
        assert!(text.starts_with("# my settings\nmodel = \"sim-model\" # favourite\napproval_policy = \"never\"\nmodel_provider = \"switchyard\"\n\n[analytics]\nenabled = false\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n"), "{text}");
        let doc: toml_edit::DocumentMut = text.parse().unwrap();
        let provider = &doc["model_providers"]["switchyard"];
        assert_eq!(provider["base_url"].as_str(), Some("http://127.0.0.1:4141/v1"));
        assert_eq!(provider["wire_api"].as_str(), Some("responses"));
        assert_eq!(provider["experimental_bearer_token"].as_str(), Some("sy-token"));
    });
}

#[test]
fn gemini_cli_gets_the_api_key_auth_type_and_an_env_file() {
    let settings = "{\n  // mine\n  \"ui\": { \"theme\": \"GitHub\" },\n}\n";
    let dotenv = "# keep me\nOTHER=1\n";
    round_trip("gemini", &[(".gemini/settings.json", settings), (".gemini/.env", dotenv)], None, |after| {
        assert_eq!(
            after[0],
            "{\n  // mine\n  \"ui\": { \"theme\": \"GitHub\" },\n  \"security\": {\n    \"auth\": {\n      \"selectedType\": \"gemini-api-key\"\n    }\n  }\n}\n"
        );
        assert_eq!(
            after[1],
            "# keep me\nOTHER=1\nGOOGLE_GEMINI_BASE_URL=http://127.0.0.1:4141\nGEMINI_API_KEY=switchyard\nGEMINI_MODEL=sim-model\n"
        );
    });
    assert!(find("gemini").unwrap().note.is_none(), "the gateway speaks Gemini's API: nothing to warn of");
}

#[test]
fn aider_gets_openai_compatible_options() {
    let user = "# aider\ndark-mode: true\nopenai-api-base: https://somewhere.example/v1\n";
    round_trip("aider", &[(".aider.conf.yml", user)], Some("sy-token"), |after| {
        assert_eq!(
            after[0],
            "# aider\ndark-mode: true\nopenai-api-base: \"http://127.0.0.1:4141/v1\"\nopenai-api-key: \"sy-token\"\nmodel: \"openai/sim-model\"\n"
        );
    });
}

#[test]
fn opencode_gets_a_provider_and_keeps_the_users_own() {
    let user = "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"provider\": {\n    \"ollama\": { \"npm\": \"@ai-sdk/openai-compatible\" }\n  }\n}\n";
    round_trip("opencode", &[(".config/opencode/opencode.json", user)], None, |after| {
        let v: serde_json::Value = serde_json::from_str(&after[0]).unwrap();
        assert_eq!(v["provider"]["switchyard"]["options"]["baseURL"], "http://127.0.0.1:4141/v1");
        assert_eq!(v["provider"]["switchyard"]["models"]["sim-model"]["name"], "sim-model");
        assert_eq!(v["model"], "switchyard/sim-model");
        assert!(after[0].starts_with(
            "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"provider\": {\n    \"ollama\": { \"npm\": \"@ai-sdk/openai-compatible\" },\n"
        ));
    });
}

#[test]
fn a_file_connect_created_is_removed_with_its_folder() {
    let home = Home::new();
    let tool = find("codex").unwrap();
    connect(tool, &home.env(), &target(None), &home.backups()).unwrap();
    let path = home.dir.path().join(".codex/config.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("bearer"), "no token without access_token = true: {text}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    disconnect(tool, &home.backups(), false).unwrap();
    assert!(!path.exists() && !home.dir.path().join(".codex").exists());
}

#[test]
fn connecting_again_updates_the_port_and_still_restores_the_first_original() {
    let home = Home::new();
    let user = "{ \"theme\": \"light\" }\n";
    let path = home.write(".claude/settings.json", user);
    let tool = find("claude").unwrap();
    connect(tool, &home.env(), &target(None), &home.backups()).unwrap();
    let moved = Target { base: "http://127.0.0.1:5151".into(), ..target(None) };
    connect(tool, &home.env(), &moved, &home.backups()).unwrap();
    assert_eq!(status_of(&home, tool).base_url.as_deref(), Some("http://127.0.0.1:5151"));
    disconnect(tool, &home.backups(), false).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), user);
}

#[test]
fn a_file_changed_since_connect_is_kept_unless_forced() {
    let home = Home::new();
    let user = "model = \"o3\"\n";
    let path = home.write(".codex/config.toml", user);
    let tool = find("codex").unwrap();
    connect(tool, &home.env(), &target(None), &home.backups()).unwrap();
    let edited = std::fs::read_to_string(&path).unwrap() + "# my note\n";
    std::fs::write(&path, &edited).unwrap();
    assert!(status_of(&home, tool).changed);
    let err = disconnect(tool, &home.backups(), false).unwrap_err();
    assert!(matches!(err, ToolError::Changed { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);
    disconnect(tool, &home.backups(), true).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), user);
}

#[test]
fn a_broken_file_is_left_alone() {
    let home = Home::new();
    let path = home.write(".claude/settings.json", "{ \"theme\": ");
    let err = connect(find("claude").unwrap(), &home.env(), &target(None), &home.backups()).unwrap_err();
    assert!(matches!(err, ToolError::Edit { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ \"theme\": ");
    assert!(!status_of(&home, find("claude").unwrap()).connected);
}

#[cfg(unix)]
#[test]
fn a_symlinked_settings_file_stays_a_link() {
    let home = Home::new();
    let real = home.write("dotfiles/aider.yml", "dark-mode: true\n");
    std::os::unix::fs::symlink(&real, home.dir.path().join(".aider.conf.yml")).unwrap();
    let tool = find("aider").unwrap();
    connect(tool, &home.env(), &target(None), &home.backups()).unwrap();
    assert!(home.dir.path().join(".aider.conf.yml").symlink_metadata().unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&real).unwrap().contains("openai-api-base"));
    disconnect(tool, &home.backups(), false).unwrap();
    assert_eq!(std::fs::read_to_string(&real).unwrap(), "dark-mode: true\n");
}

#[test]
fn installed_means_found_on_path() {
    let home = Home::new();
    let tool = find("codex").unwrap();
    assert!(status_of(&home, tool).installed.is_none());
    let bin = home.write("bin/codex", "#!/bin/sh\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    assert_eq!(status_of(&home, tool).installed, Some(bin));
}

#[test]
fn folder_variables_move_the_files() {
    let home = Home::new();
    let env = Env::new(
        home.dir.path().to_path_buf(),
        [
            ("CODEX_HOME".to_string(), "/elsewhere/codex".to_string()),
            ("XDG_CONFIG_HOME".to_string(), "/xdg".to_string()),
        ],
    );
    assert_eq!(find("codex").unwrap().files[0].place.path(&env), PathBuf::from("/elsewhere/codex/config.toml"));
    assert_eq!(find("opencode").unwrap().files[0].place.path(&env), PathBuf::from("/xdg/opencode/opencode.json"));
}
