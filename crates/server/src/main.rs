//! `ringdb`: starts the server. `ringdb [config.toml] [--setting value ...]`.

use mimalloc::MiMalloc;
use ringdb::config::{cli::Cli, Config};
use ringdb::memory::CountingAlloc;

#[global_allocator]
static GLOBAL: CountingAlloc<MiMalloc> = CountingAlloc::new(MiMalloc);

fn main() {
    let cli = Cli::parse();
    let config = match Config::load(cli.config_file.as_deref(), &cli.overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ringdb: {e}");
            std::process::exit(1);
        }
    };
    if cli.print_config {
        print!("{}", config.to_toml());
        return;
    }
    init_logging(&config);
    if let Err(e) = ringdb::node::run(config) {
        tracing::error!("{e}");
        eprintln!("ringdb: {e}");
        std::process::exit(1);
    }
}

fn init_logging(config: &Config) {
    let level = match config.loglevel() {
        "debug" => "debug",
        "verbose" => "info",
        "notice" => "info",
        "warning" => "warn",
        _ => "off",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("RINGDB_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    let logfile = config.logfile();
    if logfile.is_empty() {
        builder.init();
    } else {
        match std::fs::OpenOptions::new().create(true).append(true).open(logfile) {
            Ok(file) => builder.with_ansi(false).with_writer(std::sync::Mutex::new(file)).init(),
            Err(e) => {
                eprintln!("ringdb: cannot open logfile {logfile}: {e}");
                std::process::exit(1);
            }
        }
    }
}
