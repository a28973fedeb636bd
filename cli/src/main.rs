//! `floe`: the local catalog server, admin commands and the management API client. The
//! benchmark lab is its own binary, `floe-bench` (bench/floe-bench).

#[cfg(test)]
mod config_docs;
mod manage;
mod serve;

use clap::{Parser, Subcommand};

/// A warm request allocates dozens of small, short-lived buffers (path parameters, keys, the
/// answer's headers) across threads; mimalloc serves them from per-thread pages where glibc's
/// allocator spent a quarter of a warm loadTable's instructions.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "floe",
    version,
    about = "Floe: a serverless Apache Iceberg REST catalog",
    after_help = manage::EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every endpoint group on one local port, with the embedded store and a local warehouse.
    Serve(serve::ServeArgs),
    /// Administration: store initialization and api-client tokens.
    #[command(subcommand)]
    Admin(serve::AdminCommand),
    /// Print the route table (method, path, endpoint group) as JSON.
    Routes,
    /// Print the AWS actions each function's code can call, and the vending role's, as JSON.
    Iam,
    #[command(flatten)]
    Manage(manage::Command),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    // Management commands have exit codes of their own (see `manage::EXIT_CODES`).
    let command = match cli.command {
        Command::Manage(command) => return runtime.block_on(manage::run(command)),
        command => command,
    };
    let outcome = runtime.block_on(async {
        match command {
            Command::Manage(_) => unreachable!("answered above"),
            Command::Serve(args) => serve::serve(args).await,
            Command::Admin(command) => serve::admin(command).await,
            Command::Routes => {
                let routes: Vec<serde_json::Value> = floe::routes::ROUTES
                    .iter()
                    .map(|r| serde_json::json!({"method": r.method, "path": r.path, "group": r.group.name()}))
                    .collect();
                println!("{}", serde_json::Value::Array(routes));
                Ok(())
            }
            Command::Iam => {
                let functions: serde_json::Map<String, serde_json::Value> =
                    floe::iam::Function::ALL
                        .iter()
                        .map(|f| (f.name().to_owned(), serde_json::json!(f.aws_actions())))
                        .collect();
                let declared = serde_json::json!({
                    "functions": functions,
                    "vending-role": floe::iam::vending_role_actions(),
                });
                println!("{declared}");
                Ok(())
            }
        }
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("floe: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
