//! Every crate of the workspace drawn from its imports (docs/architecture.md), as
//! `scripts/test.sh` checks the crates' layers with `cargo tree`:
//!
//! - in every crate, no modules import each other in a circle, file by file (a `mod.rs` and
//!   its children included);
//! - in every crate, no module imports the crate's root (`lib.rs`, `main.rs`): a name the
//!   root re-exports is taken from the module that defines it, and the root defines nothing
//!   its modules use (an arrow running back up to the top);
//!
//! and `kubectl-sexton`'s source stands on floors (docs/architecture.md, "kubectl-sexton:
//! the floors"): the subcommands are siblings on one shared floor (`src/shared/`):
//!
//! - a subcommand (a top-level module other than `shared`) imports no other subcommand;
//! - the shared floor imports no subcommand (no arrow running back up);
//! - no module is more than 3 floors above the shared floor;
//! - subcommands import each other in no circle.
//!
//! An import is any path to a module of the crate: `use` trees and paths written out in the
//! code (`crate::...`, `super::...`, a child module's name), tests included.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
const CRATES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The root of each crate's module tree (each binary's and library's, and the scale
/// benchmark's), under `crates/`.
const ROOTS: &[&str] = &[
    "sexton-core/src/lib.rs",
    "sexton-inject/src/lib.rs",
    "sexton/src/lib.rs",
    "sexton/src/main.rs",
    "kubectl-sexton/src/main.rs",
    "kubectl-sexton/benches/scale/main.rs",
    "testbed/src/lib.rs",
];
const FLOOR: &str = "shared";
const MAX_FLOORS_ABOVE: usize = 3;

/// A module's path in the crate: `["controller", "terminator", "run"]`; the root is `[]`.
type ModPath = Vec<String>;

struct Module {
    file: PathBuf,
    /// The text without comments, strings and characters.
    code: String,
    /// The modules declared in it with `mod NAME;`.
    children: BTreeSet<String>,
    /// Those declared with a `#[path]`: files of another tree, left out.
    elsewhere: BTreeSet<String>,
}

/// Every module of the crate rooted at `root` (a `main.rs`), following `mod NAME;`; modules
/// given a `#[path]` (files of another tree) are left out.
fn modules(root: &Path) -> BTreeMap<ModPath, Module> {
    let mut all = BTreeMap::new();
    load(root, vec![], &mut all);
    all
}

fn load(file: &Path, path: ModPath, all: &mut BTreeMap<ModPath, Module>) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let code = strip(&text);
    let dir = file.parent().unwrap();
    let stem = file.file_stem().unwrap().to_str().unwrap();
    let own_dir = if ["main", "mod", "lib"].contains(&stem) {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    let (children, elsewhere) = declared_children(&text, &code);
    for child in &children {
        let flat = own_dir.join(format!("{child}.rs"));
        let file = if flat.exists() {
            flat
        } else {
            own_dir.join(child).join("mod.rs")
        };
        let mut p = path.clone();
        p.push(child.clone());
        load(&file, p, all);
    }
    let module = Module {
        file: file.to_path_buf(),
        code,
        children,
        elsewhere,
    };
    all.insert(path, module);
}

/// `mod NAME;` declarations (`pub`, `pub(crate)` allowed): those of this tree, and those
/// given a `#[path]`.
fn declared_children(text: &str, code: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut out, mut elsewhere) = (BTreeSet::new(), BTreeSet::new());
    let words = words(code);
    for (i, w) in words.iter().enumerate() {
        let (Some(name), Some(semi)) = (words.get(i + 1), words.get(i + 2)) else {
            continue;
        };
        if w.1 == "mod" && is_ident(&name.1) && semi.1 == ";" {
            let line_start = text[..w.0].rfind('\n').map_or(0, |n| n + 1);
            let before = &text[..line_start];
            let attrs: Vec<&str> = before
                .lines()
                .rev()
                .take_while(|l| l.trim_start().starts_with("#["))
                .collect();
            if attrs.iter().any(|a| a.contains("#[path")) {
                elsewhere.insert(name.1.clone());
            } else {
                out.insert(name.1.clone());
            }
        }
    }
    (out, elsewhere)
}

