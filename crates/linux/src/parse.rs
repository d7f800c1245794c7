//! Small parsers shared by the sysfs and procfs readers.

use crate::error::{LinuxError, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// A kernel CPU or node list (`0-3,8,10-11`; empty text for an empty set).
pub fn parse_list(text: &str, path: &Path, field: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    let line = text.trim();
    if line.is_empty() {
        return Ok(out);
    }
    for part in line.split(',') {
        let num =
            |s: &str| s.trim().parse::<u32>().map_err(|_| LinuxError::parse(path, 1, field, format!("`{part}` is not a number or range")));
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (num(lo)?, num(hi)?);
                if hi < lo {
                    return Err(LinuxError::parse(path, 1, field, format!("range `{part}` is descending")));
                }
                if hi - lo > 1 << 16 {
                    return Err(LinuxError::parse(path, 1, field, format!("range `{part}` is implausibly large")));
                }
                out.extend(lo..=hi);
            }
            None => out.push(num(part)?),
        }
        if out.len() > 1 << 20 {
            return Err(LinuxError::parse(path, 1, field, "the list names more than 2^20 entries"));
        }
    }
    // The kernel prints each entry once, ascending; anything else would double-count CPUs.
    let mut sorted = out.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(LinuxError::parse(path, 1, field, format!("`{line}` names {} twice", w[0])));
    }
    Ok(sorted)
}

/// Format a list back in kernel style (`0-3,8`).
pub fn format_list(items: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let mut j = i;
        while j + 1 < items.len() && items[j + 1] == items[j] + 1 {
            j += 1;
        }
        out.push(if j == i { items[i].to_string() } else { format!("{}-{}", items[i], items[j]) });
        i = j + 1;
    }
    out.join(",")
}

/// `key value` lines (`/proc/vmstat`, `numastat`). Unknown keys are kept; a value that is not
/// a number is an error naming the line.
pub fn parse_key_values(text: &str, path: &Path) -> Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(key), Some(val)) = (it.next(), it.next()) else {
            return Err(LinuxError::parse(path, i + 1, line, "expected `key value`"));
        };
        let v = val.parse::<u64>().map_err(|_| LinuxError::parse(path, i + 1, key, format!("`{val}` is not an unsigned integer")))?;
        out.insert(key.to_string(), v);
    }
    Ok(out)
}
