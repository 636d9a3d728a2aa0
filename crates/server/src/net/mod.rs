//! The network side of a core: listeners, the client registry, and the
//! connection loop (read → parse → route → write).

pub mod clients;
pub mod connection;
pub mod fallback;
pub mod fd_link;
pub mod listener;
pub mod socket;
pub mod tls;
pub mod uring;
