//! Intel memory-controller (uncore IMC) PMUs in `/sys/bus/event_source/devices`
//! (docs/profile.md, "Memory controllers"): which controllers there are, the `perf_event_open`
//! type and config of their CAS-count events, the CPU to open them on and the node they serve.
//!
//! Each `uncore_imc_<k>` PMU (`uncore_imc` on some client parts) is one channel of every
//! package; its `cpumask` names one CPU per package, and an event opened on that CPU counts
//! that package's instance. A controller here is one (PMU, CPU of its cpumask) pair, numbered
//! in PMU then CPU order: `imc.read[c]` / `imc.write[c]`. Its node is the node of that CPU
//! (the `nodeN` entry of `/sys/devices/system/cpu/cpuN`): the package's first node, which is
//! the controller's own node unless the package is split into several nodes (sub-NUMA
//! clustering), where the channel may serve another node of the same package.
//!
//! The events are the kernel's aliases `events/cas_count_read` and `events/cas_count_write`
//! (`event=0x04,umask=0x03` and `event=0x04,umask=0x0c` on server parts), encoded with the
//! PMU's `format/` terms (`event` → `config:0-7`, `umask` → `config:8-15`); `.scale` and `.unit`
//! (`6.103515625e-5`, `MiB`: one CAS is one 64-byte line) convert counts to bytes. PMUs without
//! these aliases (client `data_reads`, `uncore_imc_free_running_*`) and AMD's `amd_df` /
//! `amd_umc_*` are not read: no fixed CAS alias to rely on (docs/profile.md).

use crate::error::{LinuxError, Result};
use crate::parse::parse_list;
use crate::root::FsRoot;

pub const PMU_DIR: &str = "/sys/bus/event_source/devices";

/// One CAS-count event of a controller.
#[derive(Clone, Debug, PartialEq)]
pub struct UncoreEvent {
    /// The alias, e.g. `cas_count_read`.
    pub alias: String,
    /// `perf_event_attr.config` from the alias and the PMU's format terms.
    pub config: u64,
    /// `.scale`: one count in `unit` (1.0 when the file is absent).
    pub scale: f64,
    /// `.unit` (e.g. `MiB`; empty when absent).
    pub unit: String,
}

impl UncoreEvent {
    /// Bytes per count, when the unit is one of bytes (`B`, `KiB`, `MiB`, `GiB`).
    pub fn bytes_per_count(&self) -> Option<f64> {
        let mult = match self.unit.as_str() {
            "B" | "Bytes" => 1.0,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            _ => return None,
        };
        Some(self.scale * mult)
    }
}

/// One memory controller: a PMU's instance on one package.
#[derive(Clone, Debug, PartialEq)]
pub struct ImcController {
    /// `c` of `imc.read[c]`.
    pub index: u32,
    pub pmu: String,
    /// `perf_event_attr.type` (the PMU's `type` file).
    pub type_: u32,
    /// The CPU to open the events on (from `cpumask`).
    pub cpu: u32,
    /// The node of that CPU; `None` when sysfs does not say.
    pub node: Option<u32>,
    pub read: UncoreEvent,
    pub write: UncoreEvent,
}

/// What the host offers.
#[derive(Clone, Debug, PartialEq)]
pub enum Imc {
    Controllers(Vec<ImcController>),
    /// Why there are none, as the profile's note says it (`imc: unsupported (…)`).
    Unsupported(String),
}

/// The reason given on hosts and guests without an IMC PMU.
pub const NO_IMC_PMU: &str = "no uncore_imc PMU in /sys/bus/event_source/devices";

