//! Certificates and private keys from PEM files, as OpenSSL reads the
//! files Redis is given: a certificate chain (`tls-cert-file`), a private
//! key (`tls-key-file`, encrypted or not) and CA certificates
//! (`tls-ca-cert-file`, `tls-ca-cert-dir`).
//!
//! Private keys: `PRIVATE KEY` (PKCS#8), `RSA PRIVATE KEY` (PKCS#1) and
//! `EC PRIVATE KEY` (SEC1); encrypted ones as `ENCRYPTED PRIVATE KEY`
//! (PKCS#8 with PBES2: PBKDF2 or scrypt with AES-CBC, what OpenSSL 3 writes
//! by default, decrypted by RustCrypto's `pkcs8`) or in OpenSSL's legacy
//! form (`Proc-Type: 4,ENCRYPTED` and `DEK-Info: AES-{128,192,256}-CBC`,
//! what `openssl rsa -aes256 -traditional` writes). Not supported: the
//! legacy form with DES or DES-EDE3 (`-des3`) and PKCS#12 files; they fail
//! with an error naming the cipher or the label.

use base64ct::{Base64, Encoding};
use rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};
use rustls::RootCertStore;
use std::path::Path;

/// One `-----BEGIN <label>-----` block: its label, its RFC 1421 headers
/// (`Name: value` lines) and its decoded body.
struct Block {
    label: String,
    headers: Vec<(String, String)>,
    der: Vec<u8>,
}

/// The PEM blocks of `text` (anything outside them is ignored, as OpenSSL
/// ignores it). A block whose body is not base64 is an error.
fn blocks(text: &str) -> Result<Vec<Block>, String> {
    let mut found = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let Some(label) = line.strip_prefix("-----BEGIN ").and_then(|l| l.strip_suffix("-----"))
        else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let (mut headers, mut body) = (Vec::new(), String::new());
        let mut closed = false;
        for line in lines.by_ref() {
            if line == end {
                closed = true;
                break;
            }
            match line.split_once(':') {
                Some((name, value)) if body.is_empty() => {
                    headers.push((name.trim().to_string(), value.trim().to_string()))
                }
                _ => body.push_str(line),
            }
        }
        if !closed {
            return Err(format!("no '{end}' line"));
        }
        let der = Base64::decode_vec(&body).map_err(|_| format!("bad base64 in {label}"))?;
        found.push(Block { label: label.to_string(), headers, der });
    }
    Ok(found)
}

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))
}

/// The certificates of a chain file, the server's own first.
pub fn certificates(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = blocks(&read(path)?)
        .map_err(|e| format!("{path}: {e}"))?
        .into_iter()
        .filter(|b| b.label == "CERTIFICATE" || b.label == "TRUSTED CERTIFICATE")
        .map(|b| CertificateDer::from(b.der))
        .collect();
    if certs.is_empty() {
        return Err(format!("{path}: no certificate found"));
    }
    Ok(certs)
}

/// The first private key in `path`, decrypted with `pass` when it is
/// encrypted.
pub fn private_key(path: &str, pass: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    let text = read(path)?;
    let fail = |e: String| format!("{path}: {e}");
    for block in blocks(&text).map_err(fail)? {
        let encrypted = block.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("DEK-Info"));
        let der = match encrypted {
            Some((_, info)) => legacy_decrypt(info, &block.der, pass).map_err(fail)?,
            None => block.der,
        };
        return match block.label.as_str() {
            "PRIVATE KEY" => Ok(PrivatePkcs8KeyDer::from(der).into()),
            "RSA PRIVATE KEY" => Ok(PrivatePkcs1KeyDer::from(der).into()),
            "EC PRIVATE KEY" => Ok(PrivateSec1KeyDer::from(der).into()),
            "ENCRYPTED PRIVATE KEY" => {
                let pass = pass.ok_or_else(|| fail("the key is encrypted: no password".into()))?;
                pkcs8_decrypt(&der, pass).map_err(fail)
            }
            _ => continue,
        };
    }
    Err(fail("no private key found".into()))
}

/// An `ENCRYPTED PRIVATE KEY` (PKCS#8 `EncryptedPrivateKeyInfo`).
fn pkcs8_decrypt(der: &[u8], pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der)
        .map_err(|e| format!("bad encrypted key: {e}"))?;
    let plain = info
        .decrypt(pass.as_bytes())
        .map_err(|e| format!("cannot decrypt the key (wrong password?): {e}"))?;
    Ok(PrivatePkcs8KeyDer::from(plain.as_bytes().to_vec()).into())
}

