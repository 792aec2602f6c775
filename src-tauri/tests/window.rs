//! The desktop app for real: under Xvfb with a session D-Bus, the app
//! starts on a config of simulated providers and proxies a request to one,
//! the window shows the overview
//! (driven through WebKitWebDriver), the window holds a dashboard session and
//! never the admin token, its policy lets it reach the gateway's address and
//! no other local port, toggling a provider in the window disables it
//! (checked through the admin API, the page's request carrying the session
//! and no token), the window's own screenshot (not the screen's) is not
//! blank and its heading reads "Overview", the Tools view connects and
//! disconnects Codex in the app's home, and with `trayer` hosting the tray
//! the icon appears, green; its "Connect tools" submenu connects Claude Code,
//! and its "Pause gateway" (keyboard-driven with
//! xdotool) closes the port and turns the icon grey, and the window then says
//! the gateway is paused and its Resume button serves again.
//! `.ci/run` installs Xvfb, WebKitWebDriver, trayer and ImageMagick.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard_sim::{Script, SimProvider};

const ADMIN_TOKEN: &str = "sya-desktop-e2e";
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Children killed when the test ends, however it ends.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn need(tool: &str) {
    let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().unwrap();
    assert!(found.status.success(), "the desktop test needs `{tool}`: .ci/run installs it");
}

async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct Driver {
    http: reqwest::Client,
    url: String,
}

impl Driver {
    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let r = self.http.request(method, format!("{}{path}", self.url)).json(&body).send().await.unwrap();
        r.json().await.unwrap()
    }

    /// Runs `script` in the page; it calls `done` (its last argument) with the answer.
    async fn run(&self, session: &str, script: &str) -> Value {
        let body = json!({ "script": format!("const done = arguments[arguments.length - 1];\n{script}"), "args": [] });
        let v = self.call(reqwest::Method::POST, &format!("/session/{session}/execute/async"), body).await;
        v["value"].clone()
    }

    async fn find(&self, session: &str, css: &str) -> Option<String> {
        let v = self
            .call(
                reqwest::Method::POST,
                &format!("/session/{session}/element"),
                json!({ "using": "css selector", "value": css }),
            )
            .await;
        v["value"][ELEMENT].as_str().map(str::to_string)
    }
}

async fn admin_providers(port: u16) -> Vec<Value> {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("http://127.0.0.1:{port}/admin/providers");
    let r = client.get(url).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    r.json().await.unwrap()
}

/// Standard deviation of the screenshot's pixels: 0 for a blank image.
fn spread(png: &Path) -> f64 {
    let out = Command::new("convert").arg(png).args(["-format", "%[fx:standard_deviation]", "info:"]).output().unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    printed.trim().parse().unwrap_or_else(|_| {
        panic!("convert gave no spread for {}: {printed} {}", png.display(), String::from_utf8_lossy(&out.stderr))
    })
}

/// The centre of the app's tray icon on screen, once trayer hosts it: the
/// icon is a window of the tray-icon class embedded in trayer's panel
/// (`xwininfo` gives `WxH+x+y  +absX+absY`).
fn tray_icon(display: &str) -> Option<(i64, i64)> {
    let out = Command::new("xwininfo").args(["-root", "-tree"]).env("DISPLAY", display).output().ok()?;
    let tree = String::from_utf8_lossy(&out.stdout).to_string();
    let line = tree.lines().find(|l| l.contains("switchyard-desktop") && l.contains("tray-icon"))?;
    let mut words = line.split_whitespace().rev();
    let absolute = words.next()?;
    let size = words.next()?.split('+').next()?;
    let (w, h) = size.split_once('x')?;
    let mut at = absolute.trim_start_matches('+').split('+');
    let (x, y): (i64, i64) = (at.next()?.parse().ok()?, at.next()?.parse().ok()?);
    Some((x + w.parse::<i64>().ok()? / 2, y + h.parse::<i64>().ok()? / 2))
}

