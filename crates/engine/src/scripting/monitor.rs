//! What every core may know about the scripts running on the others: the
//! control path of BUSY replies, SCRIPT KILL / FUNCTION KILL, FUNCTION STATS
//! and the script bodies cached by EVAL.
//!
//! A script blocks its core while it runs. Once it has run longer than
//! `busy-reply-threshold`, its core publishes it here (the shard's `busy`
//! run id, and a description for FUNCTION STATS); the router of every core
//! checks [`ScriptMonitor::any_busy`] (one relaxed atomic load) before it
//! sends work anywhere, and answers BUSY for a busy shard. A kill request is
//! the run id written to `kill`; the running script's instruction hook reads
//! it. Nothing here is touched per command on the data path except that one
//! load, and the body cache only when a shard meets a script it has not
//! compiled yet.

use bytes::Bytes;
use hashbrown::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// A script that has run past the busy threshold, for FUNCTION STATS.
#[derive(Clone, Debug)]
pub struct RunningScript {
    /// The script's SHA1 (EVAL) or the function's name (FCALL).
    pub name: String,
    /// The command that started it.
    pub command: Vec<Bytes>,
    pub started: Instant,
    /// EVAL/EVALSHA (SCRIPT KILL stops it) rather than FCALL (FUNCTION KILL).
    pub eval: bool,
    /// Libraries and functions loaded on its shard, for a FUNCTION STATS
    /// answered while the script blocks that shard.
    pub libraries: (usize, usize),
}

/// One shard's published script state.
#[derive(Default)]
pub struct ShardScriptStatus {
    /// Run id of the script running past the threshold; 0 when none.
    pub busy: AtomicU64,
    /// Run id a SCRIPT/FUNCTION KILL asked to stop.
    pub kill: AtomicU64,
    /// The busy script has run a write command (it cannot be killed).
    pub wrote: AtomicBool,
    pub running: Mutex<Option<RunningScript>>,
}

/// Why a kill request failed, with Redis's replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillError {
    NotBusy,
    Unkillable,
    /// SCRIPT KILL of a function, or FUNCTION KILL of an EVAL script.
    WrongKind {
        running_eval: bool,
    },
}

impl KillError {
    pub fn text(self) -> &'static str {
        match self {
            KillError::NotBusy => "NOTBUSY No scripts in execution right now.",
            KillError::Unkillable => {
                "UNKILLABLE Sorry the script already executed write commands against the dataset. \
                 You can either wait the script termination or kill the server in a hard way using \
                 the SHUTDOWN NOSAVE command."
            }
            KillError::WrongKind { running_eval: true } => BUSY_EVAL,
            KillError::WrongKind { running_eval: false } => BUSY_FUNCTION,
        }
    }
}

/// Redis's reply to commands sent while an EVAL script is busy.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// The same while a function is busy.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// The process-wide view of every shard's scripts.
pub struct ScriptMonitor {
    /// Number of shards with a busy script (the router's fast check).
    busy_shards: AtomicUsize,
    shards: Vec<ShardScriptStatus>,
    next_run: AtomicU64,
    /// Bodies of the scripts EVAL and SCRIPT LOAD have seen, by SHA1: a
    /// shard that meets an EVALSHA it has not compiled yet finds it here.
    bodies: Mutex<HashMap<String, Bytes>>,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call `noscript`
    /// commands (Redis's `script_disable_deny_script`, for its tests).
    deny_disabled: AtomicBool,
}

impl ScriptMonitor {
    pub fn new(shards: usize) -> Self {
        ScriptMonitor {
            busy_shards: AtomicUsize::new(0),
            shards: (0..shards.max(1)).map(|_| ShardScriptStatus::default()).collect(),
            next_run: AtomicU64::new(1),
            bodies: Mutex::new(HashMap::new()),
            deny_disabled: AtomicBool::new(false),
        }
    }

    /// Whether any shard has a busy script: one relaxed load.
    #[inline]
    pub fn any_busy(&self) -> bool {
        self.busy_shards.load(Ordering::Relaxed) != 0
    }

