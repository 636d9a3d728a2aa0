//! `ringdb check-aof [--fix] [--yes] <file|dir>`: checks append-only logs
//! offline, as `redis-check-aof` does for Redis's.
//!
//! ringdb keeps one log per shard, `<appendfilename>.<i>-of-<n>` in
//! `<dir>/<appenddirname>`, with no manifest: the names carry the shard and
//! the shard count. Given a directory (the log directory, or the data
//! directory holding it), every shard's log is checked, then the logs
//! against each other: all must come from one shard count, and a
//! cross-shard transaction whose part is missing from some log is reported
//! (it is not an error: start-up leaves it out, as it was never complete).
//! Given a file, that log alone is checked.
//!
//! Each log is read as start-up reads it (RDB preamble with its checksum,
//! then RESP records, RESTORE payloads with their checksums, transaction
//! markers); the first problem is reported with the file and byte offset.
//! `--fix` truncates a log to its last whole record outside an unfinished
//! transaction, after asking `Continue? [y/N]:` on standard input as
//! `redis-check-aof --fix` does (`--yes` answers for scripts). As Redis's
//! tool, a fix of corruption in the middle of a log drops everything after
//! it; the message says how many bytes. A bad RDB preamble is not fixable.

use ringdb_engine::persist::aof::{self, CheckReport, Problem};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct Options {
    pub fix: bool,
    /// Answer yes to the truncation question.
    pub yes: bool,
    pub path: PathBuf,
}

pub const USAGE: &str = "Usage: ringdb check-aof [--fix] [--yes] <file.aof.<i>-of-<n> | dir>";

impl Options {
    /// Parses the arguments after `check-aof`.
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let (mut fix, mut yes, mut path) = (false, false, None);
        for arg in args {
            match arg.as_str() {
                "--fix" => fix = true,
                "--yes" | "-y" => yes = true,
                flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
                file if path.is_none() => path = Some(PathBuf::from(file)),
                _ => return Err("more than one file given".into()),
            }
        }
        let path = path.ok_or("no file or directory given")?;
        Ok(Options { fix, yes, path })
    }
}

/// A log file's shard and shard count, from its name (`….<i>-of-<n>`).
pub fn shard_of_name(name: &str) -> Option<(usize, usize)> {
    let (_, tail) = name.rsplit_once('.')?;
    let (i, n) = tail.split_once("-of-")?;
    let (i, n) = (i.parse().ok()?, n.parse().ok()?);
    (i < n).then_some((i, n))
}

/// The logs to check: the file itself, or every shard log in the
/// directory (or in its `appendonlydir`), in shard order.
pub fn logs_in(path: &Path) -> Result<Vec<PathBuf>, String> {
    if !path.is_dir() {
        return match std::fs::metadata(path) {
            Ok(_) => Ok(vec![path.to_path_buf()]),
            Err(e) => Err(format!("Cannot open file {}: {e}, aborting...", path.display())),
        };
    }
    let mut logs = shard_logs(path)?;
    if logs.is_empty() && path.join("appendonlydir").is_dir() {
        logs = shard_logs(&path.join("appendonlydir"))?;
    }
    if logs.is_empty() {
        return Err(format!(
            "No append-only logs (<appendfilename>.<i>-of-<n>) in {}",
            path.display()
        ));
    }
    Ok(logs)
}

fn shard_logs(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("Cannot read {}: {e}", dir.display()))?;
    let mut logs: Vec<(usize, usize, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some((i, n)) = shard_of_name(&name) {
            logs.push((n, i, entry.path()));
        }
    }
    logs.sort();
    if let (Some(first), Some(last)) = (logs.first(), logs.last()) {
        if first.0 != last.0 {
            return Err(format!(
                "{} holds logs of {} and of {} shards: keep one set (the server refuses to start with both)",
                dir.display(),
                first.0,
                last.0
            ));
        }
    }
    Ok(logs.into_iter().map(|(_, _, path)| path).collect())
}

/// The lines describing one log's check.
pub fn describe(path: &Path, size: usize, report: &CheckReport) -> Vec<String> {
    let file = path.display();
    let mut lines = Vec::new();
    if let Some(end) = report.preamble_end {
        lines.push(format!(
            "RDB preamble of {file} is OK ({end} bytes), proceeding with the log..."
        ));
    }
    let lost = size - report.valid_len;
    match &report.problem {
        None => {}
        Some(Problem::Corrupt(e)) if report.preamble_end.is_none() && is_rdb(path) => {
            lines.push(format!("RDB preamble of {file} is not sane: {e}"));
        }
        Some(Problem::Corrupt(e)) => lines.push(format!(
            "{file}: bad record at byte {} (0x{:x}): {}",
            e.offset, e.offset, e.reason
        )),
        Some(Problem::Torn { offset }) => lines.push(format!(
            "{file}: the log ends inside the record at byte {offset} (a torn write)"
        )),
        Some(Problem::Unfinished { id, offset }) => lines.push(format!(
            "{file}: the log ends inside transaction {id}, begun at byte {offset}: its records are never replayed"
        )),
    }
    if let (Some(Problem::Torn { .. }), Some((id, offset))) = (&report.problem, report.unfinished) {
        lines.push(format!(
            "{file}: the torn record is inside transaction {id}, begun at byte {offset}"
        ));
    }
    lines.push(format!(
        "AOF analyzed: filename={file}, size={size}, ok_up_to={}, records={}, diff={lost}",
        report.valid_len, report.records
    ));
    if lost > 0 && report.problem.is_some() {
        lines.push(format!(
            "{file}: a fix would truncate {lost} bytes (from byte {} to the end)",
            report.valid_len
        ));
    }
    lines
}

