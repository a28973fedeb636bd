//! `floe serve` and the admin commands.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use clap::{Args, Subcommand};
use std::sync::Arc;

use floe::bootstrap;
use floe::catalog::Catalog;
use floe::clock::{Clock, SystemClock};
use floe::config::{Settings, StoreKind};
use floe::events::publish::{NdjsonSink, Sink, WebhookSink};
use floe::model::OrgRole;
use floe::store::dynamodb::DynamoStore;

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "FLOE_ADDR", default_value = "127.0.0.1:8181")]
    addr: SocketAddr,
    /// Log format: text or json.
    #[arg(long, env = "FLOE_LOG_FORMAT", default_value = "text")]
    log_format: String,
    /// Seconds between purge runs beside the server (expired soft-deleted namespaces); an
    /// immediate delete starts one at once. 0 runs no purge here (run `floe admin purge` from
    /// a scheduler instead).
    #[arg(long, env = "FLOE_PURGE_INTERVAL_SECS", default_value_t = 300)]
    purge_interval_secs: u64,
    /// Seconds between maintenance runs beside the server (each table is maintained once a
    /// day; a run takes the tables due). 0 runs no maintenance here (run `floe admin maintain`
    /// from a scheduler instead).
    #[arg(long, env = "FLOE_MAINTENANCE_INTERVAL_SECS", default_value_t = 3600)]
    maintenance_interval_secs: u64,
    /// Where change events are appended, one JSON object per line (default: events.ndjson in
    /// the data directory).
    #[arg(long, env = "FLOE_EVENTS_FILE")]
    events_file: Option<std::path::PathBuf>,
    /// A URL that change events are POSTed to (CloudEvents structured mode), one at a time in
    /// order, retried with backoff.
    #[arg(long, env = "FLOE_EVENTS_WEBHOOK")]
    events_webhook: Option<String>,
    /// Milliseconds between looks for change events written by other processes (this server's
    /// own are published at once).
    #[arg(long, env = "FLOE_EVENTS_POLL_MS", default_value_t = 1000)]
    events_poll_ms: u64,
    #[command(flatten)]
    settings: Settings,
}

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Create the DynamoDB table and its indexes (FLOE_STORE=dynamodb); nothing to do for the
    /// embedded store.
    Init {
        #[command(flatten)]
        settings: Settings,
    },
    /// Create an api client in an org, or a service administrator, and print its token (shown
    /// once, stored hashed).
    CreateToken(CreateTokenArgs),
    /// Run one purge pass on the store (immediate deletes first, then namespaces past their
    /// recovery period) and print its report as JSON. The embedded store is locked by a running
    /// `floe serve`, which purges by itself.
    Purge {
        #[command(flatten)]
        settings: Settings,
    },
    /// Run one maintenance pass (every table due: snapshot expiry, then the files tables no
    /// longer reference) and print its report as JSON. The embedded store is locked by a
    /// running `floe serve`, which maintains by itself.
    Maintain {
        #[command(flatten)]
        settings: Settings,
        /// Plan and report only: nothing is committed, deleted or recorded.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Args)]
pub struct CreateTokenArgs {
    /// Org the api client belongs to.
    #[arg(long, conflicts_with = "service_admin")]
    org: Option<String>,
    /// Display name of the api client (with --service-admin, default: service-admin).
    #[arg(long, required_unless_present = "service_admin")]
    name: Option<String>,
    /// Email stamped as snapshot author on its commits.
    #[arg(long, conflicts_with = "service_admin")]
    email: Option<String>,
    /// Org role: read, write or admin.
    #[arg(long, default_value = "read", value_parser = parse_role, conflicts_with = "service_admin")]
    role: OrgRole,
    /// Create a service administrator instead: full access in every org, the only principal
    /// that may create orgs (`floe orgs create`). Works on a fresh data directory.
    #[arg(long)]
    service_admin: bool,
    #[command(flatten)]
    settings: Settings,
}

fn parse_role(raw: &str) -> Result<OrgRole, String> {
    match raw {
        "read" => Ok(OrgRole::Read),
        "write" => Ok(OrgRole::Write),
        "admin" => Ok(OrgRole::Admin),
        other => Err(format!("unknown role '{other}': use read, write or admin")),
    }
}

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLOE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

pub async fn serve(args: ServeArgs) -> Result<(), String> {
    init_logging(&args.log_format);
    let settings = &args.settings;
    let (catalog, boot) = floe::deployment::open_catalog(settings)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(token) = &boot.generated_token {
        std::fs::create_dir_all(&settings.data_dir).map_err(|e| e.to_string())?;
        let path = settings.data_dir.join("dev-token");
        write_secret(&path, token).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!(
            "Created org '{}' with an admin token (shown once, also saved to {}):\n\n    {token}\n",
            settings.dev_org,
            path.display()
        );
    }
    if args.purge_interval_secs > 0 {
        tokio::spawn(purge_beside_server(
            catalog.clone(),
            Duration::from_secs(args.purge_interval_secs),
        ));
    }
    if args.maintenance_interval_secs > 0 {
        tokio::spawn(maintenance_beside_server(
            catalog.clone(),
            Duration::from_secs(args.maintenance_interval_secs),
        ));
    }
    start_publishers(&args, &catalog)?;
    let ui = floe::ui::UiConfig::from_settings(settings).map_err(|e| e.to_string())?;
    let app = floe::ui::router(catalog.clone(), ui).merge(floe::http::full_router(catalog));
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(addr = %local, org = %settings.dev_org, store = ?settings.store, "Floe catalog listening");
    eprintln!(
        "Floe catalog: http://{local}/iceberg  (warehouse '{}'); web view: http://{local}/ui/",
        settings.dev_org
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .map_err(|e| e.to_string())
}

/// Publishers of change events beside the server: the NDJSON file, and the webhook if set.
fn start_publishers(args: &ServeArgs, catalog: &Arc<Catalog>) -> Result<(), String> {
    std::fs::create_dir_all(&args.settings.data_dir).map_err(|e| e.to_string())?;
    let file = args
        .events_file
        .clone()
        .unwrap_or_else(|| args.settings.data_dir.join("events.ndjson"));
    let mut sinks: Vec<Arc<dyn Sink>> = vec![Arc::new(NdjsonSink::new(&file))];
    if let Some(url) = &args.events_webhook {
        sinks.push(Arc::new(WebhookSink::new(url)?));
    }
    let poll = Duration::from_millis(args.events_poll_ms.max(10));
    for sink in sinks {
        let publisher = catalog.events.publisher(sink);
        tokio::spawn(publisher.run(catalog.events.written(), poll, std::future::pending()));
    }
    eprintln!("Change events: {}", file.display());
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

fn write_secret(path: &Path, secret: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    writeln!(file, "{secret}")
}

pub async fn admin(command: AdminCommand) -> Result<(), String> {
    match command {
        AdminCommand::Init { settings } => init(&settings).await,
        AdminCommand::CreateToken(args) => create_token(args).await,
        AdminCommand::Purge { settings } => purge_once(&settings).await,
        AdminCommand::Maintain { settings, dry_run } => maintain_once(&settings, dry_run).await,
    }
}

async fn purge_once(settings: &Settings) -> Result<(), String> {
    let (catalog, _) = floe::deployment::open_catalog(settings)
        .await
        .map_err(|e| e.to_string())?;
    let run = catalog
        .purge_due(SystemClock.now_ms())
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "Purged {} dropped table(s) and {} namespace(s), {} object(s) deleted, {} failed",
        run.tables.purged.len(),
        run.namespaces.purged.len(),
        run.tables.objects_deleted + run.namespaces.objects_deleted,
        run.failures().len()
    );
    report_run(serde_json::to_string(&run), run.failures(), "purge")
}

async fn maintain_once(settings: &Settings, dry_run: bool) -> Result<(), String> {
    let (catalog, _) = floe::deployment::open_catalog(settings)
        .await
        .map_err(|e| e.to_string())?;
    let options = floe::catalog::tables::MaintainOptions {
        dry_run,
        verbose: false,
    };
    let run = catalog
        .maintain_due(SystemClock.now_ms(), options)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "{} {} table(s): {} snapshot(s) expired, {} file(s) ({} bytes) {}, {} failed",
        if dry_run { "Planned" } else { "Maintained" },
        run.tables.len(),
        run.snapshots_expired,
        run.files_deleted,
        run.bytes_deleted,
        if dry_run { "to delete" } else { "deleted" },
        run.failures().len()
    );
    report_run(serde_json::to_string(&run), run.failures(), "maintenance")
}

/// Prints an admin pass's report as one JSON line; fails naming what failed, if anything did.
fn report_run(
    json: serde_json::Result<String>,
    failures: Vec<String>,
    pass: &str,
) -> Result<(), String> {
    println!("{}", json.map_err(|e| e.to_string())?);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{pass} failed for {}", failures.join(", ")))
    }
}

