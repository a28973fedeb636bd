//! `GET /v1/config`: resolves a warehouse (an org name) to the catalog prefix.

use crate::core::Core;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{CatalogError, Result};
use crate::model::Principal;
use crate::routes::advertised_endpoints;
use crate::types::CatalogConfig;

/// `GET /v1/config`.
pub struct ConfigService {
    core: Arc<Core>,
}

impl ConfigService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }
}

impl ConfigService {
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
        let ctx = self.core.lookups.org_context(principal, warehouse).await?;
        let overrides = BTreeMap::from([
            ("prefix".to_owned(), ctx.org.name.clone()),
            ("warehouse".to_owned(), ctx.org.name.clone()),
        ]);
        Ok(CatalogConfig {
            defaults: BTreeMap::new(),
            overrides,
            endpoints: advertised_endpoints(),
            idempotency_key_lifetime: self.core.idempotency.lifetime().map(iso_duration),
        })
    }
}

/// A duration as ISO-8601 (`PT30M`, `PT1H`, `PT90S`), as `idempotency-key-lifetime` is written.
pub fn iso_duration(duration: std::time::Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        s if s % 3600 == 0 && s > 0 => format!("PT{}H", s / 3600),
        s if s % 60 == 0 && s > 0 => format!("PT{}M", s / 60),
        s => format!("PT{s}S"),
    }
}

/// Reads an ISO-8601 duration of days and time, `P[nD][T[nH][nM][nS]]` (what
/// `idempotency-key-lifetime` and the event retention take); `None` for anything else.
pub fn parse_iso_duration(text: &str) -> Option<std::time::Duration> {
    let rest = text.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((days, time)) if !time.is_empty() => (days, Some(time)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut seconds = 0u64;
    if !days.is_empty() {
        let number = days.strip_suffix('D')?;
        seconds = number_of(number)?.checked_mul(86_400)?;
    } else if time.is_none() {
        return None;
    }
    let mut rest = time.unwrap_or("");
    for (unit, scale) in [('H', 3600), ('M', 60), ('S', 1)] {
        if let Some((number, tail)) = rest.split_once(unit) {
            seconds = seconds.checked_add(number_of(number)?.checked_mul(scale)?)?;
            rest = tail;
        }
    }
    rest.is_empty()
        .then(|| std::time::Duration::from_secs(seconds))
}

fn number_of(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_read_and_write_as_iso_8601() {
        for (text, seconds) in [
            ("PT30M", 1800),
            ("PT1H", 3600),
            ("PT90S", 90),
            ("PT1H30M", 5400),
        ] {
            assert_eq!(parse_iso_duration(text), Some(Duration::from_secs(seconds)));
        }
        assert_eq!(
            parse_iso_duration("P7D"),
            Some(Duration::from_secs(7 * 86_400))
        );
        assert_eq!(
            parse_iso_duration("P1DT1H"),
            Some(Duration::from_secs(86_400 + 3600))
        );
        for bad in [
            "", "P", "PT", "P1DT", "P1", "PD", "30M", "PTM", "PT1X", "PT-1S", "PT1M2H",
        ] {
            assert_eq!(parse_iso_duration(bad), None, "{bad}");
        }
        assert_eq!(iso_duration(Duration::from_secs(1800)), "PT30M");
        assert_eq!(iso_duration(Duration::from_secs(7200)), "PT2H");
        assert_eq!(iso_duration(Duration::from_secs(45)), "PT45S");
    }
}
