//! Criterion benches for the ACL check a command passes before it runs
//! ([`ringdb_engine::acl::User::check`]): the default user (one flag
//! test), a user allowed GET on one key pattern, and one with 50 key
//! patterns where the key matches the last.

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ringdb_engine::acl::{User, Verdict};
use ringdb_engine::command::table;

fn user(rules: &[String]) -> User {
    let mut u = User::new("bench", false);
    let rules: Vec<Bytes> = rules.iter().map(|r| Bytes::copy_from_slice(r.as_bytes())).collect();
    u.apply_all(&rules, false).expect("valid rules");
    u
}

fn check(c: &mut Criterion) {
    let args = vec![Bytes::from_static(b"GET"), Bytes::from_static(b"app49:user:1000")];
    let reg = table().resolve(&args).expect("GET");
    let default = User::default_user();
    let one = user(&["on".into(), "+get".into(), "~app49:*".into()]);
    let mut many: Vec<String> = vec!["on".into(), "+get".into()];
    many.extend((0..50).map(|i| format!("~app{i}:*")));
    let many = user(&many);
    assert_eq!(many.check(reg, &args), Verdict::Allowed);
    let mut g = c.benchmark_group("acl_check_get");
    g.bench_function("default_user", |b| {
        b.iter(|| {
            black_box(
                default.unrestricted() || default.check(reg, black_box(&args)) == Verdict::Allowed,
            )
        })
    });
    g.bench_function("one_pattern", |b| b.iter(|| black_box(one.check(reg, black_box(&args)))));
    g.bench_function("fifty_patterns", |b| b.iter(|| black_box(many.check(reg, black_box(&args)))));
    g.finish();
}

criterion_group!(benches, check);
criterion_main!(benches);