fn is_rdb(path: &Path) -> bool {
    let mut head = [0u8; 5];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| &head == b"REDIS")
}

/// Cross-shard transactions that are not committed (some of their parts
/// are missing): (id, parts found, parts expected).
pub fn incomplete_transactions(logs: &[Vec<u8>]) -> Vec<(u64, usize, u32)> {
    let mut tally = aof::Tally::default();
    for data in logs {
        tally.add(&aof::committed_parts(data).unwrap_or_default());
    }
    tally.incomplete()
}

/// Runs the check; returns the exit code (0: every log valid or fixed).
pub fn run(options: &Options, input: &mut dyn BufRead, out: &mut dyn Write) -> i32 {
    let logs = match logs_in(&options.path) {
        Ok(logs) => logs,
        Err(e) => {
            let _ = writeln!(out, "{e}");
            return 1;
        }
    };
    let mut status = 0;
    let mut contents = Vec::new();
    for path in &logs {
        let data = match std::fs::read(path) {
            Ok(data) => data,
            Err(e) => {
                let _ = writeln!(out, "Cannot open file {}: {e}, aborting...", path.display());
                return 1;
            }
        };
        let report = aof::check(&data);
        for line in describe(path, data.len(), &report) {
            let _ = writeln!(out, "{line}");
        }
        let valid = report.valid_len;
        if report.problem.is_none() {
            let _ = writeln!(out, "AOF {} is valid", path.display());
        } else if report.preamble_end.is_none() && data.starts_with(b"REDIS") {
            let _ = writeln!(out, "The RDB preamble cannot be fixed by truncation, aborting.");
            status = 1;
        } else if !options.fix {
            let _ = writeln!(
                out,
                "AOF {} is not valid. Use the --fix option to try fixing it.",
                path.display()
            );
            status = 1;
        } else if fix(path, data.len(), valid, options.yes, input, out) {
            contents.push(data[..valid].to_vec());
            continue;
        } else {
            return 1;
        }
        contents.push(data);
    }
    if logs.len() > 1 || options.path.is_dir() {
        for (id, found, parts) in incomplete_transactions(&contents) {
            let _ = writeln!(
                out,
                "Cross-shard transaction {id}: {found} of its {parts} parts are in the logs; start-up leaves it out (the server stopped between its parts' writes)"
            );
        }
    }
    if status == 0 && logs.len() > 1 {
        let _ = writeln!(out, "All {} AOF files are valid", logs.len());
    }
    status
}

