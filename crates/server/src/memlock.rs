//! Locked memory: sizes each shard's io_uring memory to `RLIMIT_MEMLOCK`.
//!
//! On Linux 6.x an io_uring's rings count against the locked-memory limit of
//! the user who creates them (unless it has `CAP_IPC_LOCK`), as do buffers
//! registered with a ring. Containers often get 64 KiB (`ulimit -l 64`), and
//! one shard at full size takes about 2.4 MiB. Rather than refuse to start,
//! the node raises the soft limit to the hard one (as Redis raises
//! `nofile`), then gives up, in this order, what costs least: registered
//! buffers (ringdb's paths do not use them: they serve glommio's direct
//! file I/O), the network ring's size, the executor rings' depth, the
//! network ring itself (glommio's sockets instead), and last whole shards.
//! The sizes are the kernel's: a ring takes the pages of its shared rings
//! (a header, 16 bytes per completion, 4 per submission) plus those of its
//! submission entries (64 bytes each); measured on 6.18 with a 2 MiB limit.

use std::fmt;

const PAGE: u64 = 4096;
const KIB: u64 = 1024;
/// The rings' header (`struct io_rings`), rounded up.
const RING_HEADER: u64 = 320;
/// The network driver's provided-buffer ring: 16 bytes per buffer.
const BUFFER_RING_BYTES: u64 = crate::net::uring::BUFFERS as u64 * 16;
/// Registered buffers smaller than this are not worth a registration.
const MIN_REGISTERED: u64 = 64 * KIB;

/// The network driver's ring: submission and completion entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetRing {
    pub sq: u32,
    pub cq: u32,
}

impl NetRing {
    /// The default: room for the completions of many connections at once.
    pub const FULL: NetRing = NetRing { sq: 1024, cq: 16 * 1024 };
}

/// The network ring's sizes, largest (the default) first.
const NET_RINGS: [NetRing; 4] = [
    NetRing::FULL,
    NetRing { sq: 1024, cq: 4096 },
    NetRing { sq: 256, cq: 1024 },
    NetRing { sq: 64, cq: 128 },
];
/// glommio's rings (main and latency), full and small.
const DEPTHS: [usize; 2] = [128, 64];

/// What each shard creates, chosen by [`plan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoPlan {
    pub shards: usize,
    /// Depth of glommio's two rings.
    pub ring_depth: usize,
    /// The network ring, or `None`: glommio's sockets.
    pub net: Option<NetRing>,
    /// Bytes registered with glommio's rings (0: none).
    pub io_memory: usize,
    /// The limit it was sized to (`None`: no limit applies).
    pub limit: Option<u64>,
    /// What the shards asked for, when the limit cut it.
    pub wanted_shards: usize,
    /// Locked bytes a shard takes at full size.
    pub full_per_shard: u64,
}

impl IoPlan {
    /// Locked bytes one shard takes.
    pub fn per_shard(&self) -> u64 {
        shard_bytes(self.ring_depth, self.net, self.io_memory as u64)
    }

    fn full(shards: usize, io_memory: usize, net: bool) -> IoPlan {
        let net = net.then_some(NET_RINGS[0]);
        IoPlan {
            shards,
            ring_depth: DEPTHS[0],
            net,
            io_memory,
            limit: None,
            wanted_shards: shards,
            full_per_shard: shard_bytes(DEPTHS[0], net, io_memory as u64),
        }
    }
}

