//! `floe-bench`: Floe's benchmark lab, kept out of the `floe` binary. Each subcommand starts
//! its own private catalog (or measures one at `--url`) and prints its figures; `--record DIR`
//! also writes them as a dated record (see [`record`]), from which the book's benchmarks page is
//! made.

mod bench;
mod record;

use clap::{Parser, Subcommand};

/// Measured with the allocator `floe serve` runs with, so that a throughput beside the minimal
/// server compares what operators run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "floe-bench",
    version,
    about = "Floe's benchmark lab: latency, throughput and cost of the catalog's requests"
)]
struct Cli {
    /// Also write the run's figures as a JSON record (date, revision, host, command, report)
    /// into this directory, e.g. bench/results.
    #[arg(long, global = true)]
    record: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// loadTable and commit latency at several table sizes, throughput beside a minimal server
    /// (`--floor`), dollars per million (`--cost`), or the web view's table page (`--ui`).
    Requests(bench::BenchArgs),
    /// Grow a table to many snapshots by appends, maintain it with the default policy, and
    /// report its files, bytes and commit latency before and after, and the run's cost.
    Maintenance(bench::maintenance::MaintenanceBenchArgs),
    /// One org's commit rate by writers × tables, with events numbered in the change's write
    /// (before) and by the sequencer (now), on the embedded store, a model of DynamoDB's item
    /// limits and (--dynamodb) DynamoDB.
    Writes(bench::writes::WritesBenchArgs),
    /// Server-side scan planning on tables of many files: first answer cold and warm, the
    /// whole plan, answer sizes, CPU and cost; with `--python`, PyIceberg's own planning beside.
    Planning(bench::planning::PlanningBenchArgs),
    /// Bin-pack compaction of a table of many small Parquet files beside a plain arrow-rs
    /// read-and-rewrite of the same bytes; with `--python` scan times before and after, with
    /// `--cost` dollars per GB and per table-month of scheduled maintenance.
    Compaction(bench::compaction::CompactionBenchArgs),
}

impl Command {
    /// What the command measures, as its record says.
    fn what(&self) -> &'static str {
        match self {
            Command::Requests(_) => "loadTable and commit latency, throughput and cost",
            Command::Maintenance(_) => "a maintenance run of a table grown by appends",
            Command::Writes(_) => "one org's commit rate by writers x tables",
            Command::Planning(_) => "server-side scan planning latency, answer sizes and cost",
            Command::Compaction(_) => "compaction throughput beside arrow-rs, scan times and cost",
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Command::Requests(_) => "requests",
            Command::Maintenance(_) => "maintenance",
            Command::Writes(_) => "writes",
            Command::Planning(_) => "planning",
            Command::Compaction(_) => "compaction",
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let name = cli.command.name();
    let what = cli.command.what();
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Requests(args) => bench::run(args).await,
            Command::Maintenance(args) => bench::maintenance::run(args).await,
            Command::Writes(args) => bench::writes::run(args).await,
            Command::Planning(args) => bench::planning::run(args).await,
            Command::Compaction(args) => bench::compaction::run(args).await,
        }
    });
    let outcome = outcome.and_then(|()| match &cli.record {
        Some(dir) => record::write(dir, name, what).map(|path| {
            eprintln!("floe-bench: recorded {}", path.display());
        }),
        None => Ok(()),
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("floe-bench: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