/// The colour of one screen pixel, as (r, g, b).
fn pixel(display: &str, x: i64, y: i64) -> Option<(u8, u8, u8)> {
    let out = Command::new("import")
        .args(["-window", "root", "-crop", &format!("1x1+{x}+{y}"), "-depth", "8", "txt:-"])
        .env("DISPLAY", display)
        .output()
        .ok()?;
    // "0,0: (31,138,76)  #1F8A4C  srgb(31,138,76)"
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let hex = text.split_whitespace().find(|w| w.starts_with('#') && w.len() >= 7)?;
    let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
    Some((byte(1)?, byte(3)?, byte(5)?))
}

fn xdotool(display: &str, args: &[&str]) {
    let ok = Command::new("xdotool").args(args).env("DISPLAY", display).status().unwrap();
    assert!(ok.success(), "xdotool {args:?}");
}

/// The app window's X id (its title is the app's name).
fn window_id(display: &str) -> Option<String> {
    let out = Command::new("xdotool")
        .args(["search", "--onlyvisible", "--name", "^Switchyard$"])
        .env("DISPLAY", display)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().next().map(str::to_string)
}

/// A screenshot of the app window alone, not the screen around it: the
/// screen's black margin and the tray icon give contrast to a blank window.
fn window_shot(display: &str, id: &str, path: &Path) {
    let taken = Command::new("import").args(["-window", id]).arg(path).env("DISPLAY", display).status().unwrap();
    assert!(taken.success(), "import -window {id} failed");
    let geometry = Command::new("xdotool").args(["getwindowgeometry", id]).env("DISPLAY", display).output().unwrap();
    println!("window screenshot: {} ({})", path.display(), String::from_utf8_lossy(&geometry.stdout).trim());
}

async fn text_of(driver: &Driver, session: &str, css: &str) -> Option<String> {
    let element = driver.find(session, css).await?;
    let text =
        driver.call(reqwest::Method::GET, &format!("/session/{session}/element/{element}/text"), Value::Null).await;
    text["value"].as_str().map(str::to_string)
}

async fn click(driver: &Driver, session: &str, css: &str) {
    let element = driver.find(session, css).await.unwrap_or_else(|| panic!("no {css}"));
    driver.call(reqwest::Method::POST, &format!("/session/{session}/element/{element}/click"), json!({})).await;
}

