//! Text generated from a declaration and committed: a block between two markers of a file.

/// Checks that the text of `path` between `begin` and `end` is `expected`; with `UPDATE_EXPECT=1`
/// rewrites it instead.
pub fn assert_generated_block(path: &std::path::Path, begin: &str, end: &str, expected: &str, test: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find(begin).unwrap_or_else(|| panic!("{} has the marker {begin:?}", path.display())) + begin.len();
    let stop = start + text[start..].find(end).unwrap_or_else(|| panic!("{} has the marker {end:?}", path.display()));
    if std::env::var("UPDATE_EXPECT").is_ok_and(|v| v == "1") {
        std::fs::write(path, format!("{}{expected}{}", &text[..start], &text[stop..])).unwrap();
        return;
    }
    assert!(
        text[start..stop] == *expected,
        "{} between {begin:?} and {end:?} is not the generated text; rewrite it with \
         `UPDATE_EXPECT=1 cargo test -p cp-suite --test {test}`\n--- expected:\n{expected}\n--- found:\n{}",
        path.display(),
        &text[start..stop]
    );
}
