//! TLS, as Redis 7.0 has it: a TLS port beside the plain one
//! (`tls-port`, every shard listening with SO_REUSEPORT; `port 0` for TLS
//! only), client certificates (`tls-auth-clients`), replication over TLS
//! (`tls-replication`), and every `tls-*` setting with Redis's defaults,
//! on rustls with the ring provider.
//!
//! What new handshakes use is one [`Contexts`] value, built whole from the
//! settings and swapped in at once: at start-up, and by CONFIG SET of a
//! `tls-*` setting, which fails with Redis's "Unable to update TLS
//! configuration" and keeps the old one when a file cannot be used.
//! Connections already open keep the session they have (certificate
//! rotation drops nobody). The value is process-wide, as Redis's SSL_CTX:
//! each core reads it once per accepted TLS connection.
//!
//! Records are handled by [`session`] (rustls's unbuffered API): on the
//! io_uring backend inside the shard's driver (`net::uring`), which
//! decrypts into the connection's input and encrypts its replies into the
//! send; on the glommio backend and for the replica's dial by
//! [`stream::Stream`]. Kernel TLS offload is not used.
//!
//! A handshake must finish within [`HANDSHAKE_TIMEOUT`] (Redis has no such
//! bound; an unfinished handshake would hold its buffers for ever).

pub mod cache;
pub mod certified;
pub mod keys;
pub mod session;
pub mod stream;
pub mod suites;
pub mod verify;

use crate::config::Config;
use rustls::client::UnbufferedClientConnection;
use rustls::crypto::CryptoProvider;
use rustls::server::{NoServerSessionStorage, UnbufferedServerConnection, WebPkiClientVerifier};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use session::{ClientSession, ServerSession};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tracing::warn;

/// How long a TLS handshake may take from the accept (then the socket is
/// closed). Fixed rather than tied to `timeout`, which is 0 (never) by
/// default: a stalled handshake must never hold a connection for ever.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Redis's CONFIG SET error when the TLS settings cannot be applied.
pub const UPDATE_FAILED: &str = "Unable to update TLS configuration. Check server logs.";

/// `tls-auth-clients`, as each new connection reads it (Redis applies it
/// per connection too, so changing it rebuilds nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthClients {
    No,
    Optional,
    Yes,
}

impl AuthClients {
    pub fn of(config: &Config) -> AuthClients {
        match config.get("tls-auth-clients") {
            Some("no") => AuthClients::No,
            Some("optional") => AuthClients::Optional,
            _ => AuthClients::Yes,
        }
    }
}

/// The `tls-*` values a context is built from.
#[derive(Clone, Debug)]
pub struct Settings {
    cert_file: String,
    key_file: String,
    key_pass: String,
    client_cert_file: String,
    client_key_file: String,
    client_key_pass: String,
    dh_params_file: String,
    ca_file: String,
    ca_dir: String,
    protocols: String,
    ciphers: String,
    ciphersuites: String,
    prefer_server_ciphers: bool,
    session_caching: bool,
    session_cache_size: usize,
    session_cache_timeout: u64,
    /// Redis requires a CA when any of these is on.
    needs_ca: bool,
}

impl Settings {
    pub fn of(config: &Config) -> Settings {
        let text = |name: &str| config.get(name).unwrap_or("").to_string();
        let on = |name: &str| config.get(name) == Some("yes");
        Settings {
            cert_file: text("tls-cert-file"),
            key_file: text("tls-key-file"),
            key_pass: text("tls-key-file-pass"),
            client_cert_file: text("tls-client-cert-file"),
            client_key_file: text("tls-client-key-file"),
            client_key_pass: text("tls-client-key-file-pass"),
            dh_params_file: text("tls-dh-params-file"),
            ca_file: text("tls-ca-cert-file"),
            ca_dir: text("tls-ca-cert-dir"),
            protocols: text("tls-protocols"),
            ciphers: text("tls-ciphers"),
            ciphersuites: text("tls-ciphersuites"),
            prefer_server_ciphers: on("tls-prefer-server-ciphers"),
            session_caching: on("tls-session-caching"),
            session_cache_size: config.int("tls-session-cache-size").max(0) as usize,
            session_cache_timeout: config.int("tls-session-cache-timeout").max(0) as u64,
            needs_ca: AuthClients::of(config) != AuthClients::No
                || on("tls-replication")
                || on("tls-cluster"),
        }
    }
}

