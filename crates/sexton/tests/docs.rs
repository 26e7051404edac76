//! The README documents every setting exactly as the code defines it, and
//! docs/architecture.md names only files, types and functions that exist.

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
    let ci =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.ci/run")).unwrap();
    assert!(
        ci.contains("exec ./scripts/test.sh"),
        "CI must run exactly the README's test command"
    );
}

/// Every `file.rs`, `Type::function` and `module::function` that docs/architecture.md
/// names in backticks exists in the crates' sources, so the death path it describes is
/// the code's.
#[test]
fn architecture_names_only_what_exists() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let doc = std::fs::read_to_string(format!("{root}/docs/architecture.md")).unwrap();
    let mut files = vec![];
    let mut sources = String::new();
    let mut dirs = vec![std::path::PathBuf::from(format!("{root}/crates"))];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("target") {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p.file_name().unwrap().to_string_lossy().into_owned());
                sources.push_str(&std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut checked = 0;
    for quoted in doc.split('`').skip(1).step_by(2) {
        let quoted = quoted.split(['(', ' ', '{']).next().unwrap();
        if let Some(file) = quoted.strip_suffix(".rs") {
            let name = file.rsplit('/').next().unwrap();
            assert!(
                files.iter().any(|f| f == &format!("{name}.rs")),
                "docs/architecture.md names {quoted}, which does not exist"
            );
            checked += 1;
        } else if let Some((owner, item)) = quoted.rsplit_once("::") {
            let owner = owner.rsplit("::").next().unwrap();
            let is_ident =
                |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
            if !is_ident(owner) || !is_ident(item) {
                continue;
            }
            let owner_exists = files.iter().any(|f| f == &format!("{owner}.rs"))
                || sources.contains(&format!("struct {owner}"))
                || sources.contains(&format!("enum {owner}"))
                || sources.contains(&format!("mod {owner}"));
            let item_exists = sources.contains(&format!("fn {item}("))
                || sources.contains(&format!("fn {item}<"))
                || sources.contains(&format!("    {item}("))
                || sources.contains(&format!("    {item} {{"))
                || sources.contains(&format!("    {item},"));
            assert!(
                owner_exists && item_exists,
                "docs/architecture.md names {quoted}, which does not exist"
            );
            checked += 1;
        }
    }
    assert!(
        checked > 30,
        "only {checked} names checked: did the format change?"
    );
}
