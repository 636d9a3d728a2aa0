//! The argument trees COMMAND DOCS prints, derived from a row's syntax.
//!
//! A row documents its arguments the way Redis's documentation prints them
//! (`key value [NX | XX] [EX seconds | PX milliseconds | KEEPTTL]`), a string
//! that redis.io renders from the command's JSON: `[…]` is optional, `<a | b>`
//! a required choice, `x [x ...]` repetition, an upper-case word a token.
//! [`arguments`] inverts that rendering. What the rendering drops is recovered
//! by Redis's own conventions, so that the tree matches Redis's for ordinary
//! rows:
//! - a value's type comes from its name (`count` is an integer, `timeout` a
//!   double, `pattern` a pattern); a row can say it outright with
//!   `name:type` (`increment:double`), the form redis.io's generator prints
//!   with `show_types`;
//! - key arguments take their `key_spec_index` by walking the row's key specs
//!   in order;
//! - a token followed by one value names that value (`EX seconds`), followed
//!   by several it heads a block (`LIMIT offset count`);
//! - unnamed choices and blocks get the names Redis gives the recurring ones
//!   (`condition` for `NX | XX`, `data` for `field value [field value ...]`);
//! - the few lower-case tokens Redis has outside a choice of bare words are
//!   written in double quotes (`<"lib-name" libname | "lib-ver" libver>`),
//!   and a value whose documentation shows another text than its name says
//!   both as `name=display` (`ADDR addr=ip:port`).
//!
//! Rows are static text checked by a test against Redis's command JSON, but
//! the parser still returns errors rather than panicking on malformed input.

use super::spec::{keyflags, BeginSearch, FindKeys, KeySpec};

/// An argument's type, as COMMAND DOCS names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    String,
    Integer,
    Double,
    Key,
    Pattern,
    UnixTime,
    PureToken,
    OneOf,
    Block,
}

impl ArgType {
    const ALL: [ArgType; 9] = [
        ArgType::String,
        ArgType::Integer,
        ArgType::Double,
        ArgType::Key,
        ArgType::Pattern,
        ArgType::UnixTime,
        ArgType::PureToken,
        ArgType::OneOf,
        ArgType::Block,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Double => "double",
            ArgType::Key => "key",
            ArgType::Pattern => "pattern",
            ArgType::UnixTime => "unix-time",
            ArgType::PureToken => "pure-token",
            ArgType::OneOf => "oneof",
            ArgType::Block => "block",
        }
    }

    pub fn from_name(name: &str) -> Option<ArgType> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether the argument holds other arguments (and so has no display text).
    pub fn is_container(self) -> bool {
        matches!(self, ArgType::OneOf | ArgType::Block)
    }
}

/// One argument of COMMAND DOCS (Redis's `redisCommandArg`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Argument {
    pub name: String,
    pub kind: ArgType,
    /// What the documentation shows (`display_text`; a token's is its name);
    /// `None` for choices and blocks.
    pub display: Option<String>,
    pub key_spec_index: Option<usize>,
    pub token: Option<String>,
    pub optional: bool,
    pub multiple: bool,
    pub multiple_token: bool,
    /// The members of a choice or block.
    pub arguments: Vec<Argument>,
}

impl Argument {
    fn new(name: String, kind: ArgType) -> Self {
        Argument {
            name,
            kind,
            display: None,
            key_spec_index: None,
            token: None,
            optional: false,
            multiple: false,
            multiple_token: false,
            arguments: Vec::new(),
        }
    }

    /// The flags COMMAND DOCS lists, in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let flags = [
            (self.optional, "optional"),
            (self.multiple, "multiple"),
            (self.multiple_token, "multiple_token"),
        ];
        flags.into_iter().filter(|(on, _)| *on).map(|(_, name)| name).collect()
    }
}

/// A syntax string that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError(pub String);

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Deeper nesting than any Redis command has; a guard, not a limit in use.
const MAX_DEPTH: usize = 16;

