//! The README documents every setting exactly as the code defines it.

#[test]
fn readme_settings_table_matches_code() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    for s in sexton_core::settings::SETTINGS {
        let default = match s.default {
            None => "(required)".to_string(),
            Some("") => "(none)".to_string(),
            Some(d) => format!("`{d}`"),
        };
        let row = format!("| `{}` | `--{}` | {} |", s.env, s.flag, default);
        assert!(
            readme.contains(&row),
            "README.md lacks the settings row starting {row:?}"
        );
    }
}

#[test]
fn readme_starts_with_the_two_commands() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let head: Vec<&str> = readme.lines().take(6).collect();
    assert!(
        head.iter().any(|l| l.starts_with("./scripts/demo.sh")),
        "{head:?}"
    );
    assert!(
        head.iter().any(|l| l.starts_with("./scripts/test.sh")),
        "{head:?}"
    );
    let ci = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.ci/run")).unwrap();
    assert!(
        ci.contains("exec ./scripts/test.sh"),
        "CI must run exactly the README's test command"
    );
}
