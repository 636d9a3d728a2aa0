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
