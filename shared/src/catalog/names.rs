//! Identifier rules: flat namespaces with Arraylake repo-name rules, and addressable table names.

use crate::error::CatalogError;

/// The spec's namespace-level separator.
pub const UNIT_SEPARATOR: char = '\u{1f}';
pub const MAX_NAME_LEN: usize = 128;

/// Validates a new namespace name: a letter, digit or `_`, then one or more of word characters,
/// `.`, `-`; at most 128 characters.
pub fn validate_namespace_name(name: &str) -> Result<(), CatalogError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let rest: Vec<char> = chars.collect();
    let rest_ok = !rest.is_empty()
        && rest
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !first_ok || !rest_ok || name.len() > MAX_NAME_LEN {
        return Err(CatalogError::BadRequest(format!(
            "Invalid namespace name '{}': names start with a letter, digit or underscore, \
             continue with one or more letters, digits, '_', '.' or '-', and have at most {MAX_NAME_LEN} characters",
            name.escape_debug()
        )));
    }
    Ok(())
}

/// Validates a table name: it must be addressable as one URL path segment.
pub fn validate_table_name(name: &str) -> Result<(), CatalogError> {
    if name.is_empty() {
        return Err(CatalogError::BadRequest(
            "Table name must not be empty".into(),
        ));
    }
    if name == "." || name == ".." {
        return Err(CatalogError::BadRequest(format!(
            "Invalid table name '{name}': '.' and '..' are not table names"
        )));
    }
    if name.contains('/') || name.contains(UNIT_SEPARATOR) {
        return Err(CatalogError::BadRequest(format!(
            "Invalid table name '{}': names cannot contain '/' or the 0x1F separator",
            name.escape_debug()
        )));
    }
    if name.len() > 255 || name.chars().any(char::is_control) {
        return Err(CatalogError::BadRequest(format!(
            "Invalid table name '{}': at most 255 characters, no control characters",
            name.escape_debug()
        )));
    }
    Ok(())
}

/// The namespace levels of an identifier as sent by a client: exactly one is accepted.
pub fn single_level(levels: &[String]) -> Result<&str, CatalogError> {
    match levels {
        [] => Err(CatalogError::BadRequest(
            "Namespace must not be empty".into(),
        )),
        [one] if one.is_empty() => Err(CatalogError::BadRequest(
            "Namespace must not be empty".into(),
        )),
        [one] => Ok(one),
        _ => Err(nested_namespace()),
    }
}

pub fn nested_namespace() -> CatalogError {
    CatalogError::BadRequest("Nested namespaces are not supported".into())
}

/// Splits a decoded path or `parent` value on the 0x1F separator.
pub fn split_levels(raw: &str) -> Vec<String> {
    raw.split(UNIT_SEPARATOR).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_follow_repo_rules() {
        for ok in [
            "ab",
            "a_b",
            "_x",
            "9lives",
            "my-tables",
            "a.b",
            &"a".repeat(128),
        ] {
            assert!(validate_namespace_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a",
            "-ab",
            ".ab",
            "a b",
            "a/b",
            "ä",
            "a\u{1f}b",
            &"a".repeat(129),
        ] {
            assert!(validate_namespace_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn table_names_must_be_addressable() {
        assert!(validate_table_name("events").is_ok());
        assert!(validate_table_name("with space.and.dots").is_ok());
        for bad in ["", ".", "..", "a/b", "a\u{1f}b", "a\nb"] {
            assert!(validate_table_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_one_level() {
        assert_eq!(single_level(&["a".into()]).unwrap(), "a");
        assert!(single_level(&[]).is_err());
        assert!(single_level(&["a".into(), "b".into()]).is_err());
        assert_eq!(split_levels("a\u{1f}b"), vec!["a", "b"]);
    }
}
