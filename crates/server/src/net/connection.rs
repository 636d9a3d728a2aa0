//! One client connection, on the core that accepted it, for its whole life:
//! read → parse (bounded) → route every command of the read → write all
//! replies in request order → read again.
//!
//! Reads are bounded by `client-query-buffer-limit`; a protocol error gets
//! Redis's error reply and closes the connection, a command error does not.

use crate::net::clients::ClientHandle;
use crate::net::socket::Socket;
use crate::node::Core;
use bytes::BytesMut;
use ringdb_engine::command::ClientInfo;
use ringdb_protocol::{Output, ParseLimits, ReplyWriter, Request, RequestParser, Resp};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tracing::debug;

/// Redis's reply to a non-loopback client in protected mode.
const PROTECTED_MODE_DENIED: &str = "DENIED Redis is running in protected mode because protected mode is \
    enabled and no password is set for the default user. In this mode connections are only accepted from \
    the loopback interface. If you want to connect from external computers you may adopt one of the \
    following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' \
    from the loopback interface by connecting from the same host the server is running, however MAKE SURE \
    the server is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change \
    permanent. 2) Alternatively you can just disable the protected mode by editing the configuration file, \
    and setting the protected mode option to 'no', and then restarting the server. 3) If you started the \
    server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an \
    authentication password for the default user. NOTE: You only need to do one of the above things in \
    order for the server to start accepting connections from the outside.";

/// Most push bytes a connection hands to its socket while earlier ones are
/// still unsent (see `Woken::Push` in [`Connection::run`]).
const PUSHES_UNSENT: usize = 64 * 1024;
/// Most push bytes taken from the mailbox at once.
const PUSH_BATCH: usize = 64 * 1024;
/// An output buffer grown past this is given back once written.
const KEEP_OUTPUT: usize = 4 * 1024 * 1024;

/// What ended a connection's wait ([`Connection::read_some`]).
enum Woken {
    /// This many bytes were read (0: the peer closed).
    Input(usize),
    /// A push arrived first; nothing was read.
    Push,
}

/// Connection state that commands change (SELECT, HELLO, AUTH, CLIENT …).
#[derive(Debug)]
pub struct ClientState {
    pub id: u64,
    pub db: usize,
    pub resp: Resp,
    pub authenticated: bool,
    /// The ACL user this connection runs as (`default` until AUTH), and
    /// the ACL generation it was read at: a change re-reads it.
    pub user: std::sync::Arc<ringdb_engine::acl::User>,
    pub acl_generation: u64,
    /// The running command forms keys from data (SORT BY/GET) and the
    /// user may not read every key.
    pub partial_key_read: bool,
    /// CLIENT REPLY OFF.
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: the next command's reply is dropped.
    pub skip_next: bool,
    /// The reply of the command now running is dropped (it followed CLIENT
    /// REPLY SKIP); CLIENT REPLY ON clears it, as Redis clears
    /// `CLIENT_REPLY_SKIP`, so that its own `+OK` is sent.
    pub skip_current: bool,
    pub no_touch: bool,
    pub no_evict: bool,
    /// Close once the replies so far are written (QUIT, protocol errors).
    pub close_after_reply: bool,
    /// The open MULTI, if any: commands are queued until EXEC.
    pub multi: Option<crate::route::multi::Multi>,
    /// Keys WATCHed for the next EXEC.
    pub watched: Vec<crate::route::multi::WatchedKey>,
    /// EXEC is running this connection's transaction, which holds its locks.
    pub in_exec: bool,
    /// The running EXEC's transaction id in the append-only logs (its
    /// changes are held back on each shard until it ends).
    pub exec_id: u64,
    /// Pub/Sub subscriptions (also registered in the core's push hub).
    pub subscriptions: std::collections::BTreeSet<(crate::push::Kind, bytes::Bytes)>,
    /// The core this connection lives on.
    pub home: u16,
    /// CLIENT TRACKING is on: which reads the shards remember (the rest of
    /// the client's tracking state is in the core's push hub).
    pub tracking: Option<crate::push::tracking::Remember>,
    /// CLIENT CACHING YES/NO was given for the next command (or
    /// transaction).
    pub caching: bool,
    /// The command that CLIENT CACHING applied to has run: `caching` ends
    /// before the next one (Redis's `resetClient`).
    pub caching_spent: bool,
    /// Reactive queries (`GET.WATCH key`), by fingerprint (also registered
    /// in the core's push hub and on the queries' shards).
    pub query_watches: std::collections::BTreeMap<u64, crate::push::watch::WatchedQuery>,
    /// HOTKEYS.WATCH: the key patterns watched (empty = every key), if any
    /// (also registered in the core's push hub and counted on every shard).
    pub hotkey_watch: Option<Vec<bytes::Bytes>>,
    /// MONITOR: every command run is pushed to this client.
    pub monitor: bool,
    /// SCRIPT DEBUG YES|SYNC: the next EVAL runs in a debugging session.
    pub debugger: Option<crate::route::debug::Mode>,
    /// What a replica said with REPLCONF before PSYNC, from its first
    /// REPLCONF on (boxed: most clients never send one).
    pub replica_hello: Option<Box<crate::repl::primary::Hello>>,
    /// This is the link to our primary: its writes pass a read-only
    /// replica, and nothing is answered.
    pub master: bool,
}

