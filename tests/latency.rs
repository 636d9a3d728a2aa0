//! LATENCY and INFO latencystats against a real 2-shard server: commands
//! run on either shard and on the connection's core are in the per-command
//! histograms (a blocked command once), INFO shows the configured
//! percentiles, and the latency monitor records slow commands of every
//! shard (LATEST, HISTORY, GRAPH, DOCTOR, RESET) with Redis's replies.

mod common;
use common::{info_field, keys_on_two_shards, q, Server};
use redis::Value;
use std::collections::HashMap;

/// LATENCY HISTOGRAM's reply as command -> (calls, [(usec, cumulative)]).
fn histogram(c: &mut redis::Connection, names: &[&str]) -> HashMap<String, (i64, Vec<(i64, i64)>)> {
    let mut args = vec!["LATENCY", "HISTOGRAM"];
    args.extend_from_slice(names);
    let Value::Array(flat) = q::<Value>(c, &args).unwrap() else { panic!("not an array") };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a string: {other:?}"),
    };
    let int = |v: &Value| match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    };
    flat.chunks(2)
        .map(|pair| {
            let Value::Array(body) = &pair[1] else { panic!("{pair:?}") };
            assert_eq!(
                (text(&body[0]).as_str(), text(&body[2]).as_str()),
                ("calls", "histogram_usec")
            );
            let Value::Array(cdf) = &body[3] else { panic!("{body:?}") };
            let cdf = cdf.chunks(2).map(|kv| (int(&kv[0]), int(&kv[1]))).collect();
            (text(&pair[0]), (int(&body[1]), cdf))
        })
        .collect()
}

#[test]
fn histograms_count_every_call_once() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
    let all = histogram(&mut c, &[]);
    assert_eq!(all.keys().collect::<Vec<_>>(), ["config|resetstat"]);
    for key in [&a, &b] {
        let _: () = q(&mut c, &["SET", key, "v"]).unwrap();
    }
    let _: Option<String> = q(&mut c, &["GET", &a]).unwrap();
    let _: i64 = q(&mut c, &["CLIENT", "ID"]).unwrap();
    let h = histogram(&mut c, &["set", "get", "nosuch", "client"]);
    assert_eq!(h.len(), 3, "{h:?}");
    let (calls, cdf) = &h["set"];
    assert_eq!(*calls, 2);
    // Cumulative counts at growing powers of two, ending at every call.
    assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1), "{cdf:?}");
    assert_eq!(cdf.last().unwrap().1, 2);
    assert_eq!(h["get"].0, 1);
    assert_eq!(h["client|id"].0, 1);
    assert_eq!(histogram(&mut c, &["client|id"]).len(), 1);

    // A blocking command is one call, whether it waited or not.
    let (list_a, list_b) = (format!("{{{a}}}:list"), format!("{{{b}}}:list"));
    let waited: Option<(String, String)> = q(&mut c, &["BLPOP", &list_a, "0.05"]).unwrap();
    assert_eq!(waited, None);
    let _: i64 = q(&mut c, &["RPUSH", &list_b, "x"]).unwrap();
    let _: Option<(String, String)> = q(&mut c, &["BLPOP", &list_b, "1"]).unwrap();
    let mut waiter = server.raw();
    waiter.cmd(&[b"BLPOP", list_a.as_bytes(), b"5"]);
    while info_field(&mut c, "clients", "blocked_clients") != "1" {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _: i64 = q(&mut c, &["RPUSH", &list_a, "y"]).unwrap();
    assert!(String::from_utf8_lossy(&waiter.read_frame()).ends_with("$1\r\ny\r\n"));
    assert_eq!(histogram(&mut c, &["blpop"])["blpop"].0, 3);

    // INFO latencystats: the configured percentiles of each command.
    let line = info_field(&mut c, "latencystats", "latency_percentiles_usec_set");
    let fields: Vec<&str> = line.split(',').map(|f| f.split('=').next().unwrap()).collect();
    assert_eq!(fields, ["p50", "p99", "p99.9"]);
    assert!(line.split(',').all(|f| f.split('=').nth(1).unwrap().contains('.')), "{line}");
    let _: () =
        q(&mut c, &["CONFIG", "SET", "latency-tracking-info-percentiles", "0 50.50 100"]).unwrap();
    let got: Vec<String> =
        q(&mut c, &["CONFIG", "GET", "latency-tracking-info-percentiles"]).unwrap();
    assert_eq!(got[1], "0 50.5 100");
    let line = info_field(&mut c, "latencystats", "latency_percentiles_usec_get");
    assert!(
        line.starts_with("p0=") && line.contains(",p50.5=") && line.contains(",p100="),
        "{line}"
    );
    for bad in ["101", "-1", "x"] {
        let err = q::<()>(&mut c, &["CONFIG", "SET", "latency-tracking-info-percentiles", bad])
            .unwrap_err()
            .to_string();
        assert!(err.contains("latency-tracking-info-percentiles"), "{bad}: {err}");
    }
    // Off: nothing more is recorded, and INFO shows the section empty.
    let _: () = q(&mut c, &["CONFIG", "SET", "latency-tracking", "no"]).unwrap();
    let _: () = q(&mut c, &["SET", &a, "w"]).unwrap();
    assert_eq!(histogram(&mut c, &["set"])["set"].0, 2);
    let info: String = q(&mut c, &["INFO", "latencystats"]).unwrap();
    assert_eq!(info.trim_end(), "# Latencystats");
    // CONFIG RESETSTAT forgets the histograms.
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
    assert!(histogram(&mut c, &["set", "get"]).is_empty());
}

