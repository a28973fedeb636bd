//! `GET /v1/config`: resolves a warehouse (an org name) to the catalog prefix.

use std::collections::BTreeMap;

use super::Catalog;
use crate::error::{CatalogError, Result};
use crate::model::Principal;
use crate::routes::advertised_endpoints;
use crate::types::CatalogConfig;

impl Catalog {
    pub async fn get_config(
        &self,
        principal: &Principal,
        warehouse: Option<&str>,
    ) -> Result<CatalogConfig> {
        let warehouse = warehouse.filter(|w| !w.is_empty()).ok_or_else(|| {
            CatalogError::BadRequest(
                "Missing warehouse: set the client's warehouse to your organization name".into(),
            )
        })?;
        if warehouse.contains('/') {
            return Err(CatalogError::BadRequest(format!(
                "Invalid warehouse '{warehouse}': the warehouse is an organization name, not org/bucket"
            )));
        }
        let ctx = self.org_context(principal, warehouse).await?;
        let overrides = BTreeMap::from([
            ("prefix".to_owned(), ctx.org.name.clone()),
            ("warehouse".to_owned(), ctx.org.name.clone()),
        ]);
        Ok(CatalogConfig {
            defaults: BTreeMap::new(),
            overrides,
            endpoints: advertised_endpoints(),
        })
    }
}