impl ClientState {
    /// A new connection's state (and the state RESET returns to): RESP2,
    /// database 0, nothing subscribed, watched, tracked or queued.
    /// `authenticated`: no password is required.
    pub fn new(
        id: u64,
        home: u16,
        authenticated: bool,
        user: std::sync::Arc<ringdb_engine::acl::User>,
        acl_generation: u64,
    ) -> Self {
        ClientState {
            id,
            db: 0,
            resp: Resp::V2,
            authenticated,
            user,
            acl_generation,
            partial_key_read: false,
            reply_off: false,
            skip_next: false,
            skip_current: false,
            no_touch: false,
            no_evict: false,
            close_after_reply: false,
            multi: None,
            watched: Vec::new(),
            in_exec: false,
            exec_id: 0,
            subscriptions: Default::default(),
            home,
            tracking: None,
            caching: false,
            caching_spent: false,
            query_watches: Default::default(),
            hotkey_watch: None,
            monitor: false,
            debugger: None,
            replica_hello: None,
            master: false,
        }
    }

    /// A RESP2 connection with subscriptions or reactive queries may only
    /// run the commands that manage them (Redis's subscribe mode).
    pub fn in_push_mode(&self) -> bool {
        self.resp == Resp::V2 && (!self.subscriptions.is_empty() || self.watching())
    }

    /// Reactive queries or HOTKEYS.WATCH: watch mode rather than subscribe
    /// mode in RESP2.
    pub fn watching(&self) -> bool {
        !self.query_watches.is_empty() || self.hotkey_watch.is_some()
    }

    pub fn info(&self) -> ClientInfo {
        ClientInfo {
            id: self.id,
            db: self.db,
            resp: self.resp,
            no_touch: self.no_touch,
            home: self.home,
            track: self.tracking.is_some_and(|t| t.now(self.caching)),
            script: false,
            part: false,
            master: self.master,
            acl_user: (!self.user.unrestricted()).then(|| self.user.uid()),
            partial_key_read: self.partial_key_read,
        }
    }
}

pub struct Connection {
    pub core: Rc<Core>,
    socket: Socket,
    pub handle: Rc<ClientHandle>,
    parser: RequestParser,
    inbuf: BytesMut,
    /// Replies waiting to be written (long string values by reference).
    pub out: Output,
    /// Pushes for this client (made on its first subscription).
    mailbox: Option<flume::Receiver<crate::push::Push>>,
    /// A push taken from the mailbox while waiting for input.
    pushes_in: Vec<crate::push::Push>,
    /// Input arrived while a blocking command waited (parse before reading).
    input_while_blocked: bool,
    /// What CLIENT LIST measures of the command running.
    pub meter: QueryMeter,
    pub state: ClientState,
}