#[test]
fn the_monitor_records_slow_commands_of_every_shard() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let doctor: String = q(&mut c, &["LATENCY", "DOCTOR"]).unwrap();
    assert!(doctor.starts_with("I'm sorry, Dave, I can't do that."), "{doctor}");
    assert_eq!(q::<Value>(&mut c, &["LATENCY", "LATEST"]).unwrap(), Value::Array(vec![]));
    let _: () = q(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "40"]).unwrap();
    // A script spinning 60 ms on each shard, and a server command.
    let spin = "local t = redis.call('time') local start = t[1] * 1000000 + t[2] \
                repeat t = redis.call('time') until t[1] * 1000000 + t[2] - start > 60000";
    for key in [&a, &b] {
        let _: () = q(&mut c, &["EVAL", spin, "1", key]).unwrap();
    }
    let _: () = q(&mut c, &["DEBUG", "SLEEP", "0.05"]).unwrap();
    let _: () = q(&mut c, &["SET", &a, "fast"]).unwrap();

    let latest: Vec<(String, i64, i64, i64)> = q(&mut c, &["LATENCY", "LATEST"]).unwrap();
    assert_eq!(latest.len(), 1, "{latest:?}");
    let (event, secs, last, max) = &latest[0];
    assert_eq!(event, "command");
    assert!(*secs > 1_700_000_000 && *last >= 40 && *max >= 60, "{latest:?}");
    let history: Vec<(i64, i64)> = q(&mut c, &["LATENCY", "HISTORY", "command"]).unwrap();
    assert!(!history.is_empty() && history.iter().all(|(_, ms)| *ms >= 40), "{history:?}");
    assert!(history.windows(2).all(|w| w[0].0 < w[1].0), "one sample per second: {history:?}");
    assert_eq!(
        q::<Value>(&mut c, &["LATENCY", "HISTORY", "nosuch"]).unwrap(),
        Value::Array(vec![])
    );

    let graph: String = q(&mut c, &["LATENCY", "GRAPH", "command"]).unwrap();
    assert!(graph.starts_with("command - high "), "{graph}");
    assert!(graph.lines().nth(1).unwrap().chars().all(|ch| ch == '-'), "{graph}");
    let err = q::<String>(&mut c, &["LATENCY", "GRAPH", "nosuch"]).unwrap_err().to_string();
    assert!(err.contains("No samples available for event 'nosuch'"), "{err}");
    let doctor: String = q(&mut c, &["LATENCY", "DOCTOR"]).unwrap();
    assert!(doctor.contains("\n1. command: "), "{doctor}");
    assert!(doctor.contains("I have a few advices for you"), "{doctor}");

    assert_eq!(q::<i64>(&mut c, &["LATENCY", "RESET", "nosuch"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["LATENCY", "RESET"]).unwrap(), 1);
    assert_eq!(q::<Value>(&mut c, &["LATENCY", "LATEST"]).unwrap(), Value::Array(vec![]));
    let err = q::<()>(&mut c, &["LATENCY", "HELP", "xxx"]).unwrap_err().to_string();
    assert!(err.contains("wrong number of arguments for 'latency|help' command"), "{err}");
    let help: Vec<String> = q(&mut c, &["LATENCY", "HELP"]).unwrap();
    assert_eq!(help.len(), 17);
}

/// RESP3 clients get maps from LATENCY HISTOGRAM.
#[test]
fn histogram_is_a_map_in_resp3() {
    let server = Server::start(2);
    let mut raw = server.raw();
    assert!(raw.call(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(raw.call(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
    assert_eq!(raw.call(&["SET", "k", "v"]), "+OK\r\n");
    let reply = raw.call(&["LATENCY", "HISTOGRAM", "set"]);
    assert!(
        reply.starts_with(
            "%1\r\n$3\r\nset\r\n%2\r\n$5\r\ncalls\r\n:1\r\n$14\r\nhistogram_usec\r\n%1\r\n:"
        ),
        "{reply}"
    );
}
