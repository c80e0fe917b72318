//! HTTPS: the server's certificate and key (PEM files), and the rustls configuration every TLS
//! connection starts from. TLS 1.2 and 1.3 with rustls' default (aws-lc-rs) cipher suites,
//! ALPN `http/1.1`.
//!
//! The certificate is held by a [`CertStore`] that rustls asks on every handshake, so a reload
//! (SIGHUP, [`TlsContext::reload`]) swaps it for the handshakes that follow without touching
//! connections already established. A new certificate that cannot be loaded — unreadable,
//! not PEM, or not matching its key — is refused whole and the old one stays.
//!
//! How encrypted bytes move is the transport layer's business ([`crate::transport`]).

use crate::config::TlsFiles;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::{Arc, RwLock};

/// The protocol named by ALPN: amped speaks HTTP/1.1 only.
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// What TLS connections are made from: the rustls configuration and its swappable certificate.
#[derive(Debug)]
pub struct TlsContext {
    config: Arc<ServerConfig>,
    store: Arc<CertStore>,
}

impl TlsContext {
    /// Loads the certificate chain and key named by `files`: a one-line error when either
    /// cannot be read or parsed, or when they do not belong together.
    pub fn load(files: &TlsFiles) -> Result<TlsContext, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let store = Arc::new(CertStore {
            current: RwLock::new(Arc::new(certified_key(files, &provider)?)),
            provider: provider.clone(),
        });
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(store.clone());
        config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
        Ok(TlsContext { config: Arc::new(config), store })
    }

    /// Re-reads the certificate and key (SIGHUP). On error the running certificate stays and
    /// the error is returned for the error log.
    pub fn reload(&self, files: &TlsFiles) -> Result<(), String> {
        let fresh = certified_key(files, &self.store.provider)?;
        *self.store.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(fresh);
        Ok(())
    }

    /// A server-side TLS session for a connection just accepted.
    pub fn session(&self) -> std::io::Result<rustls::ServerConnection> {
        rustls::ServerConnection::new(self.config.clone()).map_err(std::io::Error::other)
    }
}

/// The certificate handed to every handshake; replaced whole by a reload.
#[derive(Debug)]
struct CertStore {
    current: RwLock<Arc<CertifiedKey>>,
    provider: Arc<CryptoProvider>,
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The chain of `files.cert` and the key of `files.key`, checked to belong together.
fn certified_key(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let (cert, key) = (&files.cert, &files.key);
    let chain = read_chain(cert)?;
    let der = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error("--tls-key", key, e))?;
    CertifiedKey::from_der(chain, der, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => format!(
            "--tls-key {} does not match the certificate in {}",
            key.display(),
            cert.display()
        ),
        e => format!("--tls-key {}: {e}", key.display()),
    })
}

/// Every certificate of a PEM file, leaf first; at least one.
fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| pem_error("--tls-cert", path, e))?;
    if chain.is_empty() {
        return Err(format!("--tls-cert {}: no PEM certificate in the file", path.display()));
    }
    Ok(chain)
}

/// One line saying what is wrong with a PEM file.
fn pem_error(option: &str, path: &Path, e: rustls_pki_types::pem::Error) -> String {
    use rustls_pki_types::pem::Error;
    let why = match e {
        Error::Io(e) => crate::errlog::reason(&e).to_string(),
        Error::NoItemsFound => "no PEM private key in the file".to_string(),
        e => format!("not a valid PEM file ({e:?})"),
    };
    format!("{option} {}: {why}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> TlsFiles {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
        std::fs::write(&cert, ck.cert.pem()).unwrap();
        std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
        TlsFiles { cert, key }
    }

    #[test]
    fn loads_a_pair_and_refuses_what_does_not_fit() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (write_pair(dir.path(), "a"), write_pair(dir.path(), "b"));
        let ctx = TlsContext::load(&a).unwrap();
        let mixed = TlsFiles { cert: a.cert.clone(), key: b.key.clone() };
        let e = TlsContext::load(&mixed).unwrap_err();
        assert!(e.contains("does not match"), "{e}");
        assert!(ctx.reload(&mixed).is_err(), "a bad pair is refused on reload too");
        let missing = TlsFiles { cert: dir.path().join("none.crt"), key: a.key.clone() };
        let e = TlsContext::load(&missing).unwrap_err();
        assert!(e.starts_with("--tls-cert") && e.contains("none.crt"), "{e}");
        std::fs::write(dir.path().join("empty.key"), "hello\n").unwrap();
        let no_key = TlsFiles { cert: a.cert.clone(), key: dir.path().join("empty.key") };
        let e = TlsContext::load(&no_key).unwrap_err();
        assert!(e.contains("no PEM private key"), "{e}");
        ctx.reload(&b).unwrap();
        assert!(!e.contains('\n'));
    }
}
