//! Redis's glob-style matcher (`stringmatchlen` in `util.c`), used by KEYS,
//! SCAN MATCH, CONFIG GET, PSUBSCRIBE and hot-key rules: `*`, `?`, `[abc]`,
//! `[^a]`, `[a-z]`, and `\` escapes. Malformed patterns never fail; they match
//! what Redis's matcher matches. Recursion for `*` is cut short the way Redis
//! does it, so a pathological pattern costs O(pattern × string), not
//! exponential time.

/// Whether `string` matches the glob `pattern`.
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    match_impl(pattern, string, nocase, &mut skip_longer)
}

fn lower(c: u8, nocase: bool) -> u8 {
    if nocase {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

fn match_impl(mut p: &[u8], mut s: &[u8], nocase: bool, skip_longer: &mut bool) -> bool {
    // `at(p, i)` mirrors C reading the NUL terminator past the end.
    let at = |p: &[u8], i: usize| p.get(i).copied().unwrap_or(0);
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if match_impl(&p[1..], s, nocase, skip_longer) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => {
                s = &s[1..];
            }
            b'[' => {
                p = &p[1..];
                let not = at(p, 0) == b'^';
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if at(p, 0) == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if p[0] == s[0] {
                            matched = true;
                        }
                    } else if at(p, 0) == b']' && !p.is_empty() {
                        break;
                    } else if p.is_empty() {
                        // Unterminated class: C steps back one so the outer
                        // loop's advance lands on the end of the pattern.
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0], p[2]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let (start, end, c) =
                            (lower(start, nocase), lower(end, nocase), lower(s[0], nocase));
                        p = &p[2..];
                        if c >= start && c <= end {
                            matched = true;
                        }
                    } else if lower(p[0], nocase) == lower(s[0], nocase) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s = &s[1..];
                if p.is_empty() {
                    // The unterminated-class case: nothing left to advance past.
                    if s.is_empty() {
                        return true;
                    }
                    return false;
                }
            }
            b'\\' => {
                if p.len() >= 2 {
                    p = &p[1..];
                }
                if lower(p[0], nocase) != lower(s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if lower(c, nocase) != lower(s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
        if s.is_empty() {
            while !p.is_empty() && p[0] == b'*' {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

/// Whether a pattern matches at most literal strings (no `*?[\`), letting
/// callers look a key up directly instead of scanning.
pub fn is_literal(pattern: &[u8]) -> bool {
    !pattern.iter().any(|c| matches!(c, b'*' | b'?' | b'[' | b'\\'))
}

#[cfg(test)]
mod tests {
    use super::glob_match as m;

    #[test]
    fn redis_glob_rules() {
        assert!(m(b"*", b"anything", false));
        assert!(m(b"h?llo", b"hello", false));
        assert!(m(b"h*llo", b"heeeello", false));
        assert!(m(b"h[ae]llo", b"hallo", false));
        assert!(!m(b"h[ae]llo", b"hillo", false));
        assert!(m(b"h[^e]llo", b"hallo", false));
        assert!(!m(b"h[^e]llo", b"hello", false));
        assert!(m(b"h[a-b]llo", b"hbllo", false));
        assert!(m(b"h[b-a]llo", b"hallo", false));
        assert!(m(b"h\\*llo", b"h*llo", false));
        assert!(!m(b"h\\*llo", b"hello", false));
        assert!(m(b"HELLO", b"hello", true));
        assert!(!m(b"HELLO", b"hello", false));
        assert!(m(b"a*b*c", b"axxbyyc", false));
        assert!(!m(b"a*b*c", b"axxbyy", false));
        assert!(m(b"key:*", b"key:1", false));
        assert!(!m(b"key:?", b"key:", false));
        assert!(m(b"[abc", b"a", false));
        assert!(m(b"\\", b"\\", false));
    }

    #[test]
    fn empty_string() {
        // Redis: the loop never runs, so only an empty pattern matches "".
        assert!(!m(b"*", b"", false));
        assert!(m(b"", b"", false));
    }

    #[test]
    fn pathological_pattern_is_fast() {
        let s = vec![b'a'; 5000];
        let p = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        assert!(!m(p, &s, false));
    }
}
