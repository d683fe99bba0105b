//! `firstload`: bytes a browser transfers for the console's first load (issue "Ops console
//! I", Performance; issue "Proof", benchmark 7: <= 300 KB compressed).
//!
//! Fetches the page at `--url` (following redirects, as a browser does to the sign-in page),
//! finds the stylesheet, script and WebAssembly it loads (`href`/`src` attributes ending in
//! `.css`, `.js` or `.wasm`), and fetches each with `Accept-Encoding: br, gzip` and with
//! `identity`, then the modules each script imports statically (`from "./x.js"`: the lazy
//! routes' loader, `__wasm_split.*.js`, which the browser fetches before it runs the console;
//! the page chunks that loader fetches later, on a navigation, are not). Bodies are counted as sent (no decompression on this side), so the figure is
//! what crosses the network, headers aside. Prints `label.<file>.{br,identity}_bytes` and
//! the totals.

use anyhow::{Context, Result, bail};
use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "Counts the console's first-load bytes, compressed and not")]
struct Args {
    /// The console page to load, e.g. http://127.0.0.1:3000/
    #[arg(long)]
    url: String,
    /// Prefix of the printed `key=value` lines.
    #[arg(long, default_value = "firstload")]
    label: String,
}

async fn fetch(c: &reqwest::Client, url: &str, encoding: &str) -> Result<(Vec<u8>, String)> {
    let r = c
        .get(url)
        .header("accept-encoding", encoding)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    if !r.status().is_success() {
        bail!("GET {url} answered {}", r.status());
    }
    let ce = r
        .headers()
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .to_string();
    Ok((r.bytes().await?.to_vec(), ce))
}

/// The `.css`, `.js` and `.wasm` URLs the page's `href`/`src` attributes name.
fn assets(html: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for attr in ["href=\"", "src=\""] {
        for part in html.split(attr).skip(1) {
            let Some(end) = part.find('"') else { continue };
            let v = &part[..end];
            if [".css", ".js", ".wasm"].iter().any(|e| v.ends_with(e))
                && !out.iter().any(|o| o == v)
            {
                out.push(v.to_string());
            }
        }
    }
    out
}

/// The `.js` modules `js` imports statically (`import ... from "./x.js"`, and the minified
/// `import*as n from"./x.js"` that cargo-leptos's release builds write).
fn imports(js: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in js.split("from").skip(1) {
        let rest = part.trim_start();
        let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            continue;
        };
        let rest = &rest[1..];
        let Some(end) = rest.find(quote) else {
            continue;
        };
        let v = &rest[..end];
        if v.ends_with(".js") && !out.iter().any(|o| o == v) {
            out.push(v.to_string());
        }
    }
    out
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let c = reqwest::Client::builder().build()?;
    let (page, _) = fetch(&c, &args.url, "identity").await?;
    let html = String::from_utf8_lossy(&page).into_owned();
    let base = url::Url::parse(&args.url)?;
    let mut files = vec![("html".to_string(), args.url.clone())];
    for a in assets(&html) {
        let name = a.rsplit('/').next().unwrap_or(&a).to_string();
        files.push((name, base.join(&a)?.to_string()));
    }
    if files.len() < 4 {
        bail!(
            "the page names {} assets; expected css, js and wasm: {:?}",
            files.len() - 1,
            files
        );
    }
    let (mut total_c, mut total_i) = (0usize, 0usize);
    let l = &args.label;
    let mut i = 0;
    while i < files.len() {
        let (name, url) = files[i].clone();
        i += 1;
        let (compressed, ce) = fetch(&c, &url, "br, gzip").await?;
        let (plain, _) = fetch(&c, &url, "identity").await?;
        if name.ends_with(".js") {
            let from = url::Url::parse(&url)?;
            for m in imports(&String::from_utf8_lossy(&plain)) {
                let abs = from.join(&m)?.to_string();
                if !files.iter().any(|(_, u)| *u == abs) {
                    let n = m.rsplit('/').next().unwrap_or(&m).to_string();
                    files.push((n, abs));
                }
            }
        }
        total_c += compressed.len();
        total_i += plain.len();
        println!("{l}.{name}.encoding={ce}");
        println!("{l}.{name}.compressed_bytes={}", compressed.len());
        println!("{l}.{name}.identity_bytes={}", plain.len());
    }
    println!("{l}.total.compressed_bytes={total_c}");
    println!("{l}.total.identity_bytes={total_i}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::imports;

    #[test]
    fn static_imports_are_found_once_and_dynamic_chunks_are_not() {
        let js = "import * as a from \"./__wasm_split.x.js\"\nimport * as b from \"./__wasm_split.x.js\"\nimport c from './util.js';\nconst m = await import(\"./chunk_1.wasm\");";
        assert_eq!(imports(js), ["./__wasm_split.x.js", "./util.js"]);
    }

    #[test]
    fn minified_static_imports_without_spaces_are_found() {
        let js = "import*as n from\"./__wasm_split.x.js\";import*as t from\"./__wasm_split.x.js\";const a=Array.from(\"ab\");";
        assert_eq!(imports(js), ["./__wasm_split.x.js"]);
    }
}
