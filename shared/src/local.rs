//! The local deployment: embedded store and local warehouse under one data directory, used by
//! `floe serve`, the bench and locally invoked functions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bootstrap::{self, DevBootstrap, DevSettings};
use crate::catalog::Catalog;
use crate::clock::SystemClock;
use crate::error::CatalogError;
use crate::objects::local::LocalObjectStores;
use crate::store::embedded::{EmbeddedStore, OpenError};
use crate::vending::NoVending;

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("bootstrap failed: {0}")]
    Bootstrap(#[from] CatalogError),
}

/// Where the embedded store lives inside a data directory.
pub fn store_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("catalog")
}

/// Opens the data directory (taking its lock), bootstraps the development org on first start,
/// and builds the catalog.
pub async fn open(
    data_dir: &Path,
    org: &str,
    token: Option<&str>,
) -> Result<(Arc<Catalog>, DevBootstrap), LocalError> {
    let store = Arc::new(EmbeddedStore::open(&store_dir(data_dir))?);
    let clock = Arc::new(SystemClock);
    let warehouse = data_dir.join("warehouse");
    let settings = DevSettings {
        org,
        warehouse: &warehouse,
        token,
    };
    let boot = bootstrap::bootstrap_dev(&*store, &*clock, &settings).await?;
    let catalog = Arc::new(Catalog::new(
        store,
        Arc::new(LocalObjectStores),
        Arc::new(NoVending),
        clock,
    ));
    Ok((catalog, boot))
}
