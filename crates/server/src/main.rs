//! `ringdb`: starts the server. `ringdb [config.toml] [--setting value ...]`;
//! `ringdb check-aof [--fix] [--yes] <file|dir>` checks append-only logs
//! (see `ringdb::check_aof`).

use mimalloc::MiMalloc;
use ringdb::config::{cli::Cli, Config};
use ringdb::memory::CountingAlloc;

#[global_allocator]
static GLOBAL: CountingAlloc<MiMalloc> = CountingAlloc::new(MiMalloc);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("check-aof") {
        std::process::exit(check_aof(&args[2..]));
    }
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
    if let Err(e) = ringdb::logging::init(config.loglevel(), config.logfile()) {
        eprintln!("ringdb: {e}");
        std::process::exit(1);
    }
    if let Err(e) = ringdb::node::run(config) {
        tracing::error!("{e}");
        eprintln!("ringdb: {e}");
        std::process::exit(1);
    }
}

fn check_aof(args: &[String]) -> i32 {
    use ringdb::check_aof::{run, Options, USAGE};
    match Options::parse(args) {
        Ok(options) => run(&options, &mut std::io::stdin().lock(), &mut std::io::stdout()),
        Err(e) => {
            eprintln!("ringdb check-aof: {e}\n{USAGE}");
            1
        }
    }
}