/// The query buffer as CLIENT LIST reports it while a command runs:
/// parsing moves whole commands out of the buffer before they run, so the
/// bytes they took are counted here until they are done.
#[derive(Debug, Default)]
pub struct QueryMeter {
    /// Wire bytes of the running command and of the commands parsed with it
    /// that have not run yet.
    pub executing: usize,
    /// Bytes of the running command's arguments.
    pub argv_mem: usize,
    /// Most reply bytes held at once since `peak_since` (Redis's
    /// `buf_peak`, reset every 5 seconds).
    reply_peak: usize,
    peak_since: Option<Instant>,
}

/// How long a reply buffer peak is remembered (Redis's
/// `CLIENTS_PEAK_MEM_USAGE_SLOTS` seconds of `clientsCron`).
const PEAK_WINDOW: Duration = Duration::from_secs(5);

impl Connection {
    /// Tells a client it cannot be served (maxclients) and closes.
    pub async fn refuse(mut socket: Socket, error: &str) {
        let mut out = Output::default();
        out.extend_from_slice(format!("-{error}\r\n").as_bytes());
        let _ = socket.write(&mut out).await;
        socket.close().await;
    }

    /// Serves one client until it leaves, is killed or idles past `timeout`.
    pub async fn serve(core: Rc<Core>, socket: Socket) {
        if Self::denied_by_protected_mode(&core, socket.peer_addr()) {
            Box::pin(Self::refuse(socket, PROTECTED_MODE_DENIED)).await;
            core.shared.connected_clients.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        socket.set_options(core.config.borrow().tcp_keepalive());
        let id = core.shared.next_client_id.fetch_add(1, Ordering::Relaxed);
        let addr = socket.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let laddr = socket.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let handle = ClientHandle::new(id, addr, laddr, socket.fd());
        core.shard.borrow_mut().state.stats.connections_received += 1;
        core.clients.borrow_mut().add(handle.clone());
        let acl = &core.shared.acl;
        let generation = acl.generation();
        let (authenticated, user) = (!acl.auth_required(), acl.default_user());
        let mut conn = Connection {
            core: core.clone(),
            socket,
            handle,
            parser: RequestParser::new(),
            // No buffers until there is something to hold: an idle client
            // costs its socket and its state alone.
            inbuf: BytesMut::new(),
            out: Output::default(),
            mailbox: None,
            pushes_in: Vec::new(),
            input_while_blocked: false,
            meter: QueryMeter::default(),
            state: ClientState::new(id, core.id.0, authenticated, user, generation),
        };
        if let Err(reason) = conn.run().await {
            debug!(client = id, "connection closed: {reason}");
        }
        // Leave the registry first: CLIENT KILL must never reach a descriptor
        // number the kernel may hand out again once the socket is closed,
        // and a client gone is gone for tracking redirects at once (Redis
        // frees it before anything else runs).
        core.clients.borrow_mut().remove(id);
        // Boxed, as the router is in `run`: only a closing connection needs
        // their state.
        if !conn.state.watched.is_empty() {
            Box::pin(crate::route::multi::unwatch_all(&mut conn)).await;
        }
        Box::pin(conn.leave_push_hub()).await;
        let Connection { socket, .. } = conn;
        Box::pin(socket.close()).await;
        core.shared.connected_clients.fetch_sub(1, Ordering::Relaxed);
    }

    /// The connection to this replica's primary, on `socket` (with
    /// `input`, what was read past the snapshot): it runs the commands of
    /// the replication stream, in database `db`, answering nothing.
    pub fn for_master(core: Rc<Core>, socket: Socket, input: &[u8], db: usize) -> Connection {
        let id = core.shared.next_client_id.fetch_add(1, Ordering::Relaxed);
        let addr = socket.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let laddr = socket.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let handle = ClientHandle::new(id, addr, laddr, socket.fd());
        handle.view.borrow_mut().link = crate::net::clients::LinkKind::Master;
        core.clients.borrow_mut().add(handle.clone());
        // Redis's master client has no user: nothing it sends is checked.
        let superuser = std::sync::Arc::new(ringdb_engine::acl::User::superuser());
        let mut state = ClientState::new(id, core.id.0, true, superuser, u64::MAX);
        state.master = true;
        state.reply_off = true;
        state.db = db;
        let inbuf = BytesMut::from(input);
        Connection {
            core,
            socket,
            handle,
            parser: RequestParser::new(),
            inbuf,
            out: Output::default(),
            mailbox: None,
            pushes_in: Vec::new(),
            input_while_blocked: false,
            meter: QueryMeter::default(),
            state,
        }
    }

    /// Leaves the registry and closes the socket (a link's connection).
    pub async fn close(self) {
        self.core.clients.borrow_mut().remove(self.state.id);
        self.socket.close().await;
    }

    /// Reads what is available into the input buffer (a replication link,
    /// which parses it itself with [`Connection::parse_input`]); `Some(0)`
    /// when the peer closed.
    pub async fn read_input(&mut self) -> Result<Option<usize>, String> {
        // Large reads: a link's input is a stream, and each read becomes
        // one batch through the router.
        let n = self.socket.read_into(&mut self.inbuf, 1 << 20).await.map_err(|e| e.to_string())?;
        self.handle.last_active.set(Instant::now());
        Ok(Some(n))
    }

    /// Parses the whole commands in the input buffer.
    pub fn parse_input(&mut self, requests: &mut Vec<Request>) -> Result<(), String> {
        let limits = self.limits();
        self.parser.parse(&mut self.inbuf, &limits, requests).map_err(|e| e.to_string())
    }

    /// Output the kernel has not taken yet.
    pub fn unsent(&self) -> usize {
        self.socket.unsent()
    }

    /// Protected mode with no password: only loopback clients are served
    /// (Redis 7 turns the others away whatever `bind` says).
    fn denied_by_protected_mode(core: &Core, peer: Option<std::net::SocketAddr>) -> bool {
        let config = core.config.borrow();
        config.protected_mode()
            && !core.shared.acl.auth_required()
            && peer.is_some_and(|a| !is_loopback(a))
    }

    /// Whether a connection accepted while a script blocks the core may be
    /// answered before it is served ([`Self::answerable_while_busy`] of a
    /// fresh connection): no password to give first, and not one that
    /// protected mode turns away.
    pub fn answerable_when_new(core: &Core, peer: Option<std::net::SocketAddr>) -> bool {
        let Ok(config) = core.config.try_borrow() else { return false };
        let needs_password = core.shared.acl.auth_required();
        drop(config);
        !needs_password && !Self::denied_by_protected_mode(core, peer)
    }

    /// Gives this connection a mailbox in its core's push hub (its first
    /// subscription).
    pub fn ensure_mailbox(&mut self) {
        if self.mailbox.is_none() {
            self.mailbox = Some(self.core.push.borrow_mut().register(self.handle.clone()));
        }
    }

    /// Writes the pushes waiting for this client after its replies.
    pub(crate) fn write_pushes(&mut self) {
        let Some(mailbox) = &self.mailbox else { return };
        let mut pushes = std::mem::take(&mut self.pushes_in);
        let mut batch: usize = pushes.iter().map(|p| p.size()).sum();
        while batch < PUSH_BATCH {
            let Ok(push) = mailbox.try_recv() else { break };
            batch += push.size();
            pushes.push(push);
        }
        let mut out = self.out.writer(self.state.resp);
        for push in &pushes {
            crate::push::encode(push, &mut out);
            let pending = &self.handle.pending_push_bytes;
            pending.set(pending.get().saturating_sub(push.size()));
        }
    }

    /// Leaves the push hub (disconnect, RESET): drops every subscription and
    /// tells the other cores about channels this core no longer has.
    pub async fn leave_push_hub(&mut self) {
        if self.mailbox.is_none() {
            return;
        }
        crate::cmd::monitor::stop(self).await;
        crate::cmd::client::stop_tracking(self).await;
        crate::cmd::watch::unwatch_all(self).await;
        crate::cmd::hotkeys::unwatch(self).await;
        self.mailbox = None;
        self.state.subscriptions.clear();
        let emptied = self.core.push.borrow_mut().unregister(self.state.id);
        crate::cmd::pubsub::tell_other_cores(&self.core, emptied, false).await;
    }

    /// A reply writer on this connection's output, in its protocol.
    pub fn reply(&mut self) -> ReplyWriter<'_> {
        self.out.writer(self.state.resp)
    }