    /// The BUSY error for `shard` when a script there is busy.
    pub fn busy_error(&self, shard: usize) -> Option<&'static str> {
        let status = self.shards.get(shard)?;
        if status.busy.load(Ordering::Acquire) == 0 {
            return None;
        }
        let eval = status.running.lock().ok().and_then(|r| r.as_ref().map(|r| r.eval));
        Some(if eval == Some(false) { BUSY_FUNCTION } else { BUSY_EVAL })
    }

    /// The first busy shard's BUSY error.
    pub fn any_busy_error(&self) -> Option<&'static str> {
        if !self.any_busy() {
            return None;
        }
        (0..self.shards.len()).find_map(|s| self.busy_error(s))
    }

    /// DEBUG SET-DISABLE-DENY-SCRIPTS.
    pub fn set_deny_disabled(&self, disabled: bool) {
        self.deny_disabled.store(disabled, Ordering::Relaxed);
    }

    /// Whether scripts may call `noscript` commands.
    pub fn deny_disabled(&self) -> bool {
        self.deny_disabled.load(Ordering::Relaxed)
    }

    /// Shards of the node.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub fn new_run_id(&self) -> u64 {
        self.next_run.fetch_add(1, Ordering::Relaxed)
    }

    pub fn shard(&self, shard: usize) -> Option<&ShardScriptStatus> {
        self.shards.get(shard)
    }

    /// Publishes `script` (run `run`) as busy on `shard`.
    pub fn set_busy(&self, shard: usize, run: u64, wrote: bool, script: RunningScript) {
        let Some(status) = self.shards.get(shard) else { return };
        if let Ok(mut running) = status.running.lock() {
            *running = Some(script);
        }
        status.wrote.store(wrote, Ordering::Release);
        status.busy.store(run, Ordering::Release);
        self.busy_shards.fetch_add(1, Ordering::Relaxed);
    }

    /// The busy script of `shard` wrote to the dataset.
    pub fn set_wrote(&self, shard: usize) {
        if let Some(status) = self.shards.get(shard) {
            status.wrote.store(true, Ordering::Release);
        }
    }

    /// Run `run` of `shard` ended.
    pub fn clear_busy(&self, shard: usize, run: u64) {
        let Some(status) = self.shards.get(shard) else { return };
        if status.busy.compare_exchange(run, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            self.busy_shards.fetch_sub(1, Ordering::Relaxed);
            if let Ok(mut running) = status.running.lock() {
                *running = None;
            }
        }
    }

    /// Whether run `run` of `shard` was asked to stop.
    pub fn kill_requested(&self, shard: usize, run: u64) -> bool {
        self.shards.get(shard).is_some_and(|s| s.kill.load(Ordering::Acquire) == run)
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL: asks every busy script of the
    /// right kind to stop. Redis's errors when there is none, when it wrote,
    /// or when it is of the other kind.
    pub fn kill(&self, eval: bool) -> Result<(), KillError> {
        let mut result = Err(KillError::NotBusy);
        for status in &self.shards {
            let run = status.busy.load(Ordering::Acquire);
            if run == 0 {
                continue;
            }
            let running_eval =
                status.running.lock().ok().and_then(|r| r.as_ref().map(|r| r.eval)).unwrap_or(true);
            if status.wrote.load(Ordering::Acquire) {
                result = result.or(Err(KillError::Unkillable));
                continue;
            }
            if running_eval != eval {
                result = result.or(Err(KillError::WrongKind { running_eval }));
                continue;
            }
            status.kill.store(run, Ordering::Release);
            result = Ok(());
        }
        result
    }

    /// The first busy script (FUNCTION STATS).
    pub fn running(&self) -> Option<RunningScript> {
        self.shards
            .iter()
            .filter(|s| s.busy.load(Ordering::Acquire) != 0)
            .find_map(|s| s.running.lock().ok().and_then(|r| r.clone()))
    }

    /// A body cached by EVAL or SCRIPT LOAD.
    pub fn body(&self, sha: &str) -> Option<Bytes> {
        self.bodies.lock().ok()?.get(sha).cloned()
    }

    pub fn remember(&self, sha: &str, body: &Bytes) {
        if let Ok(mut bodies) = self.bodies.lock() {
            if !bodies.contains_key(sha) {
                // A copy: `body` may be a slice of a client's input buffer,
                // which a clone would keep whole for as long as the cache.
                bodies.insert(sha.to_string(), Bytes::copy_from_slice(body));
            }
        }
    }

    /// SCRIPT EXISTS.
    pub fn has_body(&self, sha: &str) -> bool {
        self.bodies.lock().map(|b| b.contains_key(sha)).unwrap_or(false)
    }

    /// Scripts EVAL and SCRIPT LOAD have cached (INFO memory).
    pub fn body_count(&self) -> usize {
        self.bodies.lock().map(|b| b.len()).unwrap_or(0)
    }

    /// SCRIPT FLUSH.
    pub fn forget_bodies(&self) {
        if let Ok(mut bodies) = self.bodies.lock() {
            *bodies = HashMap::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(eval: bool) -> RunningScript {
        RunningScript {
            name: "x".into(),
            command: vec![],
            started: Instant::now(),
            eval,
            libraries: (0, 0),
        }
    }

    #[test]
    fn kill_follows_redis_rules() {
        let m = ScriptMonitor::new(2);
        assert_eq!(m.kill(true), Err(KillError::NotBusy));
        m.set_busy(1, 7, false, script(true));
        assert!(m.any_busy());
        assert_eq!(m.busy_error(1), Some(BUSY_EVAL));
        assert_eq!(m.busy_error(0), None);
        assert_eq!(m.kill(false), Err(KillError::WrongKind { running_eval: true }));
        assert_eq!(m.kill(true), Ok(()));
        assert!(m.kill_requested(1, 7));
        assert!(!m.kill_requested(1, 8));
        m.set_wrote(1);
        assert_eq!(m.kill(true), Err(KillError::Unkillable));
        m.clear_busy(1, 7);
        assert!(!m.any_busy());
        assert!(m.running().is_none());
    }
}
