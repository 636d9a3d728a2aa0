//! Hot-key rules: which keys are counted, over what window, and when they
//! are hot.
//!
//! A rule is written as `HOTKEYS RULES SET` takes it and as the
//! `hotkeys-rules` setting stores it:
//!
//! ```text
//! name (PATTERN glob | PREFIX prefix) INTERVAL seconds THRESHOLD n DURATION seconds [COUNT reads|writes|both]
//! ```
//!
//! Several rules in the setting are separated by `;`. Seconds may be
//! fractional (`INTERVAL 0.5`). A key is counted against the first rule
//! (in the order they were set) whose pattern it matches.

use super::window::MIN_INTERVAL_MS;
use crate::command::error::CmdError;
use bytes::Bytes;

/// Most rules a server holds.
pub const MAX_RULES: usize = 64;
/// Longest rule name and longest pattern.
pub const MAX_NAME_LEN: usize = 64;
pub const MAX_PATTERN_LEN: usize = 1024;
/// Longest interval and duration: a day.
pub const MAX_SECONDS: f64 = 86_400.0;
/// Largest threshold.
pub const MAX_THRESHOLD: u64 = 1_000_000_000;

/// Which keys a rule covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Matcher {
    Prefix(Bytes),
    Glob(Bytes),
}

impl Matcher {
    pub fn matches(&self, key: &[u8]) -> bool {
        match self {
            Matcher::Prefix(p) => key.starts_with(p),
            Matcher::Glob(g) => ringdb_types::glob::glob_match(g, key, false),
        }
    }
}

/// Which accesses a rule counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    Reads,
    Writes,
    Both,
}

