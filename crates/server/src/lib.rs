//! ringdb server
