//! Command-line flags, as `redis-server` takes them: an optional config file
//! path first, then `--<setting> <value>` for any setting in the table
//! (`ringdb --port 7000 --shards 2 --requirepass s3cret`). A value may span
//! several words (`--save 3600 1 300 100`) and may be empty (`--logfile ""`).

use super::settings::SETTINGS;
use clap::{Arg, ArgAction, Command};
use std::path::PathBuf;

/// What the command line asked for.
pub struct Cli {
    pub config_file: Option<PathBuf>,
    pub overrides: Vec<(String, String)>,
    /// `--print-config`: print the default configuration file and exit.
    pub print_config: bool,
}

fn command() -> Command {
    let mut cmd = Command::new("ringdb")
        .version(env!("CARGO_PKG_VERSION"))
        .about("A Redis-compatible in-memory data server, thread-per-core on glommio (io_uring)")
        .arg(Arg::new("config").value_name("CONFIG_FILE").help("Path to a ringdb.toml file"))
        .arg(
            Arg::new("print-config")
                .long("print-config")
                .action(ArgAction::SetTrue)
                .help("Print the configuration file with every default and exit"),
        );
    for s in SETTINGS {
        cmd = cmd.arg(
            Arg::new(s.name)
                .long(s.name)
                .value_name("VALUE")
                .num_args(0..)
                .allow_negative_numbers(true)
                .action(ArgAction::Append)
                .help(s.help),
        );
    }
    cmd
}

impl Cli {
    pub fn parse() -> Cli {
        Self::from_args(std::env::args_os())
    }

    pub fn from_args<I, T>(args: I) -> Cli
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = command().get_matches_from(args);
        let mut overrides = Vec::new();
        for s in SETTINGS {
            if let Some(values) = matches.get_many::<String>(s.name) {
                let words: Vec<&str> = values.map(String::as_str).collect();
                overrides.push((s.name.to_string(), words.join(" ")));
            }
        }
        Cli {
            config_file: matches.get_one::<String>("config").map(PathBuf::from),
            overrides,
            print_config: matches.get_flag("print-config"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_style_flags() {
        let cli = Cli::from_args([
            "ringdb",
            "my.toml",
            "--port",
            "7000",
            "--requirepass",
            "s3cret",
            "--logfile",
            "",
        ]);
        assert_eq!(cli.config_file, Some(PathBuf::from("my.toml")));
        assert!(cli.overrides.contains(&("port".into(), "7000".into())));
        assert!(cli.overrides.contains(&("requirepass".into(), "s3cret".into())));
        assert!(cli.overrides.contains(&("logfile".into(), "".into())));
    }
}