/// OpenSSL's legacy PEM encryption: `DEK-Info: <cipher>,<iv hex>`, the key
/// from the password by `EVP_BytesToKey` (MD5, one round, the IV's first 8
/// bytes as salt), AES-CBC with PKCS#7 padding.
fn legacy_decrypt(info: &str, data: &[u8], pass: Option<&str>) -> Result<Vec<u8>, String> {
    use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, KeyIvInit};
    let (cipher, iv_hex) = info.split_once(',').ok_or("bad DEK-Info header")?;
    let iv = hex(iv_hex.trim()).ok_or("bad DEK-Info IV")?;
    let key_len = match cipher.trim().to_ascii_uppercase().as_str() {
        "AES-128-CBC" => 16,
        "AES-192-CBC" => 24,
        "AES-256-CBC" => 32,
        other => return Err(format!("unsupported legacy key encryption {other}: use PKCS#8 (openssl pkcs8 -topk8 -v2 aes256)")),
    };
    if iv.len() != 16 {
        return Err("bad DEK-Info IV".into());
    }
    let pass = pass.ok_or("the key is encrypted: no password")?;
    let key = bytes_to_key(pass.as_bytes(), &iv[..8], key_len);
    let wrong = "cannot decrypt the key (wrong password?)";
    let plain = match key_len {
        16 => cbc::Decryptor::<aes::Aes128>::new_from_slices(&key, &iv)
            .map_err(|_| wrong)?
            .decrypt_padded_vec_mut::<Pkcs7>(data),
        24 => cbc::Decryptor::<aes::Aes192>::new_from_slices(&key, &iv)
            .map_err(|_| wrong)?
            .decrypt_padded_vec_mut::<Pkcs7>(data),
        _ => cbc::Decryptor::<aes::Aes256>::new_from_slices(&key, &iv)
            .map_err(|_| wrong)?
            .decrypt_padded_vec_mut::<Pkcs7>(data),
    };
    plain.map_err(|_| wrong.to_string())
}

/// `EVP_BytesToKey(cipher, MD5, salt, pass, count = 1)`'s key.
fn bytes_to_key(pass: &[u8], salt: &[u8], len: usize) -> Vec<u8> {
    use md5::{Digest, Md5};
    let mut key = Vec::with_capacity(len + 16);
    let mut last: Vec<u8> = Vec::new();
    while key.len() < len {
        let mut h = Md5::new();
        h.update(&last);
        h.update(pass);
        h.update(salt);
        last = h.finalize().to_vec();
        key.extend_from_slice(&last);
    }
    key.truncate(len);
    key
}

fn hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// The CA certificates of `file` and of every file in `dir` (OpenSSL
/// looks certificates up there by hashed name; reading every file finds
/// the same ones). Files of `dir` that hold no certificate are skipped.
pub fn roots(file: Option<&str>, dir: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let mut add = |certs: Vec<CertificateDer<'static>>, from: &str| -> Result<(), String> {
        for cert in certs {
            store.add(cert).map_err(|e| format!("{from}: bad CA certificate: {e}"))?;
        }
        Ok(())
    };
    if let Some(file) = file {
        add(certificates(file)?, file)?;
    }
    if let Some(dir) = dir {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{dir}: {e}"))?;
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths.iter().filter(|p| Path::is_file(p)) {
            let name = path.display().to_string();
            if let Ok(certs) = certificates(&name) {
                add(certs, &name)?;
            }
        }
    }
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evp_bytes_to_key_matches_openssl() {
        // `openssl enc -aes-256-cbc -P -pass pass:1234 -S 0102030405060708
        // -md md5` prints this key (and, after it, the IV from the same
        // chain of digests).
        let key = bytes_to_key(b"1234", &[1, 2, 3, 4, 5, 6, 7, 8], 48);
        assert_eq!(
            key[..32],
            hex("6FC9235D02F8EDBFED640B8D627D7E605C73B6EE4DCA1A4090FE11E1C55E75E1").unwrap()[..]
        );
        assert_eq!(key[32..], hex("A1864E2E38293C1F4367B6E011984293").unwrap()[..]);
    }

    #[test]
    fn pem_blocks_keep_headers_and_skip_text_around_them() {
        let text = "junk\n-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00112233445566778899AABBCCDDEEFF\n\nAAEC\n-----END RSA PRIVATE KEY-----\nmore";
        let found = blocks(text).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].label, "RSA PRIVATE KEY");
        assert_eq!(found[0].headers.len(), 2);
        assert_eq!(found[0].der, vec![0, 1, 2]);
        assert!(blocks("-----BEGIN X-----\nAAEC\n").is_err(), "an unterminated block");
        assert!(blocks("-----BEGIN X-----\n!!!\n-----END X-----").is_err(), "bad base64");
        assert_eq!(hex("0aFF"), Some(vec![10, 255]));
        assert_eq!(hex("0a F"), None);
    }
}
