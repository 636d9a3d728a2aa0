//! `tls-protocols`, `tls-ciphers` and `tls-ciphersuites` read as OpenSSL
//! reads them, mapped onto what rustls (ring provider) has: TLS 1.2 and
//! 1.3, and AEAD suites with ECDHE key exchange only. An OpenSSL name
//! rustls lacks (AES128-SHA256, DHE-…, CBC suites) selects nothing, as an
//! unknown name does in OpenSSL; a list that selects nothing at all is an
//! error, as OpenSSL's "no cipher match".

use rustls::crypto::ring::cipher_suite as cs;
use rustls::crypto::CryptoProvider;
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};

/// The TLS versions of `tls-protocols` (empty: TLS 1.2 and 1.3, Redis's
/// default). TLSv1 and TLSv1.1 are valid words but rustls has neither.
pub fn protocols(text: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    if text.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let (mut v12, mut v13) = (false, false);
    for word in text.split_whitespace() {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1" | "tlsv1.1" => {}
            "tlsv1.2" => v12 = true,
            "tlsv1.3" => v13 = true,
            _ => {
                return Err("Invalid tls-protocols specified. Use a combination of 'TLSv1', \
                            'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'."
                    .into())
            }
        }
    }
    let mut versions = Vec::new();
    if v13 {
        versions.push(&rustls::version::TLS13);
    }
    if v12 {
        versions.push(&rustls::version::TLS12);
    }
    if versions.is_empty() {
        return Err("tls-protocols names no version this server has (TLSv1.2, TLSv1.3)".into());
    }
    Ok(versions)
}

/// A TLS 1.2 suite with its OpenSSL name and the words of OpenSSL's cipher
/// list syntax that select it.
struct Tls12 {
    suite: SupportedCipherSuite,
    name: &'static str,
    tags: &'static [&'static str],
}

const COMMON: [&str; 9] =
    ["ALL", "DEFAULT", "HIGH", "ECDHE", "EECDH", "kECDHE", "AEAD", "TLSv1.2", "SSLv3"];

/// In rustls's order of preference (and OpenSSL's DEFAULT order for these).
fn tls12() -> [Tls12; 6] {
    [
        Tls12 {
            suite: cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            name: "ECDHE-ECDSA-AES256-GCM-SHA384",
            tags: &["aECDSA", "ECDSA", "AESGCM", "AES", "AES256", "SHA384"],
        },
        Tls12 {
            suite: cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            name: "ECDHE-ECDSA-AES128-GCM-SHA256",
            tags: &["aECDSA", "ECDSA", "AESGCM", "AES", "AES128", "SHA256"],
        },
        Tls12 {
            suite: cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            name: "ECDHE-ECDSA-CHACHA20-POLY1305",
            tags: &["aECDSA", "ECDSA", "CHACHA20", "SHA256"],
        },
        Tls12 {
            suite: cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            name: "ECDHE-RSA-AES256-GCM-SHA384",
            tags: &["aRSA", "RSA", "AESGCM", "AES", "AES256", "SHA384"],
        },
        Tls12 {
            suite: cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            name: "ECDHE-RSA-AES128-GCM-SHA256",
            tags: &["aRSA", "RSA", "AESGCM", "AES", "AES128", "SHA256"],
        },
        Tls12 {
            suite: cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            name: "ECDHE-RSA-CHACHA20-POLY1305",
            tags: &["aRSA", "RSA", "CHACHA20", "SHA256"],
        },
    ]
}

impl Tls12 {
    /// Whether `word` (one part of an `A+B` combination) selects it.
    fn selected_by(&self, word: &str) -> bool {
        self.name.eq_ignore_ascii_case(word)
            || self.tags.iter().chain(&COMMON).any(|t| t.eq_ignore_ascii_case(word))
    }
}