/// Read the IMC PMUs under `root`. Missing PMUs are `Imc::Unsupported`; a PMU whose files are
/// there but malformed is an error naming the file.
pub fn read_imc(root: &FsRoot) -> Result<Imc> {
    let names = match root.list(PMU_DIR) {
        Ok(n) => n,
        // No event sources at all reads like none of them being an IMC.
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut pmus: Vec<(u32, String)> = names
        .into_iter()
        .filter_map(|n| {
            let k = if n == "uncore_imc" { Some(0) } else { n.strip_prefix("uncore_imc_").and_then(|k| k.parse::<u32>().ok()) };
            k.map(|k| (k, n))
        })
        .collect();
    // uncore_imc_2 before uncore_imc_10.
    pmus.sort();
    if pmus.is_empty() {
        return Ok(Imc::Unsupported(NO_IMC_PMU.into()));
    }
    let mut out = Vec::new();
    let mut without_cas = Vec::new();
    for (_, pmu) in &pmus {
        let dir = format!("{PMU_DIR}/{pmu}");
        let read = event(root, &dir, "cas_count_read")?;
        let write = event(root, &dir, "cas_count_write")?;
        let (Some(read), Some(write)) = (read, write) else {
            without_cas.push(pmu.clone());
            continue;
        };
        let (p, t) = root.read(&format!("{dir}/type"))?;
        let type_: u32 = t.trim().parse().map_err(|_| LinuxError::parse(&p, 1, "type", format!("`{}` is not a PMU type", t.trim())))?;
        let (p, t) = root.read(&format!("{dir}/cpumask"))?;
        let cpus = parse_list(&t, &p, "cpumask")?;
        if cpus.is_empty() {
            return Err(LinuxError::parse(&p, 1, "cpumask", "no CPU to open the PMU's events on"));
        }
        for cpu in cpus {
            out.push(ImcController {
                index: out.len() as u32,
                pmu: pmu.clone(),
                type_,
                cpu,
                node: node_of_cpu(root, cpu)?,
                read: read.clone(),
                write: write.clone(),
            });
        }
    }
    if out.is_empty() {
        return Ok(Imc::Unsupported(format!(
            "{} without cas_count_read / cas_count_write events (client or free-running counters are not read)",
            without_cas.join(", ")
        )));
    }
    Ok(Imc::Controllers(out))
}

/// The node of a CPU: the `nodeN` entry of its sysfs directory.
fn node_of_cpu(root: &FsRoot, cpu: u32) -> Result<Option<u32>> {
    let names = match root.list(&format!("/sys/devices/system/cpu/cpu{cpu}")) {
        Ok(n) => n,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(names.iter().find_map(|n| n.strip_prefix("node").and_then(|k| k.parse().ok())))
}

/// An event alias of a PMU with its scale and unit; `None` when the alias does not exist.
fn event(root: &FsRoot, dir: &str, alias: &str) -> Result<Option<UncoreEvent>> {
    let path = format!("{dir}/events/{alias}");
    let (p, text) = match root.read(&path) {
        Ok(x) => x,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut config = 0u64;
    for term in text.trim().split(',').filter(|t| !t.is_empty()) {
        let (name, value) = term.split_once('=').unwrap_or((term, "1"));
        let v = parse_number(value).ok_or_else(|| LinuxError::parse(&p, 1, alias, format!("`{term}`: `{value}` is not a number")))?;
        let (fp, format) = root.read(&format!("{dir}/format/{name}"))?;
        config |= place_bits(v, format.trim()).map_err(|m| LinuxError::parse(&fp, 1, name, m))?;
    }
    let scale = match root.read(&format!("{path}.scale")) {
        Ok((sp, s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| LinuxError::parse(&sp, 1, "scale", format!("`{}` is not a positive number", s.trim())))?,
        Err(e) if e.is_not_found() => 1.0,
        Err(e) => return Err(e),
    };
    let unit = match root.read(&format!("{path}.unit")) {
        Ok((_, u)) => u.trim().to_string(),
        Err(e) if e.is_not_found() => String::new(),
        Err(e) => return Err(e),
    };
    Ok(Some(UncoreEvent { alias: alias.into(), config, scale, unit }))
}

fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Put `value` into the bits a format term names: `config:8-15`, `config:21` or several
/// ranges `config:0-7,32-35` (filled low bits first). Only `config` is supported: the CAS
/// events need nothing else.
fn place_bits(value: u64, format: &str) -> std::result::Result<u64, String> {
    let Some(ranges) = format.strip_prefix("config:") else {
        return Err(format!("`{format}`: only config: terms are supported"));
    };
    let mut out = 0u64;
    let mut rest = value;
    for r in ranges.split(',') {
        let (lo, hi) = match r.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>(), b.trim().parse::<u32>()),
            None => (r.trim().parse::<u32>(), r.trim().parse::<u32>()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else { return Err(format!("`{format}` is not a bit range")) };
        if lo > hi || hi > 63 {
            return Err(format!("`{format}` is not a bit range of a 64-bit config"));
        }
        let width = hi - lo + 1;
        let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
        out |= (rest & mask) << lo;
        rest = if width == 64 { 0 } else { rest >> width };
    }
    if rest != 0 {
        return Err(format!("value {value:#x} does not fit `{format}`"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_terms_place_bits() {
        assert_eq!(place_bits(0x04, "config:0-7"), Ok(0x04));
        assert_eq!(place_bits(0x03, "config:8-15"), Ok(0x300));
        assert_eq!(place_bits(1, "config:18"), Ok(1 << 18));
        assert_eq!(place_bits(0x1ff, "config:0-7,32-35"), Ok(0xff | (1 << 32)));
        assert!(place_bits(0x100, "config:0-7").unwrap_err().contains("does not fit"));
        assert!(place_bits(1, "config1:0-7").unwrap_err().contains("only config:"));
        assert_eq!(parse_number("0x0c"), Some(12));
        assert_eq!(parse_number("12"), Some(12));
    }

    #[test]
    fn units_to_bytes() {
        let e = UncoreEvent { alias: "cas_count_read".into(), config: 0x304, scale: 6.103515625e-5, unit: "MiB".into() };
        assert_eq!(e.bytes_per_count(), Some(64.0));
        assert_eq!(UncoreEvent { unit: "events".into(), ..e }.bytes_per_count(), None);
    }
}
