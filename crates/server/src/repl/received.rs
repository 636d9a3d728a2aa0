//! A snapshot received from the primary, held until it is loaded: in
//! memory, or (`repl-diskless-load disabled`, Redis's default) in a file
//! in `dir` that is mapped for the load, so that the replica's memory does
//! not hold the dataset twice while it syncs.

use std::io::Write;
use std::path::PathBuf;

/// The received bytes of one RDB.
pub enum Snapshot {
    Memory(Vec<u8>),
    /// A read-only mapping of a file already unlinked.
    Mapped {
        ptr: *const u8,
        len: usize,
    },
}

// SAFETY: the mapping is read-only, owned by this value and unmapped only
// when it is dropped.
unsafe impl Send for Snapshot {}
unsafe impl Sync for Snapshot {}

impl std::ops::Deref for Snapshot {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Snapshot::Memory(bytes) => bytes,
            // SAFETY: `len` bytes mapped at `ptr` for this value's lifetime.
            Snapshot::Mapped { ptr, len } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        if let Snapshot::Mapped { ptr, len } = *self {
            // SAFETY: the mapping this value made.
            unsafe { libc::munmap(ptr as *mut libc::c_void, len) };
        }
    }
}

/// A snapshot being written to a file as it arrives.
pub struct Spill {
    file: std::fs::File,
    path: PathBuf,
}

impl Spill {
    /// A new file in `dir`, named as Redis names its replica's temporary
    /// file (`temp-<pid>.<n>.rdb`).
    pub fn create(dir: &str, n: u64) -> Result<Spill, String> {
        let path = PathBuf::from(dir).join(format!("temp-{}.{n}.rdb", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| {
                format!("Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}")
            })?;
        Ok(Spill { file, path })
    }

    pub fn put(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.file.write_all(bytes).map_err(|e| {
            format!("Write error saving the DB to disk in MASTER <-> REPLICA sync: {e}")
        })
    }

    /// Writes the last bytes and maps the whole file for reading; the file
    /// is removed at once (the mapping stays valid).
    pub fn finish(mut self, last: &[u8]) -> Result<Snapshot, String> {
        self.put(last)?;
        let len = self.file.metadata().map_err(|e| e.to_string())?.len() as usize;
        if len == 0 {
            return Ok(Snapshot::Memory(Vec::new()));
        }
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.file);
        // SAFETY: a read-only private mapping of a file this value owns.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, fd, 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!(
                "mapping {}: {}",
                self.path.display(),
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: the mapping just made; the kernel reads ahead for the load.
        unsafe { libc::madvise(ptr, len, libc::MADV_SEQUENTIAL) };
        Ok(Snapshot::Mapped { ptr: ptr as *const u8, len })
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spilled_snapshot_reads_back_whole_and_leaves_no_file() {
        let dir = std::env::temp_dir().join(format!("ringdb-spill-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut spill = Spill::create(dir.to_str().unwrap(), 1).unwrap();
        spill.put(b"REDIS").unwrap();
        let snapshot = spill.finish(b"0010").unwrap();
        assert_eq!(&snapshot[..], b"REDIS0010");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the file is removed once mapped");
        drop(snapshot);
        let empty = Spill::create(dir.to_str().unwrap(), 2).unwrap().finish(b"").unwrap();
        assert!(empty.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