impl fmt::Display for IoPlan {
    /// The one log line: what was chosen, and what it costs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(limit) = self.limit else {
            return write!(
                f,
                "locked memory: no limit applies; each shard takes {} (full size)",
                human(self.per_shard())
            );
        };
        let plural = if self.shards == 1 { "" } else { "s" };
        write!(
            f,
            "locked memory limit (ulimit -l) {} for {} shard{plural}: ",
            human(limit),
            self.shards
        )?;
        if self.wanted_shards != self.shards {
            write!(
                f,
                "only {} of the {} shards fit (the fewer cores serve); ",
                self.shards, self.wanted_shards
            )?;
        }
        write!(f, "each shard takes {}: ", human(self.per_shard()))?;
        write!(f, "rings of {} entries", self.ring_depth)?;
        match self.net {
            Some(n) => write!(f, ", a network ring of {}/{} entries", n.sq, n.cq)?,
            None => write!(
                f,
                ", no network ring (glommio's sockets: fewer requests per CPU-second, see deploy/README.md)"
            )?,
        }
        if self.io_memory > 0 {
            write!(f, ", {} of registered I/O buffers", human(self.io_memory as u64))?;
        } else {
            write!(f, ", no registered I/O buffers (ringdb does not use them: no cost)")?;
        }
        if self.per_shard() < self.full_per_shard {
            write!(
                f,
                ". Full size needs {} per shard ({} in all): raise the limit (ulimit -l, LimitMEMLOCK=, docker --ulimit memlock=)",
                human(self.full_per_shard),
                human(self.full_per_shard * self.wanted_shards as u64)
            )?;
        }
        Ok(())
    }
}

/// Whether shards run the network ring (`io-backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Net {
    /// `glommio`: glommio's sockets.
    Off,
    /// `auto`: the ring where it fits.
    Preferred,
    /// `uring`: the ring, with fewer shards if need be.
    Required,
}

/// Sizes the shards' io_uring memory to `limit` (`None`: unlimited).
/// `Err` only when not one shard fits.
pub fn plan(
    limit: Option<u64>,
    shards: usize,
    io_memory: usize,
    net: Net,
) -> Result<IoPlan, String> {
    let full = IoPlan::full(shards, io_memory, net != Net::Off);
    let Some(limit) = limit else { return Ok(full) };
    let rings = NET_RINGS.iter().copied().map(Some);
    let nets: Vec<Option<NetRing>> = match net {
        Net::Off => vec![None],
        Net::Preferred => rings.chain([None]).collect(),
        Net::Required => rings.collect(),
    };
    // Cheapest first in what they give up: buffers, then the network ring's
    // size, then glommio's depth, then the network ring, then shards.
    let mut choices: Vec<(usize, Option<NetRing>)> = Vec::new();
    for with_ring in [true, false] {
        for depth in DEPTHS {
            choices.extend(nets.iter().filter(|n| n.is_some() == with_ring).map(|&n| (depth, n)));
        }
    }
    for count in (1..=shards).rev() {
        let budget = limit / count as u64;
        for &(depth, n) in &choices {
            let rings = shard_bytes(depth, n, 0);
            if rings > budget {
                continue;
            }
            // What is left goes to registered buffers (counted once for
            // each of glommio's two rings), up to io-memory.
            let registered = ((budget - rings) / 2).min(io_memory as u64) / PAGE * PAGE;
            let registered = if registered >= MIN_REGISTERED { registered } else { 0 };
            return Ok(IoPlan {
                shards: count,
                ring_depth: depth,
                net: n,
                io_memory: registered as usize,
                limit: Some(limit),
                ..full
            });
        }
    }
    Err(format!(
        "the locked memory limit (ulimit -l) is {}: one shard needs at least {}; raise it",
        human(limit),
        human(shard_bytes(DEPTHS[DEPTHS.len() - 1], nets[nets.len() - 1], 0))
    ))
}

/// Locked bytes of one ring with these entry counts, as the kernel counts.
pub fn ring_bytes(sq: u64, cq: u64) -> u64 {
    pages(RING_HEADER + cq * 16 + sq * 4) + pages(sq * 64)
}

fn shard_bytes(depth: usize, net: Option<NetRing>, registered: u64) -> u64 {
    let depth = depth as u64;
    // glommio: main and latency rings, completion rings twice as deep; the
    // registered buffers count once per ring.
    let glommio = 2 * ring_bytes(depth, 2 * depth) + 2 * registered;
    // The network ring and its buffer ring; without them, glommio's sockets
    // and a small ring polling the listeners (`net::fallback`).
    let network = match net {
        Some(n) => ring_bytes(n.sq as u64, n.cq as u64) + pages(BUFFER_RING_BYTES),
        None => ring_bytes(4, 8),
    };
    glommio + network
}