/// The argument tree of a row with documentation syntax `syntax` and key
/// specs `keys`.
pub fn arguments(syntax: &str, keys: &[KeySpec]) -> Result<Vec<Argument>, SyntaxError> {
    let lexemes = lex(syntax);
    let mut pos = 0;
    let alternatives = parse_alternatives(&lexemes, &mut pos, 0)?;
    if pos != lexemes.len() {
        return Err(SyntaxError(format!("unbalanced `{}` in `{syntax}`", lexemes[pos].text())));
    }
    let [sequence] = <[Vec<Raw>; 1]>::try_from(alternatives)
        .map_err(|_| SyntaxError(format!("`|` outside brackets in `{syntax}`")))?;
    let mut builder = Builder { keys, spec: 0, used: 0 };
    builder.sequence(&units(sequence)?)
}

// ---- Lexing and the raw tree ------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lexeme<'a> {
    Open(u8),
    Close(u8),
    Bar,
    Word(&'a str),
}

impl Lexeme<'_> {
    fn text(&self) -> String {
        match self {
            Lexeme::Open(c) | Lexeme::Close(c) => (*c as char).to_string(),
            Lexeme::Bar => "|".into(),
            Lexeme::Word(w) => (*w).into(),
        }
    }
}

fn lex(syntax: &str) -> Vec<Lexeme<'_>> {
    let mut out = Vec::new();
    let bytes = syntax.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'[' | b'<' => out.push(Lexeme::Open(c)),
            b']' | b'>' => out.push(Lexeme::Close(c)),
            b'|' => out.push(Lexeme::Bar),
            c if c.is_ascii_whitespace() => {}
            _ => {
                let start = i;
                while i < bytes.len() && !b"[]<>| \t\n\r".contains(&bytes[i]) {
                    i += 1;
                }
                out.push(Lexeme::Word(&syntax[start..i]));
                continue;
            }
        }
        i += 1;
    }
    out
}

/// The syntax as written, before interpretation.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Raw<'a> {
    Word(&'a str),
    Ellipsis,
    /// `[…]` (optional) or `<…>`, holding `|`-separated alternatives.
    Group {
        optional: bool,
        alternatives: Vec<Vec<Raw<'a>>>,
    },
}

/// Alternatives up to the closing bracket (or the end), which is left for
/// the caller to consume.
fn parse_alternatives<'a>(
    lexemes: &[Lexeme<'a>],
    pos: &mut usize,
    depth: usize,
) -> Result<Vec<Vec<Raw<'a>>>, SyntaxError> {
    if depth > MAX_DEPTH {
        return Err(SyntaxError("brackets nested too deeply".into()));
    }
    let mut alternatives = vec![Vec::new()];
    while let Some(lexeme) = lexemes.get(*pos) {
        let current = alternatives.last_mut().expect("never empty");
        match *lexeme {
            Lexeme::Close(_) => break,
            Lexeme::Bar => alternatives.push(Vec::new()),
            Lexeme::Word("...") => current.push(Raw::Ellipsis),
            Lexeme::Word(w) => current.push(Raw::Word(w)),
            Lexeme::Open(open) => {
                *pos += 1;
                let inner = parse_alternatives(lexemes, pos, depth + 1)?;
                let close = if open == b'[' { b']' } else { b'>' };
                if lexemes.get(*pos) != Some(&Lexeme::Close(close)) {
                    return Err(SyntaxError(format!(
                        "`{}` without `{}`",
                        open as char, close as char
                    )));
                }
                current.push(Raw::Group { optional: open == b'[', alternatives: inner });
            }
        }
        *pos += 1;
    }
    if alternatives.iter().any(|a| a.is_empty()) && alternatives.len() > 1 {
        return Err(SyntaxError("empty alternative".into()));
    }
    Ok(alternatives)
}

/// A step of a sequence: one node, or nodes that repeat (`x y [x y ...]`).
#[derive(Clone, Debug)]
struct Unit<'a> {
    nodes: Vec<Raw<'a>>,
    multiple: bool,
}

impl<'a> Unit<'a> {
    fn single(&self) -> Option<&Raw<'a>> {
        match self.nodes.as_slice() {
            [node] => Some(node),
            _ => None,
        }
    }

    fn word(&self) -> Option<&'a str> {
        match self.single() {
            Some(Raw::Word(w)) => Some(w),
            _ => None,
        }
    }

    /// A value's name: a lower-case word, or an upper-case one that repeats
    /// (`ID [ID ...]`).
    fn is_value(&self) -> bool {
        self.word().is_some_and(|w| !is_token(w) || self.multiple)
    }

    /// `<a | b>`.
    fn is_required_choice(&self) -> bool {
        matches!(self.single(), Some(Raw::Group { optional: false, .. }))
    }
}

