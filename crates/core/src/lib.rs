//! numalab-core: the vocabulary every numalab component shares.
//!
//! Pure types and arithmetic only: no file, process or network I/O happens here, so the
//! simulator, the analytic models and the live agent can all depend on it.

pub mod ids;
pub mod machine;
pub mod overrides;
pub mod profile;
pub mod rng;
pub mod stats;

pub use ids::{CpuId, NodeId, PageIdx, ThreadId};

/// Join a multi-line message (the toml crate's parse errors span lines) into one line, so
/// every error the CLI prints stays one sentence.
pub fn one_line(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}
pub use machine::{Machine, MachineError, Tier};

/// Convert a TOML tree into `T`; an error's message is one line and starts with the key path
/// it is about (`sched.idle_balance: invalid type: string "yes", expected a boolean`), which the
/// toml crate gives only when it parses text. Used where a tree changed by `--set` is read.
pub fn from_toml_tree<T: serde::de::DeserializeOwned>(value: toml::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = one_line(e.inner().message());
        if path.is_empty() || path == "." {
            message
        } else {
            format!("{path}: {message}")
        }
    })
}

/// The 1-based line of a TOML `text` that a validation `problem` is about, when it can be
/// found: the problem names a key (`` `nodes[2].mem_bw_gbps` = …``, `os_costs.x`,
/// `phase 'solve': chunks = …`, `region 'a': pages = …`) and the line is the one that sets it.
/// `None` when the key is not written in the text (a default, or set with `--set`).
pub fn locate_line(text: &str, problem: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let trimmed = |i: usize| lines[i].trim_start();
    let sets = |i: usize, key: &str| {
        let l = trimmed(i);
        l.strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('='))
    };
    // The section the key lives in: [lo, hi) line range.
    let mut lo = 0usize;
    let mut hi = lines.len();
    let section_end = |from: usize| (from + 1..lines.len()).find(|&i| trimmed(i).starts_with('[')).unwrap_or(lines.len());
    let mut rest = problem;
    for (kind, header) in [("phase '", "[[phase]]"), ("region '", "[[region]]")] {
        if let Some(p) = problem.find(kind) {
            let name = &problem[p + kind.len()..];
            let name = &name[..name.find('\'')?];
            let headers: Vec<usize> = (0..lines.len()).filter(|&i| trimmed(i).starts_with(header)).collect();
            let h = headers.into_iter().find(|&h| {
                let end = section_end(h);
                (h + 1..end).any(|i| sets(i, "name") && trimmed(i).contains(&format!("\"{name}\"")))
            })?;
            lo = h;
            hi = section_end(h);
            rest = &problem[p..];
        }
    }
    // The key: the first `word[...]...` before " = " (backticks stripped).
    let key_text = rest.split(" = ").next()?;
    let key_text = key_text.rsplit([':', ' ']).next()?.trim_matches('`');
    let mut parts: Vec<&str> = key_text.split('.').collect();
    if parts.len() >= 2 && parts[0].starts_with("nodes[") {
        let idx: usize = parts[0].trim_start_matches("nodes[").trim_end_matches(']').parse().ok()?;
        let h = (0..lines.len()).filter(|&i| trimmed(i).starts_with("[[nodes]]")).nth(idx)?;
        lo = h;
        hi = section_end(h);
        parts.remove(0);
    } else if parts.len() >= 2 && lo == 0 {
        let header = format!("[{}]", parts[..parts.len() - 1].join("."));
        if let Some(h) = (0..lines.len()).find(|&i| trimmed(i).starts_with(&header)) {
            lo = h;
            hi = section_end(h);
            parts = vec![parts[parts.len() - 1]];
        }
    }
    let key = parts.last()?.split('[').next()?;
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    if let Some(i) = (lo..hi).find(|&i| sets(i, key)) {
        return Some(i + 1);
    }
    // An inline table (`accesses = [ { region = "a", share = 1.0 } ]`): a line holding
    // `key =`, and the region's name for an access.
    let region = problem.find("access to '").and_then(|p| {
        let r = &problem[p + "access to '".len()..];
        r.find('\'').map(|e| format!("\"{}\"", &r[..e]))
    });
    let assignment = format!("{key} =");
    (lo..hi)
        .find(|&i| {
            let l = lines[i];
            l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ' ' || c == '='))
                .any(|part| part.trim_start().starts_with(&assignment))
                && region.as_ref().is_none_or(|r| l.contains(r.as_str()))
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod locate_tests {
    use super::locate_line;

    #[test]
    fn finds_the_line_that_sets_a_key() {
        let t =
            "name = \"x\"\nclock_ghz = 2\n[os_costs]\nfirst_touch_fault_ns = inf\n[[nodes]]\nmem_bw_gbps = 1\n[[nodes]]\nmem_bw_gbps = 0\n";
        assert_eq!(locate_line(t, "`os_costs.first_touch_fault_ns` = inf ns: must be"), Some(4));
        assert_eq!(locate_line(t, "`nodes[1].mem_bw_gbps` = 0 GB/s: must be"), Some(8));
        assert_eq!(locate_line(t, "`clock_ghz` = 0 GHz"), Some(2));
        let w = "[workload]\nname = \"w\"\n[[phase]]\nname = \"a\"\nchunks = 1\n[[phase]]\nname = \"b\"\nchunks = 0\n";
        assert_eq!(locate_line(w, "phase 'b': chunks = 0: must lie in 1..=4096"), Some(8));
        assert_eq!(locate_line(w, "phase 'zz': chunks = 0"), None);
        let a = "[[phase]]\nname = \"fill\"\naccesses = [\n  { region = \"a\", share = 0.5 },\n  { region = \"b\", share = nan },\n]\n";
        assert_eq!(locate_line(a, "phase 'fill': access to 'b': share = NaN must lie in [0, 1]"), Some(5));
    }
}
