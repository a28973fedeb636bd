//! Local-filesystem `ObjectStore` for `file://` warehouses.

use std::io::Write as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use super::{ObjectError, ObjectMeta, ObjectStore, ObjectStores, ObjectStoresError};
use crate::model::{BucketRow, Platform};

/// Files under one root directory, addressed as `file://<root>/...`.
#[derive(Debug, Clone)]
pub struct LocalObjectStore {
    root: PathBuf,
}

/// The `file://` URL of an absolute local path.
pub fn file_url(path: &Path) -> String {
    format!("file://{}", path.display())
}

impl LocalObjectStore {
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// Maps a location to a path, refusing anything that escapes the root.
    fn path_of(&self, location: &str) -> Result<PathBuf, ObjectError> {
        let outside = || ObjectError::OutsideStore(location.to_owned());
        let raw = location.strip_prefix("file://").ok_or_else(outside)?;
        let path = Path::new(raw);
        if path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            return Err(outside());
        }
        if !path.starts_with(&self.root) {
            return Err(outside());
        }
        Ok(path.to_path_buf())
    }

    /// [`Self::path_of`], for the blocking task that uses it: the check that no component
    /// below the root is a symbolic link runs there, next to the operation.
    fn checked(&self, location: &str) -> Result<Checked, ObjectError> {
        Ok(Checked {
            root: self.root.clone(),
            path: self.path_of(location)?,
            location: location.to_owned(),
        })
    }
}

/// A path inside the root, to be checked for links where it is used.
struct Checked {
    root: PathBuf,
    path: PathBuf,
    location: String,
}

impl Checked {
    /// Refuses the path when a component below the root is a symbolic link: the store's
    /// objects are the warehouse's own files, never what a link points at (outside the
    /// warehouse, or another table's file). Components that do not exist yet are fine.
    fn without_links(&self) -> Result<&Path, ObjectError> {
        let below = self
            .path
            .strip_prefix(&self.root)
            .map_err(|_| ObjectError::OutsideStore(self.location.clone()))?;
        let mut at = self.root.clone();
        for component in below.components() {
            at.push(component);
            match std::fs::symlink_metadata(&at) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    tracing::warn!(location = %self.location, "refused a path through a symbolic link");
                    return Err(ObjectError::OutsideStore(self.location.clone()));
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) => return Err(io_err(&self.location, e)),
            }
        }
        Ok(&self.path)
    }
}

fn io_err(location: &str, e: std::io::Error) -> ObjectError {
    ObjectError::io(location, format!("{:?}", e.kind()), &e)
}

async fn blocking<T: Send + 'static>(
    location: &str,
    f: impl FnOnce() -> Result<T, ObjectError> + Send + 'static,
) -> Result<T, ObjectError> {
    let location = location.to_owned();
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ObjectError::io(&location, "TaskFailed", &e))?
}

