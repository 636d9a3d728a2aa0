//! The GEO commands against a real 2-shard server: positions, geohashes
//! and distances with the digits Redis 7.0 prints (values read from Redis),
//! radius and box searches with every option, the STORE forms writing to a
//! key on the other shard, RESP3 reply types, and Redis's error texts.

mod common;
use common::{keys_on_two_shards, q, Server};
use redis::Value;

fn strings(c: &mut redis::Connection, args: &[&str]) -> Vec<String> {
    q(c, args).unwrap()
}

fn int(c: &mut redis::Connection, args: &[&str]) -> i64 {
    q(c, args).unwrap()
}

fn error(c: &mut redis::Connection, args: &[&str]) -> String {
    q::<Value>(c, args).unwrap_err().to_string()
}

/// Palermo and Catania, as in Redis's documentation.
fn sicily(c: &mut redis::Connection, key: &str) {
    let added: i64 = q(
        c,
        &["GEOADD", key, "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"],
    )
    .unwrap();
    assert_eq!(added, 2);
}

#[test]
fn positions_hashes_and_distances_print_as_redis_does() {
    let server = Server::start(2);
    let mut c = server.client();
    sicily(&mut c, "Sicily");
    // The score is the 52-bit geohash.
    assert_eq!(
        strings(&mut c, &["ZRANGE", "Sicily", "0", "-1", "WITHSCORES"]),
        ["Palermo", "3479099956230698", "Catania", "3479447370796909"]
    );
    let pos: Vec<Option<Vec<String>>> =
        q(&mut c, &["GEOPOS", "Sicily", "Palermo", "nope"]).unwrap();
    assert_eq!(
        pos,
        [Some(vec!["13.36138933897018433".to_string(), "38.11555639549629859".to_string()]), None]
    );
    let hashes: Vec<Option<String>> =
        q(&mut c, &["GEOHASH", "Sicily", "Palermo", "Catania", "nope"]).unwrap();
    assert_eq!(hashes, [Some("sqc8b49rny0".into()), Some("sqdtr74hyu0".into()), None]);
    for (unit, want) in
        [("m", "166274.1516"), ("km", "166.2742"), ("MI", "103.3182"), ("ft", "545518.8700")]
    {
        assert_eq!(
            q::<String>(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania", unit]).unwrap(),
            want
        );
    }
    assert_eq!(
        q::<Option<String>>(&mut c, &["GEODIST", "Sicily", "Palermo", "nope"]).unwrap(),
        None
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GEODIST", "missing", "a", "b"]).unwrap(), None);
    // A missing key answers an array of nils.
    let pos: Vec<Option<Vec<String>>> = q(&mut c, &["GEOPOS", "missing", "a"]).unwrap();
    assert_eq!(pos, [None]);
    // NX, XX and CH are ZADD's.
    assert_eq!(
        int(
            &mut c,
            &["GEOADD", "Sicily", "NX", "CH", "13.361389", "38.115556", "Palermo", "2", "3", "x"]
        ),
        1
    );
    assert_eq!(
        int(&mut c, &["GEOADD", "Sicily", "XX", "CH", "13.5", "38.1", "Palermo", "2", "3", "y"]),
        1
    );
    assert_eq!(int(&mut c, &["ZCARD", "Sicily"]), 3);
    // RESP3: coordinates are doubles, distances stay strings, nils are `_`.
    let mut raw = server.raw();
    raw.call(&["HELLO", "3"]);
    assert_eq!(
        raw.call(&["GEOPOS", "Sicily", "Catania", "nope"]),
        "*2\r\n*2\r\n,15.08726745843887329\r\n,37.50266842333162032\r\n_\r\n"
    );
    assert_eq!(
        raw.call(&["GEORADIUS", "Sicily", "15", "37", "100", "km", "WITHDIST", "WITHHASH", "WITHCOORD"]),
        "*1\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n,15.08726745843887329\r\n,37.50266842333162032\r\n"
    );
}

#[test]
fn searches_by_radius_and_box_with_every_option() {
    let server = Server::start(2);
    let mut c = server.client();
    sicily(&mut c, "Sicily");
    let near = ["GEORADIUS", "Sicily", "15", "37", "200", "km"];
    assert_eq!(strings(&mut c, &near), ["Palermo", "Catania"]);
    assert_eq!(strings(&mut c, &[&near[..], &["ASC"]].concat()), ["Catania", "Palermo"]);
    assert_eq!(strings(&mut c, &[&near[..], &["DESC"]].concat()), ["Palermo", "Catania"]);
    // COUNT sorts nearest first unless ANY is given.
    assert_eq!(strings(&mut c, &[&near[..], &["COUNT", "1"]].concat()), ["Catania"]);
    assert_eq!(strings(&mut c, &[&near[..], &["COUNT", "1", "ANY"]].concat()), ["Palermo"]);
    let with: Value = q(&mut c, &[&near[..], &["WITHDIST", "ASC"]].concat()).unwrap();
    let as_pairs: Vec<(String, String)> = redis::from_redis_value(&with).unwrap();
    assert_eq!(
        as_pairs,
        [
            ("Catania".to_string(), "56.4413".to_string()),
            ("Palermo".to_string(), "190.4424".to_string())
        ]
    );
    assert_eq!(
        strings(&mut c, &["GEORADIUSBYMEMBER", "Sicily", "Palermo", "100", "km"]),
        ["Palermo"]
    );
    assert_eq!(
        strings(&mut c, &["GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", "200", "km", "DESC"]),
        ["Catania", "Palermo"]
    );
    assert_eq!(
        strings(
            &mut c,
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "ASC"]
        ),
        ["Catania", "Palermo"]
    );
    // Palermo is 190 km away but outside a box 250 km wide centred on 15,37.
    assert_eq!(
        strings(
            &mut c,
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "250", "400", "km"]
        ),
        ["Catania"]
    );
    assert_eq!(
        strings(&mut c, &["GEOSEARCH", "Sicily", "FROMMEMBER", "Catania", "BYRADIUS", "1", "m"]),
        ["Catania"]
    );
    assert_eq!(
        strings(&mut c, &["GEOSEARCH", "missing", "FROMMEMBER", "x", "BYRADIUS", "1", "m"]),
        Vec::<String>::new()
    );
    // At the antimeridian Redis's cells do not wrap for a radius search
    // from +180, but a box from -180 reaches across (Redis 7.0 answers so).
    let _: i64 =
        q(&mut c, &["GEOADD", "pacific", "179.9", "0", "east", "-179.9", "0", "west"]).unwrap();
    assert_eq!(
        strings(
            &mut c,
            &["GEOSEARCH", "pacific", "FROMLONLAT", "180", "0", "BYRADIUS", "50", "km", "ASC"]
        ),
        ["east"]
    );
    let mut both = strings(
        &mut c,
        &["GEOSEARCH", "pacific", "FROMLONLAT", "-180", "0", "BYBOX", "50", "50", "km"],
    );
    both.sort();
    assert_eq!(both, ["east", "west"]);
}