    fn limits(&self) -> ParseLimits {
        let config = self.core.config.borrow();
        ParseLimits {
            max_bulk_len: config.conn.proto_max_bulk_len,
            max_multibulk_len: i32::MAX as u64,
            authenticated: self.state.authenticated,
        }
    }

    async fn run(&mut self) -> Result<(), String> {
        let mut requests: Vec<Request> = Vec::new();
        loop {
            // Input read while a blocking command waited is parsed first.
            let woken = if std::mem::take(&mut self.input_while_blocked) {
                Woken::Input(self.inbuf.len())
            } else {
                self.read_some().await?
            };
            match woken {
                Woken::Input(0) => return Ok(()),
                Woken::Input(_) => {}
                Woken::Push => {
                    // Pushes leave the mailbox, where the pubsub output
                    // limit counts them, only as fast as the client takes
                    // them: otherwise a slow subscriber held its limit's
                    // worth in the mailbox and as much again unsent.
                    self.socket.drained_to(PUSHES_UNSENT).await.map_err(|e| e.to_string())?;
                    self.write_pushes();
                    self.flush_as(true).await?;
                    if self.handle.is_killed() {
                        return Ok(());
                    }
                    continue;
                }
            }
            let limits = self.limits();
            let parsed = self.parser.parse(&mut self.inbuf, &limits, &mut requests);
            let query_limit = self.core.config.borrow().conn.client_query_buffer_limit;
            if self.inbuf.len() > query_limit {
                tracing::warn!(
                    client = self.state.id,
                    "closing client that reached max query buffer length"
                );
                self.core.shard.borrow_mut().state.stats.query_limit_disconnections += 1;
                return Err("query buffer limit".into());
            }
            if !requests.is_empty() {
                // Boxed: the router's state is kilobytes and lives only
                // while commands run; inline it would stay in every idle
                // connection's task.
                Box::pin(crate::route::execute(self, &mut requests)).await;
            }
            if let Err(e) = parsed {
                self.reply().error(&e.to_string());
                self.state.close_after_reply = true;
            }
            self.write_pushes();
            if self.state.close_after_reply {
                // QUIT: the client may act on the reply at once (another
                // connection's write then finds this one gone).
                self.core.clients.borrow_mut().remove(self.state.id);
            }
            self.flush().await?;
            if self.state.close_after_reply || self.handle.is_killed() {
                return Ok(());
            }
            self.update_view();
        }
    }

