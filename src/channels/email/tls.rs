//! The rustls client configuration of the IMAP side.
//!
//! It uses the aws-lc-rs provider the rest of the tree (reqwest, lettre) already uses, so only
//! one crypto library is linked, and the platform verifier, as reqwest does. `tls_verify:
//! false` installs a verifier that accepts any certificate and host name: that really turns
//! checking off (for a self-signed home server), and the channel logs a loud warning when it
//! is used.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// The client configuration: certificates checked by the platform verifier when `verify`,
/// anything accepted otherwise.
pub fn client_config(verify: bool) -> Result<ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let verifier: Arc<dyn ServerCertVerifier> = if verify {
        Arc::new(rustls_platform_verifier::Verifier::new(provider)?)
    } else {
        Arc::new(AcceptAnything(provider))
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// Accepts every certificate for every name: `tls_verify: false`.
#[derive(Debug)]
struct AcceptAnything(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_modes_build_and_the_unchecked_one_accepts_any_certificate() {
        assert!(client_config(true).is_ok());
        assert!(client_config(false).is_ok());
        let verifier = AcceptAnything(Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
        let name = ServerName::try_from("mail.example.org").unwrap();
        let result = verifier.verify_server_cert(
            &CertificateDer::from(vec![1, 2, 3]),
            &[],
            &name,
            &[],
            UnixTime::now(),
        );
        assert!(result.is_ok());
        assert!(!verifier.supported_verify_schemes().is_empty());
    }
}
