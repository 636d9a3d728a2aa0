//! The clients connected to one core, for CLIENT LIST / INFO / KILL and INFO
//! clients. Each connection registers a [`ClientHandle`] here and keeps the
//! few fields CLIENT LIST shows up to date; another core reaches them only
//! through a mesh job on this core.

use ringdb_protocol::Resp;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

/// What CLIENT LIST shows of a connection, updated by the connection itself.
#[derive(Clone, Debug, Default)]
pub struct ClientView {
    pub name: String,
    pub lib_name: String,
    pub lib_ver: String,
    pub db: usize,
    pub resp: Resp,
    /// Full name of the last command (`client|list`), from the command table.
    pub last_cmd: &'static str,
    pub no_evict: bool,
    pub no_touch: bool,
    /// Query buffer bytes not yet done with: the command running (as the
    /// client sent it), the ones parsed after it, and what is unparsed.
    pub qbuf: usize,
    /// Room left in the query buffer's allocation.
    pub qbuf_free: usize,
    /// Bytes of the running command's arguments (0 between commands).
    pub argv_mem: usize,
    /// Arguments queued in an open MULTI and the queue's own allocation.
    pub multi_mem: usize,
    /// The reply buffer's allocation, and its most bytes held at once.
    pub rbs: usize,
    pub rbp: usize,
    /// Replies written but not yet taken by the kernel.
    pub obuf: usize,
    /// Channel, pattern and shard-channel subscriptions.
    pub sub: usize,
    pub psub: usize,
    pub ssub: usize,
    /// Commands queued in an open MULTI (-1: no MULTI).
    pub multi: i64,
    /// In MONITOR.
    pub monitor: bool,
    /// Waiting in a blocking command (BLPOP, XREAD BLOCK, …).
    pub blocked: bool,
    /// CLIENT TRACKING: on, in BCAST mode, its redirect target gone, and
    /// the target (-1 when not tracking, 0 for none).
    pub tracking: bool,
    pub tracking_bcast: bool,
    pub tracking_broken: bool,
    pub redirect: i64,
    /// A replication link: a replica of ours, or our primary.
    pub link: LinkKind,
    /// The ACL user the client is authenticated as.
    pub user: std::sync::Arc<str>,
}

/// Which end of a replication link a client is, if any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinkKind {
    #[default]
    None,
    Replica,
    Master,
}

impl ClientView {
    /// Memory the client holds, as Redis's `getClientMemoryUsage` adds it
    /// up: query and reply buffers, arguments, MULTI queue, unsent output
    /// and the connection's own state.
    pub fn tot_mem(&self) -> usize {
        self.qbuf
            + self.qbuf_free
            + self.rbs
            + self.argv_mem
            + self.multi_mem
            + self.obuf
            + std::mem::size_of::<crate::net::connection::Connection>()
    }
}

pub struct ClientHandle {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub created: Instant,
    pub last_active: Cell<Instant>,
    pub view: RefCell<ClientView>,
    killed: Cell<bool>,
    /// Bytes of pushes waiting in the mailbox (output buffer limit).
    pub pending_push_bytes: Cell<usize>,
    /// Since when the pending bytes are over the soft limit.
    pub soft_limit_since: Cell<Option<Instant>>,
}

impl ClientHandle {
    pub fn new(id: u64, addr: String, laddr: String, fd: i32) -> Rc<Self> {
        let now = Instant::now();
        let handle = ClientHandle {
            id,
            addr,
            laddr,
            fd,
            created: now,
            last_active: Cell::new(now),
            view: RefCell::new(ClientView {
                multi: -1,
                redirect: -1,
                user: "default".into(),
                ..ClientView::default()
            }),
            killed: Cell::new(false),
            pending_push_bytes: Cell::new(0),
            soft_limit_since: Cell::new(None),
        };
        Rc::new(handle)
    }

    /// Closes the connection (CLIENT KILL): shutting the socket down ends
    /// the connection's pending read at once, so nothing has to wait on a
    /// second event beside every read. The connection leaves the registry
    /// before it closes its socket, so `fd` is still its own here.
    pub fn kill(&self) {
        self.killed.set(true);
        // SAFETY: plain syscall on a descriptor this connection still owns.
        unsafe {
            libc::shutdown(self.fd, libc::SHUT_RDWR);
        }
    }

    pub fn is_killed(&self) -> bool {
        self.killed.get()
    }

    /// One line of CLIENT LIST, in Redis 7's format.
    pub fn describe(&self) -> String {
        let v = self.view.borrow();
        let now = Instant::now();
        let mut flags = String::new();
        match v.link {
            LinkKind::Replica => flags.push('S'),
            LinkKind::Master => flags.push('M'),
            LinkKind::None => {}
        }
        if v.monitor {
            flags.push('O');
        }
        if v.sub + v.psub + v.ssub > 0 {
            flags.push('P');
        }
        if v.multi >= 0 {
            flags.push('x');
        }
        if v.blocked {
            flags.push('b');
        }
        if v.tracking {
            flags.push('t');
        }
        if v.tracking_broken {
            flags.push('R');
        }
        if v.tracking_bcast {
            flags.push('B');
        }
        if v.no_evict {
            flags.push('e');
        }
        if v.no_touch {
            flags.push('T');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} \
             qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl=0 oll=0 omem={} tot-mem={} \
             events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            v.name,
            now.duration_since(self.created).as_secs(),
            now.duration_since(self.last_active.get()).as_secs(),
            flags,
            v.db,
            v.sub,
            v.psub,
            v.ssub,
            v.multi,
            v.qbuf,
            v.qbuf_free,
            v.argv_mem,
            v.multi_mem,
            v.rbs,
            v.rbp,
            v.obuf,
            v.tot_mem(),
            if v.last_cmd.is_empty() { "NULL" } else { v.last_cmd },
            v.user,
            v.redirect,
            if v.resp == Resp::V3 { 3 } else { 2 },
            v.lib_name,
            v.lib_ver,
        )
    }
}

/// The clients of one core, by id.
#[derive(Default)]
pub struct ClientRegistry {
    clients: BTreeMap<u64, Rc<ClientHandle>>,
}

impl ClientRegistry {
    pub fn add(&mut self, handle: Rc<ClientHandle>) {
        self.clients.insert(handle.id, handle);
    }

    pub fn get(&self, id: u64) -> Option<&Rc<ClientHandle>> {
        self.clients.get(&id)
    }

    pub fn remove(&mut self, id: u64) {
        self.clients.remove(&id);
    }

    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// The connections of this core. A killed one is leaving (its task
    /// removes it once it has closed): it is not listed, and a second
    /// CLIENT KILL does not count it, as Redis frees a killed client at once.
    pub fn iter(&self) -> impl Iterator<Item = &Rc<ClientHandle>> {
        self.clients.values().filter(|c| !c.is_killed())
    }
}
