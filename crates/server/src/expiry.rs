//! The active expiry task of a core: `hz` times a second it runs the shard's
//! expiry cycle, which reclaims expired keys without a full scan and within a
//! time budget (see `ringdb_engine::expire`), and, when the process is over
//! `maxmemory`, evicts some of the shard's keys even if no command comes
//! (see `ringdb_engine::evict`). Not on a replica: its keys expire by its
//! primary's stream.

use crate::node::Core;
use std::rc::Rc;
use std::time::Duration;

pub async fn run(core: Rc<Core>) {
    loop {
        let hz = core.config.borrow().hz();
        let period = Duration::from_millis(1000 / hz);
        glommio::timer::sleep(period).await;
        if core.shared.cron_paused.load(std::sync::atomic::Ordering::Relaxed) {
            continue;
        }
        let mut shard = core.shard.borrow_mut();
        // A replica's keys expire when its primary's DELs come (Redis runs
        // no active expiry on a replica either).
        if shard.state.settings.active_expire && !shard.state.settings.replica {
            // Redis's slow cycle: at most 25% of the period.
            ringdb_engine::expire::active_cycle(&mut shard, period / 4);
        }
        // A lowered tracking-table-max-keys is reached a step per tick.
        shard.enforce_limits(ringdb_engine::shard::now_ms());
        drop(shard);
        core.publish_changes();
    }
}