impl Counted {
    pub fn counts(self, write: bool) -> bool {
        match self {
            Counted::Reads => !write,
            Counted::Writes => write,
            Counted::Both => true,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Counted::Reads => "reads",
            Counted::Writes => "writes",
            Counted::Both => "both",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub name: String,
    pub matcher: Matcher,
    pub interval_ms: u64,
    pub threshold: u32,
    pub duration_ms: u64,
    pub counted: Counted,
}

impl Rule {
    /// Reads a rule from its words (`name PATTERN p INTERVAL s …`).
    pub fn parse(words: &[&[u8]]) -> Result<Rule, CmdError> {
        let (name, options) = words.split_first().ok_or(crate::command::error::SYNTAX)?;
        let name = parse_name(name)?;
        let mut matcher = None;
        let (mut interval, mut threshold, mut duration, mut counted) = (None, None, None, None);
        let mut rest = options.iter();
        while let Some(option) = rest.next() {
            let value = rest.next().ok_or(crate::command::error::SYNTAX)?;
            let option = option.to_ascii_uppercase();
            let slot_taken = match option.as_slice() {
                b"PATTERN" => matcher.replace(Matcher::Glob(parse_pattern(value)?)).is_some(),
                b"PREFIX" => matcher.replace(Matcher::Prefix(parse_pattern(value)?)).is_some(),
                b"INTERVAL" => interval.replace(parse_interval(value)?).is_some(),
                b"THRESHOLD" => threshold.replace(parse_threshold(value)?).is_some(),
                b"DURATION" => duration.replace(parse_duration(value)?).is_some(),
                b"COUNT" => counted.replace(parse_counted(value)?).is_some(),
                _ => return Err(crate::command::error::SYNTAX),
            };
            if slot_taken {
                return Err(crate::command::error::SYNTAX);
            }
        }
        let matcher =
            matcher.ok_or_else(|| CmdError::new("ERR a hotkeys rule needs PATTERN or PREFIX"))?;
        let (Some(interval_ms), Some(threshold), Some(duration_ms)) =
            (interval, threshold, duration)
        else {
            return Err(CmdError::new("ERR a hotkeys rule needs INTERVAL, THRESHOLD and DURATION"));
        };
        Ok(Rule {
            name,
            matcher,
            interval_ms,
            threshold,
            duration_ms,
            counted: counted.unwrap_or(Counted::Both),
        })
    }

    /// The rule written back in the syntax [`Rule::parse`] reads.
    pub fn to_words(&self) -> Vec<String> {
        let (kind, pattern) = match &self.matcher {
            Matcher::Prefix(p) => ("PREFIX", p),
            Matcher::Glob(g) => ("PATTERN", g),
        };
        vec![
            self.name.clone(),
            kind.to_string(),
            String::from_utf8_lossy(pattern).into_owned(),
            "INTERVAL".into(),
            seconds(self.interval_ms),
            "THRESHOLD".into(),
            self.threshold.to_string(),
            "DURATION".into(),
            seconds(self.duration_ms),
            "COUNT".into(),
            self.counted.name().into(),
        ]
    }

    pub fn to_line(&self) -> String {
        self.to_words().join(" ")
    }
}

/// Reads the `hotkeys-rules` setting: rules separated by `;` (empty = none).
pub fn parse_rules(text: &str) -> Result<Vec<Rule>, CmdError> {
    let mut rules: Vec<Rule> = Vec::new();
    for part in text.split(';') {
        let words: Vec<&[u8]> = part.split_ascii_whitespace().map(str::as_bytes).collect();
        if words.is_empty() {
            continue;
        }
        let rule = Rule::parse(&words)?;
        if rules.iter().any(|r| r.name == rule.name) {
            return Err(CmdError::owned(format!("ERR hotkeys rule '{}' is set twice", rule.name)));
        }
        rules.push(rule);
    }
    if rules.len() > MAX_RULES {
        return Err(too_many());
    }
    Ok(rules)
}

/// The `hotkeys-rules` setting for `rules`.
pub fn rules_to_text(rules: &[Rule]) -> String {
    rules.iter().map(Rule::to_line).collect::<Vec<_>>().join("; ")
}

pub fn too_many() -> CmdError {
    CmdError::owned(format!("ERR too many hotkeys rules (at most {MAX_RULES})"))
}

/// Names and patterns are single words without `;`, so that the setting
/// can hold any rule the command accepts.
fn is_word(text: &[u8]) -> bool {
    !text.is_empty() && text.iter().all(|&c| c.is_ascii_graphic() && c != b';') && {
        std::str::from_utf8(text).is_ok()
    }
}

fn parse_name(name: &[u8]) -> Result<String, CmdError> {
    if name.len() > MAX_NAME_LEN || !is_word(name) {
        return Err(CmdError::owned(format!(
            "ERR invalid hotkeys rule name: at most {MAX_NAME_LEN} printable characters, no spaces or ';'"
        )));
    }
    Ok(String::from_utf8_lossy(name).into_owned())
}

fn parse_pattern(pattern: &[u8]) -> Result<Bytes, CmdError> {
    if pattern.len() > MAX_PATTERN_LEN || !is_word(pattern) {
        return Err(CmdError::owned(format!(
            "ERR invalid hotkeys pattern: at most {MAX_PATTERN_LEN} printable characters, no spaces or ';'"
        )));
    }
    Ok(Bytes::copy_from_slice(pattern))
}

/// Seconds (fractional allowed) as milliseconds within `min_ms..=MAX`.
fn parse_seconds(value: &[u8], min_ms: u64) -> Option<u64> {
    let s = ringdb_types::number::parse_f64(value)?;
    if !s.is_finite() || s > MAX_SECONDS {
        return None;
    }
    let ms = (s * 1000.0).round();
    (ms >= min_ms as f64).then_some(ms as u64)
}

fn parse_interval(value: &[u8]) -> Result<u64, CmdError> {
    parse_seconds(value, MIN_INTERVAL_MS).ok_or_else(|| {
        CmdError::owned(format!(
            "ERR INTERVAL must be a number of seconds between {} and {MAX_SECONDS}",
            seconds(MIN_INTERVAL_MS)
        ))
    })
}

fn parse_duration(value: &[u8]) -> Result<u64, CmdError> {
    parse_seconds(value, 1).ok_or_else(|| {
        CmdError::owned(format!(
            "ERR DURATION must be a number of seconds between 0.001 and {MAX_SECONDS}"
        ))
    })
}

fn parse_threshold(value: &[u8]) -> Result<u32, CmdError> {
    ringdb_types::number::parse_u64(value)
        .filter(|n| (1..=MAX_THRESHOLD).contains(n))
        .map(|n| n as u32)
        .ok_or_else(|| {
            CmdError::owned(format!(
                "ERR THRESHOLD must be an integer between 1 and {MAX_THRESHOLD}"
            ))
        })
}

fn parse_counted(value: &[u8]) -> Result<Counted, CmdError> {
    match value.to_ascii_lowercase().as_slice() {
        b"reads" => Ok(Counted::Reads),
        b"writes" => Ok(Counted::Writes),
        b"both" => Ok(Counted::Both),
        _ => Err(CmdError::new("ERR COUNT must be reads, writes or both")),
    }
}

/// Milliseconds as seconds, without trailing zeros (`500` → `0.5`).
pub fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        return (ms / 1000).to_string();
    }
    let text = format!("{}.{:03}", ms / 1000, ms % 1000);
    text.trim_end_matches('0').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Rule, String> {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        Rule::parse(&words).map_err(|e| e.text().to_string())
    }

