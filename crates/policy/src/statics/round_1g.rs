//! Round-1G (docs/policies/round-1g.md): Xen's default layout. The whole address space is laid
//! out eagerly at creation, in the largest extents possible (1 GiB, then 2 MiB, then 4 KiB),
//! rotating over the home nodes.
//!
//! Simplification [ours]: a node "has a free contiguous extent" when its free memory is at
//! least the extent size; the simulator does not model physical fragmentation.

use super::resolve_nodes;
use super::round_4k::cyclic_fit;
use crate::decision::{Extent, PlaceRequest};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{AddressSpaceInfo, MemoryState, Policy, PolicyEnv};
use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

const GIB: u64 = 1 << 30;
const MIB2: u64 = 2 << 20;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Round1GConfig {
    /// Home nodes; empty = every node with memory.
    pub nodes: Vec<NodeId>,
    /// Guest-physical holes (`r1g_holes` of docs/policies/round-1g.md): pages that overlap one
    /// are never backed and not counted (docs/vm.md, "Round-1G with holes"). Left out of
    /// result files when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub holes: Vec<Hole>,
}

/// A guest-physical range `[start_bytes, end_bytes)` that is not RAM (BIOS, I/O).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hole {
    pub start_bytes: u64,
    pub end_bytes: u64,
}

impl Hole {
    /// Does the hole overlap pages `[first, first + pages)` of `page_bytes` each?
    pub fn overlaps(&self, first: u64, pages: u64, page_bytes: u64) -> bool {
        let start = u128::from(first) * u128::from(page_bytes);
        let end = start + u128::from(pages) * u128::from(page_bytes);
        start < u128::from(self.end_bytes) && end > u128::from(self.start_bytes)
    }
}

/// Check holes: each must be a non-empty range.
pub(crate) fn check_holes(policy: &str, holes: &[Hole]) -> Result<(), PolicyError> {
    match holes.iter().find(|h| h.start_bytes >= h.end_bytes) {
        Some(h) => Err(PolicyError::Config {
            policy: policy.to_string(),
            message: format!("hole [{}, {}) is empty: start_bytes must be below end_bytes", h.start_bytes, h.end_bytes),
        }),
        None => Ok(()),
    }
}

/// The live agent's round-1g map (docs/live.md, "round-1g for launched programs"): the
/// range `[k * range_bytes, (k + 1) * range_bytes)` of a process's virtual address space goes
/// to `nodes[k mod N]`, consecutive ranges rotating over the home nodes in order as the
/// simulator's layout rotates consecutive 1 GiB extents. The preloaded library
/// (`numalab_r1g.c`) computes the same. `None` without nodes or with a zero range.
pub fn range_node(nodes: &[NodeId], addr_bytes: u64, range_bytes: u64) -> Option<NodeId> {
    if nodes.is_empty() || range_bytes == 0 {
        return None;
    }
    Some(nodes[((addr_bytes / range_bytes) % nodes.len() as u64) as usize])
}

pub struct Round1G {
    config: Round1GConfig,
    nodes: Vec<NodeId>,
    memory_nodes: Vec<NodeId>,
    page_bytes: u64,
}

impl Round1G {
    /// The home nodes, resolved (every node with memory when the config names none).
    pub fn home_nodes(&self) -> &[NodeId] {
        &self.nodes
    }
}

impl Policy for Round1G {
    type Config = Round1GConfig;
    const NAME: &'static str = "round-1g";
    const SUMMARY: &'static str = "Xen default: eager 1 GiB extents round-robin over home nodes, 2 MiB / 4 KiB where 1 GiB does not fit";

    fn new(config: Round1GConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        let nodes = resolve_nodes(Self::NAME, &config.nodes, env)?;
        check_holes(Self::NAME, &config.holes)?;
        Ok(Round1G { config, nodes, memory_nodes: env.allowed.clone(), page_bytes: env.page_bytes })
    }

    fn config(&self) -> &Round1GConfig {
        &self.config
    }