/// The TLS 1.2 suites `tls-ciphers` chooses, in its order (empty: all).
/// OpenSSL's syntax: words separated by `:`, `,` or spaces; `A+B` selects
/// what both select; a leading `!` removes for good, `-` removes, `+`
/// moves to the end; `@STRENGTH`, `@SECLEVEL=n` change nothing here.
pub fn tls12_suites(list: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let all = tls12();
    if list.trim().is_empty() {
        return Ok(all.iter().map(|s| s.suite).collect());
    }
    let mut chosen: Vec<usize> = Vec::new();
    let mut banned = [false; 6];
    for token in list.split([':', ',', ' ']).filter(|t| !t.is_empty()) {
        let (op, rest) = match token.as_bytes()[0] {
            b'!' | b'-' | b'+' => (token.as_bytes()[0], &token[1..]),
            _ => (b'=', token),
        };
        if rest.starts_with('@') || rest.is_empty() {
            continue;
        }
        let hits: Vec<usize> = (0..all.len())
            .filter(|&i| rest.split('+').all(|word| all[i].selected_by(word)))
            .collect();
        match op {
            b'!' => {
                chosen.retain(|i| !hits.contains(i));
                hits.iter().for_each(|&i| banned[i] = true);
            }
            b'-' => chosen.retain(|i| !hits.contains(i)),
            b'+' => {
                let moved: Vec<usize> =
                    chosen.iter().copied().filter(|i| hits.contains(i)).collect();
                chosen.retain(|i| !hits.contains(i));
                chosen.extend(moved);
            }
            _ => {
                for i in hits {
                    if !banned[i] && !chosen.contains(&i) {
                        chosen.push(i);
                    }
                }
            }
        }
    }
    if chosen.is_empty() {
        return Err(format!(
            "Failed to configure ciphers: {list} (no cipher match: the TLS 1.2 suites here are {})",
            all.iter().map(|s| s.name).collect::<Vec<_>>().join(":")
        ));
    }
    Ok(chosen.into_iter().map(|i| all[i].suite).collect())
}

/// The TLS 1.3 suites `tls-ciphersuites` names, `:`-separated, in its
/// order (empty: all). Unknown names are skipped; none known is an error.
pub fn tls13_suites(list: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let all = [
        ("TLS_AES_256_GCM_SHA384", cs::TLS13_AES_256_GCM_SHA384),
        ("TLS_AES_128_GCM_SHA256", cs::TLS13_AES_128_GCM_SHA256),
        ("TLS_CHACHA20_POLY1305_SHA256", cs::TLS13_CHACHA20_POLY1305_SHA256),
    ];
    if list.trim().is_empty() {
        return Ok(all.iter().map(|(_, s)| *s).collect());
    }
    let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
    for name in list.split(':').map(str::trim) {
        if let Some((_, suite)) = all.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            if !chosen.contains(suite) {
                chosen.push(*suite);
            }
        }
    }
    if chosen.is_empty() {
        return Err(format!("Failed to configure ciphersuites: {list}"));
    }
    Ok(chosen)
}

/// ring's provider with the suites the settings choose (TLS 1.3 first).
/// rustls deprecates ring's provider for lacking post-quantum key exchange
/// (aws-lc-rs has it); ringdb uses ring on purpose (no C toolchain, no
/// aws-lc), so its key exchange is X25519 and the NIST curves.
#[allow(deprecated)]
pub fn provider(ciphers: &str, ciphersuites: &str) -> Result<CryptoProvider, String> {
    let mut suites = tls13_suites(ciphersuites)?;
    suites.extend(tls12_suites(ciphers)?);
    Ok(CryptoProvider { cipher_suites: suites, ..rustls::crypto::ring::default_provider() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &str) -> Vec<String> {
        tls12_suites(list).unwrap_or_default().iter().map(|s| format!("{:?}", s.suite())).collect()
    }

    #[test]
    fn cipher_lists_read_as_openssl_reads_them() {
        assert_eq!(names("").len(), 6);
        assert_eq!(names("DEFAULT").len(), 6);
        assert_eq!(names("DEFAULT:-AES128-SHA256").len(), 6, "an unknown name removes nothing");
        assert_eq!(
            names("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384"),
            ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"]
        );
        assert_eq!(names("HIGH:!CHACHA20").len(), 4);
        assert_eq!(names("ECDHE+AESGCM+aRSA").len(), 2);
        assert_eq!(names("!AES256:HIGH").len(), 4, "banned stays banned");
        let moved = names("ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256:+CHACHA20");
        assert_eq!(moved[1], "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256");
        assert!(tls12_suites("AES128-SHA256:AES256-SHA256").is_err(), "CBC suites: no match");
        assert!(tls12_suites("HIGH:@STRENGTH").is_ok());
    }

    #[test]
    fn suites_and_protocols() {
        assert_eq!(tls13_suites("TLS_AES_128_GCM_SHA256:bogus").unwrap().len(), 1);
        assert!(tls13_suites("bogus").is_err());
        assert_eq!(protocols("").unwrap().len(), 2);
        assert_eq!(protocols("TLSv1.2").unwrap().len(), 1);
        assert_eq!(protocols("tlsv1.1 TLSv1.3").unwrap().len(), 1);
        assert!(protocols("TLSv1").is_err(), "nothing rustls has");
        assert!(protocols("SSLv3").unwrap_err().starts_with("Invalid tls-protocols"));
    }
}