    /// Whether the driver may answer this connection's next commands while
    /// a script blocks the core (`route::busy`): nothing of a command is
    /// buffered here, and nothing of the connection's state but its
    /// transaction, which it hands over (authentication, CLIENT REPLY,
    /// CLIENT CACHING, RESP2 subscribe mode), changes what a BUSY-time
    /// command gets or does.
    fn answerable_while_busy(&self) -> bool {
        let st = &self.state;
        self.inbuf.is_empty()
            && st.authenticated
            && !st.reply_off
            && !st.skip_next
            && !st.caching
            && !st.close_after_reply
            && !st.in_push_mode()
    }

    /// Reads what is available (waiting for at least one byte), unless a
    /// push arrives first. CLIENT KILL shuts the socket down, which ends
    /// the read; so does `timeout`.
    async fn read_some(&mut self) -> Result<Woken, String> {
        let wanted = self.parser.pending_bulk(self.inbuf.len()).unwrap_or(0);
        // Subscribers and watchers wait for pushes as well as for input, and
        // are never closed for being idle (as in Redis); other clients with
        // a mailbox (RESP3, tracking) are.
        let idle_limit = if self.state.subscriptions.is_empty()
            && self.state.query_watches.is_empty()
            && !self.state.monitor
        {
            self.core.config.borrow().conn.idle_timeout
        } else {
            0
        };
        if self.answerable_while_busy() {
            let multi = self.state.multi.take();
            self.socket.set_idle(crate::route::busy::Idle::new(self.state.resp, multi));
        }
        if self.inbuf.is_empty() {
            // Nothing half-read: give the buffer back while waiting (the
            // uring backend hands over its own on the next read).
            self.inbuf = BytesMut::new();
        }
        let read = self.socket.read_into(&mut self.inbuf, wanted);
        let read = async { read.await.map(Some).map_err(|e| e.to_string()) };
        let pushes_in = &mut self.pushes_in;
        let n = match (&self.mailbox, idle_limit) {
            (Some(mailbox), secs) => {
                let push = async {
                    // A closed mailbox cannot happen while we hold it.
                    if let Ok(p) = mailbox.recv_async().await {
                        pushes_in.push(p);
                    }
                    Ok(None)
                };
                if secs == 0 {
                    futures_lite::future::or(read, push).await
                } else {
                    // A RESP3 or tracking client waits for pushes but,
                    // not being subscribed, is closed when idle (Redis).
                    let idle = glommio::timer::sleep(Duration::from_secs(secs));
                    let idle = async {
                        idle.await;
                        Err("idle timeout".to_string())
                    };
                    futures_lite::future::or(read, futures_lite::future::or(push, idle)).await
                }
            }
            (None, 0) => read.await,
            (None, secs) => {
                let idle = glommio::timer::sleep(Duration::from_secs(secs));
                futures_lite::future::or(read, async {
                    idle.await;
                    Err("idle timeout".to_string())
                })
                .await
            }
        };
        if let Some(idle) = self.socket.take_idle() {
            // What a busy script's hook did to the transaction meanwhile.
            self.state.multi = idle.multi;
            if idle.discarded {
                // Boxed: rare, and inline its state would be in every idle
                // connection's task.
                Box::pin(crate::route::multi::unwatch_all(self)).await;
            }
        }
        let Some(n) = n? else { return Ok(Woken::Push) };
        if n > 0 {
            let stats = &mut self.core.shard.borrow_mut().state.stats;
            stats.net_input_bytes += n as u64;
            stats.reads_processed += 1;
        }
        self.handle.last_active.set(Instant::now());
        Ok(Woken::Input(n))
    }

