//! `/sys/devices/virtual/memory_tiering` (Linux ≥ 6.1): `memory_tierN/nodelist`. A lower N is
//! a faster tier (N is the abstract distance divided by the chunk size).

use crate::error::Result;
use crate::parse::parse_list;
use crate::root::FsRoot;

pub const TIER_DIR: &str = "/sys/devices/virtual/memory_tiering";

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MemoryTier {
    pub id: u32,
    pub nodes: Vec<u32>,
}

/// The tiers, fastest first; `None` when the kernel has no memory tiering.
pub fn read_tiers(root: &FsRoot) -> Result<Option<Vec<MemoryTier>>> {
    let names = match root.list(TIER_DIR) {
        Ok(n) => n,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut tiers = Vec::new();
    for name in names {
        let Some(id) = name.strip_prefix("memory_tier").and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let (p, t) = root.read(&format!("{TIER_DIR}/{name}/nodelist"))?;
        tiers.push(MemoryTier { id, nodes: parse_list(&t, &p, "nodelist")? });
    }
    tiers.sort_by_key(|t| t.id);
    Ok(Some(tiers))
}
