//! The `engram` binary: arguments → configuration → logging → serve.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use engram::app::{App, shutdown_signal};
use engram::config::Config;

/// Engram: long-term memory for AI coding agents.
///
/// Configuration comes from built-in defaults, then the YAML file given by
/// --config (or ENGRAM_CONFIG), then environment variables: ENGRAM_KEY for
/// a top-level key (ENGRAM_LISTEN, ENGRAM_DATA_DIR), ENGRAM_SECTION__KEY
/// for one in a section (e.g. ENGRAM_LIMITS__MAX_BODY_BYTES=2097152), then
/// the flags of `serve`.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The YAML configuration file (before or after the command:
    /// `engram --config FILE serve`, `engram serve --config FILE`).
    #[arg(long, env = "ENGRAM_CONFIG", value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// `serve`'s flags, for `engram` run without a command.
    #[command(flatten)]
    serve: ServeArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

/// Where to serve, winning over the environment and the file.
#[derive(clap::Args)]
struct ServeArgs {
    /// The address to serve on (the `listen` key, ENGRAM_LISTEN).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// The data directory (the `data_dir` key, ENGRAM_DATA_DIR).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

impl ServeArgs {
    /// These flags, each filled from `outer` where not given: `engram
    /// --listen A serve` and `engram serve --listen A` are one command.
    fn or(self, outer: Self) -> Self {
        Self {
            listen: self.listen.or(outer.listen),
            data_dir: self.data_dir.or(outer.data_dir),
        }
    }

    fn is_given(&self) -> bool {
        self.listen.is_some() || self.data_dir.is_some()
    }
}

/// What `engram healthcheck` asks.
#[derive(clap::Args)]
struct HealthcheckArgs {
    /// Ask /readyz instead: exit 0 only once the server is ready (with
    /// PostgreSQL: caught up with the database and connected to it).
    #[arg(long)]
    ready: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (the default).
    Serve(ServeArgs),
    /// Print the effective configuration as YAML and exit.
    Config,
    /// Print the OpenAPI document as YAML and exit.
    Openapi,
    /// Exit 0 if the configured server answers /healthz (for container health checks).
    Healthcheck(HealthcheckArgs),
    /// Run as a coding agent's hook: read its JSON on stdin, call a running
    /// Engram, print what the agent expects. Always exits 0; failures go to
    /// a log file.
    Hook(engram::client::hook::HookArgs),
    /// Merge Engram's hooks into a coding agent's settings file.
    Setup(engram::client::setup::SetupArgs),
    /// Check that the agents' hooks and MCP server can reach Engram: the
    /// URL answers, the settings hold Engram's entries and the binary they
    /// run exists; print the hook log's last lines. Exits 1 on a problem.
    Doctor(engram::client::doctor::DoctorArgs),
    /// MCP over stdio, bridged to a running Engram's `/mcp`.
    Mcp(engram::client::bridge::BridgeArgs),
    /// Bring memories into a running Engram: agents' transcripts,
    /// instructions files, an export, mem0's memories.
    Import(engram::client::import::ImportArgs),
    /// Write every memory of a running Engram, whole, as JSON Lines or
    /// memory files.
    Export(engram::client::export::ExportArgs),
    /// Judge the anchors of a repo's memories against a git working tree
    /// (current, changed or gone) and record the verdicts with a running
    /// Engram. Exits 1 on a git or server failure.
    Check(engram::client::check::CheckArgs),
    /// Run one consolidation pass over a repo's and a user's memories with
    /// a running Engram, and print what it changed. Exits 1 on a server
    /// failure.
    Consolidate(engram::client::consolidate::ConsolidateArgs),
}

fn main() -> ExitCode {
    engram::allocator::configure();
    let args = match Args::try_parse() {
        Ok(args) => args,
        // A mistyped hook command must not fail the agent's prompt: log it
        // and exit 0 like any other hook failure.
        Err(err) if is_hook_run(&err) => {
            engram::client::hook::log_usage_error(&err.to_string());
            return ExitCode::SUCCESS;
        }
        Err(err) => err.exit(),
    };
    let command = match args.command {
        None => Command::Serve(args.serve),
        Some(Command::Serve(flags)) => Command::Serve(flags.or(args.serve)),
        Some(_) if args.serve.is_given() => Args::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--listen and --data-dir are `serve`'s flags: give them after `serve`, or with \
                 no command",
            )
            .exit(),
        Some(command) => command,
    };
    match command {
        Command::Hook(hook) => engram::client::hook::run(&hook),
        Command::Setup(setup) => engram::client::setup::run(&setup),
        Command::Doctor(doctor) => engram::client::doctor::run(&doctor),
        Command::Mcp(bridge) => engram::client::bridge::run(&bridge),
        Command::Import(import) => engram::client::import::run(&import),
        Command::Export(export) => engram::client::export::run(&export),
        Command::Check(check) => engram::client::check::run(&check),
        Command::Consolidate(consolidate) => engram::client::consolidate::run(&consolidate),
        Command::Openapi => print_yaml(&engram::routes::openapi()),
        Command::Config => match load_config(args.config.as_deref()) {
            Ok(config) => print_yaml(&config),
            Err(code) => code,
        },
        Command::Healthcheck(HealthcheckArgs { ready }) => {
            match load_config(args.config.as_deref()) {
                Ok(config) => match engram::client::probe::probe(
                    config.listen,
                    if ready { "/readyz" } else { "/healthz" },
                ) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(err) => {
                        eprintln!("engram: unhealthy: {err}");
                        ExitCode::FAILURE
                    }
                },
                Err(code) => code,
            }
        }
        Command::Serve(flags) => match serve_config(args.config.as_deref(), flags) {
            Ok(config) => serve(config),
            Err(code) => code,
        },
    }
}

/// Whether `err` is from an `engram hook …` invocation rather than a
/// request for help or version.
fn is_hook_run(err: &clap::Error) -> bool {
    use clap::error::ErrorKind;
    let asked_for_help = matches!(
        err.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    !asked_for_help && std::env::args().nth(1).as_deref() == Some("hook")
}

fn load_config(path: Option<&std::path::Path>) -> Result<Config, ExitCode> {
    Config::load(path, std::env::vars()).map_err(|err| invalid_configuration(&err))
}

fn invalid_configuration(err: &engram::config::Error) -> ExitCode {
    eprintln!("engram: invalid configuration: {err}");
    ExitCode::from(2)
}

/// The configuration with `serve`'s flags laid over it, validated again.
fn serve_config(path: Option<&std::path::Path>, flags: ServeArgs) -> Result<Config, ExitCode> {
    let mut config = load_config(path)?;
    if let Some(listen) = flags.listen {
        config.listen = listen;
    }
    if let Some(data_dir) = flags.data_dir {
        config.data_dir = data_dir;
    }
    config
        .validate()
        .map_err(|err| invalid_configuration(&err))?;
    Ok(config)
}

fn print_yaml(value: &impl serde::Serialize) -> ExitCode {
    match serde_yaml::to_string(value) {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("engram: {err}");
            ExitCode::FAILURE
        }
    }
}

#[tokio::main]
async fn serve(config: Config) -> ExitCode {
    engram::telemetry::init(&config.log);
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    let result = match App::build(config).await {
        Ok(app) => app.run_until_stopped(shutdown_signal()).await,
        Err(err) => Err(err),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %engram::causes::error_chain(&err), "engram failed");
            ExitCode::FAILURE
        }
    }
}