/// The maintenance beside the server: a run every `interval`, each taking the tables due.
async fn maintenance_beside_server(
    catalog: std::sync::Arc<floe::catalog::Catalog>,
    interval: Duration,
) {
    loop {
        match catalog
            .maintain_due(SystemClock.now_ms(), Default::default())
            .await
        {
            Ok(run)
                if run.snapshots_expired == 0
                    && run.files_deleted == 0
                    && run.failures().is_empty() => {}
            Ok(run) => tracing::info!(
                tables = run.tables.len(),
                failed = run.failures().len(),
                snapshots_expired = run.snapshots_expired,
                files_deleted = run.files_deleted,
                bytes_deleted = run.bytes_deleted,
                "maintenance run finished"
            ),
            Err(e) => tracing::error!(error = %e, "maintenance run could not list the tables"),
        }
        tokio::time::sleep(interval).await;
    }
}

/// The purge beside the server: a run every `interval`, and one at once when an admin asks for
/// a purge now (a request during a run starts another right after it).
async fn purge_beside_server(catalog: std::sync::Arc<floe::catalog::Catalog>, interval: Duration) {
    let wanted = catalog.purge_requested();
    loop {
        match catalog.purge_due(SystemClock.now_ms()).await {
            Ok(run) if !run.did_anything() => {}
            Ok(run) => tracing::info!(
                tables_purged = run.tables.purged.len(),
                namespaces_purged = run.namespaces.purged.len(),
                failed = run.failures().len(),
                objects_deleted = run.tables.objects_deleted + run.namespaces.objects_deleted,
                "purge run finished"
            ),
            Err(e) => tracing::error!(error = %e, "purge run could not list its candidates"),
        }
        tokio::select! {
            _ = wanted.notified() => {}
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

async fn init(settings: &Settings) -> Result<(), String> {
    match settings.store {
        StoreKind::Embedded => {
            eprintln!("The embedded store needs no initialization; `floe serve` creates it.");
            Ok(())
        }
        StoreKind::Dynamodb => {
            let sdk = floe::deployment::aws_config().await;
            let store = DynamoStore::new(aws_sdk_dynamodb_client(&sdk), &settings.dynamodb_table);
            let created = store.create_table().await.map_err(|e| e.to_string())?;
            if created {
                eprintln!("Created DynamoDB table {}", store.table());
            } else {
                eprintln!("DynamoDB table {} already exists", store.table());
            }
            Ok(())
        }
    }
}

fn aws_sdk_dynamodb_client(sdk: &floe::deployment::SdkConfig) -> floe::deployment::DynamoClient {
    floe::deployment::DynamoClient::new(sdk)
}

async fn create_token(args: CreateTokenArgs) -> Result<(), String> {
    if args.service_admin {
        return create_service_admin(args).await;
    }
    let settings = &args.settings;
    let sdk = if settings.uses_aws() {
        Some(floe::deployment::aws_config().await)
    } else {
        None
    };
    let store = floe::deployment::open_store(settings, sdk.as_ref())
        .await
        .map_err(|e| e.to_string())?;
    let org = args.org.as_deref().unwrap_or(&settings.dev_org);
    let (principal, token) = bootstrap::issue_api_client(
        &*store,
        &SystemClock,
        org,
        args.name.as_deref().ok_or("--name is required")?,
        args.email,
        args.role,
    )
    .await
    .map_err(|e| e.to_string())?;
    eprintln!(
        "Created api client {} ({:?}) in org '{org}'",
        principal.id, args.role
    );
    println!("{token}");
    Ok(())
}

/// A service administrator on the store `floe serve` would open. Nothing is bootstrapped here:
/// a dev-org token generated now would never be shown, and `floe serve` provisions the dev org
/// on its first start as usual.
async fn create_service_admin(args: CreateTokenArgs) -> Result<(), String> {
    let settings = Settings {
        bootstrap: false,
        ..args.settings
    };
    let (catalog, _) = floe::deployment::open_catalog(&settings)
        .await
        .map_err(|e| e.to_string())?;
    let name = args.name.as_deref().unwrap_or("service-admin");
    let (principal, token) = floe::catalog::issue_service_admin(&catalog, name)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "Created service administrator {} ('{name}'), with full access in every org.\n\
         Its token follows on stdout. It is shown only this once: store it now.",
        floe::catalog::display_principal(&principal.id)
    );
    println!("{token}");
    Ok(())
}
