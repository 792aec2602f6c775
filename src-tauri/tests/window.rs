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
//! A second test closes the window through the window manager (openbox),
//! finds no process left under the app (the window has its own, which
//! exits), reads the app's memory and CPU from /proc for a minute, and
//! reopens it from the tray: the Overview paints (its screenshot read by
//! tesseract).
//! `.ci/run` installs Xvfb, WebKitWebDriver, trayer, openbox, tesseract and ImageMagick.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard_sim::{Script, SimProvider};

const ADMIN_TOKEN: &str = "sya-desktop-e2e";
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One app at a time on the session bus: a second would hand over to the
/// first (single instance) and exit.
static ONE_APP: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let _one = ONE_APP.lock().await;
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

    // The window shows the overview, fed by the in-process gateway: probes
    // are off and nothing was sent yet, so nothing is known of the provider.
    let card = wait_until("the overview cards", Duration::from_secs(30), || {
        driver.find(&session, "article[data-provider=\"desk-a\"] [data-state=\"unknown\"]")
    })
    .await;
    let text = driver.call(reqwest::Method::GET, &format!("/session/{session}/element/{card}/text"), Value::Null).await;
    assert!(text["value"].as_str().unwrap_or("").contains("Not checked yet"), "{text}");

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

/// This process's children and their children, with their commands.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
            let ppid = stat[close + 1..].split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
            if ppid == Some(parent) {
                found.push((pid, stat[open + 1..close].to_string()));
                parents.push(pid);
            }
        }
    }
    found
}

/// The WebKit processes among `pid`'s descendants.
fn webkit_processes(pid: u32) -> Vec<(u32, String)> {
    descendants(pid).into_iter().filter(|(_, comm)| comm.starts_with("WebKit")).collect()
}

