//! The command line: `loadgen <scenario> [options]`, one subcommand per
//! scenario, with the options every scenario shares and its own.

use crate::conn::Target;
use crate::run::Common;
use crate::{blpop, evalsha, multi, publish, watch, xreadgroup};
use clap::{value_parser, Arg, ArgAction, ArgMatches, Command};
use std::time::Duration;

pub enum Scenario {
    Multi(multi::Options),
    Evalsha(evalsha::Options),
    Publish(publish::Options),
    Watch(watch::Options),
    Blpop(blpop::Options),
    XReadGroup(xreadgroup::Options),
}

pub struct Plan {
    pub common: Common,
    pub scenario: Scenario,
    /// Print the CSV header line first.
    pub header: bool,
}

fn number(name: &'static str, default: &'static str, help: &'static str) -> Arg {
    Arg::new(name).long(name).value_parser(value_parser!(u64)).default_value(default).help(help)
}

fn seconds(name: &'static str, default: &'static str, help: &'static str) -> Arg {
    Arg::new(name).long(name).value_parser(value_parser!(f64)).default_value(default).help(help)
}

/// The options of every scenario; `clients` is the number of connections
/// that send (or block), with a default that suits the scenario.
fn scenario(name: &'static str, about: &'static str, clients: &'static str) -> Command {
    Command::new(name).about(about).args([
        Arg::new("host").long("host").default_value("127.0.0.1").help("server address"),
        Arg::new("port")
            .long("port")
            .value_parser(value_parser!(u16))
            .default_value("6379")
            .help("server port"),
        seconds("seconds", "5", "length of the measured window"),
        seconds("warmup", "1", "time before the window: traffic, not counted"),
        number("threads", "1", "event-loop threads for the receiving connections"),
        number("clients", clients, "client connections"),
        number("pipeline", "1", "requests a client sends before it waits for the replies"),
        number("keyspace", "100000", "random keys are drawn from this many"),
        Arg::new("server-pid")
            .long("server-pid")
            .value_parser(value_parser!(u32))
            .help("the server's PID, to report its CPU time in the window"),
        Arg::new("header")
            .long("header")
            .action(ArgAction::SetTrue)
            .help("print the CSV header line before the result"),
    ])
}

fn window(default: &'static str) -> Arg {
    number("window", default, "sends awaiting delivery, at most (1 = ping-pong)")
}

pub fn command() -> Command {
    Command::new("loadgen")
        .about(
            "RESP load generator for ringdb and redis-server: prints one CSV line per run \
             (throughput, p50/p99 latency, CPU), for benches/load.sh",
        )
        .subcommand_required(true)
        .subcommand(
            scenario("multi", "MULTI + N INCRs + EXEC per transaction", "50").args([
                number("commands", "10", "INCRs per transaction"),
                Arg::new("keys")
                    .long("keys")
                    .value_parser(["tagged", "random"])
                    .default_value("tagged")
                    .help("tagged: one hash tag per transaction; random: every key drawn apart"),
            ]),
        )
        .subcommand(scenario("evalsha", "EVALSHA of a flash-sale purchase (or an INCR)", "50").args([
            Arg::new("script")
                .long("script")
                .value_parser(["flash-sale", "seckill", "incr"])
                .default_value("flash-sale")
                .help("flash-sale: check stock and buyer, decrement, record (keys declared); seckill: the tutorial's purchase script verbatim (no key declared, a stream of orders); incr: INCR a random key"),
            number("items", "1000", "flash-sale and seckill: items (vouchers) on sale, drawn at random per call"),
            number("stock", "1000000000", "flash-sale and seckill: units of each item at the start"),
        ]))
        .subcommand(
            scenario("publish", "S subscribers on one channel, P publishers", "1").args([
                number("subscribers", "1", "subscriber connections"),
                number("publishers", "4", "publisher connections (threads)"),
                number("payload", "16", "message size in bytes (at least the timestamp)"),
                window("64"),
            ]),
        )
        .subcommand(
            scenario("watch-latency", "W watchers of GET.WATCH on one key, one writer", "1")
                .args([number("watchers", "1", "watcher connections"), window("1")]),
        )
        .subcommand(
            scenario("blpop-latency", "clients blocked in BLPOP, one LPUSH pusher", "1")
                .arg(window("1")),
        )
        .subcommand(
            scenario("xreadgroup", "XADD producers, a consumer group reading and acking", "1").args([
                number("producers", "2", "producer connections (threads)"),
                number("consumers", "4", "consumers in the group"),
                number("count", "10", "XREADGROUP COUNT"),
                window("1000"),
            ]),
        )
}

fn int(matches: &ArgMatches, name: &str) -> u64 {
    matches.get_one::<u64>(name).copied().unwrap_or_default()
}

fn duration(matches: &ArgMatches, name: &str) -> Result<Duration, String> {
    let value = matches.get_one::<f64>(name).copied().unwrap_or_default();
    Duration::try_from_secs_f64(value).map_err(|_| format!("--{name}: not a duration: {value}"))
}