#[test]
fn store_forms_write_to_a_key_on_the_other_shard() {
    let server = Server::start(2);
    let mut c = server.client();
    let (src, dst) = keys_on_two_shards();
    sicily(&mut c, &src);
    assert_eq!(
        int(
            &mut c,
            &[
                "GEOSEARCHSTORE",
                &dst,
                &src,
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "200",
                "km",
                "ASC",
                "COUNT",
                "1"
            ]
        ),
        1
    );
    assert_eq!(
        strings(&mut c, &["ZRANGE", &dst, "0", "-1", "WITHSCORES"]),
        ["Catania", "3479447370796909"]
    );
    assert_eq!(
        int(
            &mut c,
            &[
                "GEOSEARCHSTORE",
                &dst,
                &src,
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "200",
                "km",
                "STOREDIST"
            ]
        ),
        2
    );
    assert_eq!(
        strings(&mut c, &["ZRANGE", &dst, "0", "-1", "WITHSCORES"]),
        ["Catania", "56.441257870158204", "Palermo", "190.44242984775784"]
    );
    assert_eq!(int(&mut c, &["GEORADIUS", &src, "15", "37", "200", "km", "STORE", &dst]), 2);
    assert_eq!(int(&mut c, &["ZSCORE", &dst, "Palermo"]), 3479099956230698);
    assert_eq!(
        int(&mut c, &["GEORADIUSBYMEMBER", &src, "Palermo", "10", "km", "STOREDIST", &dst]),
        1
    );
    assert_eq!(strings(&mut c, &["ZRANGE", &dst, "0", "-1", "WITHSCORES"]), ["Palermo", "0"]);
    // Nothing found, or no source: the target is deleted.
    assert_eq!(int(&mut c, &["GEORADIUS", &src, "0", "0", "1", "km", "STORE", &dst]), 0);
    assert_eq!(int(&mut c, &["EXISTS", &dst]), 0);
    let _: i64 = q(&mut c, &["GEOADD", &dst, "1", "1", "x"]).unwrap();
    assert_eq!(
        int(
            &mut c,
            &["GEOSEARCHSTORE", &dst, "{missing}", "FROMMEMBER", "x", "BYRADIUS", "1", "km"]
        ),
        0
    );
    assert_eq!(int(&mut c, &["EXISTS", &dst]), 0);
    // COMMAND GETKEYS finds both STORE keys, as Redis's key specs do.
    assert_eq!(
        strings(
            &mut c,
            &[
                "COMMAND",
                "GETKEYS",
                "GEORADIUS",
                "a",
                "1",
                "2",
                "3",
                "km",
                "STORE",
                "b",
                "STOREDIST",
                "c"
            ]
        ),
        ["a", "b", "c"]
    );
}

