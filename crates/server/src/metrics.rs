//! The per-core task that samples the instantaneous rates INFO stats shows
//! (`instantaneous_ops_per_sec`, `instantaneous_input_kbps`, …) every
//! 100 ms, as Redis's `serverCron` does; and, on the same beat, cools down
//! the hot keys whose time is up (pushing `coldkey` to their watchers).

use crate::node::Core;
use std::rc::Rc;
use std::time::Duration;

/// Redis samples its instantaneous metrics every 100 ms.
const PERIOD: Duration = Duration::from_millis(100);

pub async fn run(core: Rc<Core>) {
    loop {
        glommio::timer::sleep(PERIOD).await;
        let now = ringdb_engine::shard::now_ms();
        let cooled = {
            let mut shard = core.shard.borrow_mut();
            shard.state.stats.sample(now);
            // Reads answered from copies on other cores count as accesses.
            shard.state.tick_hotkeys(now)
        };
        if cooled {
            core.publish_changes();
        }
    }
}
