//! The process as init scripts and supervisors see it, as redis-server does
//! it: `daemonize` (fork, new session, standard streams to /dev/null) and
//! the `pidfile`.

/// Forks into the background: the parent exits at once, the child carries
/// on in a new session with its standard streams on /dev/null. Must run
/// before any thread is started (fork keeps only the calling thread).
pub fn daemonize() -> Result<(), String> {
    // SAFETY: called from main before any other thread exists; the child
    // continues with a copy of this single-threaded process.
    match unsafe { libc::fork() } {
        -1 => return Err(format!("cannot fork: {}", std::io::Error::last_os_error())),
        0 => {}
        _ => std::process::exit(0),
    }
    // SAFETY: plain system calls on descriptors this process owns.
    unsafe {
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..=2 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
    Ok(())
}

/// Writes the process id; as Redis, a file that cannot be written is a
/// warning, not a reason to stop.
pub fn write_pidfile(path: &str) {
    if let Err(e) = std::fs::write(path, format!("{}\n", std::process::id())) {
        tracing::warn!("Failed to write PID file {path}: {e}");
    }
}

/// The process's OOM score before ringdb first changed it (restored by
/// `oom-score-adj no`), as Redis's `oom_score_adj_base`.
static OOM_BASE: std::sync::Mutex<Option<i32>> = std::sync::Mutex::new(None);

const OOM_SCORE_ADJ: &str = "/proc/self/oom_score_adj";

/// Applies `oom-score-adj` (Redis's `setOOMScoreAdj`): `relative` adds the
/// primary's value to the score the process had, `absolute` sets it, `no`
/// gives back the score it had if ringdb changed it. The kernel's bounds
/// (-1000..1000) clamp the result.
pub fn apply_oom_score(mode: &str, value: i32) -> Result<(), String> {
    let mut base = OOM_BASE.lock().unwrap_or_else(|e| e.into_inner());
    let score = match mode {
        "no" => match base.take() {
            Some(original) => original,
            None => return Ok(()),
        },
        _ => {
            let original = match *base {
                Some(b) => b,
                None => {
                    let read = std::fs::read_to_string(OOM_SCORE_ADJ)
                        .ok()
                        .and_then(|t| t.trim().parse().ok())
                        .ok_or("Failed to set current oom_score_adj. Check server logs.")?;
                    *base = Some(read);
                    read
                }
            };
            let score = if mode == "absolute" { value } else { original + value };
            score.clamp(-1000, 1000)
        }
    };
    std::fs::write(OOM_SCORE_ADJ, score.to_string()).map_err(|e| {
        tracing::warn!("Unable to write oom_score_adj: {e}");
        "Failed to set current oom_score_adj. Check server logs.".to_string()
    })
}