/// The content of `[x y ...]` (the alternatives without the ellipsis), if
/// `node` is such a repetition.
fn repetition<'a>(node: &Raw<'a>) -> Option<Vec<Vec<Raw<'a>>>> {
    let Raw::Group { optional: true, alternatives } = node else { return None };
    let last = alternatives.last()?;
    if last.last() != Some(&Raw::Ellipsis) {
        return None;
    }
    let mut content = alternatives.clone();
    content.last_mut()?.pop();
    Some(content)
}

/// Groups a sequence into units, joining each repetition to what it repeats.
fn units(sequence: Vec<Raw<'_>>) -> Result<Vec<Unit<'_>>, SyntaxError> {
    let mut out: Vec<Unit> = Vec::new();
    for node in sequence {
        let Some(content) = repetition(&node) else {
            if node == Raw::Ellipsis {
                return Err(SyntaxError("`...` outside a repetition".into()));
            }
            out.push(Unit { nodes: vec![node], multiple: false });
            continue;
        };
        match content.as_slice() {
            // `x y [x y ...]`: the last units are what repeats.
            [repeated] if !repeated.is_empty() && repeated.len() <= out.len() => {
                let start = out.len() - repeated.len();
                let tail = &out[start..];
                let same =
                    tail.iter().zip(repeated).all(|(u, n)| !u.multiple && u.single() == Some(n));
                if !same {
                    return Err(SyntaxError(format!(
                        "repetition of {repeated:?} follows something else"
                    )));
                }
                out.truncate(start);
                out.push(Unit { nodes: repeated.clone(), multiple: true });
            }
            // `<a | b> [a | b ...]`: a repeated choice.
            choices if choices.len() > 1 => match out.last_mut() {
                Some(last @ Unit { multiple: false, .. }) if matches!(last.single(), Some(Raw::Group { optional: false, alternatives }) if alternatives == choices) => {
                    last.multiple = true
                }
                _ => return Err(SyntaxError("repeated choice follows something else".into())),
            },
            _ => return Err(SyntaxError("repetition with nothing to repeat".into())),
        }
    }
    Ok(out)
}

// ---- Interpretation ---------------------------------------------------------

/// Whether a word is a token rather than a value's name: upper case
/// (`NX`, `WITHSCORES`, `LIB-NAME`) or punctuation (`*`, `$`, `=`, `""`).
fn is_token(word: &str) -> bool {
    if quoted_token(word).is_some() {
        return true;
    }
    let upper = word.bytes().any(|c| c.is_ascii_uppercase())
        && word
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'-' || c == b'_');
    upper || word.bytes().all(|c| c.is_ascii_punctuation())
}

/// Names Redis gives tokens other than their lower-cased text (punctuation,
/// and SORT's ALPHA).
const SYMBOL_NAMES: &[(&str, &str)] = &[
    ("ALPHA", "sorting"),
    ("\"\"", "empty-string"),
    ("=", "equal"),
    ("~", "approximately"),
    ("*", "auto-id"),
    ("$", "new-id"),
];

/// `"lib-name"` → `lib-name`: a lower-case token in quotes (`""`, the empty
/// string token, is not one).
fn quoted_token(word: &str) -> Option<&str> {
    word.strip_prefix('"')?.strip_suffix('"').filter(|w| !w.is_empty() && !w.contains('"'))
}

/// A token's text as sent by clients: without the quotes of a quoted one.
fn token_text(word: &str) -> &str {
    quoted_token(word).unwrap_or(word)
}

fn token_name(token: &str) -> String {
    let token = token_text(token);
    match SYMBOL_NAMES.iter().find(|(t, _)| *t == token) {
        Some((_, name)) => (*name).to_string(),
        None => token.to_ascii_lowercase(),
    }
}

