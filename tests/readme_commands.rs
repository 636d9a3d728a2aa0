//! The README's command list is the command table rendered as markdown:
//! one line per command and subcommand with its group and summary, between
//! `<!-- commands:start -->` and `<!-- commands:end -->`. A test fails when
//! the README and the table disagree; rewrite the section with
//!
//! ```text
//! cargo test -p ringdb --test readme_commands -- --ignored regenerate
//! ```

use ringdb_engine::command::{table, Registered};
use std::path::PathBuf;

const START: &str = "<!-- commands:start -->";
const END: &str = "<!-- commands:end -->";
const REGENERATE: &str = "cargo test -p ringdb --test readme_commands -- --ignored regenerate";

fn readme_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md")
}

/// `CLIENT LIST` for the row `client|list`.
fn display_name(reg: &Registered) -> String {
    reg.full_name.replace('|', " ").to_ascii_uppercase()
}

/// Text safe inside a markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The command list: a markdown table of every command and subcommand,
/// ordered by group, then name.
fn command_list() -> String {
    let mut rows: Vec<(&str, String, &str)> = table()
        .all_rows()
        .into_iter()
        .map(|reg| (reg.spec.doc.group, display_name(reg), reg.spec.doc.summary))
        .collect();
    rows.sort();
    let mut out = String::from("| Command | Group | Summary |\n|---|---|---|\n");
    for (group, name, summary) in rows {
        out += &format!("| `{name}` | {group} | {} |\n", cell(summary));
    }
    out
}

/// The README's text between the markers, if it has them in order.
fn section(readme: &str) -> Option<(usize, usize)> {
    let start = readme.find(START)? + START.len();
    let end = start + readme[start..].find(END)?;
    Some((start, end))
}

/// The generated section as it sits between the markers.
fn generated_section() -> String {
    format!("\n{}", command_list())
}

#[test]
fn command_list_renders_every_row() {
    let list = command_list();
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines[0], "| Command | Group | Summary |");
    assert_eq!(lines.len() - 2, table().all_rows().len(), "one line per row");
    assert!(lines.contains(&"| `GET` | string | Returns the string value of a key. |"), "{list}");
    assert!(
        lines.contains(&"| `COMMAND LIST` | server | Returns a list of command names. |"),
        "subcommands are listed by their full name: {list}"
    );
    let groups: Vec<&str> =
        lines[2..].iter().map(|l| l.split(" | ").nth(1).unwrap_or_default()).collect();
    assert!(groups.windows(2).all(|w| w[0] <= w[1]), "ordered by group: {groups:?}");
    assert_eq!(cell("a | b"), "a \\| b");
}

#[test]
fn readme_lists_every_command() {
    let path = readme_path();
    let readme = std::fs::read_to_string(&path).unwrap_or_default();
    let Some((start, end)) = section(&readme) else {
        panic!(
            "{} has no command list between `{START}` and `{END}`; add the two markers and run\n    {REGENERATE}",
            path.display()
        );
    };
    assert!(
        readme[start..end] == generated_section(),
        "the command list in {} is out of date with the command table; run\n    {REGENERATE}",
        path.display()
    );
}

/// Rewrites the README's command list (appending the markers first if the
/// README has none).
#[test]
#[ignore = "rewrites README.md; run explicitly to regenerate the command list"]
fn regenerate() {
    let path = readme_path();
    let mut readme = std::fs::read_to_string(&path).unwrap_or_default();
    if section(&readme).is_none() {
        if !readme.is_empty() {
            readme = format!("{}\n\n", readme.trim_end());
        }
        readme += &format!("{START}\n{END}\n");
    }
    let Some((start, end)) = section(&readme) else { panic!("the markers were just added") };
    readme.replace_range(start..end, &generated_section());
    if let Err(e) = std::fs::write(&path, readme) {
        panic!("cannot write {}: {e}", path.display());
    }
}