/// Whether the server uses TLS at all (Redis configures it when any of
/// these is set).
pub fn wanted(config: &Config) -> bool {
    config.int("tls-port") != 0
        || config.get("tls-replication") == Some("yes")
        || config.get("tls-cluster") == Some("yes")
}

/// What new TLS connections are made with.
pub struct Contexts {
    /// By `tls-auth-clients`: no, optional, yes. Without a CA only the
    /// first can be had (Redis then refuses such handshakes too).
    server: [Option<Arc<ServerConfig>>; 3],
    /// For the replica's dial to a TLS primary.
    client: Arc<ClientConfig>,
}

static CURRENT: RwLock<Option<Arc<Contexts>>> = RwLock::new(None);

fn current() -> Option<Arc<Contexts>> {
    CURRENT.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Builds the contexts `config` asks for and makes them current, unless
/// TLS is not wanted (then nothing changes). Files are read again even
/// when their names did not change (a certificate renewed in place). An
/// error (logged as Redis logs it) leaves the current contexts as they
/// were.
pub fn configure(config: &Config) -> Result<(), String> {
    if !wanted(config) {
        return Ok(());
    }
    let built = build(Settings::of(config)).inspect_err(|e| warn!("{e}"))?;
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(built));
    Ok(())
}

/// Whether contexts have been built (a TLS port can be opened).
pub fn configured() -> bool {
    current().is_some()
}

/// A server session for a connection just accepted on the TLS port.
pub fn accept(auth: AuthClients) -> Result<ServerSession, String> {
    let contexts = current().ok_or("TLS is not configured")?;
    let index = match auth {
        AuthClients::No => 0,
        AuthClients::Optional => 1,
        AuthClients::Yes => 2,
    };
    let config = contexts.server[index]
        .clone()
        .ok_or("tls-auth-clients needs tls-ca-cert-file or tls-ca-cert-dir")?;
    let conn = UnbufferedServerConnection::new(config).map_err(|e| e.to_string())?;
    Ok(ServerSession::new(conn))
}

/// A client session to `host` (the replica's dial to its primary).
pub fn connect(host: &str) -> Result<ClientSession, String> {
    let contexts = current().ok_or("TLS is not configured")?;
    // The name is sent (SNI) but not checked (see `verify`).
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host}: {e}"))?;
    let conn = UnbufferedClientConnection::new(contexts.client.clone(), name)
        .map_err(|e| e.to_string())?;
    Ok(ClientSession::new(conn))
}

