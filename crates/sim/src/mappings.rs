//! Per-node page mappings with referenced and modified bits, for policies that ask for them
//! (DUnX's page-scanner daemons; docs/simulator.md, "Page mappings and scanner daemons").
//!
//! Each node has at most one mapping of a page. A mapping targets the node's own copy if it
//! holds one, else the page's home; it is read-only or writable, and carries a referenced and
//! a modified bit that the node's references set and the scanner of the target's node clears.
//!
//! Three words per page, one bit per node (nodes 0..32): `map` (bit `i`: node `i` maps the
//! page; bit `32 + i`: writably), `bits` (bit `i`: referenced; bit `32 + i`: modified) and
//! `fast`, what the hot path may charge without stopping: bit `i` when node `i` maps the page
//! and its referenced bit is already set (a read changes nothing), bit `32 + i` when the
//! mapping is writable and both bits are set (a write changes nothing). Everything else takes
//! the slow path, which faults or sets the bits.

/// Most nodes a run with mappings may have (one bit each in a 32-bit half word).
pub const MAX_MAPPED_NODES: usize = 32;

const LOW: u64 = 0xFFFF_FFFF;

pub(crate) struct Mappings {
    map: Vec<u64>,
    bits: Vec<u64>,
    fast: Vec<u64>,
    /// Scanner period, ns.
    pub period_ns: f64,
    /// When the next scanner pass is due, ns.
    pub next_ns: f64,
    /// Passes made per node.
    pub passes: Vec<u64>,
}

/// The bit a reference of `node` needs in `fast` (or `map`): `node` for a read, `32 + node`
/// for a write.
#[inline(always)]
pub(crate) fn need_bit(node: usize, write: bool) -> u64 {
    1u64 << (node + 32 * usize::from(write))
}

impl Mappings {
    pub fn new(pages: u64, nodes: usize, period_ns: f64) -> Mappings {
        Mappings {
            map: vec![0; pages as usize],
            bits: vec![0; pages as usize],
            fast: vec![0; pages as usize],
            period_ns,
            next_ns: period_ns,
            passes: vec![0; nodes],
        }
    }

    /// The hot path's view (see the module comment).
    #[inline]
    pub fn fast(&self) -> &[u64] {
        &self.fast
    }

    fn refresh(&mut self, page: u64) {
        let p = page as usize;
        let (m, b) = (self.map[p], self.bits[p]);
        let read = m & b & LOW;
        let write = (m >> 32) & (b >> 32) & read;
        self.fast[p] = read | (write << 32);
    }

    /// Node `node`'s mapping allows this reference.
    pub fn permits(&self, page: u64, node: usize, write: bool) -> bool {
        self.map[page as usize] & need_bit(node, write) != 0
    }

    /// Mapped nodes as a mask (bit `i`), and the writable ones.
    pub fn mask(&self, page: u64) -> (u64, u64) {
        let m = self.map[page as usize];
        (m & LOW, m >> 32)
    }

    /// Install (or replace) node `node`'s mapping. A new mapping starts with clear bits; a
    /// replaced one keeps them (the hardware bits belong to the translation, which stays).
    pub fn map(&mut self, page: u64, node: usize, writable: bool) {
        let p = page as usize;
        if self.map[p] & (1 << node) == 0 {
            self.bits[p] &= !((1 << node) | (1 << (32 + node)));
        }
        self.map[p] = (self.map[p] & !(1 << (32 + node))) | (1 << node) | (u64::from(writable) << (32 + node));
        self.refresh(page);
    }

    /// The reference of `node` went through its mapping: set its referenced bit, and its
    /// modified bit for a write.
    pub fn touch(&mut self, page: u64, node: usize, write: bool) {
        let p = page as usize;
        debug_assert!(self.permits(page, node, write), "a reference needs a mapping that allows it");
        self.bits[p] |= (1 << node) | (u64::from(write) << (32 + node));
        self.refresh(page);
    }

    /// Remove the mappings of the nodes in `nodes` (a node mask). Returns how many existed.
    pub fn drop_nodes(&mut self, page: u64, nodes: u64) -> u32 {
        let p = page as usize;
        let gone = self.map[p] & nodes & LOW;
        let clear = gone | (gone << 32);
        self.map[p] &= !clear;
        self.bits[p] &= !clear;
        self.refresh(page);
        gone.count_ones()
    }

    /// Make every mapping of the page read-only (a replica was made).
    pub fn downgrade_all(&mut self, page: u64) {
        self.map[page as usize] &= LOW;
        self.refresh(page);
    }

    /// The scanner's sample of the copy on `home` for the mappings of `targeting` (the nodes
    /// whose mapping goes to that copy): (home's own mapping referenced, another's referenced,
    /// any modified). The bits sampled are cleared.
    pub fn sample(&mut self, page: u64, home: usize, targeting: u64) -> (bool, bool, bool) {
        let p = page as usize;
        let mapped = self.map[p] & LOW & targeting;
        let b = self.bits[p];
        let local = mapped & b & (1 << home) != 0;
        let remote = mapped & b & !(1 << home) & LOW != 0;
        let dirty = (b >> 32) & mapped != 0;
        self.bits[p] &= !(mapped | (mapped << 32));
        self.refresh(page);
        (local, remote, dirty)
    }

    /// Every page's mappings are consistent with its copies (spec invariants, checked in
    /// debug builds by the engine): a replicated page has no writable mapping.
    pub fn writable_mask(&self, page: u64) -> u64 {
        self.map[page as usize] >> 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_bits_follow_mapping_and_hardware_bits() {
        let mut m = Mappings::new(2, 4, 1e9);
        assert!(!m.permits(0, 1, false));
        m.map(0, 1, true);
        // Mapped but not yet referenced: the first reference takes the slow path to set it.
        assert_eq!(m.fast()[0], 0);
        m.touch(0, 1, false);
        assert_eq!(m.fast()[0], 1 << 1, "reads are free, the first write still stops");
        m.touch(0, 1, true);
        assert_eq!(m.fast()[0], (1 << 1) | (1 << 33));
        m.downgrade_all(0);
        assert_eq!(m.fast()[0], 1 << 1);
        assert!(!m.permits(0, 1, true), "read-only now");
        assert_eq!(m.drop_nodes(0, 0b1110), 1);
        assert_eq!((m.fast()[0], m.mask(0)), (0, (0, 0)));
        assert_eq!(m.drop_nodes(0, u64::MAX), 0);
    }

    #[test]
    fn a_sample_reads_and_clears_only_the_targeting_mappings() {
        let mut m = Mappings::new(1, 4, 1e9);
        for node in 0..3 {
            m.map(0, node, true);
        }
        m.touch(0, 0, false);
        m.touch(0, 2, true);
        // Node 2 reads its own replica, say: not a mapping to node 0's copy.
        assert_eq!(m.sample(0, 0, 0b011), (true, false, false));
        assert_eq!(m.sample(0, 0, 0b011), (false, false, false), "cleared");
        assert_eq!(m.sample(0, 0, 0b111), (false, true, true), "node 2's bits were left alone");
        assert_eq!(m.sample(0, 0, 0b111), (false, false, false));
        // Re-mapping an existing mapping keeps its bits; a new one starts clear.
        m.touch(0, 1, true);
        m.map(0, 1, false);
        assert_eq!(m.sample(0, 0, 0b010), (false, true, true));
    }
}