/// Value names whose type is not `string`, as Redis's command JSON types
/// them (where a name has several types, the most common one).
const TYPED_NAMES: &[(ArgType, &[&str])] = &[
    (
        ArgType::Integer,
        &[
            "bit",
            "bits",
            "client-id",
            "cluster-bus-port",
            "config-epoch",
            "count",
            "current-epoch",
            "cursor",
            "db",
            "decrement",
            "destination-db",
            "end",
            "end-slot",
            "entries-added",
            "entries-read",
            "frequency",
            "increment",
            "index",
            "index1",
            "index2",
            "len",
            "limit",
            "milliseconds",
            "min-match-len",
            "ms",
            "num-matches",
            "numkeys",
            "numlocal",
            "numreplicas",
            "offset",
            "port",
            "protover",
            "quorum",
            "rank",
            "seconds",
            "slot",
            "start",
            "start-slot",
            "stop",
            "ttl",
            "version",
            "weight",
        ],
    ),
    (ArgType::Double, &["height", "latitude", "longitude", "radius", "score", "timeout", "width"]),
    (ArgType::UnixTime, &["unix-time-milliseconds", "unix-time-seconds"]),
    (ArgType::Pattern, &["pattern"]),
];

/// Value names that are key names when the row has a key spec for them.
const KEY_NAMES: &[&str] = &[
    "key",
    "destination",
    "destkey",
    "dst",
    "key1",
    "key2",
    "newkey",
    "source",
    "sourcekey",
    "src",
];

/// Names Redis gives recurring unnamed choices, by their first member.
const CHOICE_NAMES: &[(&str, &str)] = &[
    ("nx", "condition"),
    ("ex", "expiration"),
    ("gt", "comparison"),
    ("asc", "order"),
    ("async", "flush-type"),
    ("byte", "unit"),
    ("m", "unit"),
    ("left", "where"),
    ("before", "where"),
    ("min", "where"),
    ("byscore", "sortby"),
    ("maxlen", "strategy"),
    ("equal", "operator"),
    ("and", "operation"),
    ("on", "enabled"),
    ("flush", "policy"),
];

/// A key spec for keys formed from a command's data rather than named by
/// its arguments, only read (SORT's BY/GET patterns).
fn is_pattern_spec(spec: &KeySpec) -> bool {
    let writes = keyflags::RW | keyflags::OW | keyflags::RM;
    spec.begin == BeginSearch::Unknown && spec.flags & writes == 0
}

/// Builds arguments left to right, handing out key spec indexes in order.
struct Builder<'k> {
    keys: &'k [KeySpec],
    /// The key spec the next key argument belongs to.
    spec: usize,
    /// Key arguments already given to `spec`.
    used: usize,
}

