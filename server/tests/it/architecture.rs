//! Checks on the backend's source tree that keep its shape true (issue 33): no module imports
//! from a layer above its own, the top-level modules import one another without a cycle, and
//! no list of route names chooses how an Idempotency-Key is claimed (every merchant POST is a
//! use case that claims its key in its own first transaction, `service/write.rs`).
//!
//! The source is read with `std::fs` from `server/src`; comment lines and everything from a
//! file's `#[cfg(test)]` on are skipped (docs may link anywhere; tests may use any layer).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first: a module may import its own layer and those below it. The
/// domain imports nothing of ours but itself; the store imports the domain (and the leaf
/// helpers beside it); the channel adapters the store; the use cases the store, domain and
/// channel; the adapters (merchant API, console API, workers, `verify`, the HTTP error type,
/// the settings) the use cases; the composition (`http`, `startup`) everything.
const LAYERS: &[(&str, u8)] = &[
    ("domain", 0),
    // The simulator's planted-bug switches (issue 39): read by the service, import nothing.
    ("planted", 0),
    ("ids", 1),
    ("telemetry", 1),
    ("schema", 1),
    ("store", 1),
    ("channel", 2),
    ("service", 3),
    ("api", 4),
    ("ops", 4),
    ("worker", 4),
    ("verify", 4),
    ("error", 4),
    ("config", 4),
    ("http", 5),
    ("startup", 5),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read the source tree") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read a source file");
                out.push((path, text));
            }
        }
    }
    out.sort();
    out
}

/// The top-level module a file under `src` belongs to (`store/keys.rs` -> `store`,
/// `error.rs` -> `error`); None for `lib.rs`.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then(|| name.to_owned())
}

/// The code lines of a file: comment lines and its tests left out.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| l.trim() != "#[cfg(test)]")
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l))
}

/// The top-level modules a line names through `crate::` (or `$crate::` in a macro).
fn imported_modules(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::x, b}`: each item's first segment.
            let inner = group.split('}').next().unwrap_or("");
            for item in inner.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push(name);
                }
            }
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.push(name);
        }
    }
    found
}

/// Each import that points up a layer, as `file:line: from -> to`, and the import graph of
/// the top-level modules.
fn check_imports(
    src: &Path,
    files: &[(PathBuf, String)],
) -> (Vec<String>, BTreeMap<String, BTreeSet<String>>) {
    let mut upward = Vec::new();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let Some(from) = module_of(src, path) else {
            continue;
        };
        let from_layer = layer(&from);
        if from_layer.is_none() {
            upward.push(format!(
                "{}: module `{from}` has no layer in LAYERS",
                path.display()
            ));
            continue;
        }
        for (n, line) in code_lines(text) {
            for to in imported_modules(line) {
                if to == from {
                    continue;
                }
                let Some(to_layer) = layer(&to) else {
                    continue;
                };
                graph.entry(from.clone()).or_default().insert(to.clone());
                if to_layer > from_layer.unwrap_or(0) {
                    upward.push(format!("{}:{n}: {from} -> {to}", path.display()));
                }
            }
        }
    }
    (upward, graph)
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

/// Code lines holding a string literal that names a route by method and path (`"POST /v1/..."`):
/// a list of route names deciding how a request is handled, as `DEFERRED_ROUTES` chose which
/// routes claimed their key in their handler. Routes are told apart by the router, not by text.
fn route_name_lists(files: &[(PathBuf, String)]) -> Vec<String> {
    let methods = ["\"POST /", "\"PUT /", "\"PATCH /", "\"DELETE /"];
    let mut found = Vec::new();
    for (path, text) in files {
        for (n, line) in code_lines(text) {
            if methods.iter().any(|m| line.contains(m)) {
                found.push(format!("{}:{n}: {}", path.display(), line.trim()));
            }
        }
    }
    found
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_module_imports_from_a_layer_above_it_and_no_modules_import_each_other_in_a_cycle() {
    let src = src_dir();
    let files = sources(&src);
    assert!(
        files.len() > 50,
        "the source tree was not found at {}",
        src.display()
    );
    let (upward, graph) = check_imports(&src, &files);
    assert!(
        upward.is_empty(),
        "imports that point up a layer (LAYERS in tests/it/architecture.rs):\n{}",
        upward.join("\n")
    );
    assert_eq!(
        find_cycle(&graph),
        None,
        "the top-level modules import in a cycle"
    );
}

#[test]
fn no_route_name_list_chooses_how_a_key_is_claimed() {
    let found = route_name_lists(&sources(&src_dir()));
    assert!(
        found.is_empty(),
        "route names in code (the router tells routes apart):\n{}",
        found.join("\n")
    );
}

/// The checks above fail on what they are meant to catch: the old `idempotency/` module's
/// shapes (the store importing the layer above it, the two importing each other, and the
/// route list that chose the claim).
#[test]
fn the_checks_catch_an_upward_import_a_cycle_and_a_route_list() {
    let src = PathBuf::from("/src");
    let files = vec![
        (
            src.join("store/keys_sql.rs"),
            "use crate::domain::idempotency::KeyState;\n// crate::api in a comment is fine\nfn f() -> $crate::service::Core {}\n".to_owned(),
        ),
        (
            src.join("domain/x.rs"),
            "use crate::{domain::money, store::Payment};\n#[cfg(test)]\nuse crate::api::x;\n".to_owned(),
        ),
        (
            src.join("api/idempotency.rs"),
            "use crate::ops::x;\nconst DEFERRED_ROUTES: [&str; 1] = [\"POST /v1/payments\"];\n".to_owned(),
        ),
        (src.join("ops/mod.rs"), "use crate::api::y;\n".to_owned()),
    ];
    let (upward, graph) = check_imports(&src, &files);
    assert_eq!(
        upward,
        [
            "/src/store/keys_sql.rs:3: store -> service",
            "/src/domain/x.rs:1: domain -> store",
        ]
    );
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["api".to_owned(), "ops".to_owned(), "api".to_owned()])
    );
    assert_eq!(route_name_lists(&files).len(), 1);
}
