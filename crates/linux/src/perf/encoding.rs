//! Catalogue ID → `(type, config)` (perfutil §7.2). Generic cache events use
//! `cache | op << 8 | result << 16`.

use super::sys::{PERF_TYPE_HARDWARE, PERF_TYPE_HW_CACHE, PERF_TYPE_SOFTWARE};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoding {
    pub type_: u32,
    pub config: u64,
}

impl Encoding {
    /// Generic (`HARDWARE`/`HW_CACHE`) events: an `EINVAL` in the probe means the model table
    /// has no valid encoding, i.e. unsupported rather than a bug.
    pub fn is_generic_hw(&self) -> bool {
        self.type_ == PERF_TYPE_HARDWARE || self.type_ == PERF_TYPE_HW_CACHE
    }

    pub fn is_software(&self) -> bool {
        self.type_ == PERF_TYPE_SOFTWARE
    }
}

const LL: u64 = 2;
const NODE: u64 = 6;
const READ: u64 = 0;
const WRITE: u64 = 1;
const ACCESS: u64 = 0;
const MISS: u64 = 1;

const fn cache(c: u64, op: u64, result: u64) -> Encoding {
    Encoding { type_: PERF_TYPE_HW_CACHE, config: c | op << 8 | result << 16 }
}

/// Encoding of a catalogue ID; `None` for IDs this backend cannot name (e.g. `imc.*` without
/// an uncore PMU).
pub fn encode(id: &str) -> Option<Encoding> {
    let sw = |config| Some(Encoding { type_: PERF_TYPE_SOFTWARE, config });
    let hw = |config| Some(Encoding { type_: PERF_TYPE_HARDWARE, config });
    match id {
        "sw.task_clock" => sw(1),
        "sw.page_faults" => sw(2),
        "sw.context_switches" => sw(3),
        "sw.cpu_migrations" => sw(4),
        "sw.page_faults.minor" => sw(5),
        "sw.page_faults.major" => sw(6),
        "cpu.cycles" => hw(0),
        "cpu.instructions" => hw(1),
        "cpu.ref_cycles" => hw(9),
        "llc.read.access" => Some(cache(LL, READ, ACCESS)),
        "llc.read.miss" => Some(cache(LL, READ, MISS)),
        "llc.write.access" => Some(cache(LL, WRITE, ACCESS)),
        "llc.write.miss" => Some(cache(LL, WRITE, MISS)),
        "node.read.local" => Some(cache(NODE, READ, ACCESS)),
        "node.read.remote" => Some(cache(NODE, READ, MISS)),
        "node.write.local" => Some(cache(NODE, WRITE, ACCESS)),
        "node.write.remote" => Some(cache(NODE, WRITE, MISS)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_encodings() {
        // perfutil §11 vector 1 and the §7.2 table.
        assert_eq!(encode("node.read.remote"), Some(Encoding { type_: 3, config: 0x10006 }));
        assert_eq!(encode("llc.read.access").unwrap().config, 0x2);
        assert_eq!(encode("llc.write.miss").unwrap().config, 0x10102);
        assert_eq!(encode("node.write.local").unwrap().config, 0x106);
        assert_eq!(encode("sw.page_faults.major"), Some(Encoding { type_: 1, config: 6 }));
        assert_eq!(encode("cpu.ref_cycles"), Some(Encoding { type_: 0, config: 9 }));
        assert_eq!(encode("imc.read[0]"), None);
        for d in numalab_core::profile::CATALOGUE {
            assert!(encode(d.id).is_some(), "{} has no encoding", d.id);
        }
    }
}
