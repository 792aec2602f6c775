//! The update check for real: a static server on 127.0.0.1:0 serves a
//! signed `latest.json` and its artifact, and the updater plugin, in an app
//! built on Tauri's mock runtime with the plugin settings `tauri.conf.json`
//! ships (only the public key swapped), checks, downloads and verifies.
//! Every key pair here is generated for the test: none is a release key.

use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use minisign::KeyPair;
use tauri::test::{mock_builder, mock_context, noop_assets, MockRuntime};
use tauri::Url;
use tauri_plugin_updater::UpdaterExt as _;

use super::{Phase, UpdateError, Updates};

const SHIPPED: &str = include_str!("../tauri.conf.json");
const CURRENT: &str = env!("CARGO_PKG_VERSION");
const ARTIFACT: &[u8] = b"Switchyard, the next version, as the release workflow uploads it";

/// A version after this one.
fn newer() -> String {
    let mut parts = CURRENT.split('.').map(|p| p.parse::<u64>().unwrap());
    let (major, minor) = (parts.next().unwrap(), parts.next().unwrap());
    format!("{major}.{}.0", minor + 1)
}

fn keys() -> KeyPair {
    KeyPair::generate_unencrypted_keypair().unwrap()
}

/// The public key as `plugins.updater.pubkey` holds it: the key file, base64.
fn pubkey(keys: &KeyPair) -> String {
    BASE64.encode(keys.pk.to_box().unwrap().to_string())
}

/// A signature as the Tauri CLI writes it into `<artifact>.sig`: the
/// minisign signature file, base64, with the version in the trusted comment.
fn sign(keys: &KeyPair, data: &[u8], version: &str) -> String {
    signed(keys, data, &format!("timestamp:1767225600\tfile:Switchyard_{version}_amd64.deb\tversion:{version}"))
}

fn signed(keys: &KeyPair, data: &[u8], trusted_comment: &str) -> String {
    let signature = minisign::sign(
        None,
        &keys.sk,
        Cursor::new(data),
        Some(trusted_comment),
        Some("signature from tauri secret key"),
    )
    .unwrap();
    BASE64.encode(signature.to_string())
}

/// This machine's key in the manifest's `platforms`, as the updater looks it up.
fn platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        os => os,
    };
    format!("{os}-{}", std::env::consts::ARCH)
}

struct Site {
    manifest: String,
    artifact: Vec<u8>,
    hits: AtomicUsize,
}

/// A static server on 127.0.0.1:0 serving `/latest.json` and `/artifact`,
/// counting every request.
struct Server {
    base: String,
    site: Arc<Site>,
}

impl Server {
    async fn start(manifest: impl FnOnce(&str) -> String, artifact: &[u8]) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let site = Arc::new(Site { manifest: manifest(&base), artifact: artifact.to_vec(), hits: AtomicUsize::new(0) });
        let router = Router::new()
            .route(
                "/latest.json",
                get(|State(site): State<Arc<Site>>| async move {
                    site.hits.fetch_add(1, Ordering::SeqCst);
                    ([("content-type", "application/json")], site.manifest.clone())
                }),
            )
            .route(
                "/artifact",
                get(|State(site): State<Arc<Site>>| async move {
                    site.hits.fetch_add(1, Ordering::SeqCst);
                    site.artifact.clone()
                }),
            )
            .with_state(Arc::clone(&site));
        tokio::spawn(async move { axum::serve(listener, router).await });
        Server { base, site }
    }

    fn endpoint(&self) -> Url {
        format!("{}/latest.json", self.base).parse().unwrap()
    }

    fn hits(&self) -> usize {
        self.site.hits.load(Ordering::SeqCst)
    }
}

/// A release manifest in the static format the release workflow publishes.
fn manifest(base: &str, version: &str, signature: &str) -> String {
    serde_json::json!({
        "version": version,
        "notes": "Faster failover.",
        "pub_date": "2026-01-01T00:00:00Z",
        "platforms": { platform(): { "url": format!("{base}/artifact"), "signature": signature } }
    })
    .to_string()
}

/// An app with the updater plugin configured as `tauri.conf.json` ships it,
/// with `pubkey` for the release key and `endpoints` as given.
fn app(pubkey: &str, endpoints: &[Url]) -> tauri::App<MockRuntime> {
    let shipped: serde_json::Value = serde_json::from_str(SHIPPED).unwrap();
    let mut updater = shipped["plugins"]["updater"].clone();
    updater["pubkey"] = pubkey.into();
    updater["endpoints"] = endpoints.iter().map(|u| u.to_string()).collect();
    let mut context = mock_context(noop_assets());
    context.config_mut().plugins.0.insert("updater".into(), updater);
    context.package_info_mut().version = CURRENT.parse().unwrap();
    mock_builder().plugin(tauri_plugin_updater::Builder::new().build()).build(context).unwrap()
}

