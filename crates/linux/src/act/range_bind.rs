//! round-1g for launched programs (docs/live.md, "round-1g for launched programs"): the
//! library `shim/numalab_r1g.c`, built into numalab, is preloaded into the program; it mbinds
//! every private anonymous mapping the program creates with `mmap`, range by range, to the
//! node [`numalab_policy::statics::range_node`] gives. This side writes the library to a
//! memfd, gives the program the environment that loads it, and reads back (from a second,
//! shared memfd of one page) whether the library ran and what it did.

use super::preload::{handover, Handover};
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};

/// The library, as built by build.rs (empty without a C compiler).
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libnumalab_r1g.so"));

const MAGIC: u64 = 0x3130_3147_5241_4c4e; // "NLAR1G01"
const STATUS_BYTES: usize = 4096;
const S_MAGIC: usize = 0;
const S_MAPPINGS: usize = 2;
const S_PIECES: usize = 3;
const S_FAILED: usize = 4;
const S_LAST_ERRNO: usize = 5;

/// The environment variable that sets the range size (bytes; default 1 GiB).
pub const RANGE_ENV: &str = "NUMALAB_R1G_RANGE_BYTES";
pub const DEFAULT_RANGE_BYTES: u64 = 1 << 30;

/// What the library reported after the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RangeBindReport {
    /// Private anonymous mappings it saw created.
    pub mappings: u64,
    /// Range pieces mbind accepted.
    pub pieces_bound: u64,
    /// Range pieces mbind refused, and the last errno.
    pub pieces_failed: u64,
    pub last_errno: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RangeBindError {
    #[error("round-1g's preload library was not built (numalab was built without a C compiler)")]
    NotBuilt,
    #[error("{RANGE_ENV}={0}: the range size must be a power of two of at least 4096 bytes")]
    BadRange(String),
    #[error("cannot set up round-1g's preload library: {0}")]
    Setup(std::io::Error),
    #[error(
        "the program did not load round-1g's preload library (statically linked, setuid, or it clears LD_PRELOAD): its memory was interleaved over the nodes, not bound per range"
    )]
    NotLoaded,
}

/// The range size: `NUMALAB_R1G_RANGE_BYTES` from `value` (the agent's environment), else 1 GiB.
pub fn range_bytes(value: Option<&std::ffi::OsStr>) -> Result<u64, RangeBindError> {
    let Some(v) = value else { return Ok(DEFAULT_RANGE_BYTES) };
    let text = v.to_string_lossy();
    match text.trim().parse::<u64>() {
        Ok(r) if r.is_power_of_two() && r >= 4096 => Ok(r),
        _ => Err(RangeBindError::BadRange(text.into_owned())),
    }
}

/// The agent's side of the library while the program runs.
pub struct RangeBind {
    handover: Handover,
}

impl RangeBind {
    /// Write the library and the status page; the environment the program must start with.
    /// `kernel_nodes`: the home nodes in the policy's order, kernel ids.
    pub fn prepare(kernel_nodes: &[u32], range_bytes: u64) -> Result<(RangeBind, Vec<(OsString, OsString)>), RangeBindError> {
        if LIBRARY.is_empty() {
            return Err(RangeBindError::NotBuilt);
        }
        let handover =
            handover(LIBRARY, c"numalab-r1g.so", c"numalab-r1g-status", STATUS_BYTES).map_err(|e| RangeBindError::Setup(e.into_io()))?;
        let nodes = kernel_nodes.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let env = vec![
            ("LD_PRELOAD".into(), handover.preload()),
            ("NUMALAB_R1G_FD".into(), handover.shared_fd().to_string().into()),
            ("NUMALAB_R1G_NODES".into(), nodes.into()),
            (RANGE_ENV.into(), range_bytes.to_string().into()),
        ];
        Ok((RangeBind { handover }, env))
    }

    fn word(&self, i: usize) -> u64 {
        // SAFETY: i < 512 words of the page-sized, page-aligned mapping this value owns.
        unsafe { (*(self.handover.base() as *const AtomicU64).add(i)).load(Ordering::Acquire) }
    }

    /// After the program ended: what the library did, or that it never ran.
    pub fn report(&self) -> Result<RangeBindReport, RangeBindError> {
        if self.word(S_MAGIC) != MAGIC {
            return Err(RangeBindError::NotLoaded);
        }
        Ok(RangeBindReport {
            mappings: self.word(S_MAPPINGS),
            pieces_bound: self.word(S_PIECES),
            pieces_failed: self.word(S_FAILED),
            last_errno: self.word(S_LAST_ERRNO),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::system::spawn;

    #[test]
    fn the_range_size_is_a_power_of_two_page_multiple() {
        assert_eq!(range_bytes(None).unwrap(), 1 << 30);
        assert_eq!(range_bytes(Some("2097152".as_ref())).unwrap(), 2 << 20);
        let e = range_bytes(Some("3000000".as_ref())).unwrap_err().to_string();
        assert_eq!(e, "NUMALAB_R1G_RANGE_BYTES=3000000: the range size must be a power of two of at least 4096 bytes");
        assert!(range_bytes(Some("1024".as_ref())).is_err());
    }

    /// On this host (any node count): a dynamically linked program loads the library, which
    /// binds its private anonymous mappings; a statically linked one (busybox-static, when
    /// installed) does not, and that is reported.
    #[test]
    fn the_library_loads_into_a_dynamic_program_and_is_missed_by_a_static_one() {
        if LIBRARY.is_empty() {
            return;
        }
        let (rb, env) = RangeBind::prepare(&[0], 2 << 20).unwrap();
        // sh and cat map private anonymous memory (buffers, malloc arenas) through mmap.
        let argv: Vec<OsString> = ["sh", "-c", "cat /proc/self/status > /dev/null"].iter().map(OsString::from).collect();
        let exit = spawn(&argv, &[], &env).unwrap().wait().unwrap();
        assert_eq!(exit.code, Some(0));
        let r = rb.report().unwrap();
        assert_eq!(r.pieces_failed, 0, "{r:?}");
        assert!(r.pieces_bound >= r.mappings, "{r:?}");
        let busybox = std::path::Path::new("/bin/busybox");
        if busybox.exists() {
            let (rb, env) = RangeBind::prepare(&[0], 2 << 20).unwrap();
            let argv: Vec<OsString> = ["/bin/busybox", "true"].iter().map(OsString::from).collect();
            spawn(&argv, &[], &env).unwrap().wait().unwrap();
            assert!(matches!(rb.report(), Err(RangeBindError::NotLoaded)));
        }
    }
}