    fn layout(&mut self, space: &AddressSpaceInfo, mem: &dyn MemoryState) -> Result<Option<Vec<Extent>>, OutOfMemory> {
        let pb = self.page_bytes;
        let total = space.pages;
        let (g, m2) = (GIB / pb, MIB2 / pb);
        let sizes = [g, m2, 1];
        let mut used = vec![0u64; self.memory_nodes.iter().map(|&n| n as usize + 1).max().unwrap_or(0)];
        let free = |n: NodeId, used: &[u64]| mem.free_pages(n).saturating_sub(used[n as usize]);
        let (mut cursor, mut fc) = (0usize, 0usize);
        let mut extents: Vec<Extent> = Vec::new();
        let push = |extents: &mut Vec<Extent>, first_page: u64, pages: u64, node: NodeId| match extents.last_mut() {
            Some(last) if last.node == node && last.first_page + last.pages == first_page => last.pages += pages,
            _ => extents.push(Extent { first_page, pages, node }),
        };
        let mut p = 0u64;
        'next_extent: while p < total {
            for &size in &sizes {
                if !p.is_multiple_of(size) || p + size > total {
                    continue;
                }
                // The first and last GiB are never one 1 GiB extent (BIOS and I/O ranges).
                if size == g && g > 1 && (p < g || p + size > total.saturating_sub(g)) {
                    continue;
                }
                // A hole: larger extents split around it; a page inside it is never backed.
                if self.config.holes.iter().any(|h| h.overlaps(p, size, pb)) {
                    if size == 1 {
                        p += 1;
                        continue 'next_extent;
                    }
                    continue;
                }
                for k in 0..self.nodes.len() {
                    let n = self.nodes[(cursor + k) % self.nodes.len()];
                    if free(n, &used) >= size {
                        push(&mut extents, p, size, n);
                        used[n as usize] += size;
                        cursor = (cursor + k + 1) % self.nodes.len();
                        p += size;
                        continue 'next_extent;
                    }
                }
            }
            // No home node can give even one page: any node with memory, from a second cursor.
            let mn = &self.memory_nodes;
            match (0..mn.len()).map(|k| (fc + k) % mn.len()).find(|&i| free(mn[i], &used) >= 1) {
                Some(i) => {
                    push(&mut extents, p, 1, mn[i]);
                    used[mn[i] as usize] += 1;
                    fc = (i + 1) % mn.len();
                    p += 1;
                }
                None => return Err(OutOfMemory { wanted: self.nodes[cursor], pages: 1 }),
            }
        }
        Ok(Some(extents))
    }

    /// Pages outside the creation layout (none in the simulator) interleave by address.
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        cyclic_fit(&self.nodes, (req.page % self.nodes.len() as u64) as usize, mem, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statics::testing::FixedMemory;
    use numalab_core::machine::presets;
    use std::sync::Arc;

    const G: u64 = GIB / 4096;
    const M: u64 = MIB2 / 4096;

    fn layout(bytes: u64, mem: &FixedMemory) -> Vec<Extent> {
        let env = PolicyEnv::new(Arc::new(presets::load("server-a-2n").unwrap()));
        let mut p = Round1G::new(Round1GConfig::default(), &env).unwrap();
        p.layout(&AddressSpaceInfo { space: 0, pages: bytes / 4096, threads: 1 }, mem).unwrap().unwrap()
    }

    fn node_at(ext: &[Extent], page: u64) -> NodeId {
        ext.iter().find(|e| page >= e.first_page && page < e.first_page + e.pages).unwrap().node
    }

    /// The live map rotates consecutive ranges over the home nodes exactly as the simulator's
    /// layout rotates consecutive interior 1 GiB extents (only the phase differs: the
    /// simulator's first GiB is 512 2 MiB extents, which on two nodes bring the cursor back to
    /// node 0, so its GiB k is the live map's range k - 1).
    #[test]
    fn the_live_range_map_rotates_as_the_simulator_layout() {
        let mem = FixedMemory::uniform(2, 64 * G);
        let e = layout(8 * GIB, &mem);
        let nodes = [0, 1];
        for k in 1..7u64 {
            for off in [0, G / 2, G - 1] {
                let live = range_node(&nodes, (k - 1) * GIB + off * 4096, GIB).unwrap();
                assert_eq!(node_at(&e, k * G + off), live, "GiB {k}, page {off}");
            }
        }
        // Worked values: 2 MiB ranges (the guest test's size) over nodes {1, 3}.
        assert_eq!(range_node(&[1, 3], 0, MIB2), Some(1));
        assert_eq!(range_node(&[1, 3], MIB2 - 1, MIB2), Some(1));
        assert_eq!(range_node(&[1, 3], MIB2, MIB2), Some(3));
        assert_eq!(range_node(&[1, 3], 5 * MIB2 + 7, MIB2), Some(3));
        assert_eq!(range_node(&[0, 1, 2], 0x7f00_0000_0000, GIB), Some(((0x7f00_0000_0000u64 >> 30) % 3) as NodeId));
        assert_eq!(range_node(&[], 0, GIB), None);
        assert_eq!(range_node(&[0], 0, 0), None);
    }

    /// docs/policies/round-1g.md, test vector 4.
    #[test]
    fn spec_vector_4() {
        let mem = FixedMemory::uniform(2, 64 * G);
        let e = layout(4 * GIB, &mem);
        for i in 0..512 {
            assert_eq!(node_at(&e, i * M), (i % 2) as NodeId, "GiB 0, 2 MiB extent {i}");
        }
        assert_eq!(node_at(&e, G), 0);
        assert_eq!(node_at(&e, G + G - 1), 0);
        assert_eq!(node_at(&e, 2 * G), 1);
        assert_eq!(node_at(&e, 3 * G), 0, "last GiB starts on node 0");
        assert_eq!(node_at(&e, 3 * G + M), 1);
        let total: u64 = e.iter().map(|x| x.pages).sum();
        assert_eq!(total, 4 * G);

        let e = layout(3 * GIB + GIB / 2, &mem);
        assert_eq!(node_at(&e, G), 0);
        assert_eq!(node_at(&e, 2 * G - 1), 0);
        for i in 0..768 {
            assert_eq!(node_at(&e, 2 * G + i * M), ((i + 1) % 2) as NodeId, "[2, 3.5) GiB extent {i}");
        }
    }

    #[test]
    fn small_spaces_get_no_gib_extent_and_full_nodes_fall_back() {
        let mut mem = FixedMemory::uniform(2, 64 * G);
        let e = layout(2 * GIB, &mem);
        assert!(e.iter().all(|x| x.pages % M == 0));
        // Node 0 can give three 4 KiB pages only, node 1 one 2 MiB extent and two pages.
        mem.free = vec![3, M + 2];
        let e = layout((M + 5) * 4096, &mem);
        let on = |n: NodeId| e.iter().filter(|x| x.node == n).map(|x| x.pages).sum::<u64>();
        assert_eq!((on(0), on(1)), (3, M + 2));
        assert_eq!(node_at(&e, 0), 1, "node 0 has no free 2 MiB extent");
        assert_eq!(node_at(&e, M), 0, "4 KiB pages rotate from the cursor");
        assert_eq!(node_at(&e, M + 1), 1);
        let mut none = FixedMemory::uniform(2, 0);
        none.free = vec![0, 0];
        let env = PolicyEnv::new(Arc::new(presets::load("server-a-2n").unwrap()));
        let mut p = Round1G::new(Round1GConfig::default(), &env).unwrap();
        assert!(p.layout(&AddressSpaceInfo { space: 0, pages: 10, threads: 1 }, &none).is_err());
    }

    fn layout_with_holes(bytes: u64, holes: Vec<Hole>) -> Vec<Extent> {
        let env = PolicyEnv::new(Arc::new(presets::load("server-a-2n").unwrap()));
        let mut p = Round1G::new(Round1GConfig { holes, ..Default::default() }, &env).unwrap();
        let mem = FixedMemory::uniform(2, 64 * G);
        p.layout(&AddressSpaceInfo { space: 0, pages: bytes / 4096, threads: 1 }, &mem).unwrap().unwrap()
    }

    fn covers(ext: &[Extent], page: u64) -> bool {
        ext.iter().any(|e| page >= e.first_page && page < e.first_page + e.pages)
    }

    /// docs/policies/round-1g.md with a hole: the legacy BIOS/VGA range [640 KiB, 1 MiB) of a
    /// 4 GiB VM on home {0, 1}. The first 2 MiB extent overlaps it, so [0, 2 MiB) is walked in
    /// 4 KiB pages: 160 pages rotate 0, 1, ..., the 96 hole pages are skipped (no extent, no
    /// cursor move), 256 pages rotate on. The cursor is then back on node 0 (416 extents),
    /// GiB 0's 511 remaining 2 MiB extents start there, and GiB 1 (after 927 extents) goes
    /// to node 1.
    #[test]
    fn holes_split_extents_and_are_never_backed() {
        let e = layout_with_holes(4 * GIB, vec![Hole { start_bytes: 0xA_0000, end_bytes: 0x10_0000 }]);
        for page in 0..160 {
            assert_eq!(node_at(&e, page), (page % 2) as NodeId, "4 KiB page {page}");
        }
        for page in 160..256 {
            assert!(!covers(&e, page), "hole page {page} is not backed");
        }
        for page in 256..512 {
            assert_eq!(node_at(&e, page), (page % 2) as NodeId, "4 KiB page {page} (extent {})", page - 96);
        }
        assert_eq!(node_at(&e, M), 0, "extent 416");
        assert_eq!(node_at(&e, M + M), 1);
        assert_eq!(node_at(&e, G), 1, "GiB 1 after 927 extents");
        assert_eq!(node_at(&e, 2 * G - 1), 1);
        assert_eq!(node_at(&e, 2 * G), 0);
        assert_eq!(e.iter().map(|x| x.pages).sum::<u64>(), 4 * G - 96, "hole pages are not counted");

        // One hole page in the middle of GiB 1: no 1 GiB extent there, its 2 MiB extent
        // becomes 511 pages of 4 KiB.
        let at = G + G / 2;
        let e = layout_with_holes(4 * GIB, vec![Hole { start_bytes: at * 4096, end_bytes: at * 4096 + 1 }]);
        assert!(!covers(&e, at));
        assert!(covers(&e, at - 1) && covers(&e, at + 1));
        assert_ne!(node_at(&e, G), node_at(&e, G + M), "GiB 1 is 2 MiB extents now");
        assert_eq!(e.iter().map(|x| x.pages).sum::<u64>(), 4 * G - 1);
    }

    #[test]
    fn an_empty_hole_is_refused() {
        let env = PolicyEnv::new(Arc::new(presets::load("server-a-2n").unwrap()));
        let cfg = Round1GConfig { holes: vec![Hole { start_bytes: 8192, end_bytes: 8192 }], ..Default::default() };
        let e = Round1G::new(cfg, &env).err().unwrap();
        assert_eq!(e.to_string(), "policy 'round-1g': hole [8192, 8192) is empty: start_bytes must be below end_bytes");
    }
}