fn pages(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE) * PAGE
}

fn human(bytes: u64) -> String {
    if bytes >= 4 * 1024 * KIB {
        format!("{:.1} MiB", bytes as f64 / (KIB * KIB) as f64)
    } else {
        format!("{} KiB", bytes.div_ceil(KIB))
    }
}

/// The limit that applies to this process once the soft limit is raised to
/// the hard one: `None` when there is none (unlimited, or `CAP_IPC_LOCK`,
/// which exempts io_uring from the accounting).
pub fn effective_limit() -> Option<u64> {
    if has_ipc_lock() {
        return None;
    }
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

/// `CAP_IPC_LOCK` in the effective set (`/proc/self/status`, `CapEff`).
fn has_ipc_lock() -> bool {
    const CAP_IPC_LOCK: u32 = 14;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim().to_string();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sizes_match_the_kernel() {
        // Measured on 6.18: rings created one after another until ENOMEM
        // under a 2 MiB limit.
        assert_eq!(ring_bytes(64, 128), 8 * KIB);
        assert_eq!(ring_bytes(128, 256), 16 * KIB);
        assert_eq!(ring_bytes(128, 512), 20 * KIB);
        assert_eq!(ring_bytes(256, 512), 28 * KIB);
        assert_eq!(ring_bytes(256, 1024), 36 * KIB);
    }

    #[test]
    fn no_limit_is_full_size() {
        let p = plan(None, 4, 1 << 20, Net::Preferred).unwrap();
        assert_eq!(
            (p.shards, p.ring_depth, p.net, p.io_memory),
            (4, 128, Some(NET_RINGS[0]), 1 << 20)
        );
    }

    #[test]
    fn buffers_go_first_then_the_network_ring_shrinks() {
        // 8 MiB, 2 shards: 4 MiB each fits everything.
        let p = plan(Some(8 << 20), 2, 1 << 20, Net::Preferred).unwrap();
        assert_eq!((p.net, p.io_memory), (Some(NET_RINGS[0]), 1 << 20));
        // 1 MiB, 2 shards: the full rings fit, the buffers are cut.
        let p = plan(Some(1 << 20), 2, 1 << 20, Net::Preferred).unwrap();
        assert_eq!(p.net, Some(NET_RINGS[0]));
        assert!(p.io_memory > 0 && p.io_memory < 1 << 20, "{p:?}");
        assert!(p.per_shard() * 2 <= 1 << 20);
    }

    #[test]
    fn sixty_four_kib_fits_two_shards_with_small_rings() {
        let p = plan(Some(64 * KIB), 2, 1 << 20, Net::Preferred).unwrap();
        assert_eq!(p.shards, 2);
        assert_eq!(p.io_memory, 0);
        assert!(p.net.is_some(), "{p:?}");
        assert!(p.per_shard() * 2 <= 64 * KIB, "{p:?}");
        let line = p.to_string();
        assert!(line.contains("64 KiB") && line.contains("no registered I/O buffers"), "{line}");
    }

    #[test]
    fn too_little_for_every_shard_runs_fewer() {
        let p = plan(Some(64 * KIB), 16, 1 << 20, Net::Preferred).unwrap();
        assert_eq!(p.shards, 2, "{p:?}");
        assert_eq!(p.wanted_shards, 16);
        assert!(p.per_shard() * p.shards as u64 <= 64 * KIB);
        assert!(p.to_string().contains("of the 16 shards fit"));
        assert!(plan(Some(8 * KIB), 1, 0, Net::Preferred).is_err());
    }

    #[test]
    fn glommio_backend_takes_no_network_ring() {
        let p = plan(Some(64 * KIB), 4, 1 << 20, Net::Off).unwrap();
        assert_eq!((p.shards, p.net, p.per_shard()), (2, None, 24 * KIB));
        let p = plan(Some(64 * KIB), 4, 1 << 20, Net::Required).unwrap();
        assert_eq!(p.shards, 2);
        assert!(p.net.is_some());
    }
}
