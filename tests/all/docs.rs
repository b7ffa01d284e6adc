//! The facts the embedding guide states that can drift from the code: checked against the
//! source, so a hook or error added without the guide following fails here.

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The `Driver` trait's hooks, `(required, provided)`: a `fn` whose signature ends with `;`
/// is required, one with a body provided.
fn driver_hooks() -> (Vec<String>, Vec<String>) {
    let source = read("src/driver.rs");
    let start = source.find("pub trait Driver").expect("the trait");
    let body = &source[start..];
    let (mut required, mut provided) = (Vec::new(), Vec::new());
    for (at, _) in body.match_indices("\n    fn ") {
        let rest = &body[at + "\n    fn ".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut depth = 0i32;
        for c in rest.chars() {
            match c {
                '(' | '<' => depth += 1,
                ')' | '>' => depth -= 1,
                ';' if depth <= 0 => {
                    required.push(name);
                    break;
                }
                '{' if depth <= 0 => {
                    provided.push(name);
                    break;
                }
                _ => {}
            }
        }
    }
    (required, provided)
}

/// EMBEDDING.md counts the required and provided hooks and names every provided one.
#[test]
fn the_guide_counts_and_names_the_drivers_hooks() {
    let guide = read("docs/EMBEDDING.md");
    let (required, provided) = driver_hooks();
    assert!(
        required.len() > 10 && provided.len() > 10,
        "{required:?} {provided:?}"
    );
    let claim = format!(
        "{} required hooks and {} provided ones",
        required.len(),
        provided.len()
    );
    let flat = guide.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&claim), "EMBEDDING.md must say \"{claim}\"");
    for hook in &provided {
        assert!(
            guide.contains(&format!("`{hook}`")),
            "EMBEDDING.md does not name the provided hook `{hook}`"
        );
    }
}

/// The minimal driver's list of hooks (the section "A minimal driver") names every required
/// hook, says how many others have default bodies, and names each of those.
#[test]
fn the_minimal_drivers_list_names_every_hook() {
    let guide = read("docs/EMBEDDING.md");
    let (required, provided) = driver_hooks();
    let start = guide
        .find(&format!("The {} required hooks:", required.len()))
        .expect("the minimal driver's list of required hooks, with their count");
    let end = start + guide[start..].find("`Kernel`'s").expect("the list's end");
    let list = &guide[start..end];
    let flat = list.split_whitespace().collect::<Vec<_>>().join(" ");
    let claim = format!("The {} others have default bodies", provided.len());
    assert!(flat.contains(&claim), "the list must say \"{claim}\"");
    for hook in required.iter().chain(&provided) {
        assert!(
            list.contains(&format!("`{hook}`")),
            "the minimal driver's list does not name the hook `{hook}`"
        );
    }
}

/// EMBEDDING.md's error table has a row for every `Error` variant.
#[test]
fn the_guides_error_table_has_every_error() {
    let guide = read("docs/EMBEDDING.md");
    let source = read("src/error.rs");
    let start = source.find("pub enum Error {").expect("the enum");
    let end = start + source[start..].find("\n}").expect("its end");
    let variants: Vec<&str> = source[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.starts_with("pub enum") && !l.is_empty())
        .map(|l| l.trim_end_matches(',').split('(').next().unwrap_or(l))
        .collect();
    assert!(variants.len() >= 5, "{variants:?}");
    for variant in variants {
        let row = format!("| `{variant}");
        assert!(
            guide.contains(&row),
            "EMBEDDING.md's error table has no row for `{variant}`"
        );
    }
}
