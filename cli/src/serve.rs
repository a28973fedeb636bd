//! `floe serve` and the local admin commands.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Args;
use floe::bootstrap;
use floe::clock::SystemClock;
use floe::routes::Group;
use floe::store::embedded::EmbeddedStore;
use floe::store::rows::OrgRole;

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "FLOE_ADDR", default_value = "127.0.0.1:8181")]
    addr: SocketAddr,
    /// Directory holding the catalog database and the local warehouse.
    #[arg(long, env = "FLOE_DATA_DIR", default_value = ".floe")]
    data_dir: PathBuf,
    /// Org bootstrapped on first start (the warehouse name clients use).
    #[arg(long, env = "FLOE_DEV_ORG", default_value = "demo")]
    dev_org: String,
    /// Admin token to register; when unset, one is generated on first start.
    #[arg(long, env = "FLOE_DEV_TOKEN", hide_env_values = true)]
    dev_token: Option<String>,
    /// Log format: text or json.
    #[arg(long, env = "FLOE_LOG_FORMAT", default_value = "text")]
    log_format: String,
}

#[derive(Args)]
pub struct CreateTokenArgs {
    #[arg(long, env = "FLOE_DATA_DIR", default_value = ".floe")]
    data_dir: PathBuf,
    #[arg(long, env = "FLOE_DEV_ORG", default_value = "demo")]
    org: String,
    /// Display name of the api client.
    #[arg(long)]
    name: String,
    /// Email stamped as snapshot author on its commits.
    #[arg(long)]
    email: Option<String>,
    /// Org role: read, write or admin.
    #[arg(long, default_value = "read", value_parser = parse_role)]
    role: OrgRole,
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

fn open_store(data_dir: &Path) -> Result<EmbeddedStore, String> {
    EmbeddedStore::open(&floe::local::store_dir(data_dir)).map_err(|e| e.to_string())
}

pub async fn serve(args: ServeArgs) -> Result<(), String> {
    init_logging(&args.log_format);
    let (catalog, boot) =
        floe::local::open(&args.data_dir, &args.dev_org, args.dev_token.as_deref())
            .await
            .map_err(|e| e.to_string())?;
    if let Some(token) = &boot.generated_token {
        let path = args.data_dir.join("dev-token");
        write_secret(&path, token).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!(
            "Created org '{}' with an admin token (shown once, also saved to {}):\n\n    {token}\n",
            args.dev_org,
            path.display()
        );
    }
    let app = floe::http::router(catalog, &Group::ALL);
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(addr = %local, org = %args.dev_org, "Floe catalog listening");
    eprintln!(
        "Floe catalog: http://{local}/iceberg  (warehouse '{}')",
        args.dev_org
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .map_err(|e| e.to_string())
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

pub async fn create_token(args: CreateTokenArgs) -> Result<(), String> {
    let store = open_store(&args.data_dir)?;
    let (principal, token) = bootstrap::issue_api_client(
        &store,
        &SystemClock,
        &args.org,
        &args.name,
        args.email,
        args.role,
    )
    .await
    .map_err(|e| e.to_string())?;
    eprintln!(
        "Created api client {} ({:?}) in org '{}'",
        principal.id, args.role, args.org
    );
    println!("{token}");
    Ok(())
}