#[test]
fn bad_arguments_get_redis_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    sicily(&mut c, "Sicily");
    let _: () = q(&mut c, &["SET", "str", "x"]).unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["GEOADD", "g", "181", "0", "x"], "invalid longitude,latitude pair 181.000000,0.000000"),
        (&["GEOADD", "g", "0", "85.1", "x"], "invalid longitude,latitude pair 0.000000,85.100000"),
        (&["GEOADD", "g", "a", "0", "x"], "value is not a valid float"),
        (&["GEOADD", "g", "XX", "NX", "1", "1", "x"], "syntax error"),
        (&["GEOADD", "g", "1", "1", "x", "2"], "syntax error"),
        (&["GEOADD", "str", "1", "1", "x"], "WRONGTYPE"),
        (&["GEOPOS", "str", "x"], "WRONGTYPE"),
        (&["GEODIST", "Sicily", "a", "b", "yd"], "unsupported unit provided. please use M, KM, FT, MI"),
        (&["GEODIST", "Sicily", "a", "b", "km", "x"], "syntax error"),
        (&["GEORADIUS", "Sicily", "15", "37", "-1", "km"], "radius cannot be negative"),
        (&["GEORADIUS", "Sicily", "15", "37", "x", "km"], "need numeric radius"),
        (&["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "0"], "COUNT must be > 0"),
        (&["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "x"], "value is not an integer or out of range"),
        (&["GEORADIUS", "Sicily", "15", "37", "1", "km", "ANY"], "the ANY argument requires COUNT argument"),
        (&["GEORADIUS", "Sicily", "15", "37", "1", "km", "STORE", "d", "WITHDIST"], "STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
        (&["GEORADIUS_RO", "Sicily", "15", "37", "1", "km", "STORE", "d"], "syntax error"),
        (&["GEORADIUSBYMEMBER", "Sicily", "nope", "1", "km"], "could not decode requested zset member"),
        (&["geosearch", "Sicily", "BYRADIUS", "1", "km", "ASC", "WITHDIST"], "exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch"),
        (&["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "ASC", "WITHDIST"], "exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH"),
        (&["GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km"], "syntax error"),
        (&["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "-1", "1", "km"], "height or width cannot be negative"),
        (&["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "1", "h", "km"], "need numeric height"),
        (&["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "STORE", "d"], "syntax error"),
        (&["GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "WITHCOORD"], "GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
        (&["GEOSEARCH", "str", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km"], "WRONGTYPE"),
    ];
    for (args, want) in cases {
        let got = error(&mut c, args);
        assert!(got.contains(want), "{args:?}: {got}");
    }
    // Nothing was created by the failed GEOADDs.
    assert_eq!(int(&mut c, &["EXISTS", "g"]), 0);
}