impl Builder<'_> {
    /// The key spec for the next key argument: specs are taken in order,
    /// each for as many key arguments as it has fixed keys (`LCS key1 key2`
    /// shares one spec), or for one argument when its count varies
    /// (`key [key ...]`). Specs of things that are not keys, and
    /// [pattern specs](Self::pattern_key_spec), are skipped.
    fn next_key_spec(&mut self) -> Option<usize> {
        loop {
            let spec = self.keys.get(self.spec)?;
            if spec.flags & keyflags::NOT_KEY != 0 || is_pattern_spec(spec) {
                self.spec += 1;
                self.used = 0;
                continue;
            }
            let capacity = match spec.find {
                FindKeys::Range { lastkey, step, .. } if lastkey >= 0 && step > 0 => {
                    lastkey / step + 1
                }
                _ => 1,
            };
            let index = self.spec;
            self.used += 1;
            if self.used as i32 >= capacity {
                self.spec += 1;
                self.used = 0;
            }
            return Some(index);
        }
    }

    /// A value argument from its word (`count`, `increment:double`).
    fn value(&mut self, word: &str, multiple: bool) -> Argument {
        let (name, explicit) = match word.rsplit_once(':') {
            Some((name, kind)) => match ArgType::from_name(kind) {
                Some(kind) => (name, Some(kind)),
                None => (word, None),
            },
            None => (word, None),
        };
        let (name, display) = name.split_once('=').unwrap_or((name, name));
        let kind = explicit.unwrap_or_else(|| {
            if KEY_NAMES.contains(&name) && self.keys.len() > self.spec {
                ArgType::Key
            } else {
                TYPED_NAMES
                    .iter()
                    .find(|(_, names)| names.contains(&name))
                    .map_or(ArgType::String, |(t, _)| *t)
            }
        });
        let mut arg = Argument::new(name.to_string(), kind);
        arg.display = Some(display.to_string());
        arg.multiple = multiple;
        if kind == ArgType::Key {
            arg.key_spec_index = self.next_key_spec();
        } else if kind == ArgType::Pattern {
            arg.key_spec_index = self.pattern_key_spec();
        }
        arg
    }

    /// The key spec of the keys a pattern argument forms from a value
    /// (SORT's BY and GET), if the row has one.
    fn pattern_key_spec(&self) -> Option<usize> {
        self.keys.iter().position(is_pattern_spec)
    }

    fn pure_token(&self, token: &str) -> Argument {
        let name = token_name(token);
        let mut arg = Argument::new(name.clone(), ArgType::PureToken);
        arg.display = Some(name);
        arg.token = Some(token_text(token).to_string());
        arg
    }

    /// A sequence of units: the arguments of a command or of a block.
    fn sequence(&mut self, units: &[Unit]) -> Result<Vec<Argument>, SyntaxError> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < units.len() {
            let unit = &units[i];
            i += 1;
            if unit.nodes.len() > 1 {
                out.push(self.repeated(&unit.nodes)?);
                continue;
            }
            match unit.single() {
                Some(Raw::Word(w)) if is_token(w) && !unit.multiple => {
                    let (arg, used) = self.token(w, &units[i..])?;
                    i += used;
                    out.push(arg);
                }
                // A value; also an upper-case name that repeats (`ID [ID ...]`).
                Some(Raw::Word(w)) => out.push(self.value(w, unit.multiple)),
                Some(Raw::Group { optional, alternatives }) => {
                    let mut arg = self.group(alternatives, *optional)?;
                    arg.multiple |= unit.multiple;
                    out.push(arg);
                }
                Some(Raw::Ellipsis) | None => return Err(SyntaxError("misplaced `...`".into())),
            }
        }
        Ok(out)
    }

    /// A token and what it takes from the units after it (`rest`), with the
    /// number of units taken: the values that follow it as a block
    /// (`STREAMS key [key ...] ID [ID ...]`, `GROUP group consumer`), the one
    /// value or required choice it names (`EX seconds`, `AGGREGATE <SUM |
    /// MAX>`), or nothing (`NX`).
    fn token(&mut self, token: &str, rest: &[Unit]) -> Result<(Argument, usize), SyntaxError> {
        let values = rest.iter().take_while(|u| u.is_value()).count();
        let (mut arg, used) = if values >= 2 && !rest.iter().any(Unit::is_required_choice) {
            (block(token_name(token), self.sequence(&rest[..values])?), values)
        } else {
            match rest.first() {
                Some(next) if next.is_value() => {
                    (self.value(next.word().unwrap_or_default(), next.multiple), 1)
                }
                Some(next @ Unit { nodes, multiple: false }) if next.is_required_choice() => {
                    let [Raw::Group { alternatives, .. }] = nodes.as_slice() else {
                        return Err(SyntaxError("a choice expected".into()));
                    };
                    let mut choice = self.group(alternatives, false)?;
                    if choice.kind.is_container() {
                        choice.name = token_name(token);
                    }
                    (choice, 1)
                }
                _ => return Ok((self.pure_token(token), 0)),
            }
        };
        arg.token = Some(token_text(token).to_string());
        Ok((arg, used))
    }

    /// A repeated run of several nodes: `GET pattern [GET pattern ...]` (a
    /// token repeated with its value), `CONFIG name value [CONFIG name value
    /// ...]`, or an unnamed block `field value [field value ...]`.
    fn repeated(&mut self, nodes: &[Raw]) -> Result<Argument, SyntaxError> {
        if let Some(Raw::Word(token)) =
            nodes.first().filter(|n| matches!(n, Raw::Word(w) if is_token(w)))
        {
            let rest = self.sequence(&units(nodes[1..].to_vec())?)?;
            let mut arg = match <[Argument; 1]>::try_from(rest) {
                Ok([only]) if !only.kind.is_container() && only.token.is_none() => only,
                Ok([only]) => block(token_name(token), vec![only]),
                Err(rest) => block(token_name(token), rest),
            };
            arg.token = Some(token_text(token).to_string());
            arg.multiple = true;
            arg.multiple_token = true;
            return Ok(arg);
        }
        let members = self.sequence(&units(nodes.to_vec())?)?;
        let mut arg = block("data".to_string(), members);
        arg.multiple = true;
        Ok(arg)
    }

    /// `[…]` or `<…>`: a choice when it has alternatives, else what its one
    /// sequence makes.
    fn group(
        &mut self,
        alternatives: &[Vec<Raw>],
        optional: bool,
    ) -> Result<Argument, SyntaxError> {
        let mut alternatives = alternatives.to_vec();
        let multiple = strip_repeated_choice(&mut alternatives);
        let mut arg = if alternatives.len() > 1 {
            self.choice(&alternatives)?
        } else {
            self.one(alternatives.pop().unwrap_or_default())?
        };
        arg.optional |= optional;
        arg.multiple |= multiple;
        Ok(arg)
    }

    fn choice(&mut self, alternatives: &[Vec<Raw>]) -> Result<Argument, SyntaxError> {
        // `<m | km | ft | mi>`: a choice of bare lower-case words is a choice
        // of tokens (Redis's tokens are not always upper case).
        let bare_words = alternatives
            .iter()
            .all(|a| matches!(a.as_slice(), [Raw::Word(w)] if !is_token(w) && !w.contains(':')));
        let mut members = Vec::with_capacity(alternatives.len());
        for alternative in alternatives {
            match alternative.as_slice() {
                [Raw::Word(w)] if bare_words => members.push(self.pure_token(w)),
                _ => members.push(self.one(alternative.clone())?),
            }
        }
        let first = members.first().map(label).unwrap_or_default();
        let name = match CHOICE_NAMES.iter().find(|(f, _)| *f == first) {
            Some((_, name)) => (*name).to_string(),
            None => joined_names(&members),
        };
        let mut arg = Argument::new(name, ArgType::OneOf);
        arg.arguments = members;
        Ok(arg)
    }

    /// One sequence that is one argument: an alternative of a choice or the
    /// content of brackets. `LIMIT offset count` is a block headed by its
    /// token; `COUNT count [ANY]` and `BYRADIUS radius <m | km>` are blocks
    /// whose first member has the token, as Redis defines them.
    fn one(&mut self, sequence: Vec<Raw>) -> Result<Argument, SyntaxError> {
        let units = units(sequence)?;
        if let Some(token) = headed_block_token(&units) {
            let members = self.sequence(&units[1..])?;
            let mut arg = block(token_name(token), members);
            arg.token = Some(token_text(token).to_string());
            return Ok(arg);
        }
        let members = self.sequence(&units)?;
        match <[Argument; 1]>::try_from(members) {
            Ok([only]) => Ok(only),
            Err(members) if members.is_empty() => Err(SyntaxError("empty brackets".into())),
            Err(members) => Ok(block(joined_names(&members), members)),
        }
    }
}