    /// While the connection waits in a blocking command: keeps what the
    /// client sends (it runs after the blocking command, in order, up to the
    /// query buffer limit) and returns once the client has hung up or been
    /// killed, so that nothing is served to a reader that is gone.
    pub async fn read_while_blocked(&mut self) {
        loop {
            if self.handle.is_killed() {
                return;
            }
            let limit = self.core.config.borrow().conn.client_query_buffer_limit;
            if self.inbuf.len() >= limit {
                // Stop reading; the kernel holds the rest.
                std::future::pending::<()>().await;
            }
            match self.socket.read_into(&mut self.inbuf, 0).await {
                Ok(0) | Err(_) => return,
                Ok(_) => self.input_while_blocked = true,
            }
        }
    }

    /// The client is on a loopback address (Redis's `islocalClient`, for
    /// the protected actions).
    pub fn is_local(&self) -> bool {
        self.handle.addr.parse::<std::net::SocketAddr>().is_ok_and(is_loopback)
    }

    pub fn socket_fd(&self) -> std::os::fd::RawFd {
        self.socket.fd()
    }

    /// See [`Socket::stop_reading`].
    pub async fn stop_reading(&mut self) {
        self.socket.stop_reading().await;
    }

    /// This connection as a debugging session's client.
    pub fn debug_link(&self) -> Box<dyn ringdb_engine::scripting::debugger::Link> {
        self.socket.debug_link()
    }

