//! The server's own certificate and key, as rustls presents them, loaded
//! the way OpenSSL loads them: the key must match the certificate, but
//! the certificate itself is not parsed further. rustls's own loading
//! (`with_single_cert`) parses it with webpki, which refuses X.509 v1
//! certificates; OpenSSL serves those (Redis's `gen-test-certs.sh` makes
//! one, `redis.crt`, with OpenSSL 3). Peers still verify what they get.

use rustls::client::ResolvesClientCert;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{Error, InconsistentKeys, SignatureScheme};
use std::sync::Arc;

/// One certificate chain and its key, for every handshake.
#[derive(Debug)]
pub struct Fixed(Arc<CertifiedKey>);

impl Fixed {
    /// `chain` (ours first) with `key`; an error when the key does not
    /// belong to the certificate or cannot sign.
    pub fn load(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        provider: &CryptoProvider,
    ) -> Result<Fixed, String> {
        let signer = provider.key_provider.load_private_key(key).map_err(|e| e.to_string())?;
        let certified = CertifiedKey::new(chain, signer);
        match certified.keys_match() {
            // OpenSSL's "key values mismatch".
            Err(Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
                Err("the private key does not match the certificate".into())
            }
            // Matching, or a certificate webpki cannot read (v1): served.
            _ => Ok(Fixed(Arc::new(certified))),
        }
    }
}

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

impl ResolvesClientCert for Fixed {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}
