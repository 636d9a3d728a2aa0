//! The command line, read as `redis-server` reads it: an optional
//! configuration file first (`-` for standard input), then options
//! `--<directive> <value ...>` appended to it, with the same directives as
//! the file (`ringdb redis.conf --port 7000 --save ""`). A value may span
//! several words (`--save 3600 1 300 100`) and may be empty.

use super::redis_conf::{self, Directive};
use super::Format;
use std::path::PathBuf;

/// What the command line asked for.
#[derive(Debug, PartialEq)]
pub enum Action {
    Serve,
    /// `--print-config [toml|redis]`: print every setting with its default.
    PrintConfig(Format),
    Version,
    Help,
    /// A request ringdb refuses, with the reason.
    Refuse(String),
}

#[derive(Debug)]
pub struct Cli {
    pub config_file: Option<PathBuf>,
    /// `-`: read (more) configuration from standard input.
    pub config_from_stdin: bool,
    pub options: Vec<Directive>,
    pub action: Action,
}

pub const USAGE: &str = "\
Usage: ringdb [/path/to/redis.conf | /path/to/ringdb.toml] [options] [-]
       ringdb - (read config from stdin)
       ringdb --print-config [toml|redis]
       ringdb -v or --version
       ringdb -h or --help
       ringdb check-aof [--fix] [--yes] <file|dir>

Options are configuration directives of either file format, as redis-server
takes them: ringdb --port 7777 --shards 2 --save \"\" --loglevel verbose.
The file's format is chosen by its name (.toml, .conf) or its content.
";

impl Cli {
    pub fn parse() -> Cli {
        Self::from_args(std::env::args().skip(1).collect())
    }

    /// From the arguments after the program name.
    pub fn from_args(args: Vec<String>) -> Cli {
        let mut cli = Cli {
            config_file: None,
            config_from_stdin: false,
            options: Vec::new(),
            action: Action::Serve,
        };
        match args.first().map(String::as_str) {
            Some("-v" | "--version") => cli.action = Action::Version,
            Some("-h" | "--help") => cli.action = Action::Help,
            Some("--test-memory") => {
                cli.action = Action::Refuse(
                    "ringdb does not test memory (redis-server --test-memory): use memtester or memtest86+"
                        .into(),
                )
            }
            Some("--print-config") => {
                cli.action = match args.get(1).map(String::as_str) {
                    None | Some("toml") => Action::PrintConfig(Format::Toml),
                    Some("redis") => Action::PrintConfig(Format::Redis),
                    Some(other) => Action::Refuse(format!(
                        "--print-config takes 'toml' or 'redis', not '{other}'"
                    )),
                }
            }
            _ => {}
        }
        if cli.action != Action::Serve {
            return cli;
        }
        let mut rest = &args[..];
        if let Some(first) = args.first().filter(|a| !a.starts_with('-')) {
            cli.config_file = Some(PathBuf::from(first));
            rest = &args[1..];
        }
        // `-` as the first or the last argument: read standard input too.
        if rest.first().map(String::as_str) == Some("-") {
            cli.config_from_stdin = true;
            rest = &rest[1..];
        } else if rest.last().map(String::as_str) == Some("-") {
            cli.config_from_stdin = true;
            rest = &rest[..rest.len() - 1];
        }
        cli.options = redis_conf::command_line(rest);
        if cli.options.iter().any(|d| d.name == "sentinel") {
            cli.action = Action::Refuse("ringdb cannot run as redis-sentinel".into());
        }
        cli
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        Cli::from_args(args.iter().map(|a| a.to_string()).collect())
    }

    #[test]
    fn redis_style_arguments() {
        let c = cli(&["my.conf", "--port", "7000", "--requirepass", "s3cret", "--logfile", ""]);
        assert_eq!(c.config_file, Some(PathBuf::from("my.conf")));
        let got: Vec<(&str, Vec<String>)> =
            c.options.iter().map(|d| (d.name.as_str(), d.args.clone())).collect();
        assert_eq!(
            got,
            vec![
                ("port", vec!["7000".to_string()]),
                ("requirepass", vec!["s3cret".to_string()]),
                ("logfile", vec![String::new()])
            ]
        );
        assert_eq!(c.action, Action::Serve);
        let c = cli(&["--port", "7000", "-"]);
        assert!(c.config_from_stdin && c.config_file.is_none());
        assert_eq!(cli(&["--version"]).action, Action::Version);
        assert_eq!(cli(&["--print-config", "redis"]).action, Action::PrintConfig(Format::Redis));
        assert!(matches!(cli(&["--test-memory", "100"]).action, Action::Refuse(_)));
        // A stray word is a directive, as redis-server reads it (an
        // unknown one fails when the configuration is loaded).
        let c = cli(&["a.conf", "stray", "word"]);
        assert_eq!((c.options[0].name.as_str(), c.options[0].args.len()), ("stray", 1));
        assert!(matches!(cli(&["--sentinel"]).action, Action::Refuse(_)));
    }
}