/// The code without comments, string and character literals (each replaced by spaces, so
/// that positions still match the text).
fn strip(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            loop {
                if i >= b.len() {
                    break;
                }
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !ident_char(b.get(i.wrapping_sub(1)))
        {
            // r"...", r#"..."#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for c in &b[i..j.min(b.len())] {
                out.push(blank(*c));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && char_literal_len(&b[i..]).is_some() {
            let n = char_literal_len(&b[i..]).unwrap();
            for _ in 0..n {
                out.push(' ');
            }
            i += n;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_char(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// The length of a character literal starting here (`'a'`, `'\n'`, `'\u{1F600}'`); `None`
/// for a lifetime.
fn char_literal_len(b: &[char]) -> Option<usize> {
    if b.get(1) == Some(&'\\') {
        let end = b.iter().skip(3).position(|c| *c == '\'')?;
        return Some(end + 4);
    }
    (b.get(2) == Some(&'\'')).then_some(3)
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The code's words: identifiers and `::` as one token each, other characters one by one;
/// with their byte offsets.
fn words(code: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    let mut chars = code.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut w = c.to_string();
            while let Some(&(_, d)) = chars.peek() {
                if d.is_alphanumeric() || d == '_' {
                    w.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push((i, w));
        } else if c == ':' && chars.peek().map(|p| p.1) == Some(':') {
            chars.next();
            out.push((i, "::".into()));
        } else if !c.is_whitespace() {
            out.push((i, c.to_string()));
        }
    }
    out
}

/// How deep inside inline modules (`mod tests { ... }`) each word is.
fn inline_depths(words: &[(usize, String)]) -> Vec<usize> {
    let mut depths = vec![0; words.len()];
    // (brace depth at which an inline module's body started)
    let mut open: Vec<usize> = vec![];
    let mut braces = 0usize;
    for (i, w) in words.iter().enumerate() {
        match w.1.as_str() {
            "{" => {
                braces += 1;
                let starts_module = i >= 2 && words[i - 2].1 == "mod" && is_ident(&words[i - 1].1);
                if starts_module {
                    open.push(braces);
                }
            }
            "}" => {
                if open.last() == Some(&braces) {
                    open.pop();
                }
                braces = braces.saturating_sub(1);
            }
            _ => {}
        }
        depths[i] = open.len();
    }
    depths
}

/// Every path the module's code names, as written: `use` trees expanded
/// (`crate::a::{b, c}` → `crate::a::b`, `crate::a::c`), and paths written out; each with how
/// deep in inline modules it stands.
fn paths(code: &str) -> Vec<(Vec<String>, usize)> {
    let words = words(code);
    let depths = inline_depths(&words);
    let mut out = vec![];
    let mut i = 0;
    while i < words.len() {
        if words[i].1 == "use" {
            let end = (i..words.len())
                .find(|&j| words[j].1 == ";")
                .unwrap_or(words.len());
            let tree: Vec<&str> = words[i + 1..end].iter().map(|w| w.1.as_str()).collect();
            for p in expand(&tree) {
                out.push((p, depths[i]));
            }
            i = end;
            continue;
        }
        // a path written out: IDENT :: IDENT (:: IDENT)*, not the tail of a longer one
        let starts = is_ident(&words[i].1)
            && words.get(i + 1).is_some_and(|w| w.1 == "::")
            && (i == 0 || words[i - 1].1 != "::");
        if starts {
            let mut p = vec![words[i].1.clone()];
            let mut j = i + 1;
            while words.get(j).is_some_and(|w| w.1 == "::")
                && words.get(j + 1).is_some_and(|w| is_ident(&w.1))
            {
                p.push(words[j + 1].1.clone());
                j += 2;
            }
            out.push((p, depths[i]));
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// `a :: { b , c :: { d , self } }` → `a::b`, `a::c::d`, `a::c::self` (renames dropped).
fn expand(tree: &[&str]) -> Vec<Vec<String>> {
    let mut prefix = vec![];
    let mut i = 0;
    while i < tree.len() {
        match tree[i] {
            "::" => i += 1,
            "{" => {
                let close = matching(tree, i);
                let mut out = vec![];
                for part in split_top(&tree[i + 1..close]) {
                    for mut tail in expand(part) {
                        let mut p = prefix.clone();
                        p.append(&mut tail);
                        out.push(p);
                    }
                }
                return out;
            }
            "as" => break,
            w => {
                prefix.push(w.to_string());
                i += 1;
            }
        }
    }
    if prefix.is_empty() {
        vec![]
    } else {
        vec![prefix]
    }
}

fn matching(tree: &[&str], open: usize) -> usize {
    let mut depth = 0;
    for (j, t) in tree.iter().enumerate().skip(open) {
        match *t {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    tree.len()
}

fn split_top<'a>(items: &'a [&'a str]) -> Vec<&'a [&'a str]> {
    let mut out = vec![];
    let (mut depth, mut start) = (0, 0);
    for (j, t) in items.iter().enumerate() {
        match *t {
            "{" => depth += 1,
            "}" => depth -= 1,
            "," if depth == 0 => {
                out.push(&items[start..j]);
                start = j + 1;
            }
            _ => {}
        }
    }
    out.push(&items[start..]);
    out.into_iter().filter(|p| !p.is_empty()).collect()
}

/// The module a path names (the longest prefix that is one), if it is one of the crate's.
fn target(
    all: &BTreeMap<ModPath, Module>,
    from: &ModPath,
    path: &[String],
    inline_depth: usize,
) -> Option<ModPath> {
    let first = path.first()?.as_str();
    let (mut base, rest): (ModPath, &[String]) = match first {
        "crate" => (vec![], &path[1..]),
        "self" => (from.clone(), &path[1..]),
        "super" => {
            let supers = path.iter().take_while(|s| *s == "super").count();
            // in an inline module, the first `super`s climb out of it, inside the file
            let climb = supers.saturating_sub(inline_depth);
            let mut b = from.clone();
            b.truncate(b.len().saturating_sub(climb));
            (b, &path[supers..])
        }
        name if all[from].children.contains(name) => (from.clone(), path),
        _ => return None,
    };
    for seg in rest {
        if all[&base].elsewhere.contains(seg) {
            return None;
        }
        let mut next = base.clone();
        next.push(seg.clone());
        if seg == "self" || !all.contains_key(&next) {
            break;
        }
        base = next;
    }
    Some(base)
}

/// Module → the modules it imports (itself left out).
fn imports(all: &BTreeMap<ModPath, Module>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    all.iter()
        .map(|(from, m)| {
            let to = paths(&m.code)
                .iter()
                .filter_map(|(p, depth)| target(all, from, p, *depth))
                .filter(|t| t != from)
                .collect();
            (from.clone(), to)
        })
        .collect()
}

fn name(p: &ModPath) -> String {
    if p.is_empty() {
        "(the root)".into()
    } else {
        p.join("/")
    }
}

/// The circles of a graph: its strongly connected components of more than one node.
fn circles<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    // (a node reaches itself through another: the circle is the set of such nodes
    // reaching each other)
    let reach = |from: &N| -> BTreeSet<N> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<N> = graph[from].iter().cloned().collect();
        while let Some(n) = todo.pop() {
            if seen.insert(n.clone()) {
                todo.extend(graph.get(&n).into_iter().flatten().cloned());
            }
        }
        seen
    };
    let reached: BTreeMap<N, BTreeSet<N>> = graph.keys().map(|n| (n.clone(), reach(n))).collect();
    let mut out: Vec<Vec<N>> = vec![];
    for n in graph.keys() {
        if !reached[n].contains(n) || out.iter().any(|c| c.contains(n)) {
            continue;
        }
        let circle = graph
            .keys()
            .filter(|m| reached[n].contains(*m) && reached[*m].contains(n))
            .cloned()
            .collect();
        out.push(circle);
    }
    out
}

/// How many floors each node stands above the nodes that import nothing (0); the graph has
/// no circle.
fn floors<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> BTreeMap<N, usize> {
    fn floor<N: Ord + Clone>(
        n: &N,
        graph: &BTreeMap<N, BTreeSet<N>>,
        memo: &mut BTreeMap<N, usize>,
    ) -> usize {
        if let Some(f) = memo.get(n) {
            return *f;
        }
        let f = graph[n]
            .iter()
            .map(|m| floor(m, graph, memo) + 1)
            .max()
            .unwrap_or(0);
        memo.insert(n.clone(), f);
        f
    }
    let mut memo = BTreeMap::new();
    for n in graph.keys() {
        floor(n, graph, &mut memo);
    }
    memo
}

/// The unit a module belongs to: `main`, a subcommand (`controller`, with all its files), or
/// a module of the shared floor (`shared/registry`, with its files).
fn unit(p: &ModPath) -> String {
    match p.as_slice() {
        [] => "main".into(),
        [floor, module, ..] if floor == FLOOR => format!("{floor}/{module}"),
        [top, ..] => top.clone(),
    }
}

fn is_floor(unit: &str) -> bool {
    unit.starts_with(&format!("{FLOOR}/")) || unit == FLOOR
}

/// The drawing, for failure messages: each unit on its floor, with what it imports.
fn drawing(units: &BTreeMap<String, BTreeSet<String>>) -> String {
    let no_circles = circles(units).is_empty();
    let mut lines = vec![];
    if no_circles {
        let f = floors(units);
        let mut by: Vec<_> = f.iter().collect();
        by.sort_by_key(|(u, f)| (**f, (*u).clone()));
        for (u, f) in by {
            let to: Vec<&str> = units[u].iter().map(String::as_str).collect();
            lines.push(format!("  {f} {u} -> {}", to.join(", ")));
        }
    } else {
        for (u, to) in units {
            let to: Vec<&str> = to.iter().map(String::as_str).collect();
            lines.push(format!("  {u} -> {}", to.join(", ")));
        }
    }
    lines.join("\n")
}

fn units(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> BTreeMap<String, BTreeSet<String>> {
    let mut units: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in graph {
        let u = unit(from);
        let entry = units.entry(u.clone()).or_default();
        for to in tos {
            let v = unit(to);
            if v != u {
                entry.insert(v);
            }
        }
    }
    units
}

#[test]
fn subcommands_are_siblings_on_the_shared_floor() {
    let all = modules(&Path::new(SRC).join("main.rs"));
    let graph = imports(&all);
    let units = units(&graph);
    let mut wrong = vec![];
    for (from, tos) in &graph {
        let u = unit(from);
        for to in tos {
            let v = unit(to);
            if u == v {
                continue;
            }
            let what = format!(
                "{} imports {}",
                all[from].file.strip_prefix(SRC).unwrap().display(),
                all[to].file.strip_prefix(SRC).unwrap().display()
            );
            if v == "main" {
                wrong.push(format!(
                    "{what}: main.rs only dispatches; nothing imports it"
                ));
            } else if is_floor(&u) && !is_floor(&v) {
                wrong.push(format!(
                    "{what}: the shared floor imports no subcommand (an arrow running back up)"
                ));
            } else if !is_floor(&u) && u != "main" && !is_floor(&v) {
                wrong.push(format!(
                    "{what}: subcommands are siblings; what both need belongs in src/{FLOOR}/"
                ));
            }
        }
    }
    if !all.contains_key(&vec![FLOOR.to_string()]) {
        wrong.push(format!(
            "no src/{FLOOR}/: every top-level module is a subcommand, and none may import another"
        ));
    }
    assert!(
        wrong.is_empty(),
        "{}\n\nthe drawing (unit -> what it imports):\n{}",
        wrong.join("\n"),
        drawing(&units)
    );
    let circles_of_units = circles(&units);
    assert!(
        circles_of_units.is_empty(),
        "modules importing each other in a circle: {circles_of_units:?}\n{}",
        drawing(&units)
    );
    // floors above the shared floor: a unit of the floor is at 0, anything else one above
    // the highest unit it imports
    let f = floors(&units);
    let floor_top = units
        .keys()
        .filter(|u| is_floor(u))
        .map(|u| f[u])
        .max()
        .unwrap_or(0);
    for (u, at) in &f {
        if is_floor(u) {
            continue;
        }
        let above = above_floor(u, &units);
        assert!(
            above <= MAX_FLOORS_ABOVE,
            "{u} stands {above} floors above the shared floor (at most {MAX_FLOORS_ABOVE}; it is {at} above the lowest module, the floor's top is {floor_top})\n{}",
            drawing(&units)
        );
    }
}

/// How many floors `u` stands above the shared floor: 0 for the floor, else one more than
/// the highest unit it imports that is not the floor (1 if it imports only the floor).
fn above_floor(u: &str, units: &BTreeMap<String, BTreeSet<String>>) -> usize {
    if is_floor(u) {
        return 0;
    }
    1 + units[u]
        .iter()
        .filter(|v| !is_floor(v))
        .map(|v| above_floor(v, units))
        .max()
        .unwrap_or(0)
}

#[test]
fn no_module_imports_another_in_a_circle() {
    let mut found = vec![];
    for root in ROOTS {
        let all = modules(&Path::new(CRATES).join(root));
        for circle in circles(&imports(&all)) {
            let names: Vec<String> = circle.iter().map(name).collect();
            found.push(format!("{root}: {}", names.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules importing each other in a circle (each reaches every other through its imports):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_module_imports_its_crate_root() {
    let mut found = vec![];
    for root in ROOTS {
        let file = Path::new(CRATES).join(root);
        let all = modules(&file);
        for (from, path) in root_imports(&all) {
            found.push(format!(
                "{} takes {path} from {root}: import it from the module that defines it (move a definition the root holds into one)",
                all[&from].file.strip_prefix(CRATES).unwrap().display()
            ));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The modules that import the crate's root, each with the path it writes.
fn root_imports(all: &BTreeMap<ModPath, Module>) -> Vec<(ModPath, String)> {
    let mut out = vec![];
    for (from, m) in all {
        if from.is_empty() {
            continue;
        }
        for (p, depth) in paths(&m.code) {
            if target(all, from, &p, depth) == Some(vec![]) {
                out.push((from.clone(), p.join("::")));
            }
        }
    }
    out
}

/// The checks see what they must: each rule fails on a drawing that breaks it.
#[test]
fn the_checks_catch_what_they_are_for() {
    let code = strip(
        "use crate::{a::b, c};\n// use crate::d;\nlet s = \"crate::e\";\nmod tests { use super::*; use super::super::f; }\nfn x() { g::h(); crate::i::j(); }",
    );
    let found: Vec<String> = paths(&code).iter().map(|(p, _)| p.join("::")).collect();
    assert!(found.contains(&"crate::a::b".to_string()), "{found:?}");
    assert!(found.contains(&"crate::c".to_string()), "{found:?}");
    assert!(found.contains(&"crate::i::j".to_string()), "{found:?}");
    assert!(
        !found.iter().any(|p| p.contains("::d") || p.contains("::e")),
        "{found:?}"
    );
    let depths: Vec<usize> = paths(&code).iter().map(|(_, d)| *d).collect();
    assert_eq!(depths.iter().filter(|d| **d == 1).count(), 2, "{found:?}");
    let graph: BTreeMap<&str, BTreeSet<&str>> = [
        ("a", BTreeSet::from(["b"])),
        ("b", BTreeSet::from(["c"])),
        ("c", BTreeSet::from(["a"])),
        ("d", BTreeSet::from(["a"])),
    ]
    .into();
    assert_eq!(circles(&graph), vec![vec!["a", "b", "c"]]);
    let stacked: BTreeMap<String, BTreeSet<String>> = [
        ("main", vec!["doctor"]),
        ("doctor", vec!["webhook", "shared/pod"]),
        ("webhook", vec!["shared/pod"]),
        ("shared/pod", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(above_floor("doctor", &stacked), 2);
    assert_eq!(above_floor("main", &stacked), 3);
    // a module taking a name through the root's re-export, or one the root defines
    let module = |code: &str, children: &[&str]| Module {
        file: PathBuf::new(),
        code: strip(code),
        children: children.iter().map(|c| c.to_string()).collect(),
        elsewhere: BTreeSet::new(),
    };
    let all: BTreeMap<ModPath, Module> = [
        (
            vec![],
            module(
                "mod a; mod b; pub use a::X; pub const Y: u8 = 0;",
                &["a", "b"],
            ),
        ),
        (
            vec!["a".into()],
            module("use crate::b::Z; use crate::Y;", &[]),
        ),
        (
            vec!["b".into()],
            module("pub struct Z; fn f() -> crate::X { super::a::X }", &[]),
        ),
    ]
    .into();
    let taken: Vec<String> = root_imports(&all)
        .into_iter()
        .map(|(from, p)| format!("{}: {p}", name(&from)))
        .collect();
    assert_eq!(taken, ["a: crate::Y", "b: crate::X"]);
    assert_eq!(
        circles(&imports(&all)),
        vec![vec![vec![], vec!["a".to_string()], vec!["b".to_string()]]]
    );
}