    pub async fn flush(&mut self) -> Result<(), String> {
        self.flush_as(false).await
    }

    /// [`Connection::flush`]; `pushes`: the output is only pushes (see
    /// [`Socket::write_as`]).
    async fn flush_as(&mut self, pushes: bool) -> Result<(), String> {
        if self.out.is_empty() {
            return Ok(());
        }
        let len = self.out.size();
        self.track_reply_peak(len);
        self.socket.write_as(&mut self.out, pushes).await.map_err(|e| e.to_string())?;
        self.check_output_limit()?;
        {
            let stats = &mut self.core.shard.borrow_mut().state.stats;
            stats.net_output_bytes += len as u64;
            stats.writes_processed += 1;
        }
        if self.out.capacity() > KEEP_OUTPUT {
            self.out = Output::default();
        }
        Ok(())
    }

    /// `client-output-buffer-limit normal …` for replies the kernel has not
    /// taken yet (subscribers' pushes are held to the pubsub class where
    /// they are queued, see `push::PushHub::send`).
    fn check_output_limit(&self) -> Result<(), String> {
        let unsent = self.socket.unsent();
        if unsent == 0 || !self.state.subscriptions.is_empty() {
            return Ok(());
        }
        let limit = self.core.config.borrow().conn.normal_output_limit;
        if crate::push::over_limit(&self.handle, unsent, limit) {
            tracing::warn!(
                client = self.state.id,
                unsent,
                "closing a client that reached its output buffer limit"
            );
            self.core.push.borrow_mut().limit_disconnections += 1;
            // Abortive: what is unsent is dropped, not waited for.
            self.handle.kill();
            return Err("output buffer limit".into());
        }
        Ok(())
    }

    fn track_reply_peak(&mut self, len: usize) {
        // The time of the last read is close enough for a 5 s window, and
        // costs no clock read per reply.
        let now = self.handle.last_active.get();
        let m = &mut self.meter;
        if m.peak_since.is_none_or(|t| now.duration_since(t) >= PEAK_WINDOW) {
            m.peak_since = Some(now);
            m.reply_peak = 0;
        }
        m.reply_peak = m.reply_peak.max(len);
    }

    /// Publishes the state CLIENT LIST shows (also called by CLIENT LIST and
    /// INFO themselves, so that the caller's own line is current).
    pub fn update_view(&self) {
        use crate::push::Kind;
        let mut view = self.handle.view.borrow_mut();
        let count =
            |kind: Kind| self.state.subscriptions.iter().filter(|(k, _)| *k == kind).count();
        view.sub = count(Kind::Channel);
        view.psub = count(Kind::Pattern);
        view.ssub = count(Kind::ShardChannel);
        view.multi = self.state.multi.as_ref().map_or(-1, |m| m.queued.len() as i64);
        view.monitor = self.state.monitor;
        view.db = self.state.db;
        view.resp = self.state.resp;
        view.no_evict = self.state.no_evict;
        view.no_touch = self.state.no_touch;
        view.qbuf = self.meter.executing + self.inbuf.len();
        view.qbuf_free = self.inbuf.capacity() - self.inbuf.len();
        view.argv_mem = self.meter.argv_mem;
        view.multi_mem = self.state.multi.as_ref().map_or(0, |m| {
            let args: usize = m.queued.iter().flat_map(|q| &q.args).map(|a| a.len()).sum();
            args + m.queued.capacity() * std::mem::size_of::<crate::route::multi::Queued>()
        });
        view.rbs = self.out.capacity();
        // The reply being written counts too (CLIENT LIST's own).
        view.rbp = self.meter.reply_peak.max(self.out.size());
        view.obuf = self.socket.unsent();
    }
}

/// Whether a peer is this host (127.0.0.0/8 or ::1, also as an IPv4-mapped
/// IPv6 address).
fn is_loopback(peer: std::net::SocketAddr) -> bool {
    peer.ip().to_canonical().is_loopback()
}
