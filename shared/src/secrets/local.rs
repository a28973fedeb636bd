//! AES-256-GCM under a key file of the data directory: the sealer of `floe serve` on the
//! embedded store. The key lives beside the catalog, not in it, so a copy of the catalog
//! database alone does not reveal the secrets it holds.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use aws_lc_rs::aead::LessSafeKey;

use super::{KEY_LEN, Sealed, SecretError, SecretSealer};

/// Scheme of values sealed with the local key file.
pub const SCHEME: &str = "floe-local-aes-256-gcm-v1";

/// Name of the key file inside the data directory.
pub const KEY_FILE: &str = "secret.key";

/// Where the key file of a data directory lives.
pub fn key_file(data_dir: &Path) -> PathBuf {
    data_dir.join(KEY_FILE)
}

/// Seals with a 32-byte AES-256-GCM key read from (or created in) a key file.
pub struct LocalKeySealer {
    key: LessSafeKey,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for LocalKeySealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalKeySealer")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LocalKeySealer {
    /// The sealer of the key file at `path`, creating the file (0600, 32 random bytes) when it
    /// does not exist. An existing file of the wrong size, or one that group or others may
    /// access, is refused: a truncated key would seal nothing that could be opened again, and a
    /// readable one would defeat sealing.
    pub fn open_or_create(path: &Path) -> Result<Self, SecretError> {
        let io = |source| SecretError::KeyFileIo {
            path: path.to_path_buf(),
            source,
        };
        if let Err(e) = std::fs::symlink_metadata(path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(io(e));
            }
            create(path).map_err(io)?;
        }
        let key = read(path)?;
        Ok(Self {
            key: super::aead_key(&key)?,
            path: Some(path.to_path_buf()),
        })
    }

    /// A sealer with the given key, kept in memory only.
    pub fn from_key(key: &[u8; KEY_LEN]) -> Result<Self, SecretError> {
        Ok(Self {
            key: super::aead_key(key)?,
            path: None,
        })
    }

    /// The key file this sealer was read from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

