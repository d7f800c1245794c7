//! Helpers shared by the CLI test files: run the built `numalab`, read what it prints,
//! and check a failure for one `error: ...` line; the presets every listing must name.
//!
//! Each test file includes this module and uses part of it.
#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;

pub fn numalab() -> Command {
    Command::cargo_bin("numalab").unwrap()
}

pub const MACHINES: [&str; 11] = [
    "amd48",
    "xeon-e5-2690-2s",
    "xeon-e5-2690-1n",
    "knl-7250-flat",
    "gp1000",
    "server-a-4n",
    "server-a-2n",
    "server-b-8n",
    "epyc-2s-nps4",
    "xeon-max-hbm-flat",
    "cxl-expander",
];

pub const WORKLOADS: [&str; 25] = [
    "is-like",
    "ep-like",
    "cg-like",
    "mg-like",
    "ft-like",
    "bt-like",
    "sp-like",
    "lu-like",
    "ua-like",
    "xsbench-like",
    "graph500-like",
    "stream-like",
    "master-slave",
    "dunx-synth",
    "msort-like",
    "gauss-like",
    "hh3d-like",
    "hough-like",
    "psolu-like",
    "wave-like",
    "fish-like",
    "mandel-like",
    "hydm-npb-mix",
    "hydm-npb-mix-32",
    "tiering-mix",
];

pub const POLICIES: [&str; 21] = [
    "first-touch",
    "round-4k",
    "round-1g",
    "bind",
    "preferred",
    "weighted-interleave",
    "linux",
    "tier-static",
    "autonuma",
    "stable-numa",
    "kmaf",
    "carrefour",
    "first-touch+carrefour",
    "round-4k+carrefour",
    "hydm",
    "linux-tiering",
    "dunx",
    "cache",
    "mor",
    "ideal",
    "error",
];

/// Bandwidth-bound, deterministic and very fast: 4 threads stream on nodes 0-3 of amd48.
pub const SMALL: [&str; 10] = ["--machine", "amd48", "--workload", "stream-like", "--scale", "0.001", "--threads", "4", "--runs", "2"];

pub fn stdout_of(args: &[&str]) -> String {
    let out = numalab().args(args).assert().success().get_output().clone();
    String::from_utf8(out.stdout).expect("UTF-8 stdout")
}

pub fn stderr_of(args: &[&str]) -> String {
    let out = numalab().args(args).assert().success().get_output().clone();
    String::from_utf8(out.stderr).expect("UTF-8 stderr")
}

pub fn json_of(args: &[&str]) -> Value {
    let text = stdout_of(&[args, &["--format", "json"]].concat());
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{text}"))
}

/// Run a command that must fail: exit code 2, nothing on stdout, and exactly one line
/// `error: ...` on stderr. Returns that line without the trailing newline.
pub fn error_of(args: &[&str]) -> String {
    let out = numalab().args(args).assert().code(2).get_output().clone();
    assert!(out.stdout.is_empty(), "stdout not empty: {}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error: "), "stderr: {err:?}");
    assert!(err.ends_with('\n') && err.matches('\n').count() == 1, "error is not one line: {err:?}");
    err.trim_end().to_string()
}

pub fn write_file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// A minimal RFC 4180 reader: rows of fields, quotes and doubled quotes handled.
pub fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(!quoted, "unterminated quote in CSV:\n{text}");
    assert!(field.is_empty() && row.is_empty(), "CSV does not end with a newline");
    rows
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}