    #[test]
    fn reads_every_option_and_writes_it_back() {
        let r = parse("users prefix user: interval 0.5 threshold 100 duration 2.25 count reads")
            .unwrap();
        assert_eq!(r.matcher, Matcher::Prefix(Bytes::from_static(b"user:")));
        assert_eq!((r.interval_ms, r.threshold, r.duration_ms), (500, 100, 2250));
        assert_eq!(r.counted, Counted::Reads);
        assert_eq!(
            r.to_line(),
            "users PREFIX user: INTERVAL 0.5 THRESHOLD 100 DURATION 2.25 COUNT reads"
        );
        assert_eq!(parse(&r.to_line()).unwrap(), r);
        let g = parse("any PATTERN item:*:stock DURATION 5 THRESHOLD 3 INTERVAL 1").unwrap();
        assert_eq!(g.counted, Counted::Both);
        assert!(g.matcher.matches(b"item:42:stock"));
        assert!(!g.matcher.matches(b"item:42:price"));
        assert!(r.matcher.matches(b"user:1") && !r.matcher.matches(b"users"));
    }

    #[test]
    fn refuses_what_it_cannot_use() {
        let e = |line: &str| parse(line).unwrap_err();
        assert_eq!(
            e("r PREFIX a INTERVAL 1 THRESHOLD 1"),
            "ERR a hotkeys rule needs INTERVAL, THRESHOLD and DURATION"
        );
        assert_eq!(
            e("r INTERVAL 1 THRESHOLD 1 DURATION 1"),
            "ERR a hotkeys rule needs PATTERN or PREFIX"
        );
        assert_eq!(e("r PREFIX a PATTERN b INTERVAL 1 THRESHOLD 1 DURATION 1"), "ERR syntax error");
        assert_eq!(e("r PREFIX a INTERVAL 1 THRESHOLD 1 DURATION"), "ERR syntax error");
        assert_eq!(e("r PREFIX a COLOR red"), "ERR syntax error");
        assert!(e("r PREFIX a INTERVAL 0.001 THRESHOLD 1 DURATION 1")
            .starts_with("ERR INTERVAL must be"));
        assert!(
            e("r PREFIX a INTERVAL x THRESHOLD 1 DURATION 1").starts_with("ERR INTERVAL must be")
        );
        assert!(e("r PREFIX a INTERVAL 86401 THRESHOLD 1 DURATION 1")
            .starts_with("ERR INTERVAL must be"));
        assert!(
            e("r PREFIX a INTERVAL 1 THRESHOLD 0 DURATION 1").starts_with("ERR THRESHOLD must be")
        );
        assert!(
            e("r PREFIX a INTERVAL 1 THRESHOLD -3 DURATION 1").starts_with("ERR THRESHOLD must be")
        );
        assert!(
            e("r PREFIX a INTERVAL 1 THRESHOLD 1 DURATION 0").starts_with("ERR DURATION must be")
        );
        assert!(
            e("r PREFIX a INTERVAL 1 THRESHOLD 1 DURATION inf").starts_with("ERR DURATION must be")
        );
        assert_eq!(
            e("r PREFIX a INTERVAL 1 THRESHOLD 1 DURATION 1 COUNT all"),
            "ERR COUNT must be reads, writes or both"
        );
        assert!(e("a;b PREFIX a INTERVAL 1 THRESHOLD 1 DURATION 1")
            .starts_with("ERR invalid hotkeys rule name"));
        assert!(e("r PREFIX a;b INTERVAL 1 THRESHOLD 1 DURATION 1")
            .starts_with("ERR invalid hotkeys pattern"));
    }

    #[test]
    fn the_setting_holds_several_rules() {
        let rules =
            parse_rules(" a PREFIX x INTERVAL 1 THRESHOLD 5 DURATION 1 ;; b PATTERN * INTERVAL 2 THRESHOLD 9 DURATION 3 COUNT writes ")
                .unwrap();
        assert_eq!(rules.len(), 2);
        let text = rules_to_text(&rules);
        assert_eq!(
            text,
            "a PREFIX x INTERVAL 1 THRESHOLD 5 DURATION 1 COUNT both; b PATTERN * INTERVAL 2 THRESHOLD 9 DURATION 3 COUNT writes"
        );
        assert_eq!(parse_rules(&text).unwrap(), rules);
        assert!(parse_rules("").unwrap().is_empty());
        assert_eq!(
            parse_rules("a PREFIX x INTERVAL 1 THRESHOLD 5 DURATION 1; a PREFIX y INTERVAL 1 THRESHOLD 5 DURATION 1")
                .unwrap_err()
                .text(),
            "ERR hotkeys rule 'a' is set twice"
        );
        let many: Vec<String> = (0..=MAX_RULES)
            .map(|i| format!("r{i} PREFIX x INTERVAL 1 THRESHOLD 5 DURATION 1"))
            .collect();
        assert!(parse_rules(&many.join(";")).unwrap_err().text().starts_with("ERR too many"));
    }
}
