//! The pages: one askama template each (in `shared/templates/`), with the view data it shows.
//! askama escapes every value for HTML, so names, properties and summary values from clients
//! render as text; the only URLs are those `links` builds.

use askama::Template;

use super::chart::Chart;
use super::history::HistoryPage;

/// The signed-in principal as the page header shows it.
pub struct Who {
    pub name: String,
    pub principal: String,
}

/// A link in the breadcrumb trail.
pub struct Crumb {
    pub label: String,
    pub href: String,
}

#[derive(Template)]
#[template(path = "signin.html")]
pub struct SignInPage {
    pub who: Option<Who>,
    pub crumbs: Vec<Crumb>,
    pub message: Option<String>,
}

pub struct OrgEntry {
    pub name: String,
    pub href: String,
    pub role: String,
}

#[derive(Template)]
#[template(path = "orgs.html")]
pub struct OrgsPage {
    pub who: Option<Who>,
    pub crumbs: Vec<Crumb>,
    pub orgs: Vec<OrgEntry>,
    pub service_admin: bool,
}

pub struct NamespaceEntry {
    pub name: String,
    pub href: String,
    pub visibility: &'static str,
    pub bucket: String,
    pub description: String,
    pub tables: u64,
}

#[derive(Template)]
#[template(path = "org.html")]
pub struct OrgPage {
    pub who: Option<Who>,
    pub crumbs: Vec<Crumb>,
    pub org: String,
    pub namespaces: Vec<NamespaceEntry>,
}

pub struct TableEntry {
    pub name: String,
    pub href: String,
}

#[derive(Template)]
#[template(path = "namespace.html")]
pub struct NamespacePage {
    pub who: Option<Who>,
    pub crumbs: Vec<Crumb>,
    pub namespace: String,
    pub tables: Vec<TableEntry>,
    pub views: Vec<ViewEntry>,
}

/// A view the caller may read, with its current version's SQL per dialect.
pub struct ViewEntry {
    pub name: String,
    pub representations: Vec<(String, String)>,
}

pub struct FieldRow {
    pub id: i32,
    pub name: String,
    pub field_type: String,
    pub required: bool,
    pub doc: String,
}

pub struct PartitionRow {
    pub name: String,
    pub source: String,
    pub transform: String,
}

pub struct SortRow {
    pub source: String,
    pub transform: String,
    pub direction: String,
    pub null_order: String,
}

#[derive(Template)]
#[template(path = "table.html")]
pub struct TablePage {
    pub who: Option<Who>,
    pub crumbs: Vec<Crumb>,
    pub table: String,
    pub location: String,
    pub format_version: String,
    pub uuid: String,
    pub last_updated: String,
    pub schema_id: i32,
    pub fields: Vec<FieldRow>,
    pub spec_id: i32,
    pub partition: Vec<PartitionRow>,
    pub order_id: i64,
    pub sort: Vec<SortRow>,
    pub properties: Vec<(String, String)>,
    pub maintenance: MaintenanceView,
    pub chart: Option<Chart>,
    pub history: HistoryPage,
    pub prev_href: Option<String>,
    pub next_href: Option<String>,
    pub first_href: Option<String>,
    pub last_href: Option<String>,
}

/// A table's maintenance as its page shows it.
pub struct MaintenanceView {
    /// On or off, with the target size when on.
    pub compaction: String,
    pub last_run: String,
    pub next_due: String,
    pub last_error: Option<String>,
    /// What the last compaction that rewrote anything did.
    pub last_compaction: Option<String>,
}

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    pub who: Option<Who>,
    pub crumbs: Vec<Crumb>,
    pub status: u16,
    pub title: String,
    pub message: String,
}
