//! Pub/Sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE,
//! SUNSUBSCRIBE, PUBLISH, SPUBLISH and the PUBSUB container. They run on the
//! connection's core (`Exec::Node`); the server crate implements them on its
//! push path. Only their rows live here.

use crate::command::spec::{
    flags::*, keyflags as kf, ChannelArgs, CommandSpec, Exec, KeySpec, NodeCommand as N,
};

const fn node(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Node(cmd))
}

const SUBSCRIBER: u32 = PUBSUB | NOSCRIPT | LOADING | STALE | PUSH_MODE | PUSH_REPLY;

static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    node("channels", -2, PUBSUB | LOADING | STALE, N::PubSubChannels).doc(
        "pubsub",
        "2.8.0",
        "Returns the active channels.",
        "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)",
        "[pattern]",
    ),
    node("numsub", -2, PUBSUB | LOADING | STALE, N::PubSubNumSub).doc(
        "pubsub",
        "2.8.0",
        "Returns a count of subscribers to channels.",
        "O(N) for the NUMSUB subcommand, where N is the number of requested channels",
        "[channel [channel ...]]",
    ),
    node("numpat", 2, PUBSUB | LOADING | STALE, N::PubSubNumPat).doc(
        "pubsub",
        "2.8.0",
        "Returns a count of unique pattern subscriptions.",
        "O(1)",
        "",
    ),
    node("shardchannels", -2, PUBSUB | LOADING | STALE, N::PubSubShardChannels).doc(
        "pubsub",
        "7.0.0",
        "Returns the active shard channels.",
        "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).",
        "[pattern]",
    ),
    node("shardnumsub", -2, PUBSUB | LOADING | STALE, N::PubSubShardNumSub).doc(
        "pubsub",
        "7.0.0",
        "Returns the count of subscribers of shard channels.",
        "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels",
        "[shardchannel [shardchannel ...]]",
    ),
    node("help", 2, LOADING | STALE, N::PubSubHelp).doc(
        "pubsub",
        "6.2.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        "",
    ),
];

pub static COMMANDS: &[CommandSpec] = &[
    node("subscribe", -2, SUBSCRIBER | SENTINEL, N::Subscribe).channels(ChannelArgs::Subscribe).doc(
        "pubsub",
        "2.0.0",
        "Listens for messages published to channels.",
        "O(N) where N is the number of channels to subscribe to.",
        "channel [channel ...]",
    ),
    node("unsubscribe", -1, SUBSCRIBER | SENTINEL, N::Unsubscribe).doc(
        "pubsub",
        "2.0.0",
        "Stops listening to messages posted to channels.",
        "O(N) where N is the number of channels to unsubscribe.",
        "[channel [channel ...]]",
    ),
    node("psubscribe", -2, SUBSCRIBER | SENTINEL, N::PSubscribe)
        .channels(ChannelArgs::SubscribePattern)
        .doc(
        "pubsub",
        "2.0.0",
        "Listens for messages published to channels that match one or more patterns.",
        "O(N) where N is the number of patterns to subscribe to.",
        "pattern [pattern ...]",
    ),
    node("punsubscribe", -1, SUBSCRIBER | SENTINEL, N::PUnsubscribe).doc(
        "pubsub",
        "2.0.0",
        "Stops listening to messages published to channels that match one or more patterns.",
        "O(N) where N is the number of patterns to unsubscribe.",
        "[pattern [pattern ...]]",
    ),
    node("ssubscribe", -2, SUBSCRIBER, N::SSubscribe)
        .channels(ChannelArgs::Subscribe)
        .keys(&[KeySpec::range(1, -1, 1, kf::NOT_KEY)])
        .doc(
            "pubsub",
            "7.0.0",
            "Listens for messages published to shard channels.",
            "O(N) where N is the number of shard channels to subscribe to.",
            "shardchannel [shardchannel ...]",
        ),
    node("sunsubscribe", -1, SUBSCRIBER, N::SUnsubscribe)
        .keys(&[KeySpec::range(1, -1, 1, kf::NOT_KEY)])
        .doc(
            "pubsub",
            "7.0.0",
            "Stops listening to messages posted to shard channels.",
            "O(N) where N is the number of shard channels to unsubscribe.",
            "[shardchannel [shardchannel ...]]",
        ),
    node("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE | SENTINEL, N::Publish)
        .channels(ChannelArgs::Publish)
        .doc(
        "pubsub",
        "2.0.0",
        "Posts a message to a channel.",
        "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
        "channel message",
    ),
    node("spublish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, N::SPublish)
        .channels(ChannelArgs::Publish)
        .keys(&[KeySpec::one(1, kf::NOT_KEY)])
        .doc(
            "pubsub",
            "7.0.0",
            "Post a message to a shard channel",
            "O(N) where N is the number of clients subscribed to the receiving shard channel.",
            "shardchannel message",
        ),
    CommandSpec::container("pubsub", PUBSUB_SUBCOMMANDS).doc(
        "pubsub",
        "2.8.0",
        "A container for Pub/Sub commands.",
        "Depends on subcommand.",
        "",
    ),
];
