//! `ringdb`: starts the server, as `redis-server` starts:
//! `ringdb [redis.conf | ringdb.toml] [--directive value ...]`;
//! `ringdb check-aof [--fix] [--yes] <file|dir>` checks append-only logs
//! (see `ringdb::check_aof`).

use ringdb::config::cli::{Action, Cli, USAGE};
use ringdb::config::redis_conf::FatalError;
use ringdb::config::{Config, ConfigError, Format};
use ringdb::memory::{CountingAlloc, Mimalloc};

#[global_allocator]
static GLOBAL: CountingAlloc<Mimalloc> = CountingAlloc::new(Mimalloc);

/// Turns transparent huge pages off before the heap's first page is
/// touched (a constructor runs before `main` and its allocations): a page
/// faulted in as a huge one stays so. `disable-thp no`, read later, turns
/// them back on.
#[used]
#[link_section = ".init_array"]
static THP_OFF_FIRST: extern "C" fn() = {
    extern "C" fn thp_off() {
        let _ = ringdb::memory::set_thp_disabled(true);
    }
    thp_off
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("check-aof") {
        std::process::exit(check_aof(&args[2..]));
    }
    let cli = Cli::parse();
    // Before any thread, and after the last read of the arguments.
    ringdb::proctitle::init();
    match &cli.action {
        Action::Serve | Action::PrintConfig(_) => {}
        Action::Version => {
            println!(
                "ringdb v={} redis_version={} malloc=mimalloc bits={}",
                env!("CARGO_PKG_VERSION"),
                ringdb::cmd::connection::REDIS_VERSION,
                usize::BITS
            );
            return;
        }
        Action::Help => {
            print!("{USAGE}");
            return;
        }
        Action::Refuse(why) => fail(why),
    }
    let stdin = cli.config_from_stdin.then(|| {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .unwrap_or_else(|e| fail(&format!("cannot read the configuration from stdin: {e}")));
        text
    });
    let config = Config::load(cli.config_file.as_deref(), stdin.as_deref(), &cli.options)
        .unwrap_or_else(|e| match e {
            // Redis's own text, as redis-server prints it.
            ConfigError::Fatal(f) => {
                eprintln!("{f}");
                std::process::exit(1)
            }
            other => fail(&other.to_string()),
        });
    match cli.action {
        Action::PrintConfig(Format::Toml) => return print!("{}", config.to_toml()),
        Action::PrintConfig(Format::Redis) => return print!("{}", config.to_redis_conf()),
        _ => {}
    }
    if let Err(e) = ringdb_engine::command::table::init(&config.renames) {
        eprintln!("{}", FatalError { at: None, message: e });
        std::process::exit(1);
    }
    // Before any thread exists: fork() keeps only the calling thread.
    if config.daemonize() {
        ringdb::process::daemonize().unwrap_or_else(|e| fail(&e));
    }
    if let Err(e) = ringdb::logging::init(config.loglevel(), config.logfile()) {
        fail(&e);
    }
    tracing::info!("oO0OoO0OoO0Oo ringdb is starting oO0OoO0OoO0Oo");
    tracing::info!(
        "ringdb version={}, redis_version={}, bits={}, pid={}, just started",
        env!("CARGO_PKG_VERSION"),
        ringdb::cmd::connection::REDIS_VERSION,
        usize::BITS,
        std::process::id()
    );
    match &config.file {
        Some(_) => tracing::info!("Configuration loaded"),
        None => tracing::warn!(
            "Warning: no config file specified, using the default config. In order to specify a config file use ringdb /path/to/redis.conf"
        ),
    }
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    if !config.disable_thp() {
        let _ = ringdb::memory::set_thp_disabled(false);
    }
    let (mode, value) = config.oom_score();
    if let Err(e) = ringdb::process::apply_oom_score(mode, value) {
        tracing::warn!("{e}");
    }
    let pidfile = config.pidfile();
    if let Some(path) = &pidfile {
        ringdb::process::write_pidfile(path);
    }
    let result = ringdb::node::run(config);
    if let Some(path) = &pidfile {
        let _ = std::fs::remove_file(path);
    }
    if let Err(e) = result {
        tracing::error!("{e}");
        fail(&e.to_string());
    }
}

fn fail(why: &str) -> ! {
    eprintln!("ringdb: {why}");
    std::process::exit(1)
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