fn screenshot(display: &str, path: &Path) {
    let taken = Command::new("import").args(["-window", "root"]).arg(path).env("DISPLAY", display).status().unwrap();
    assert!(taken.success(), "import failed");
    println!("screenshot: {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_serves_shows_its_dashboard_toggles_a_provider_and_pauses_from_the_tray() {
    for tool in ["Xvfb", "WebKitWebDriver", "trayer", "xwininfo", "xdotool", "import", "convert"] {
        need(tool);
    }
    assert!(
        std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some(),
        "the desktop test needs a session D-Bus: run it through .ci/run"
    );
    let a = SimProvider::start("a", Script::ok()).await.unwrap();
    let b = SimProvider::start("b", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = dir.path().join("switchyard.toml");
    let provider = |name: &str, sim: &SimProvider| {
        format!(
            "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\nprobe = false\n",
            sim.base_url()
        )
    };
    std::fs::write(
        &config,
        format!("[server]\nlisten = \"127.0.0.1:{port}\"\n\n{}\n{}", provider("desk-a", &a), provider("desk-b", &b)),
    )
    .unwrap();

    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let display_number = 40 + std::process::id() % 400;
    let display = format!(":{display_number}");
    let mut procs = Procs(Vec::new());
    procs.0.push(
        Command::new("Xvfb")
            .args([display.as_str(), "-screen", "0", "1280x800x24", "-nolisten", "tcp"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let socket = PathBuf::from(format!("/tmp/.X11-unix/X{display_number}"));
    wait_until("Xvfb", Duration::from_secs(10), || std::future::ready(socket.exists().then_some(()))).await;
    procs.0.push(
        Command::new("trayer")
            .args([
                "--edge",
                "top",
                "--align",
                "right",
                "--widthtype",
                "request",
                "--height",
                "32",
                "--SetDockType",
                "true",
            ])
            .env("DISPLAY", &display)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let driver_port = free_port();
    // `.ci/run` runs this test again on the app the .deb installed.
    let app = std::env::var_os("SWITCHYARD_DESKTOP_APP")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_switchyard-desktop")));
    println!("app: {}", app.display());
    procs.0.push(
        Command::new("WebKitWebDriver")
            .arg(format!("--port={driver_port}"))
            .env("DISPLAY", &display)
            .env("TAURI_WEBVIEW_AUTOMATION", "true")
            .env("SWITCHYARD_CONFIG", &config)
            .env("SWITCHYARD_DATA_DIR", dir.path().join("data"))
            .env("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("SWITCHYARD_KEY_DESK_A", "sk-desk-a")
            .env("SWITCHYARD_KEY_DESK_B", "sk-desk-b")
            // The tools the app connects are this home's, not the user's running the test.
            .env("HOME", &home)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let driver = Driver {
        http: reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(60)).build().unwrap(),
        url: format!("http://127.0.0.1:{driver_port}"),
    };
    wait_until("WebKitWebDriver", Duration::from_secs(10), || async {
        driver.http.get(format!("{}/status", driver.url)).send().await.ok().filter(|r| r.status().is_success())
    })
    .await;
    let caps =
        json!({ "capabilities": { "alwaysMatch": { "webkitgtk:browserOptions": { "binary": app, "args": [] } } } });
    let session = driver.call(reqwest::Method::POST, "/session", caps).await;
    let session = session["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {session}")).to_string();

    // The window shows the overview, fed by the in-process gateway.
    let card = wait_until("the overview cards", Duration::from_secs(30), || {
        driver.find(&session, "article[data-provider=\"desk-a\"] [data-state=\"healthy\"]")
    })
    .await;
    let text = driver.call(reqwest::Method::GET, &format!("/session/{session}/element/{card}/text"), Value::Null).await;
    assert!(text["value"].as_str().unwrap_or("").contains("Healthy"), "{text}");

    // The app's gateway proxies a request to a provider.
    let answer = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
        .json(&json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert!(answer["choices"][0]["message"]["content"].as_str().unwrap_or("").starts_with("Hello from"), "{answer}");

    // The window's connection is a session at its gateway, not the admin token.
    let connect = driver
        .run(&session, "window.__TAURI_INTERNALS__.invoke('connect').then(done, (e) => done({ error: String(e) }));")
        .await;
    assert!(!connect.to_string().contains(ADMIN_TOKEN), "the window was handed the admin token: {connect}");
    assert_eq!(connect["base"], format!("http://127.0.0.1:{port}"), "{connect}");
    let window_session = connect["session"].as_str().unwrap_or_else(|| panic!("no session: {connect}")).to_string();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let admitted = http
        .get(format!("http://127.0.0.1:{port}/admin/providers"))
        .header("x-switchyard-session", &window_session)
        .send()
        .await
        .unwrap();
    assert_eq!(admitted.status(), 200, "the session reaches the admin API");
    let stored = driver
        .run(
            &session,
            "done(document.documentElement.outerHTML + JSON.stringify(localStorage) + JSON.stringify(sessionStorage));",
        )
        .await;
    assert!(!stored.to_string().contains(ADMIN_TOKEN), "the page holds the admin token");

    // Its policy names the gateway's address: another local port is refused
    // before any connection is made.
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    other.set_nonblocking(true).unwrap();
    let other_port = other.local_addr().unwrap().port();
    let violation = driver
        .run(
            &session,
            &format!(
                "document.addEventListener('securitypolicyviolation', (e) => done({{ directive: e.violatedDirective, \
                 blocked: e.blockedURI, policy: e.originalPolicy }}), {{ once: true }});\n\
                 fetch('http://127.0.0.1:{other_port}/').catch(() => {{}});\n\
                 setTimeout(() => done(null), 5000);"
            ),
        )
        .await;
    assert!(violation["directive"].as_str().unwrap_or("").starts_with("connect-src"), "not refused: {violation}");
    let policy = violation["policy"].as_str().unwrap().to_string();
    let connect_src = policy.split(';').map(str::trim).find(|d| d.starts_with("connect-src")).unwrap();
    assert_eq!(connect_src, format!("connect-src ipc: http://ipc.localhost http://127.0.0.1:{port}"), "{policy}");
    assert!(!policy.contains('*'), "{policy}");
    assert!(other.accept().is_err(), "the refused request never reached the other port");

    // The page's own requests carry the session and no token.
    driver
        .run(
            &session,
            "window.__sent = []; const real = window.fetch; \
             window.fetch = (input, init) => { window.__sent.push(Object.assign({}, (init && init.headers) || {})); \
             return real(input, init); }; done(true);",
        )
        .await;

    // Toggling the provider in the window disables it in the gateway.
    let switch = driver.find(&session, "article[data-provider=\"desk-a\"] input[role=\"switch\"]").await.unwrap();
    driver.call(reqwest::Method::POST, &format!("/session/{session}/element/{switch}/click"), json!({})).await;
    wait_until("desk-a disabled through the admin API", Duration::from_secs(10), || async {
        admin_providers(port).await.iter().find(|p| p["name"] == "desk-a" && p["enabled"] == false).map(|_| ())
    })
    .await;
    assert!(admin_providers(port).await.iter().any(|p| p["name"] == "desk-b" && p["enabled"] == true));
    let sent = driver.run(&session, "done(window.__sent);").await;
    let sent = sent.as_array().unwrap_or_else(|| panic!("no requests recorded: {sent}"));
    assert!(!sent.is_empty(), "the toggle went through the page's fetch");
    for headers in sent {
        assert_eq!(headers["x-switchyard-session"], window_session.as_str(), "{headers}");
        assert!(headers.get("authorization").is_none(), "{headers}");
        assert!(!headers.to_string().contains(ADMIN_TOKEN), "{headers}");
    }

    // The window shows text, and its own pixels are not blank.
    assert_eq!(text_of(&driver, &session, "nav a[aria-current=\"page\"]").await.as_deref(), Some("Overview"));
    // WebKit paints after the DOM has its text, later on a loaded machine:
    // the window is shot until it shows something, and a window that stays
    // blank fails.
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/desktop-shots");
    std::fs::create_dir_all(&shots).unwrap();
    let window = window_id(&display).expect("the app window is on screen");
    let shot = shots.join("window.png");
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        window_shot(&display, &window, &shot);
        let spread = spread(&shot);
        if spread > 0.02 {
            break;
        }
        assert!(Instant::now() < end, "the window is blank (spread {spread})");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The Tools view connects and disconnects a tool in this home.
    driver.run(&session, "location.hash = '#/tools'; done(true);").await;
    let row =
        wait_until("the Tools view", Duration::from_secs(10), || text_of(&driver, &session, "tr[data-tool=\"codex\"]"))
            .await;
    assert!(row.contains("Codex") && row.contains("not on PATH") && row.contains("never"), "{row}");
    let codex_config = home.join(".codex/config.toml");
    click(&driver, &session, "tr[data-tool=\"codex\"] button").await;
    wait_until("Codex connected", Duration::from_secs(10), || {
        std::future::ready(
            std::fs::read_to_string(&codex_config).ok().filter(|t| t.contains(&format!("http://127.0.0.1:{port}/v1"))),
        )
    })
    .await;
    let row = wait_until("the row to say connected", Duration::from_secs(10), || async {
        text_of(&driver, &session, "tr[data-tool=\"codex\"]").await.filter(|t| t.contains("Disconnect"))
    })
    .await;
    assert!(row.contains(&format!("http://127.0.0.1:{port}/v1")), "{row}");
    click(&driver, &session, "tr[data-tool=\"codex\"] button").await;
    wait_until("Codex disconnected", Duration::from_secs(10), || {
        std::future::ready((!codex_config.exists()).then_some(()))
    })
    .await;
    driver.run(&session, "location.hash = '#/overview'; done(true);").await;

    // trayer hosts the tray icon; its menu pauses the gateway.
    let (x, y) =
        wait_until("the tray icon in trayer", Duration::from_secs(10), || std::future::ready(tray_icon(&display)))
            .await;
    // Inside the icon's rounded square, clear of the white glyph: its colour is the health.
    let swatch = (x - 8, y - 7);
    // The icon takes the health colour once the first health reaches the
    // tray, which under load can be after the icon appears.
    let green = |(r, g, b): (u8, u8, u8)| i32::from(g) > i32::from(r) + 40 && i32::from(g) > i32::from(b) + 20;
    let healthy = wait_until("the icon green while healthy", Duration::from_secs(10), || {
        std::future::ready(pixel(&display, swatch.0, swatch.1).filter(|p| green(*p)))
    })
    .await;
    // "Connect tools" → its first tool, Claude Code, connects it in this home.
    xdotool(&display, &["mousemove", &x.to_string(), &y.to_string(), "click", "1"]);
    tokio::time::sleep(Duration::from_millis(800)).await;
    for key in ["Down", "Down", "Down", "Right"] {
        xdotool(&display, &["key", key]);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    screenshot(&display, &shots.join("tray-tools.png"));
    xdotool(&display, &["key", "Return"]);
    let claude_settings = home.join(".claude/settings.json");
    wait_until("Claude Code connected from the tray", Duration::from_secs(10), || {
        std::future::ready(
            std::fs::read_to_string(&claude_settings).ok().filter(|t| t.contains(&format!("http://127.0.0.1:{port}"))),
        )
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    xdotool(&display, &["mousemove", &x.to_string(), &y.to_string(), "click", "1"]);
    tokio::time::sleep(Duration::from_millis(800)).await;
    screenshot(&display, &shots.join("tray-menu.png"));
    // Keys skip the status line and separators: two copy items, the
    // "Connect tools" submenu, the two providers, then "Pause gateway"
    // (menu::build's order).
    for _ in 0..6 {
        xdotool(&display, &["key", "Down"]);
    }
    xdotool(&display, &["key", "Return"]);
    wait_until("the paused gateway to stop listening", Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err().then_some(())
    })
    .await;
    // The icon turns grey: paused.
    let grey = wait_until("the paused icon", Duration::from_secs(10), || {
        let p = pixel(&display, swatch.0, swatch.1).filter(|(r, g, b)| r.abs_diff(*g) < 20 && g.abs_diff(*b) < 20);
        std::future::ready(p)
    })
    .await;
    println!("tray icon colour: healthy {healthy:?}, paused {grey:?}");

    // The window says the gateway is paused, not gone, and resumes it.
    let banner = wait_until("the paused banner", Duration::from_secs(20), || {
        text_of(&driver, &session, "[data-state=\"paused\"]")
    })
    .await;
    assert!(banner.contains("The gateway is paused") && !banner.contains("Is Switchyard running"), "{banner}");
    screenshot(&display, &shots.join("paused.png"));
    click(&driver, &session, "[data-state=\"paused\"] button").await;
    wait_until("the gateway listening again", Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok().map(|_| ())
    })
    .await;
    wait_until("the paused banner gone", Duration::from_secs(20), || async {
        driver.find(&session, "[data-state=\"paused\"]").await.is_none().then_some(())
    })
    .await;

    // Why the window is measured on its own: blanked, the whole screen still
    // has contrast enough for the old check; the window's own pixels do not.
    driver.run(&session, "document.body.innerHTML = ''; document.documentElement.style.background = '#fff'; document.body.style.background = '#fff'; done(true);").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (blank_screen, blank_window) = (shots.join("blank-screen.png"), shots.join("blank-window.png"));
    screenshot(&display, &blank_screen);
    window_shot(&display, &window, &blank_window);
    println!("blank window: screen spread {}, window spread {}", spread(&blank_screen), spread(&blank_window));
    assert!(spread(&blank_screen) > 0.02, "the whole-screen measure passes a blank window");
    assert!(spread(&blank_window) < 0.02, "the window's own measure fails a blank window");

    driver.call(reqwest::Method::DELETE, &format!("/session/{session}"), Value::Null).await;
}