/// Truncates `path` to `valid` bytes once the user agrees; whether it did.
fn fix(
    path: &Path,
    size: usize,
    valid: usize,
    yes: bool,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> bool {
    let _ = writeln!(
        out,
        "This will shrink the AOF {} from {size} bytes, with {} bytes, to {valid} bytes",
        path.display(),
        size - valid
    );
    if !yes {
        let _ = write!(out, "Continue? [y/N]: ");
        let _ = out.flush();
        let mut answer = String::new();
        if input.read_line(&mut answer).is_err() || !answer.trim_start().starts_with(['y', 'Y']) {
            let _ = writeln!(out, "Aborting...");
            return false;
        }
    }
    let truncated = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(valid as u64).and_then(|()| f.sync_all()));
    match truncated {
        Ok(()) => {
            let _ = writeln!(out, "Successfully truncated AOF {}", path.display());
            true
        }
        Err(e) => {
            let _ = writeln!(out, "Failed to truncate AOF {}: {e}", path.display());
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        out
    }

    fn log(records: &[&[&str]]) -> Vec<u8> {
        records.iter().flat_map(|r| record(r)).collect()
    }

    fn check(options: &Options, answer: &str) -> (i32, String) {
        let mut out = Vec::new();
        let code = run(options, &mut answer.as_bytes(), &mut out);
        (code, String::from_utf8(out).unwrap())
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ringdb-check-aof-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("appendonlydir")).unwrap();
        dir
    }

    #[test]
    fn options_as_redis_check_aof() {
        let parse =
            |args: &[&str]| Options::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        assert_eq!(
            parse(&["--fix", "a.aof"]),
            Ok(Options { fix: true, yes: false, path: "a.aof".into() })
        );
        assert_eq!(
            parse(&["dir", "--yes"]),
            Ok(Options { fix: false, yes: true, path: "dir".into() })
        );
        assert!(parse(&[]).is_err());
        assert!(parse(&["a", "b"]).is_err());
        assert!(parse(&["--truncate-to-timestamp", "a"]).is_err());
        assert_eq!(shard_of_name("appendonly.aof.1-of-2"), Some((1, 2)));
        assert_eq!(shard_of_name("appendonly.aof.2-of-2"), None);
        assert_eq!(shard_of_name("temp-rewriteaof-1-0.aof"), None);
    }

    #[test]
    fn a_torn_log_is_reported_and_fixed_after_confirmation() {
        let dir = temp_dir("torn");
        let whole = log(&[&["SELECT", "0"], &["DEL", "a"]]);
        let mut torn = whole.clone();
        torn.extend_from_slice(b"*2\r\n$3\r\nDEL\r\n$1");
        let (good, bad) =
            (dir.join("appendonlydir/x.aof.0-of-2"), dir.join("appendonlydir/x.aof.1-of-2"));
        std::fs::write(&good, &whole).unwrap();
        std::fs::write(&bad, &torn).unwrap();
        let options = Options { fix: false, yes: false, path: dir.clone() };
        let (code, text) = check(&options, "");
        assert_eq!(code, 1, "{text}");
        assert!(text.contains(&format!("AOF {} is valid", good.display())), "{text}");
        assert!(
            text.contains(&format!(
                "{}: the log ends inside the record at byte {} (a torn write)",
                bad.display(),
                whole.len()
            )),
            "{text}"
        );
        assert!(text.contains("a fix would truncate 15 bytes"), "{text}");
        assert!(text.contains("Use the --fix option"), "{text}");
        // --fix asks first; "n" leaves the file alone.
        let fixing = Options { fix: true, ..options };
        let (code, text) = check(&fixing, "n\n");
        assert_eq!(code, 1);
        assert!(text.contains("Continue? [y/N]: Aborting..."), "{text}");
        assert_eq!(std::fs::read(&bad).unwrap(), torn);
        let (code, text) = check(&fixing, "y\n");
        assert_eq!(code, 0, "{text}");
        assert!(text.contains(&format!(
            "This will shrink the AOF {} from {} bytes, with 15 bytes, to {} bytes",
            bad.display(),
            torn.len(),
            whole.len()
        )));
        assert_eq!(std::fs::read(&bad).unwrap(), whole);
        let (code, text) = check(&Options { fix: false, yes: false, path: dir.clone() }, "");
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("All 2 AOF files are valid"), "{text}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn corruption_and_missing_parts_are_named() {
        let dir = temp_dir("corrupt");
        let part = |id: &str| {
            log(&[&["TXBEGIN", id, "2"], &["SELECT", "0"], &["DEL", "k"], &["TXEND", id]])
        };
        let zero = dir.join("appendonlydir/appendonly.aof.0-of-2");
        let one = dir.join("appendonlydir/appendonly.aof.1-of-2");
        let mut first = part("11");
        first.extend(part("12"));
        std::fs::write(&zero, &first).unwrap();
        let mut second = part("11");
        let bad_at = second.len();
        second.extend_from_slice(b"*1\r\n$5\r\nHELLO\r\n");
        second.extend(log(&[&["DEL", "k"]]));
        std::fs::write(&one, &second).unwrap();
        let (code, text) = check(&Options { fix: false, yes: false, path: dir.clone() }, "");
        assert_eq!(code, 1);
        assert!(
            text.contains(&format!(
                "{}: bad record at byte {bad_at} (0x{bad_at:x}): unknown record 'HELLO'",
                one.display()
            )),
            "{text}"
        );
        assert!(text.contains("Cross-shard transaction 12: 1 of its 2 parts"), "{text}");
        assert!(!text.contains("transaction 11"), "{text}");
        // The fix cuts at the bad record, dropping what follows it.
        let (code, text) = check(&Options { fix: true, yes: true, path: one.clone() }, "");
        assert_eq!(code, 0, "{text}");
        assert!(!text.contains("Continue?"));
        assert_eq!(std::fs::read(&one).unwrap().len(), bad_at);
        // Logs of two shard counts, and an empty directory.
        std::fs::write(dir.join("appendonlydir/appendonly.aof.0-of-3"), b"").unwrap();
        let (code, text) = check(&Options { fix: false, yes: false, path: dir.clone() }, "");
        assert_eq!(code, 1);
        assert!(text.contains("holds logs of 2 and of 3 shards"), "{text}");
        let empty = temp_dir("empty");
        let (code, text) = check(&Options { fix: false, yes: false, path: empty.clone() }, "");
        assert_eq!(code, 1);
        assert!(text.starts_with("No append-only logs"), "{text}");
        std::fs::remove_dir_all(dir).unwrap();
        std::fs::remove_dir_all(empty).unwrap();
    }

    #[test]
    fn a_bad_rdb_preamble_is_not_truncated() {
        let dir = temp_dir("preamble");
        let path = dir.join("appendonlydir/appendonly.aof.0-of-1");
        std::fs::write(&path, b"REDIS0011\xfa\x00garbage").unwrap();
        let (code, text) = check(&Options { fix: true, yes: true, path: path.clone() }, "");
        assert_eq!(code, 1);
        assert!(text.contains("RDB preamble of"), "{text}");
        assert!(text.contains("cannot be fixed"), "{text}");
        assert_eq!(std::fs::read(&path).unwrap().len(), 18);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
