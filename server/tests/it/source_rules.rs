//! Checks on the workspace's source that keep each rule written once (issue 33): they read the
//! `.rs` files under `server/src`, `app/src`, `wire/src` and `bench/src` and fail, naming the
//! file and line, when
//! - a lifecycle status (a job's, a delivery's, a refund's, ...) is written as an SQL literal
//!   (`'due'`) anywhere but its enum's file, `wire/src/lifecycle.rs`, whose `job_sql!`-style
//!   macros the queries build their text from;
//! - the console compares an action kind as text (`o.kind == "retry"`) instead of through
//!   `converge_wire::ActionKind`;
//! - a currency-exponent table appears anywhere but `wire/src/money.rs`;
//! - a function outside tests is longer than 100 lines (the 41 that were when issue 33 was
//!   filed are split; the console's Leptos components count like any function: their
//!   `view!` is code);
//! - a use case in `server/src/service/` is a free function over the store or the core (a
//!   module-level `pub fn` whose first parameter is a `&dyn Store` or a `&Core`) instead of a
//!   method on `Core`, the one shape every use case has;
//! - an `ApiError::new(..)` or `ApiError::bad_request(..)` is given its code as a string
//!   literal instead of a `converge_wire::ErrorCode` (the codes are written once, in
//!   `wire/src/codes.rs`).
//!
//! The scanner is deliberately small: it knows Rust's comments, strings, raw strings and char
//! literals well enough to match braces and to tell code from text, and it drops
//! `#[cfg(test)]` items (tests may spell statuses, currencies and long tables as they like).
//! No database: these are plain tests, not `on_both_backends!`.

use std::path::{Path, PathBuf};

/// The workspace root (this crate is `server/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("server/ has a parent")
        .to_path_buf()
}

/// Every `.rs` file under the crates' `src/` directories, as (path relative to the root,
/// text), in a stable order.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let root = root();
    let mut files = Vec::new();
    for krate in ["server", "app", "wire", "bench", "sim"] {
        walk(&root.join(krate).join("src"), &mut files);
    }
    files.sort();
    assert!(
        files.len() > 50,
        "the scan found the sources ({})",
        files.len()
    );
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("a source file reads");
            let rel = p
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, text)
        })
        .collect()
}

/// What a byte of a source file is, for the checks: code, or inside a comment, a string
/// (`"..."`, `r#"..."#`, `b"..."`) or a char literal.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    Code,
    Comment,
    Text,
}