fn common(matches: &ArgMatches) -> Result<Common, String> {
    let host = matches.get_one::<String>("host").cloned().unwrap_or_default();
    let port = matches.get_one::<u16>("port").copied().unwrap_or(6379);
    let seconds = duration(matches, "seconds")?;
    if seconds.is_zero() {
        return Err("--seconds must be above 0".into());
    }
    Ok(Common {
        target: Target { host, port },
        warmup: duration(matches, "warmup")?,
        seconds,
        threads: int(matches, "threads").max(1) as usize,
        server_pid: matches.get_one::<u32>("server-pid").copied(),
        keyspace: int(matches, "keyspace").max(1),
    })
}

/// Parses the arguments (without the program name's). `cargo bench` adds
/// `--bench` to a bench target's arguments; it is dropped here.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Plan, clap::Error> {
    let args =
        std::iter::once("loadgen".to_string()).chain(args.into_iter().filter(|a| a != "--bench"));
    let matches = command().try_get_matches_from(args)?;
    let Some((name, sub)) = matches.subcommand() else {
        return Err(command().error(clap::error::ErrorKind::MissingSubcommand, "no scenario"));
    };
    let common =
        common(sub).map_err(|e| command().error(clap::error::ErrorKind::InvalidValue, e))?;
    let clients = int(sub, "clients") as usize;
    let pipeline = int(sub, "pipeline").max(1) as usize;
    let scenario = match name {
        "multi" => Scenario::Multi(multi::Options {
            clients,
            pipeline,
            commands: int(sub, "commands").max(1) as usize,
            keys: match sub.get_one::<String>("keys").map(String::as_str) {
                Some("random") => multi::Keys::Random,
                _ => multi::Keys::Tagged,
            },
        }),
        "evalsha" => Scenario::Evalsha(evalsha::Options {
            clients,
            pipeline,
            script: match sub.get_one::<String>("script").map(String::as_str) {
                Some("incr") => evalsha::Script::Incr,
                Some("seckill") => evalsha::Script::Seckill,
                _ => evalsha::Script::FlashSale,
            },
            items: int(sub, "items"),
            stock: int(sub, "stock"),
        }),
        "publish" => Scenario::Publish(publish::Options {
            subscribers: int(sub, "subscribers") as usize,
            publishers: int(sub, "publishers") as usize,
            payload: int(sub, "payload") as usize,
            window: int(sub, "window"),
        }),
        "watch-latency" => Scenario::Watch(watch::Options {
            watchers: int(sub, "watchers") as usize,
            window: int(sub, "window"),
        }),
        "blpop-latency" => Scenario::Blpop(blpop::Options { clients, window: int(sub, "window") }),
        _ => Scenario::XReadGroup(xreadgroup::Options {
            producers: int(sub, "producers") as usize,
            consumers: int(sub, "consumers") as usize,
            count: int(sub, "count") as usize,
            pipeline,
            window: int(sub, "window"),
        }),
    };
    Ok(Plan { common, scenario, header: sub.get_flag("header") })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(line: &str) -> Result<Plan, clap::Error> {
        parse(line.split_whitespace().map(String::from))
    }

    #[test]
    fn parses_a_scenario_and_drops_cargo_bench_flag() {
        let plan =
            plan("multi --keys random --pipeline 16 --port 7990 --seconds 0.5 --bench").unwrap();
        assert_eq!(plan.common.target.port, 7990);
        assert_eq!(plan.common.seconds, Duration::from_millis(500));
        match plan.scenario {
            Scenario::Multi(o) => {
                assert_eq!(
                    (o.keys, o.pipeline, o.commands, o.clients),
                    (multi::Keys::Random, 16, 10, 50)
                )
            }
            _ => panic!("not multi"),
        }
    }

    #[test]
    fn defaults_suit_each_scenario() {
        match plan("publish --subscribers 1000").unwrap().scenario {
            Scenario::Publish(o) => {
                assert_eq!((o.subscribers, o.publishers, o.window), (1000, 4, 64))
            }
            _ => panic!("not publish"),
        }
        match plan("evalsha").unwrap().scenario {
            Scenario::Evalsha(o) => {
                assert_eq!((o.script, o.items, o.clients), (evalsha::Script::FlashSale, 1000, 50))
            }
            _ => panic!("not evalsha"),
        }
        match plan("evalsha --script incr").unwrap().scenario {
            Scenario::Evalsha(o) => assert_eq!(o.script, evalsha::Script::Incr),
            _ => panic!("not evalsha"),
        }
        match plan("evalsha --script seckill --items 3").unwrap().scenario {
            Scenario::Evalsha(o) => assert_eq!((o.script, o.items), (evalsha::Script::Seckill, 3)),
            _ => panic!("not evalsha"),
        }
        match plan("watch-latency").unwrap().scenario {
            Scenario::Watch(o) => assert_eq!((o.watchers, o.window), (1, 1)),
            _ => panic!("not watch"),
        }
    }

    #[test]
    fn refuses_bad_input() {
        assert!(plan("nosuch").is_err());
        assert!(plan("multi --keys odd").is_err());
        assert!(plan("multi --seconds 0").is_err());
        assert!(plan("evalsha --seconds -1").is_err());
        assert!(plan("").is_err());
    }
}