#[async_trait]
impl ObjectStore for LocalObjectStore {
    async fn get(&self, location: &str) -> Result<Bytes, ObjectError> {
        let checked = self.checked(location)?;
        blocking(location, move || {
            let loc = &checked.location;
            let path = checked.without_links()?;
            let mut file = match std::fs::File::open(path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(ObjectError::NotFound(loc.clone()));
                }
                Err(e) => return Err(io_err(loc, e)),
            };
            // The file opened is the one checked: a link swapped in since is refused.
            let opened = file.metadata().map_err(|e| io_err(loc, e))?;
            let checked_now = std::fs::symlink_metadata(path).map_err(|e| io_err(loc, e))?;
            if !same_file(&opened, &checked_now) {
                return Err(ObjectError::OutsideStore(loc.clone()));
            }
            let mut bytes = Vec::with_capacity(opened.len() as usize);
            std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| io_err(loc, e))?;
            Ok(Bytes::from(bytes))
        })
        .await
    }

    async fn put_if_absent(&self, location: &str, bytes: Bytes) -> Result<(), ObjectError> {
        let checked = self.checked(location)?;
        blocking(location, move || {
            let loc = checked.location.clone();
            let path = checked.without_links()?.to_path_buf();
            let dir = path
                .parent()
                .ok_or_else(|| ObjectError::OutsideStore(loc.clone()))?;
            std::fs::create_dir_all(dir).map_err(|e| io_err(&loc, e))?;
            // Again with every directory made: none of them is a link either.
            checked.without_links()?;
            // Write a complete temporary file, then hard-link it into place: linking fails if
            // the target exists, so a reader never sees a partial file and nothing is replaced.
            let mut tmp = tempfile_in(dir).map_err(|e| io_err(&loc, e))?;
            tmp.1.write_all(&bytes).map_err(|e| io_err(&loc, e))?;
            tmp.1.sync_all().map_err(|e| io_err(&loc, e))?;
            let linked = std::fs::hard_link(&tmp.0, &path);
            let _ = std::fs::remove_file(&tmp.0);
            match linked {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    Err(ObjectError::AlreadyExists(loc))
                }
                Err(e) => Err(io_err(&loc, e)),
            }
        })
        .await
    }

    async fn list_detailed(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<ObjectMeta>, ObjectError> {
        let checked = self.checked(prefix.trim_end_matches('/'))?;
        let loc = prefix.to_owned();
        blocking(prefix, move || {
            let dir = checked.without_links()?.to_path_buf();
            let mut found = Vec::new();
            let mut stack = vec![dir];
            while let Some(dir) = stack.pop() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_err(&loc, e)),
                };
                for entry in entries {
                    let entry = entry.map_err(|e| io_err(&loc, e))?;
                    // The entry's own type: a link is not followed, and not an object.
                    let kind = entry.file_type().map_err(|e| io_err(&loc, e))?;
                    if kind.is_symlink() {
                        tracing::warn!(location = %file_url(&entry.path()), "left a symbolic link out of a listing");
                    } else if kind.is_dir() {
                        stack.push(entry.path());
                    } else if !is_temporary(&entry.path()) {
                        let meta = match entry.metadata() {
                            Ok(meta) => meta,
                            // Deleted between the listing and the look at it.
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                            Err(e) => return Err(io_err(&loc, e)),
                        };
                        found.push(ObjectMeta {
                            location: file_url(&entry.path()),
                            size: meta.len(),
                            modified_ms: meta
                                .modified()
                                .ok()
                                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                                .map_or(0, |d| d.as_millis() as u64),
                        });
                        if found.len() >= limit {
                            return Ok(found);
                        }
                    }
                }
            }
            Ok(found)
        })
        .await
    }

    async fn delete(&self, locations: &[String]) -> Result<(), ObjectError> {
        let paths = locations
            .iter()
            .map(|l| self.checked(l))
            .collect::<Result<Vec<_>, _>>()?;
        blocking("delete", move || {
            // Every location is checked before any is deleted.
            for checked in &paths {
                checked.without_links()?;
            }
            for checked in &paths {
                match std::fs::remove_file(&checked.path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_err(&checked.location, e)),
                }
            }
            Ok(())
        })
        .await
    }
}

/// Whether two metadata describe one file (same device and inode).
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

const TMP_MARKER: &str = ".floe-tmp-";

fn is_temporary(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(TMP_MARKER))
}

fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    let name = format!("{TMP_MARKER}{}", uuid::Uuid::new_v4().simple());
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    Ok((path, file))
}

/// Serves `Local` bucket configurations whose root is a `file://` directory.
#[derive(Debug, Default, Clone)]
pub struct LocalObjectStores;

