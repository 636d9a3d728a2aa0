//! LATENCY DOCTOR / GRAPH / HISTOGRAM / HISTORY / LATEST / RESET / HELP.
//!
//! Every shard records the latency of the commands it runs and its own
//! monitor events (`ringdb_engine::latency`); these commands read every
//! core's record behind the jobs already queued to it and merge them, so a
//! command a client ran before asking is always in the answer.

use super::help;
use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::{table, CmdError, CmdResult, Exec, Registered};
use ringdb_engine::latency::{self, report, CommandLatency, Events};
use ringdb_engine::shard::now_ms;
use std::collections::BTreeSet;

/// Every core's histograms, merged.
pub async fn merged_histograms(conn: &Connection) -> Result<CommandLatency, CmdError> {
    let parts = conn
        .core
        .invoke_on_all_queued(|core| core.shard.borrow_mut().state.latency.commands().clone())
        .await?;
    let mut merged = CommandLatency::default();
    parts.iter().for_each(|part| merged.add(part));
    Ok(merged)
}

async fn merged_events(conn: &Connection) -> Result<Events, CmdError> {
    let parts = conn
        .core
        .invoke_on_all_queued(|core| core.shard.borrow().state.latency.events.clone())
        .await?;
    let mut merged = Events::default();
    parts.iter().for_each(|part| merged.merge(part));
    Ok(merged)
}

/// LATENCY HISTOGRAM [command ...]: per command with calls, its calls and
/// their cumulative distribution (all commands with none named; a
/// container names its subcommands; unknown names are skipped).
pub async fn histogram(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let merged = merged_histograms(conn).await?;
    let rows: Vec<&Registered> = if args.len() == 2 {
        table().all_rows()
    } else {
        args[2..]
            .iter()
            .filter_map(|name| table().get_full(name))
            .flat_map(|row| std::iter::once(row).chain(row.subcommands()))
            .collect()
    };
    let with_calls: Vec<(&Registered, _)> = rows
        .into_iter()
        .filter(|row| !matches!(row.spec.exec, Exec::Container))
        .filter_map(|row| Some((row, merged.get(row.id)?)))
        .collect();
    let mut out = conn.reply();
    out.map(with_calls.len());
    for (row, h) in with_calls {
        out.bulk(row.full_name.as_bytes());
        out.map(2);
        out.bulk(b"calls");
        out.int(h.len() as i64);
        out.bulk(b"histogram_usec");
        let cdf = latency::cdf_usec(h);
        out.map(cdf.len());
        for (usec, calls) in cdf {
            out.int(usec as i64);
            out.int(calls as i64);
        }
    }
    Ok(())
}

/// LATENCY LATEST: per event, its latest sample's time and latency, and
/// its worst ever.
pub async fn latest(conn: &mut Connection) -> CmdResult {
    let events = merged_events(conn).await?;
    let mut out = conn.reply();
    out.array(events.by_name.len());
    for (name, series) in &events.by_name {
        let (secs, ms) = series.samples.back().copied().unwrap_or_default();
        out.array(4);
        out.bulk(name.as_bytes());
        out.int(secs as i64);
        out.int(ms as i64);
        out.int(series.max as i64);
    }
    Ok(())
}

/// LATENCY HISTORY event: its samples, oldest first (none for an event
/// never seen).
pub async fn history(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let events = merged_events(conn).await?;
    let series = events.by_name.iter().find(|(name, _)| name.as_bytes() == &args[2][..]);
    let samples: Vec<(u64, u64)> =
        series.map(|(_, s)| s.samples.iter().copied().collect()).unwrap_or_default();
    let mut out = conn.reply();
    out.array(samples.len());
    for (secs, ms) in samples {
        out.array(2);
        out.int(secs as i64);
        out.int(ms as i64);
    }
    Ok(())
}

/// LATENCY GRAPH event: Redis's ASCII graph of its samples.
pub async fn graph(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let events = merged_events(conn).await?;
    let Some((name, series)) =
        events.by_name.iter().find(|(name, _)| name.as_bytes() == &args[2][..])
    else {
        return Err(CmdError::owned(format!(
            "ERR No samples available for event '{}'",
            String::from_utf8_lossy(&args[2])
        )));
    };
    let text = report::graph(name, series, now_ms() / 1000);
    conn.reply().verbatim("txt", text.as_bytes());
    Ok(())
}

/// LATENCY DOCTOR: Redis's report and advice.
pub async fn doctor(conn: &mut Connection) -> CmdResult {
    let events = merged_events(conn).await?;
    let ctx = {
        let config = conn.core.config.borrow();
        report::DoctorContext {
            threshold_ms: config.latency().monitor_threshold_ms,
            slowlog_slower_than_us: config.slowlog().slower_than,
            hz: config.hz(),
            now_secs: now_ms() / 1000,
        }
    };
    let text = report::doctor(&events, &ctx);
    conn.reply().verbatim("txt", text.as_bytes());
    Ok(())
}

/// LATENCY RESET [event ...]: forgets the events (all with none named) on
/// every shard; answers how many there were.
pub async fn reset(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let names: Vec<Bytes> = args[2..].to_vec();
    let gone = conn
        .core
        .invoke_on_all_queued(move |core| {
            let names: Vec<&[u8]> = names.iter().map(|n| &n[..]).collect();
            core.shard.borrow_mut().state.latency.events.reset(&names)
        })
        .await?;
    let distinct: BTreeSet<&str> = gone.iter().flatten().copied().collect();
    conn.reply().int(distinct.len() as i64);
    Ok(())
}

pub fn latency_help(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    help(
        conn,
        args,
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}