/// Redis's texts for what cannot be loaded, then the reason.
fn build(s: Settings) -> Result<Contexts, String> {
    let none_if_empty = |v: &str| (!v.is_empty()).then(|| v.to_string());
    if s.cert_file.is_empty() {
        return Err("No tls-cert-file configured!".into());
    }
    if s.key_file.is_empty() {
        return Err("No tls-key-file configured!".into());
    }
    let (ca_file, ca_dir) = (none_if_empty(&s.ca_file), none_if_empty(&s.ca_dir));
    if s.needs_ca && ca_file.is_none() && ca_dir.is_none() {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when \
                    tls-cluster, tls-replication or tls-auth-clients are enabled!"
            .into());
    }
    let versions = suites::protocols(&s.protocols)?;
    let provider = Arc::new(suites::provider(&s.ciphers, &s.ciphersuites)?);
    let certs = keys::certificates(&s.cert_file)
        .map_err(|e| format!("Failed to load certificate: {}: {e}", s.cert_file))?;
    let key = keys::private_key(&s.key_file, none_if_empty(&s.key_pass).as_deref())
        .map_err(|e| format!("Failed to load private key: {}: {e}", s.key_file))?;
    let roots = match (&ca_file, &ca_dir) {
        (None, None) => None,
        _ => {
            Some(Arc::new(keys::roots(ca_file.as_deref(), ca_dir.as_deref()).map_err(|e| {
                format!("Failed to configure CA certificate(s) file/directory: {e}")
            })?))
        }
    };
    if !s.dh_params_file.is_empty() {
        std::fs::metadata(&s.dh_params_file)
            .map_err(|e| format!("Failed to load {}: {e}", s.dh_params_file))?;
    }
    let sessions: Arc<dyn rustls::server::StoresServerSessions> = if s.session_caching {
        Arc::new(cache::SessionCache::new(
            s.session_cache_size,
            Duration::from_secs(s.session_cache_timeout),
        ))
    } else {
        Arc::new(NoServerSessionStorage {})
    };
    let own = Arc::new(
        certified::Fixed::load(certs.clone(), key.clone_key(), &provider)
            .map_err(|e| format!("Failed to load private key: {}: {e}", s.key_file))?,
    );
    let server_for = |verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>| {
        let mut config = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("Failed to configure TLS: {e}"))?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(own.clone());
        config.ignore_client_order = s.prefer_server_ciphers;
        config.session_storage = sessions.clone();
        if !s.session_caching {
            config.send_tls13_tickets = 0;
        }
        Ok::<_, String>(Arc::new(config))
    };
    let client_verifier = |roots: &Arc<RootCertStore>, optional: bool| {
        let builder = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
        let builder = if optional { builder.allow_unauthenticated() } else { builder };
        builder
            .build()
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))
    };
    let no_auth = server_for(WebPkiClientVerifier::no_client_auth())?;
    let (optional, required) = match &roots {
        Some(roots) => (
            Some(server_for(client_verifier(roots, true)?)?),
            Some(server_for(client_verifier(roots, false)?)?),
        ),
        None => (None, None),
    };
    let client = client_config(&s, &versions, &provider, roots, own)?;
    Ok(Contexts { server: [Some(no_auth), optional, required], client })
}

/// The replica's side: its certificate is `tls-client-cert-file` (with its
/// key), or `tls-cert-file` when none is set, as in Redis.
fn client_config(
    s: &Settings,
    versions: &[&'static rustls::SupportedProtocolVersion],
    provider: &Arc<CryptoProvider>,
    roots: Option<Arc<RootCertStore>>,
    server_own: Arc<certified::Fixed>,
) -> Result<Arc<ClientConfig>, String> {
    let own = if !s.client_cert_file.is_empty() && !s.client_key_file.is_empty() {
        let certs = keys::certificates(&s.client_cert_file)
            .map_err(|e| format!("Failed to load certificate: {}: {e}", s.client_cert_file))?;
        let pass = (!s.client_key_pass.is_empty()).then_some(s.client_key_pass.as_str());
        let key = keys::private_key(&s.client_key_file, pass)
            .map_err(|e| format!("Failed to load private key: {}: {e}", s.client_key_file))?;
        Arc::new(
            certified::Fixed::load(certs, key, provider)
                .map_err(|e| format!("Failed to load private key: {}: {e}", s.client_key_file))?,
        )
    } else {
        server_own
    };
    // Without a CA the primary cannot be checked; Redis then requires one
    // (tls-replication needs a CA), so this only serves a context that
    // never dials.
    let roots = roots.unwrap_or_else(|| Arc::new(RootCertStore::empty()));
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| format!("Failed to configure TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verify::ChainOnly::new(roots, provider.clone())))
        .with_client_cert_resolver(own);
    Ok(Arc::new(config))
}