#[async_trait]
impl ObjectStores for LocalObjectStores {
    async fn for_bucket(
        &self,
        bucket: &BucketRow,
    ) -> Result<Arc<dyn ObjectStore>, ObjectStoresError> {
        match bucket.platform {
            Platform::Local => {
                let root = bucket.root.strip_prefix("file://").ok_or_else(|| {
                    ObjectStoresError::Invalid {
                        nickname: bucket.nickname.clone(),
                        reason: "a local bucket root must be a file:// URL".into(),
                    }
                })?;
                Ok(Arc::new(LocalObjectStore::new(PathBuf::from(root))))
            }
            Platform::S3 => Err(ObjectStoresError::Unsupported(
                "S3 (not configured on this server)",
            )),
            Platform::Gcs => Err(ObjectStoresError::Unsupported(
                "GCS (not configured on this server)",
            )),
            Platform::Azure => Err(ObjectStoresError::Unsupported("Azure")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn put_if_absent_never_overwrites_and_list_sees_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalObjectStore::new(dir.path().to_path_buf());
        let root = file_url(dir.path());
        let loc = format!("{root}/ns/t/metadata/00000-a.metadata.json");
        store
            .put_if_absent(&loc, Bytes::from_static(b"one"))
            .await
            .unwrap();
        let again = store.put_if_absent(&loc, Bytes::from_static(b"two")).await;
        assert!(matches!(again, Err(ObjectError::AlreadyExists(_))));
        assert_eq!(store.get(&loc).await.unwrap(), Bytes::from_static(b"one"));
        assert_eq!(
            store.list(&format!("{root}/ns/"), 10).await.unwrap(),
            vec![loc.clone()]
        );
        assert!(
            store
                .list(&format!("{root}/other/"), 10)
                .await
                .unwrap()
                .is_empty()
        );
        store.delete(std::slice::from_ref(&loc)).await.unwrap();
        assert!(matches!(
            store.get(&loc).await,
            Err(ObjectError::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn symlinks_below_the_root_are_refused_for_every_operation() {
        let dir = tempfile::tempdir().unwrap();
        let warehouse = dir.path().join("wh");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(warehouse.join("ns/t/metadata")).unwrap();
        std::fs::create_dir_all(warehouse.join("ns/other/data")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), b"outside").unwrap();
        std::fs::write(warehouse.join("ns/other/data/f.parquet"), b"other").unwrap();
        let store = LocalObjectStore::new(warehouse.clone());
        let root = file_url(&warehouse);
        // A file link to outside the warehouse, one to another table's file, and a directory
        // link to outside the warehouse.
        std::os::unix::fs::symlink(outside.join("secret"), warehouse.join("ns/t/metadata/a"))
            .unwrap();
        std::os::unix::fs::symlink(
            warehouse.join("ns/other/data/f.parquet"),
            warehouse.join("ns/t/metadata/b"),
        )
        .unwrap();
        std::os::unix::fs::symlink(&outside, warehouse.join("ns/t/data")).unwrap();
        let refused = |r: Result<(), ObjectError>, what: &str| {
            assert!(
                matches!(r, Err(ObjectError::OutsideStore(_))),
                "{what}: {r:?}"
            );
        };
        for link in ["ns/t/metadata/a", "ns/t/metadata/b", "ns/t/data/secret"] {
            let loc = format!("{root}/{link}");
            refused(store.get(&loc).await.map(drop), &loc);
            refused(store.delete(std::slice::from_ref(&loc)).await, &loc);
        }
        refused(
            store
                .put_if_absent(&format!("{root}/ns/t/data/new"), Bytes::from_static(b"x"))
                .await,
            "put through a directory link",
        );
        assert!(!outside.join("new").exists());
        refused(
            store
                .list(&format!("{root}/ns/t/data/"), 10)
                .await
                .map(drop),
            "list through a directory link",
        );
        // Listing the table's directory names no link (nor what is behind one).
        let listed = store.list(&format!("{root}/ns/t/"), 10).await.unwrap();
        assert!(listed.is_empty(), "{listed:?}");
        // The targets are untouched; the warehouse's own files still work.
        assert!(outside.join("secret").exists());
        let other = format!("{root}/ns/other/data/f.parquet");
        assert_eq!(
            store.get(&other).await.unwrap(),
            Bytes::from_static(b"other")
        );
    }

    #[tokio::test]
    async fn locations_outside_the_root_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalObjectStore::new(dir.path().join("wh"));
        for bad in [
            "s3://bucket/x".to_string(),
            format!("file://{}/elsewhere/x", dir.path().display()),
            format!("file://{}/wh/../x", dir.path().display()),
        ] {
            assert!(
                matches!(store.get(&bad).await, Err(ObjectError::OutsideStore(_))),
                "{bad}"
            );
        }
    }
}