fn block(name: String, members: Vec<Argument>) -> Argument {
    let mut arg = Argument::new(name, ArgType::Block);
    arg.arguments = members;
    arg
}

/// How a member is known in its group's name: by its token if it has one.
fn label(member: &Argument) -> String {
    match &member.token {
        Some(token) => token_name(token),
        None => member.name.clone(),
    }
}

/// `host port` → `host-port`: Redis's usual name for an unnamed group.
fn joined_names(members: &[Argument]) -> String {
    members.iter().map(label).collect::<Vec<_>>().join("-")
}

/// The token heading a block (`LIMIT offset count`): a token followed by at
/// least two units, the first a value other than the token's own name, none
/// a required choice.
fn headed_block_token<'a>(units: &[Unit<'a>]) -> Option<&'a str> {
    let (head, rest) = units.split_first()?;
    let token = head.word().filter(|w| is_token(w) && !head.multiple)?;
    let first = rest.first()?.word()?;
    let is_block = rest.len() >= 2
        && !is_token(first)
        && first != token.to_ascii_lowercase()
        && !rest.iter().any(Unit::is_required_choice);
    is_block.then_some(token)
}

/// `a | b [a | b ...]` (redis.io's rendering of a repeated choice): drops the
/// repetition and says whether there was one.
fn strip_repeated_choice(alternatives: &mut [Vec<Raw>]) -> bool {
    let Some((last, before)) = alternatives.split_last() else { return false };
    let Some(content) = last.last().and_then(repetition) else { return false };
    let mut expected: Vec<Vec<Raw>> = before.to_vec();
    expected.push(last[..last.len() - 1].to_vec());
    if before.is_empty() || content != expected {
        return false;
    }
    if let Some(last) = alternatives.last_mut() {
        last.pop();
    }
    true
}

#[cfg(test)]
mod tests;
