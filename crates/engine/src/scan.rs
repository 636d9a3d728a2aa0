//! SCAN: one cursor over every shard of the keyspace.