/// The class of every byte of `s` (a lifetime `'a` is code; `'x'`, `'\n'` are text).
fn classify(s: &str) -> Vec<Class> {
    let b = s.as_bytes();
    let mut out = vec![Class::Code; b.len()];
    let mut i = 0;
    while i < b.len() {
        let start = i;
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            out[start..i].fill(Class::Comment);
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out[start..i].fill(Class::Comment);
        } else if b[i] == b'r'
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && b.get(i + 1 + hashes_at(b, i + 1)) == Some(&b'"')
        {
            let hashes = hashes_at(b, i + 1);
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            i += 2 + hashes;
            while i < b.len() && !b[i..].starts_with(&close) {
                i += 1;
            }
            i = (i + close.len()).min(b.len());
            out[start..i].fill(Class::Text);
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
            out[start..i].fill(Class::Text);
        } else if b[i] == b'\'' {
            // A char literal is 'x', '\x..', '\u{..}' or a multi-byte char; else a lifetime.
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|c| *c == b'\'')
                    .map(|p| i + 2 + p)
            } else {
                let ch = s[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 1 + ch)
            };
            match end {
                Some(e) => {
                    i = e + 1;
                    out[start..i].fill(Class::Text);
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// How many `#` start at `at`.
fn hashes_at(b: &[u8], at: usize) -> usize {
    b[at.min(b.len())..]
        .iter()
        .take_while(|c| **c == b'#')
        .count()
}

/// The index of the `}` matching the `{` at `open`, in code.
fn matching_brace(b: &[u8], class: &[Class], open: usize) -> Option<usize> {
    let mut depth = 0i64;
    for (i, c) in b.iter().enumerate().skip(open) {
        if class[i] != Class::Code {
            continue;
        }
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `s` with every `#[cfg(test)]` item (module or function) blanked out, lines kept, so line
/// numbers still point into the file.
fn without_tests(s: &str) -> String {
    let class = classify(s);
    let b = s.as_bytes();
    let mut out = b.to_vec();
    let mut from = 0;
    while let Some(p) = s[from..].find("#[cfg(test)]") {
        let at = from + p;
        from = at + 1;
        if class[at] != Class::Code {
            continue;
        }
        // The item's body: the first `{` in code (a `;` first: an item without one, e.g. a
        // `mod x;` or a `use`, which needs no blanking).
        let Some(open) =
            (at..b.len()).find(|&i| class[i] == Class::Code && (b[i] == b'{' || b[i] == b';'))
        else {
            break;
        };
        if b[open] == b';' {
            continue;
        }
        let close = matching_brace(b, &class, open).unwrap_or(b.len() - 1);
        for c in &mut out[at..=close] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = close;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where `needle` occurs in `s` outside comments (in code or in a string).
fn outside_comments(s: &str, needle: &str) -> Vec<usize> {
    let class = classify(s);
    s.match_indices(needle)
        .map(|(at, _)| at)
        .filter(|at| class[*at] != Class::Comment)
        .collect()
}

/// 1-based line of byte `at`.
fn line_of(s: &str, at: usize) -> usize {
    s[..at].bytes().filter(|c| *c == b'\n').count() + 1
}

/// Every function with a body: (name, first line, number of lines from `fn` to its `}`).
fn functions(s: &str) -> Vec<(String, usize, usize)> {
    let class = classify(s);
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = s[i..].find("fn ") {
        let at = i + p;
        i = at + 3;
        let word_start = at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_');
        if class[at] != Class::Code || !word_start {
            continue;
        }
        let name: String = s[at + 3..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // a pointer type, `fn(i64) -> i64`
        }
        // The body opens at the first `{` in code outside the signature's parentheses and
        // brackets; a `;` there first is a declaration without one.
        let mut depth = 0i64;
        let mut open = None;
        for j in at..b.len() {
            if class[j] != Class::Code {
                continue;
            }
            match b[j] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                b';' if depth == 0 => break,
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let Some(close) = matching_brace(b, &class, open) else {
            continue;
        };
        let first = line_of(s, at);
        out.push((name, first, line_of(s, close) - first + 1));
    }
    out
}

/// Longest function allowed outside tests, in lines from `fn` to its closing brace.
const MAX_FUNCTION_LINES: usize = 100;

#[test]
fn no_function_outside_tests_is_longer_than_100_lines() {
    let mut long = Vec::new();
    for (path, text) in sources() {
        for (name, line, lines) in functions(&without_tests(&text)) {
            if lines > MAX_FUNCTION_LINES {
                long.push(format!("{path}::{name} (line {line}): {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines outside tests (split them): {long:#?}"
    );
}

/// Every status name of the lifecycles in `wire/src/lifecycle.rs`.
fn status_names() -> Vec<&'static str> {
    use converge_wire::lifecycle::{
        ActionStatus, DeliveryStatus, EndpointStatus, ErrorItemStatus, JobStatus, KeyState,
        PauseStatus, RefundStatus,
    };
    let mut names: Vec<&'static str> = Vec::new();
    names.extend(JobStatus::ALL.map(JobStatus::as_str));
    names.extend(DeliveryStatus::ALL.map(DeliveryStatus::as_str));
    names.extend(RefundStatus::ALL.map(RefundStatus::as_str));
    names.extend(ActionStatus::ALL.map(ActionStatus::as_str));
    names.extend(EndpointStatus::ALL.map(EndpointStatus::as_str));
    names.extend(ErrorItemStatus::ALL.map(ErrorItemStatus::as_str));
    names.extend(KeyState::ALL.map(KeyState::as_str));
    names.extend(PauseStatus::ALL.map(PauseStatus::as_str));
    names.sort_unstable();
    names.dedup();
    names
}

/// Places a quoted status name is something else, each with why.
const STATUS_WORDS_ELSEWHERE: &[(&str, &str)] = &[
    // The sandbox channel's own charge table (`succeeded`, `declined`): a connector's
    // vocabulary, not one of converge's lifecycles.
    ("server/src/channel/sandbox/", "'succeeded'"),
    // `auth_attempts.outcome` (migration 0103): a sign-in attempt being verified, its own
    // three words, not a request's status.
    ("server/src/store/console_sql.rs", "'pending'"),
];

#[test]
fn lifecycle_statuses_are_written_only_in_their_enums_file() {
    let names = status_names();
    assert!(names.contains(&"due") && names.contains(&"abandoned"));
    let mut found = Vec::new();
    for (path, text) in sources() {
        // The benchmarks write rows with raw SQL on purpose: the baselines they measure
        // converge against (a bare two-phase insert, graphile-worker's queue) are SQL alone.
        if path == "wire/src/lifecycle.rs" || path.starts_with("bench/") {
            continue;
        }
        for name in &names {
            let quoted = format!("'{name}'");
            if STATUS_WORDS_ELSEWHERE
                .iter()
                .any(|(p, w)| path.starts_with(p) && *w == quoted)
            {
                continue;
            }
            for (at, _) in text.match_indices(&quoted) {
                found.push(format!("{path}:{}: {quoted}", line_of(&text, at)));
            }
        }
    }
    assert!(
        found.is_empty(),
        "status names written outside wire/src/lifecycle.rs (build the SQL with \
         converge_wire::job_sql!(..) and its siblings): {found:#?}"
    );
}

#[test]
fn the_console_compares_no_action_kind_as_text() {
    let kinds = converge_wire::ActionKind::ALL.map(|k| format!("\"{}\"", k.as_str()));
    let mut found = Vec::new();
    for (path, text) in sources() {
        if !path.starts_with("app/src/") {
            continue;
        }
        let code = without_tests(&text);
        for kind in &kinds {
            for at in outside_comments(&code, kind) {
                found.push(format!("{path}:{}: {kind}", line_of(&code, at)));
            }
        }
    }
    assert!(
        found.is_empty(),
        "action kinds written as text in the console (use converge_wire::ActionKind): {found:#?}"
    );
}

/// Codes only an exponent table names: the ones whose minor unit is 0, 3 or 4.
const TABLE_CODES: &[&str] = &["\"BHD\"", "\"KWD\"", "\"CLF\"", "\"ISK\"", "\"BIF\""];

#[test]
fn there_is_one_currency_exponent_table() {
    let mut found = Vec::new();
    for (path, text) in sources() {
        if path == "wire/src/money.rs" {
            continue;
        }
        let code = without_tests(&text);
        for c in TABLE_CODES {
            for at in outside_comments(&code, c) {
                found.push(format!("{path}:{}: {c}", line_of(&code, at)));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a currency-exponent table outside wire/src/money.rs (use converge_wire::money): {found:#?}"
    );
}

#[test]
fn no_error_code_is_matched_by_its_text() {
    let mut found = Vec::new();
    for (path, text) in sources() {
        if !(path.starts_with("server/src/") || path.starts_with("app/src/")) {
            continue;
        }
        let code = without_tests(&text);
        for pattern in ["code == \"", "code != \"", "code.as_str() == \""] {
            for at in outside_comments(&code, pattern) {
                found.push(format!("{path}:{}: {pattern}", line_of(&code, at)));
            }
        }
    }
    assert!(
        found.is_empty(),
        "error codes compared as text (ask the error: ApiError::is_internal, ...): {found:#?}"
    );
}

/// The first parameter of the function whose `fn` keyword is at `at` in `code`, without
/// spaces (`store:&dynStore`); none for a function without parameters.
fn first_parameter(code: &str, at: usize) -> Option<String> {
    let open = at + code[at..].find('(')?;
    let mut depth = 0i64;
    let mut end = None;
    for (i, c) in code[open + 1..].char_indices() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' if depth == 0 => {
                end = Some(open + 1 + i);
                break;
            }
            ',' if depth == 0 => {
                end = Some(open + 1 + i);
                break;
            }
            ')' | '>' | ']' => depth -= 1,
            _ => {}
        }
    }
    let p: String = code[open + 1..end?]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    (!p.is_empty()).then_some(p)
}

#[test]
fn every_use_case_is_a_method_on_core() {
    let mut found = Vec::new();
    for (path, text) in sources() {
        if !path.starts_with("server/src/service/") {
            continue;
        }
        let code = without_tests(&text);
        let class = classify(&code);
        let mut at = 0;
        for line in code.split_inclusive('\n') {
            let start = at;
            at += line.len();
            // Module level: the item starts its line (the items of an `impl` or a nested
            // module are indented).
            let Some(rest) = line.strip_prefix("pub") else {
                continue;
            };
            if class[start] != Class::Code {
                continue;
            }
            let rest = rest.trim_start_matches(|c: char| c != ' ').trim_start();
            let rest = rest.strip_prefix("async ").unwrap_or(rest);
            if !rest.starts_with("fn ") {
                continue;
            }
            let Some(param) = first_parameter(&code, start + line.find("fn ").unwrap_or(0)) else {
                continue;
            };
            let ty = param.split_once(':').map_or("", |(_, t)| t);
            let over_store =
                ty == "&dynStore" || (ty.starts_with("&dyn") && ty.ends_with("::Store"));
            let over_core = ty == "&Core" || (ty.starts_with('&') && ty.ends_with("::Core"));
            if over_store || over_core {
                found.push(format!("{path}:{}: {}", line_of(&code, start), line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "use cases written as free functions over the store or the core (make each a method \
         in an `impl Core` block of its module): {found:#?}"
    );
}

/// The arguments of the call whose `(` is at `open`, as byte ranges of `s` split at its
/// top-level commas (in code; commas in strings, comments and nested brackets are skipped).
fn call_arguments(s: &str, class: &[Class], open: usize) -> Vec<(usize, usize)> {
    let b = s.as_bytes();
    let mut args = Vec::new();
    let mut depth = 0i64;
    let mut start = open + 1;
    for (i, c) in b.iter().enumerate().skip(open) {
        if class[i] != Class::Code {
            continue;
        }
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    args.push((start, i));
                    break;
                }
            }
            b',' if depth == 1 => {
                args.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    args
}

#[test]
fn no_api_error_is_given_its_code_as_a_string_literal() {
    // (the call's text up to its `(`, the index of the argument that is the code)
    let calls = [("ApiError::new(", 1), ("bad_request(", 0)];
    let mut found = Vec::new();
    for (path, text) in sources() {
        if !(path.starts_with("server/src/") || path.starts_with("app/src/")) {
            continue;
        }
        let code = without_tests(&text);
        let class = classify(&code);
        for (call, index) in calls {
            for at in outside_comments(&code, call) {
                let before = code[..at].chars().next_back();
                if class[at] != Class::Code
                    || before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                {
                    continue;
                }
                let open = at + call.len() - 1;
                let Some(&(from, to)) = call_arguments(&code, &class, open).get(index) else {
                    continue;
                };
                let arg = code[from..to].trim_start();
                if arg.starts_with('"') || arg.starts_with("r#\"") || arg.starts_with("r\"") {
                    let literal = to - arg.len();
                    found.push(format!("{path}:{}: {call}", line_of(&code, literal)));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "error codes written as string literals (use converge_wire::ErrorCode, \
         wire/src/codes.rs): {found:#?}"
    );
}
