//! `/proc/PID/numa_maps`: one line per mapping, `ADDRESS POLICY [fields…]`, with resident
//! pages per node as `N<node>=<pages>` in units of `kernelpagesize_kB`.

use crate::error::{LinuxError, Result};
use numalab_core::profile::NodePages;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaMapsEntry {
    pub start: u64,
    /// `default`, `bind:0-1`, `interleave:0-1`, `prefer:1`, `local`, `prefer (many):0-1`,
    /// `weighted interleave:0-1`, optionally with `=static`/`=relative` mode flags.
    pub policy: String,
    pub file: Option<String>,
    pub heap: bool,
    pub stack: bool,
    /// hugetlbfs mapping.
    pub huge: bool,
    pub anon: Option<u64>,
    pub dirty: Option<u64>,
    pub mapped: Option<u64>,
    pub mapmax: Option<u64>,
    pub swapcache: Option<u64>,
    pub active: Option<u64>,
    pub writeback: Option<u64>,
    /// Resident pages per node, in units of `kernel_page_bytes`.
    pub pages_per_node: BTreeMap<u32, u64>,
    /// `None` when the kernel printed no size (a mapping with no resident page).
    pub kernel_page_bytes: Option<u64>,
    /// Fields this parser does not know, kept verbatim.
    pub other: BTreeMap<String, String>,
}

/// What a mapping's pages count as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    Anon,
    File,
    Huge,
}

impl NumaMapsEntry {
    /// hugetlbfs → Huge; a file mapping (including its private copy-on-write pages) → File;
    /// everything else (heap, stacks, anonymous mmap, THP) → Anon.
    pub fn kind(&self) -> PageKind {
        if self.huge {
            PageKind::Huge
        } else if self.file.is_some() {
            PageKind::File
        } else {
            PageKind::Anon
        }
    }
}

fn split_policy<'a>(tokens: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>) -> Option<String> {
    let first = tokens.next()?;
    // Two-word policies: `prefer (many):…` and `weighted interleave:…`.
    if first == "prefer" || first == "weighted" {
        if let Some(next) = tokens.next() {
            return Some(format!("{first} {next}"));
        }
    }
    Some(first.to_string())
}

pub fn parse_numa_maps(text: &str, path: &Path) -> Result<Vec<NumaMapsEntry>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let mut tokens = line.split_whitespace().peekable();
        let addr = tokens.next().unwrap_or("");
        let start = u64::from_str_radix(addr, 16)
            .map_err(|_| LinuxError::parse(path, lineno, "address", format!("`{addr}` is not hexadecimal")))?;
        let policy = split_policy(&mut tokens).ok_or_else(|| LinuxError::parse(path, lineno, "policy", "missing"))?;
        let mut e = NumaMapsEntry { start, policy, ..Default::default() };
        for tok in tokens {
            let num = |field: &str, v: &str| {
                v.parse::<u64>().map_err(|_| LinuxError::parse(path, lineno, field, format!("`{v}` is not an unsigned integer")))
            };
            match tok.split_once('=') {
                None => match tok {
                    "heap" => e.heap = true,
                    "stack" => e.stack = true,
                    "huge" => e.huge = true,
                    other => {
                        e.other.insert(other.to_string(), String::new());
                    }
                },
                Some(("file", v)) => e.file = Some(v.to_string()),
                Some(("anon", v)) => e.anon = Some(num("anon", v)?),
                Some(("dirty", v)) => e.dirty = Some(num("dirty", v)?),
                Some(("mapped", v)) => e.mapped = Some(num("mapped", v)?),
                Some(("mapmax", v)) => e.mapmax = Some(num("mapmax", v)?),
                Some(("swapcache", v)) => e.swapcache = Some(num("swapcache", v)?),
                Some(("active", v)) => e.active = Some(num("active", v)?),
                Some(("writeback", v)) => e.writeback = Some(num("writeback", v)?),
                Some(("kernelpagesize_kB", v)) => e.kernel_page_bytes = Some(num("kernelpagesize_kB", v)? * 1024),
                Some((k, v)) if k.len() > 1 && k.starts_with('N') && k[1..].bytes().all(|b| b.is_ascii_digit()) => {
                    let node: u32 = k[1..].parse().map_err(|_| LinuxError::parse(path, lineno, k, "node number out of range"))?;
                    e.pages_per_node.insert(node, num(k, v)?);
                }
                Some((k, v)) => {
                    e.other.insert(k.to_string(), v.to_string());
                }
            }
        }
        if !e.pages_per_node.is_empty() && e.kernel_page_bytes.is_none() {
            return Err(LinuxError::parse(path, lineno, "kernelpagesize_kB", "missing on a mapping with resident pages"));
        }
        out.push(e);
    }
    Ok(out)
}

/// Resident bytes per node, split by [`PageKind`], over all mappings; nodes ascending.
pub fn pages_per_node(entries: &[NumaMapsEntry]) -> Vec<NodePages> {
    let mut by_node: BTreeMap<u32, NodePages> = BTreeMap::new();
    for e in entries {
        let page = e.kernel_page_bytes.unwrap_or(0);
        for (&node, &pages) in &e.pages_per_node {
            let bytes = pages.saturating_mul(page);
            let np = by_node.entry(node).or_insert_with(|| NodePages { node, ..Default::default() });
            match e.kind() {
                PageKind::Anon => np.anon_bytes += bytes,
                PageKind::File => np.file_bytes += bytes,
                PageKind::Huge => np.huge_bytes += bytes,
            }
            np.total_bytes += bytes;
        }
    }
    by_node.into_values().collect()
}