#[tokio::test]
async fn a_correctly_signed_newer_version_is_found_and_its_download_verifies() {
    let release = keys();
    let version = newer();
    let server = Server::start(|base| manifest(base, &version, &sign(&release, ARTIFACT, &version)), ARTIFACT).await;
    let app = app(&pubkey(&release), &[]);
    let updates = Updates::new(Some(server.endpoint()));
    assert_eq!(updates.phase(), Some(Phase::Idle));

    assert_eq!(updates.check(app.handle()).await.unwrap(), Some(version.clone()));
    assert_eq!(updates.phase(), Some(Phase::Available(version.clone())));
    assert_eq!(server.hits(), 1, "the manifest only: nothing is downloaded before the user asks");

    let (update, bytes) = updates.download().await.unwrap();
    assert_eq!(bytes, ARTIFACT);
    assert_eq!(update.version, version);
    assert_eq!(update.body.as_deref(), Some("Faster failover."));
    assert_eq!(updates.phase(), Some(Phase::Installing(version)));
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_tampered_artifact_is_refused() {
    let release = keys();
    let version = newer();
    let signature = sign(&release, ARTIFACT, &version);
    let mut tampered = ARTIFACT.to_vec();
    tampered[0] ^= 1;
    let server = Server::start(|base| manifest(base, &version, &signature), &tampered).await;
    let app = app(&pubkey(&release), &[]);
    let updates = Updates::new(Some(server.endpoint()));

    assert_eq!(updates.check(app.handle()).await.unwrap(), Some(version));
    let Err(refused) = updates.download().await else { panic!("a refused download was installed") };
    assert!(matches!(refused, UpdateError::Download(tauri_plugin_updater::Error::Minisign(_))), "{refused:?}");
    // Refused is forgotten: nothing is left to install.
    assert_eq!(updates.phase(), Some(Phase::Idle));
    assert!(matches!(updates.download().await, Err(UpdateError::NothingFound)));
}

#[tokio::test]
async fn a_manifest_signed_with_another_key_is_refused() {
    let (release, other) = (keys(), keys());
    let version = newer();
    let server = Server::start(|base| manifest(base, &version, &sign(&other, ARTIFACT, &version)), ARTIFACT).await;
    let app = app(&pubkey(&release), &[]);
    let updates = Updates::new(Some(server.endpoint()));

    assert_eq!(updates.check(app.handle()).await.unwrap(), Some(version));
    let Err(refused) = updates.download().await else { panic!("a refused download was installed") };
    assert!(matches!(refused, UpdateError::Download(tauri_plugin_updater::Error::Minisign(_))), "{refused:?}");
    assert_eq!(server.hits(), 2);
}

/// The manifest is not signed: an old, validly signed release announced as
/// a new version is refused, because the signature names its own version.
#[tokio::test]
async fn an_old_release_announced_as_a_new_version_is_refused() {
    let release = keys();
    let server = Server::start(|base| manifest(base, &newer(), &sign(&release, ARTIFACT, CURRENT)), ARTIFACT).await;
    let app = app(&pubkey(&release), &[]);
    let updates = Updates::new(Some(server.endpoint()));

    assert!(updates.check(app.handle()).await.unwrap().is_some());
    let Err(refused) = updates.download().await else { panic!("a refused download was installed") };
    assert!(
        matches!(refused, UpdateError::Download(tauri_plugin_updater::Error::SignedVersionMismatch { .. })),
        "{refused:?}"
    );
}

/// Signatures made before the CLI wrote the version into them prove no
/// version: `requireSignedVersion` refuses them (there are no such releases).
#[tokio::test]
async fn a_signature_that_names_no_version_is_refused() {
    let release = keys();
    let version = newer();
    let unversioned = signed(&release, ARTIFACT, "timestamp:1767225600\tfile:Switchyard_amd64.deb");
    let server = Server::start(|base| manifest(base, &version, &unversioned), ARTIFACT).await;
    let app = app(&pubkey(&release), &[]);
    let updates = Updates::new(Some(server.endpoint()));

    assert!(updates.check(app.handle()).await.unwrap().is_some());
    let Err(refused) = updates.download().await else { panic!("a refused download was installed") };
    assert!(matches!(refused, UpdateError::Download(tauri_plugin_updater::Error::MissingSignedVersion)), "{refused:?}");
}

#[tokio::test]
async fn the_same_version_is_no_update() {
    let release = keys();
    let server = Server::start(|base| manifest(base, CURRENT, &sign(&release, ARTIFACT, CURRENT)), ARTIFACT).await;
    let app = app(&pubkey(&release), &[]);
    let updates = Updates::new(Some(server.endpoint()));

    assert_eq!(updates.check(app.handle()).await.unwrap(), None);
    assert_eq!(updates.phase(), Some(Phase::Idle));
    assert!(matches!(updates.download().await, Err(UpdateError::NothingFound)));
}

#[tokio::test]
async fn no_endpoint_configured_means_no_network_call() {
    let release = keys();
    let version = newer();
    let server = Server::start(|base| manifest(base, &version, &sign(&release, ARTIFACT, &version)), ARTIFACT).await;
    // Even with an endpoint in the plugin's own settings, only
    // `[desktop] update_endpoint` turns checks on.
    let app = app(&pubkey(&release), &[server.endpoint()]);
    let updates = Updates::new(None);

    assert_eq!(updates.phase(), None, "no tray item");
    assert!(matches!(updates.check(app.handle()).await, Err(UpdateError::NotConfigured)));
    assert!(matches!(updates.download().await, Err(UpdateError::NothingFound)));
    assert_eq!(server.hits(), 0);
    // The server was there to be asked: the plugin left to itself asks it.
    assert!(app.handle().updater().unwrap().check().await.unwrap().is_some());
    assert_eq!(server.hits(), 1);
}

#[test]
fn the_shipped_settings_hold_a_minisign_key_require_signed_versions_and_name_no_endpoint() {
    let shipped: serde_json::Value = serde_json::from_str(SHIPPED).unwrap();
    let updater = &shipped["plugins"]["updater"];
    let key = String::from_utf8(BASE64.decode(updater["pubkey"].as_str().unwrap()).unwrap()).unwrap();
    minisign::PublicKeyBox::from_string(&key).unwrap().into_public_key().unwrap();
    assert_eq!(updater["requireSignedVersion"], true);
    assert!(updater.get("endpoints").is_none(), "updates are off until [desktop] update_endpoint is set");
    assert!(updater.get("dangerousInsecureTransportProtocol").is_none());
}
