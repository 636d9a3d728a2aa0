//! The limits a container's cgroup sets (v2, or v1): its CPU quota decides
//! how many shards run by default (as the affinity mask does for a cpuset),
//! and its memory limit gives `maxmemory` a default below it, so that a
//! full dataset answers `-OOM` instead of the container being killed.

use std::path::{Path, PathBuf};

/// What the cgroup allows this process; `None`: no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Limits {
    /// CPUs' worth of time per period (`cpu.max`: quota / period).
    pub cpus: Option<f64>,
    /// Bytes (`memory.max`).
    pub memory: Option<u64>,
}

/// The share of the cgroup's memory limit `maxmemory` defaults to: the
/// rest is for what `maxmemory` does not count (client buffers, the
/// allocator's overhead, a snapshot being written).
pub const MAXMEMORY_SHARE: f64 = 0.8;

/// This process's limits, from `/proc/self/cgroup` and `/sys/fs/cgroup`.
pub fn limits() -> Limits {
    match std::fs::read_to_string("/proc/self/cgroup") {
        Ok(membership) => limits_at(Path::new("/sys/fs/cgroup"), &membership),
        Err(_) => Limits::default(),
    }
}

/// The limits under `root` (the cgroup mount) for `membership` (the text
/// of `/proc/self/cgroup`): the tightest of the process's group and its
/// ancestors.
pub fn limits_at(root: &Path, membership: &str) -> Limits {
    let mut limits = Limits::default();
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            // v2: one hierarchy.
            for dir in groups(root, path) {
                limits.cpus =
                    tighter(limits.cpus, read(&dir.join("cpu.max")).and_then(|s| cpu_max(&s)));
                limits.memory =
                    tighter(limits.memory, read(&dir.join("memory.max")).and_then(|s| bytes(&s)));
            }
        } else {
            let controllers: Vec<&str> = controllers.split(',').collect();
            let mount = root.join(controllers.join(","));
            if controllers.contains(&"cpu") {
                for dir in groups(&mount, path) {
                    let quota = read(&dir.join("cpu.cfs_quota_us"))
                        .and_then(|s| s.trim().parse::<i64>().ok());
                    let period = read(&dir.join("cpu.cfs_period_us"))
                        .and_then(|s| s.trim().parse::<i64>().ok());
                    if let (Some(q), Some(p)) = (quota, period) {
                        let cpus = (q > 0 && p > 0).then(|| q as f64 / p as f64);
                        limits.cpus = tighter(limits.cpus, cpus);
                    }
                }
            }
            if controllers.contains(&"memory") {
                for dir in groups(&mount, path) {
                    let limit = read(&dir.join("memory.limit_in_bytes")).and_then(|s| bytes(&s));
                    limits.memory = tighter(limits.memory, limit);
                }
            }
        }
    }
    limits
}

/// The group's directory and its ancestors' under `mount`. In a container
/// without a cgroup namespace the path is the host's, and the container's
/// own group is mounted at `mount` itself.
fn groups(mount: &Path, path: &str) -> Vec<PathBuf> {
    let mut dir = mount.join(path.trim_start_matches('/'));
    if !dir.is_dir() {
        dir = mount.to_path_buf();
    }
    let mut dirs = vec![dir.clone()];
    while dir != mount && dir.pop() && dir.starts_with(mount) {
        dirs.push(dir.clone());
    }
    dirs
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn tighter<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b < a { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// `cpu.max`: "max 100000" (no limit) or "quota period".
fn cpu_max(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    let quota: f64 = words.next()?.parse().ok()?;
    let period: f64 = words.next().unwrap_or("100000").parse().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// A byte count; "max" and v1's "no limit" (near 2^63) are none.
fn bytes(text: &str) -> Option<u64> {
    text.trim().parse::<u64>().ok().filter(|&b| b < 1 << 60)
}

/// The shards to run by default: one per CPU of the affinity mask, but no
/// more than the CPU quota gives time for (rounded up).
pub fn default_shards(affinity: usize, limits: &Limits) -> usize {
    match limits.cpus {
        Some(cpus) => affinity.min(cpus.ceil().max(1.0) as usize),
        None => affinity,
    }
}

/// `maxmemory`'s default under a memory limit.
pub fn default_maxmemory(limits: &Limits) -> Option<u64> {
    limits.memory.map(|m| (m as f64 * MAXMEMORY_SHARE) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "ringdb-cgroup-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    #[test]
    fn v2_takes_the_tightest_of_the_group_and_its_ancestors() {
        let root = tree(&[
            ("cpu.max", "max 100000\n"),
            ("memory.max", "max\n"),
            ("kubepods/cpu.max", "400000 100000\n"),
            ("kubepods/memory.max", "1073741824\n"),
            ("kubepods/pod1/cpu.max", "150000 100000\n"),
            ("kubepods/pod1/memory.max", "max\n"),
        ]);
        let limits = limits_at(&root, "0::/kubepods/pod1\n");
        assert_eq!(limits, Limits { cpus: Some(1.5), memory: Some(1 << 30) });
        assert_eq!(default_shards(16, &limits), 2);
        assert_eq!(default_maxmemory(&limits), Some(858_993_459));
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn v2_in_a_cgroup_namespace_and_without_limits() {
        let root = tree(&[("cpu.max", "max 100000\n"), ("memory.max", "max\n")]);
        let limits = limits_at(&root, "0::/\n");
        assert_eq!(limits, Limits::default());
        assert_eq!(default_shards(8, &limits), 8);
        // A path that is the host's (no namespace): the mount is the group.
        let root2 = tree(&[("cpu.max", "50000 100000\n"), ("memory.max", "536870912\n")]);
        let limits = limits_at(&root2, "0::/docker/abc\n");
        assert_eq!(limits, Limits { cpus: Some(0.5), memory: Some(512 << 20) });
        assert_eq!(default_shards(8, &limits), 1);
        let _ = std::fs::remove_dir_all(root);
        let _ = std::fs::remove_dir_all(root2);
    }

    #[test]
    fn v1_controllers() {
        let root = tree(&[
            ("cpu,cpuacct/cpu.cfs_quota_us", "200000\n"),
            ("cpu,cpuacct/cpu.cfs_period_us", "100000\n"),
            ("memory/memory.limit_in_bytes", "9223372036854771712\n"),
        ]);
        let limits = limits_at(&root, "4:memory:/docker/x\n3:cpu,cpuacct:/docker/x\n");
        assert_eq!(limits, Limits { cpus: Some(2.0), memory: None });
        let _ = std::fs::remove_dir_all(root);
    }
}