/// CPU time (user and system, in clock ticks) of a process.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().collect();
    // After the command: state is field 3, utime 14 and stime 15 (man 5 proc).
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A `/proc/<pid>/status` figure in kB (VmRSS, RssAnon, RssFile).
fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A `/proc/<pid>/smaps_rollup` figure in kB (Pss: shared pages counted
/// once across the processes that map them, as RSS does not).
fn rollup_kb(pid: u32, field: &str) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    let line = rollup.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Resident kB per mapped file (anonymous memory as `[anon]`, `[heap]`, …),
/// largest first: where a closed app's RSS is.
fn resident_by_mapping(pid: u32) -> Vec<(String, u64)> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut by: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    let mut current = String::new();
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            current = words.nth(4).unwrap_or("[anon]").to_string();
        } else if first == "Rss:" {
            *by.entry(current.clone()).or_default() += words.next().and_then(|k| k.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    let mut sorted: Vec<(String, u64)> = by.into_iter().collect();
    sorted.sort_by_key(|(_, kb)| std::cmp::Reverse(*kb));
    sorted
}

/// The text tesseract reads in an image.
fn ocr(png: &Path) -> String {
    let out = Command::new("tesseract").arg(png).arg("stdout").stderr(Stdio::null()).output().unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The targets for the closed app and a reopened window.
const TARGET_RSS_MB: u64 = 100;
const TARGET_PAINT: Duration = Duration::from_millis(500);
/// What this test holds a reopened window to: a debug build on a loaded
/// 2-core machine paints in 0.8 to 1.4 s (a new web and network process, the
/// bundle, a session, the providers), over the target, which is printed
/// beside the figure; this catches a window that does not paint at all.
const PAINT_LIMIT: Duration = Duration::from_millis(3000);
/// How long the closed app is watched, in real time (it is a real app).
const WATCHED: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_window_leaves_no_webkit_and_little_memory_and_the_tray_reopens_it_painted() {
    let _one = ONE_APP.lock().await;
    for tool in ["Xvfb", "openbox", "trayer", "xwininfo", "xdotool", "import", "convert", "tesseract"] {
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
        format!("[server]\nlisten = \"127.0.0.1:{port}\"\n\n{}\n{}", provider("light-a", &a), provider("light-b", &b)),
    )
    .unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let display_number = 440 + std::process::id() % 400;
    let display = format!(":{display_number}");
    let mut procs = Procs(Vec::new());
    let quiet = |cmd: &mut Command| cmd.env("DISPLAY", &display).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
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
    // A window manager: the window is closed the way a user closes it.
    procs.0.push(quiet(Command::new("openbox").env("HOME", &home)).unwrap());
    procs.0.push(
        quiet(Command::new("trayer").args([
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
        ]))
        .unwrap(),
    );
    let app = std::env::var_os("SWITCHYARD_DESKTOP_APP")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_switchyard-desktop")));
    println!("app: {}", app.display());
    // The app's log keeps its window timings (built, page load), read after the reopen.
    let log = dir.path().join("app.log");
    let child = Command::new(&app)
        .env("DISPLAY", &display)
        .env("SWITCHYARD_CONFIG", &config)
        .env("SWITCHYARD_DATA_DIR", dir.path().join("data"))
        .env("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("SWITCHYARD_KEY_LIGHT_A", "sk-light-a")
        .env("SWITCHYARD_KEY_LIGHT_B", "sk-light-b")
        .env("RUST_LOG", "info,switchyard_desktop=debug")
        .env("HOME", &home)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    procs.0.push(child);

    // Open: the window, and WebKit's processes behind it.
    let window =
        wait_until("the app window", Duration::from_secs(30), || std::future::ready(window_id(&display))).await;
    wait_until("WebKit's processes", Duration::from_secs(30), || {
        std::future::ready((webkit_processes(pid).len() >= 2).then_some(()))
    })
    .await;
    let open_rss: u64 =
        std::iter::once(pid).chain(descendants(pid).iter().map(|(p, _)| *p)).map(|p| status_kb(p, "VmRSS")).sum();
    println!("window open: app and WebKit {} MB RSS ({:?})", open_rss / 1024, webkit_processes(pid));

    // Closed through the window manager (Alt+F4 in openbox).
    // Pressed again while the window stays, as a user would: on a loaded
    // machine the first key can reach the window before the window manager
    // has taken it over.
    // Not asserted: the window may go between the search and the key.
    let close = |window: &str| {
        let _ = Command::new("xdotool")
            .args(["windowactivate", "--sync", window, "key", "--clearmodifiers", "alt+F4"])
            .env("DISPLAY", &display)
            .status();
    };
    close(&window);
    let end = Instant::now() + Duration::from_secs(30);
    let mut pressed = Instant::now();
    loop {
        let (open, left) = (window_id(&display), descendants(pid));
        if open.is_none() && left.is_empty() {
            break;
        }
        assert!(Instant::now() < end, "30 s after Alt+F4: window {open:?} still mapped, processes left {left:?}");
        if let Some(open) = open.filter(|_| pressed.elapsed() > Duration::from_secs(5)) {
            println!("the window is still open 5 s after Alt+F4: pressed again");
            close(&open);
            pressed = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Watched for a minute, closed and without traffic: the app with every
    // process under it, of which none should be left (the window and
    // WebKit run in processes of their own, which exit with the window).
    let ticks_before = cpu_ticks(pid);
    let started = Instant::now();
    let mut peak = (0, 0, 0);
    while started.elapsed() < WATCHED {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let left = descendants(pid);
        assert!(left.is_empty(), "a process runs under the closed app: {left:?}");
        let now = (status_kb(pid, "VmRSS"), status_kb(pid, "RssAnon"), status_kb(pid, "RssFile"));
        peak = (peak.0.max(now.0), peak.1.max(now.1), peak.2.max(now.2));
    }
    let ticks = cpu_ticks(pid) - ticks_before;
    let hz = 100.0; // USER_HZ on Linux
    let cpu = ticks as f64 / hz / started.elapsed().as_secs_f64();
    println!(
        "closed, over {:?}: {ticks} ticks = {:.3}% of a core; RSS {} MB ({} MB anonymous, {} MB of mapped files); no process under it",
        started.elapsed(),
        cpu * 100.0,
        peak.0 / 1024,
        peak.1 / 1024,
        peak.2 / 1024,
    );
    assert!(cpu < 0.001, "the closed app used {:.3}% of a core", cpu * 100.0);
    // Where it is: the binary and the libraries the tray touched; Pss
    // shares the pages other processes map too.
    let biggest: Vec<String> = resident_by_mapping(pid)
        .into_iter()
        .take(8)
        .map(|(path, kb)| format!("{} {:.1} MB", path.rsplit('/').next().unwrap_or(&path), kb as f64 / 1024.0))
        .collect();
    println!("closed, resident by mapping: {}; Pss {} MB", biggest.join(", "), rollup_kb(pid, "Pss") / 1024);
    println!("RSS target {TARGET_RSS_MB} MB: {}", if peak.0 < TARGET_RSS_MB * 1024 { "met" } else { "not met" });
    // All of it, mapped files included, but for the executable's own pages:
    // those depend on the build (a debug binary keeps some 50 MB of them
    // resident, a release one 22 MB; docs/desktop.md has the release
    // figure whole). A process that built a webview keeps WebKit's
    // libraries and the GL driver resident, so this fails an app that does
    // not draw its window in a process of its own.
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap().display().to_string();
    let own: u64 = resident_by_mapping(pid).iter().filter(|(path, _)| *path == exe).map(|(_, kb)| kb).sum();
    let rest = peak.0.saturating_sub(own);
    println!("closed, without the executable's own {} MB: {} MB", own / 1024, rest / 1024);
    assert!(rest < TARGET_RSS_MB * 1024, "the closed app holds {} MB resident besides its executable", rest / 1024);

    // Reopened from the tray menu: the Overview paints.
    let (x, y) =
        wait_until("the tray icon in trayer", Duration::from_secs(10), || std::future::ready(tray_icon(&display)))
            .await;
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/desktop-shots");
    std::fs::create_dir_all(&shots).unwrap();
    // The menu is opened and walked by keys; on a loaded machine the keys
    // can reach the screen before the menu does, and nothing opens. Then
    // the menu is closed and walked again, and the time runs from the
    // walk that opened the window.
    let mut tries = 0;
    let (clicked, clicked_wall) = loop {
        tries += 1;
        xdotool(&display, &["mousemove", &x.to_string(), &y.to_string(), "click", "1"]);
        tokio::time::sleep(Duration::from_millis(800)).await;
        // Copy ×2, "Connect tools", the two providers, "Pause gateway", then
        // "Open dashboard" (menu::build's order).
        for _ in 0..7 {
            xdotool(&display, &["key", "Down"]);
        }
        xdotool(&display, &["key", "Return"]);
        let clicked = Instant::now();
        // The click on the app log's clock (UTC), to read its timings
        // against: taken here, not once the window shows.
        let clicked_wall = std::time::SystemTime::now();
        while clicked.elapsed() < Duration::from_secs(3) && window_id(&display).is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if window_id(&display).is_some() {
            break (clicked, clicked_wall);
        }
        assert!(tries < 3, "three walks of the tray menu opened no window");
        println!("reopen: the menu walk opened no window in 3 s; walking it again");
        xdotool(&display, &["key", "Escape"]);
    };
    // Frames as fast as they can be taken; read afterwards, so reading
    // them does not slow the sampling.
    let mut frames = Vec::new();
    while clicked.elapsed() < Duration::from_secs(5) {
        let at = clicked.elapsed();
        if let Some(id) = window_id(&display) {
            let frame = shots.join(format!("reopen-{}.png", frames.len()));
            let taken = Command::new("import").args(["-window", &id]).arg(&frame).env("DISPLAY", &display).status();
            if taken.is_ok_and(|s| s.success()) {
                frames.push((at, frame));
            }
        }
    }
    let painted = frames.iter().find(|(_, f)| {
        // The OCR reads the page's heading and the provider cards' kind
        // reliably (white-on-blue "Overview" less so).
        let text = ocr(f);
        text.contains("GATEWAY") && text.contains("openai")
    });
    let (at, frame) = painted.unwrap_or_else(|| panic!("no frame in 5 s shows the Overview: {frames:?}"));
    let met = if *at < TARGET_PAINT { "met" } else { "not met" };
    println!(
        "reopened: the Overview painted {at:?} after the menu click ({}); target {TARGET_PAINT:?} {met}",
        frame.display()
    );
    let taken: Vec<u128> = frames.iter().map(|(at, _)| at.as_millis()).collect();
    let since_midnight = clicked_wall.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64() % 86_400.0;
    let (h, m, sec) =
        ((since_midnight / 3600.0) as u32, (since_midnight % 3600.0 / 60.0) as u32, since_midnight % 60.0);
    println!("reopen: menu clicked at {h:02}:{m:02}:{sec:09.6} UTC; frames taken at {taken:?} ms");
    // Where the time went, by the app's clock: the window is built at once;
    // most of the wait is WebKit starting its processes before the load starts.
    let timings = std::fs::read_to_string(&log).unwrap_or_default();
    let reopen: Vec<&str> = timings.lines().filter(|l| l.contains("window:")).collect();
    for line in reopen.iter().skip(reopen.len().saturating_sub(5)) {
        let at = line.split_whitespace().next().unwrap_or("");
        println!("reopen, app log: {at} {}", line.split_once("window:").map_or(*line, |(_, rest)| rest.trim()));
    }
    assert!(!webkit_processes(pid).is_empty(), "the new window runs WebKit again, under the app");
    assert!(*at < PAINT_LIMIT, "the Overview took {at:?} to paint");
}
