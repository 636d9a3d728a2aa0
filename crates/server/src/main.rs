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