/// Writes a fresh key to a private temporary file and links it into place, so the key file
/// appears complete or not at all (a crash never leaves a short key) and a concurrent creator's
/// key is never overwritten: whoever links first wins and both read the winner.
fn create(path: &Path) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut key = [0u8; KEY_LEN];
    aws_lc_rs::rand::fill(&mut key).map_err(|_| std::io::Error::other("no random bytes"))?;
    let mut suffix = [0u8; 8];
    aws_lc_rs::rand::fill(&mut suffix).map_err(|_| std::io::Error::other("no random bytes"))?;
    let tmp = dir.join(format!(".{KEY_FILE}.{}", hex::encode(suffix)));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&key)?;
        file.sync_all()
    })();
    key.fill(0);
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Reads and checks an existing key file.
fn read(path: &Path) -> Result<[u8; KEY_LEN], SecretError> {
    let io = |source| SecretError::KeyFileIo {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(SecretError::KeyFileKind {
            path: path.to_path_buf(),
        });
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SecretError::KeyFilePermissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    if meta.len() != KEY_LEN as u64 {
        return Err(SecretError::KeyFileSize {
            path: path.to_path_buf(),
            len: meta.len(),
        });
    }
    let mut key = [0u8; KEY_LEN];
    file.read_exact(&mut key).map_err(io)?;
    Ok(key)
}

#[async_trait::async_trait]
impl SecretSealer for LocalKeySealer {
    async fn seal(&self, plaintext: &[u8]) -> Result<Sealed, SecretError> {
        let (nonce, ciphertext) = super::seal_with(&self.key, SCHEME, plaintext)?;
        Ok(Sealed {
            scheme: SCHEME.into(),
            data_key: None,
            nonce,
            ciphertext,
        })
    }

    async fn open(&self, sealed: &Sealed) -> Result<Vec<u8>, SecretError> {
        super::check_scheme(sealed, SCHEME)?;
        if sealed.data_key.is_some() {
            return Err(SecretError::Malformed(
                "a locally sealed secret has no data key",
            ));
        }
        super::open_with(&self.key, SCHEME, &sealed.nonce, &sealed.ciphertext)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as B64;

    use super::*;

    const SECRET: &[u8] = b"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn round_trip_with_a_fresh_nonce_each_time() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalKeySealer::open_or_create(&key_file(dir.path())).unwrap();
        let a = sealer.seal(SECRET).await.unwrap();
        let b = sealer.seal(SECRET).await.unwrap();
        assert_eq!(a.scheme, SCHEME);
        assert_eq!(a.data_key, None);
        assert_ne!(a.nonce, b.nonce);
        assert_ne!(a.ciphertext, b.ciphertext);
        assert_eq!(sealer.open(&a).await.unwrap(), SECRET);
        assert_eq!(sealer.open(&b).await.unwrap(), SECRET);
        assert_eq!(
            sealer.open(&sealer.seal(b"").await.unwrap()).await.unwrap(),
            b""
        );
    }

    /// The key file is created private, 32 bytes long, and read back (not replaced) later.
    #[tokio::test]
    async fn key_file_is_created_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(&dir.path().join("not-yet"));
        let first = LocalKeySealer::open_or_create(&path).unwrap();
        assert_eq!(first.path(), Some(path.as_path()));
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), KEY_LEN as u64);
        let sealed = first.seal(SECRET).await.unwrap();
        let again = LocalKeySealer::open_or_create(&path).unwrap();
        assert_eq!(again.open(&sealed).await.unwrap(), SECRET);
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, [KEY_FILE], "no temporary file is left behind");
    }

    #[test]
    fn key_files_of_the_wrong_size_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path());
        for len in [0, 16, 31, 33, 64] {
            std::fs::write(&path, vec![0x41; len]).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            let error = LocalKeySealer::open_or_create(&path).unwrap_err();
            assert!(
                matches!(error, SecretError::KeyFileSize { len: l, .. } if l == len as u64),
                "{error}"
            );
            assert!(!error.to_string().contains("AAAA"), "{error}");
        }
    }

    #[test]
    fn key_files_others_can_access_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path());
        LocalKeySealer::open_or_create(&path).unwrap();
        for bad in [0o640, 0o604, 0o644, 0o620, 0o602, 0o610] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bad)).unwrap();
            let error = LocalKeySealer::open_or_create(&path).unwrap_err();
            assert!(
                matches!(error, SecretError::KeyFilePermissions { mode, .. } if mode == bad),
                "{error}"
            );
            assert!(error.to_string().contains("0600"), "{error}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        LocalKeySealer::open_or_create(&path).unwrap();
    }

    #[test]
    fn a_directory_is_not_a_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path());
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(matches!(
            LocalKeySealer::open_or_create(&path),
            Err(SecretError::KeyFileKind { .. })
        ));
    }

    /// Flipping any bit of the nonce or the ciphertext, or opening under another key, fails.
    #[tokio::test]
    async fn altered_values_and_other_keys_are_refused() {
        let sealer = LocalKeySealer::from_key(&[1u8; KEY_LEN]).unwrap();
        let sealed = sealer.seal(SECRET).await.unwrap();
        let flip = |b64: &str, at: usize| {
            let mut bytes = B64.decode(b64).unwrap();
            bytes[at] ^= 0x01;
            B64.encode(bytes)
        };
        let ct_len = B64.decode(&sealed.ciphertext).unwrap().len();
        for at in [0, ct_len / 2, ct_len - 1] {
            let altered = Sealed {
                ciphertext: flip(&sealed.ciphertext, at),
                ..sealed.clone()
            };
            assert!(matches!(
                sealer.open(&altered).await,
                Err(SecretError::Unopenable)
            ));
        }
        for at in [0, 11] {
            let altered = Sealed {
                nonce: flip(&sealed.nonce, at),
                ..sealed.clone()
            };
            assert!(matches!(
                sealer.open(&altered).await,
                Err(SecretError::Unopenable)
            ));
        }
        let truncated = Sealed {
            ciphertext: B64.encode(&B64.decode(&sealed.ciphertext).unwrap()[..ct_len - 1]),
            ..sealed.clone()
        };
        assert!(matches!(
            sealer.open(&truncated).await,
            Err(SecretError::Unopenable)
        ));

        let other = LocalKeySealer::from_key(&[2u8; KEY_LEN]).unwrap();
        assert!(matches!(
            other.open(&sealed).await,
            Err(SecretError::Unopenable)
        ));

        // Another scheme, or an envelope field the scheme does not have, is refused outright.
        let relabelled = Sealed {
            scheme: super::super::kms::SCHEME.into(),
            ..sealed.clone()
        };
        assert!(matches!(
            sealer.open(&relabelled).await,
            Err(SecretError::Scheme { .. })
        ));
        let enveloped = Sealed {
            data_key: Some(B64.encode([0u8; 32])),
            ..sealed
        };
        assert!(matches!(
            sealer.open(&enveloped).await,
            Err(SecretError::Malformed(_))
        ));
    }

    /// Neither the plaintext nor its base64 appears in what a catalog row would store, nor in
    /// the sealer's debug form.
    #[tokio::test]
    async fn plaintext_never_appears_in_the_sealed_form() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalKeySealer::open_or_create(&key_file(dir.path())).unwrap();
        let sealed = sealer.seal(SECRET).await.unwrap();
        let json = serde_json::to_string(&sealed).unwrap();
        let text = std::str::from_utf8(SECRET).unwrap();
        assert!(!json.contains(text), "{json}");
        assert!(!json.contains(&B64.encode(SECRET)), "{json}");
        assert!(!json.contains("data_key"), "{json}");
        assert!(!format!("{sealed:?}").contains(text));
        let key = std::fs::read(key_file(dir.path())).unwrap();
        assert!(!format!("{sealer:?}").contains(&hex::encode(&key)));
        let back: Sealed = serde_json::from_str(&json).unwrap();
        assert_eq!(sealer.open(&back).await.unwrap(), SECRET);
    }
}
