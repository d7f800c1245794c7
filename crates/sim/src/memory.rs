//! Physical memory: one byte per base page (its home node, or a marker), free pages per node,
//! and, once a policy replicates, a node mask per page for the extra copies. One byte per page
//! keeps a 100 GiB footprint at 25 MiB of page state; the masks (8 bytes a page) exist only in
//! runs that replicate, where every read of a replicated page looks its mask up.

use numalab_core::NodeId;
use numalab_policy::MemoryState;

/// Largest node count the page byte can name (ids 0..=62).
pub const MAX_NODES: usize = 63;
/// A page no one has touched yet.
pub const UNPLACED: u8 = 0x3F;
/// The page has read-only copies on other nodes (see `replicas`).
pub const REPLICATED: u8 = 0x40;
/// The page was freed when its program exited (docs/simulator.md, "Program exit"): it holds
/// no memory and is never placed again. `UNPLACED | REPLICATED`, a value no live page can
/// have (a replicated page always has a home).
pub const FREED: u8 = UNPLACED | REPLICATED;
/// The scanner unmapped the page: its next access is a hinting fault.
pub const ARMED: u8 = 0x80;
/// Any page byte at or above this value needs the slow path.
pub const SLOW: u8 = UNPLACED;
pub const NODE_MASK: u8 = 0x3F;

/// The node of the one copy of a page whose byte is `byte`, armed or not, among `nodes` nodes;
/// `None` for a page that is unplaced, freed or replicated (its node depends on the reader).
#[inline]
pub fn single_copy_node(byte: u8, nodes: usize) -> Option<usize> {
    let node = (byte & NODE_MASK) as usize;
    (byte & REPLICATED == 0 && node < nodes).then_some(node)
}

/// One change of a page byte, as the journal keeps it: the page, its byte before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    pub page: u64,
    pub old: u8,
    pub new: u8,
}

/// Most changes the journal keeps. Past this it starts over, and a reader behind it counts
/// its pages again (docs/simulator.md, "The fast engine"): 256 Ki changes are 4 MiB.
const JOURNAL_MAX: usize = 1 << 18;

pub struct Memory {
    /// Private so that every change goes through a method that bumps `generation`.
    home: Vec<u8>,
    /// Bumped by every change to a page byte: the fast engine's cached per-segment node
    /// shares are valid while it is unchanged (docs/simulator.md, "The fast engine").
    generation: u64,
    /// The latest changes of page bytes, `journal[i]` being the change that took the
    /// generation from `journal_from + i` to `journal_from + i + 1`: the fast engine keeps
    /// its per-segment counts up to date from it instead of counting every page again.
    journal: Vec<Change>,
    journal_from: u64,
    /// Changes that turned a page byte from below `SLOW` to `SLOW` or above (armed,
    /// replicated, released): a page on the fast path stays on it while this is unchanged
    /// (the fast engine's strides over armed pages rely on it, `stridereach`).
    slowed: u64,
    pub free: Vec<u64>,
    pub capacity: Vec<u64>,
    /// Extra copies per page as a node bit mask (the home copy excluded); empty until the
    /// first replication.
    replicas: Vec<u64>,
    /// Extra copies alive.
    replica_copies: u64,
    /// Pages in the `FREED` state.
    freed_pages: u64,
    /// Pages with the `ARMED` bit: unmapped for a hinting fault not taken yet.
    armed_pages: u64,
}

impl Memory {
    pub fn new(pages: u64, capacity: Vec<u64>) -> Memory {
        Memory {
            home: vec![UNPLACED; pages as usize],
            generation: 0,
            journal: Vec::new(),
            journal_from: 0,
            slowed: 0,
            free: capacity.clone(),
            capacity,
            replicas: Vec::new(),
            replica_copies: 0,
            freed_pages: 0,
            armed_pages: 0,
        }
    }

    /// The nodes holding extra copies of a page (the home excluded), as a bit mask.
    #[inline]
    pub fn replica_mask(&self, page: u64) -> u64 {
        self.replicas.get(page as usize).copied().unwrap_or(0)
    }

    /// Pages in use on each node (home copies and replicas).
    pub fn resident_per_node(&self) -> Vec<u64> {
        self.capacity.iter().zip(&self.free).map(|(c, f)| c - f).collect()
    }

    /// Extra copies alive, over all pages.
    pub fn replica_copies(&self) -> u64 {
        self.replica_copies
    }

    /// Every page's byte: its home node, or `UNPLACED`, with the `ARMED` / `REPLICATED` bits.
    #[inline]
    pub fn home(&self) -> &[u8] {
        &self.home
    }

    /// Changes to page bytes so far.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Changes so far that turned a page slow (see the field).
    #[inline]
    pub fn slowed(&self) -> u64 {
        self.slowed
    }

    /// The oldest generation the journal reaches back to (`changes_since` of anything
    /// older is `None`).
    pub fn journal_from(&self) -> u64 {
        self.journal_from
    }

    /// The changes of page bytes from generation `since` to now, or `None` if the journal
    /// no longer reaches that far back.
    pub fn changes_since(&self, since: u64) -> Option<&[Change]> {
        let from = since.checked_sub(self.journal_from)?;
        self.journal.get(from as usize..)
    }

    /// Every change of a page byte goes through here: the byte, the generation, the journal.
    #[inline]
    fn set(&mut self, page: u64, new: u8) {
        let old = self.home[page as usize];
        self.home[page as usize] = new;
        // A migration or a release drops the bit as a fault does: the count follows the byte.
        self.armed_pages = self.armed_pages + u64::from(new & ARMED != 0) - u64::from(old & ARMED != 0);
        self.slowed += u64::from(old < SLOW && new >= SLOW);
        if self.journal.len() == JOURNAL_MAX {
            self.journal.clear();
            self.journal_from = self.generation;
        }
        self.journal.push(Change { page, old, new });
        self.generation += 1;
    }

    /// Unmap a placed page for a hinting fault (its next access takes the slow path).
    pub fn arm(&mut self, page: u64) {
        self.set(page, self.home[page as usize] | ARMED);
    }

    /// The hinting fault of an armed page was taken.
    pub fn disarm(&mut self, page: u64) {
        self.set(page, self.home[page as usize] & !ARMED);
    }

    #[inline]
    pub fn node_of(&self, page: u64) -> Option<NodeId> {
        let h = self.home[page as usize];
        (h & NODE_MASK != UNPLACED).then_some((h & NODE_MASK) as NodeId)
    }

    pub fn place(&mut self, page: u64, node: NodeId) {
        debug_assert_eq!(self.home[page as usize], UNPLACED);
        self.set(page, node as u8);
        self.free[node as usize] -= 1;
    }

    /// Move the (only) copy of a placed page; keeps the hint marker off.
    pub fn migrate(&mut self, page: u64, to: NodeId) -> bool {
        let Some(from) = self.node_of(page) else { return false };
        if from == to || self.free[to as usize] == 0 || self.home[page as usize] & REPLICATED != 0 {
            return false;
        }
        self.free[from as usize] += 1;
        self.free[to as usize] -= 1;
        self.set(page, to as u8);
        true
    }

    pub fn replicate(&mut self, page: u64, to: NodeId) -> bool {
        let Some(home) = self.node_of(page) else { return false };
        let mask = self.replica_mask(page);
        if home == to || mask & (1 << to) != 0 || self.free[to as usize] == 0 {
            return false;
        }
        self.free[to as usize] -= 1;
        if self.replicas.is_empty() {
            self.replicas = vec![0; self.home.len()];
        }
        self.replicas[page as usize] = mask | (1 << to);
        self.replica_copies += 1;
        self.set(page, self.home[page as usize] | REPLICATED);
        true
    }

    /// Drop every copy except the one on `keep` (which must hold a copy). Returns copies freed.
    pub fn collapse(&mut self, page: u64, keep: NodeId) -> u32 {
        let Some(home) = self.node_of(page) else { return 0 };
        let mask = self.replica_mask(page);
        if mask == 0 {
            return 0;
        }
        self.replicas[page as usize] = 0;
        self.replica_copies -= u64::from(mask.count_ones());
        let all = mask | (1 << home);
        let keep = if all & (1 << keep) != 0 { keep } else { home };
        let mut freed = 0;
        for n in 0..MAX_NODES as NodeId {
            if all & (1 << n) != 0 && n != keep {
                self.free[n as usize] += 1;
                freed += 1;
            }
        }
        self.set(page, (self.home[page as usize] & ARMED) | keep as u8);
        freed
    }

    /// The copy a CPU on `cpu_node` reads: its own node's replica if there is one.
    pub fn read_copy(&self, page: u64, cpu_node: NodeId) -> NodeId {
        let home = (self.home[page as usize] & NODE_MASK) as NodeId;
        if self.replica_mask(page) & (1 << cpu_node) != 0 {
            cpu_node
        } else {
            home
        }
    }

    /// Free a placed page at its program's exit: its home copy and every replica return to
    /// their nodes' free pages and the page becomes `FREED`. An unplaced page held no memory
    /// and stays unplaced. Returns the copies returned (0 for an unplaced or freed page).
    pub fn release(&mut self, page: u64) -> u32 {
        let Some(home) = self.node_of(page) else { return 0 };
        let mask = self.replica_mask(page);
        if mask != 0 {
            self.replicas[page as usize] = 0;
            self.replica_copies -= u64::from(mask.count_ones());
        }
        let all = mask | (1 << home);
        for n in 0..MAX_NODES {
            if all & (1 << n) != 0 {
                self.free[n] += 1;
            }
        }
        self.set(page, FREED);
        self.freed_pages += 1;
        all.count_ones()
    }

    /// Pages armed for a hinting fault now (docs/simulator.md, "Fast-forward": windows run in
    /// lockstep while there are any).
    pub fn armed_pages(&self) -> u64 {
        self.armed_pages
    }

    /// Pages freed at their program's exit.
    pub fn freed_pages(&self) -> u64 {
        self.freed_pages
    }

    /// Pages no one has touched yet (freed pages not included).
    pub fn unplaced_pages(&self) -> u64 {
        self.home.iter().filter(|&&h| h == UNPLACED).count() as u64
    }

    pub fn copies(&self) -> u64 {
        self.home.iter().filter(|&&h| h & NODE_MASK != UNPLACED).count() as u64 + self.replica_copies
    }
}

impl MemoryState for Memory {
    fn free_pages(&self, node: NodeId) -> u64 {
        self.free[node as usize]
    }
    fn capacity_pages(&self, node: NodeId) -> u64 {
        self.capacity[node as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_copys_node_is_read_from_its_byte_armed_or_not() {
        assert_eq!(single_copy_node(2, 3), Some(2));
        assert_eq!(single_copy_node(2 | ARMED, 3), Some(2));
        assert_eq!(single_copy_node(3, 3), None, "a node the machine does not have");
        assert_eq!(single_copy_node(UNPLACED, 3), None);
        assert_eq!(single_copy_node(FREED, 3), None);
        assert_eq!(single_copy_node(1 | REPLICATED, 3), None, "a replicated page's node depends on the reader");
    }

    #[test]
    fn pages_are_conserved_through_every_operation() {
        let mut m = Memory::new(4, vec![3, 3, 3]);
        m.place(0, 0);
        m.place(1, 1);
        assert!(m.migrate(0, 2));
        assert!(!m.migrate(3, 1), "an unplaced page cannot migrate");
        assert!(m.replicate(1, 0));
        assert!(m.replicate(1, 2));
        assert!(!m.replicate(1, 2), "one copy per node");
        assert_eq!(m.read_copy(1, 2), 2);
        assert_eq!(m.copies(), 4);
        assert_eq!(m.free.iter().sum::<u64>(), 9 - 4);
        assert!(!m.migrate(1, 0), "replicated pages collapse before they move");
        assert_eq!(m.collapse(1, 2), 2);
        assert_eq!(m.node_of(1), Some(2));
        assert_eq!(m.free.iter().sum::<u64>(), 9 - 2);
    }

    /// The armed count follows the bytes: arming an armed page adds nothing, and a fault, a
    /// migration and a release each take one away.
    #[test]
    fn armed_pages_are_counted_through_every_way_the_bit_goes() {
        let mut m = Memory::new(4, vec![4, 4]);
        for p in 0..4 {
            m.place(p, 0);
            m.arm(p);
        }
        m.arm(0);
        assert_eq!(m.armed_pages(), 4, "arming an armed page adds nothing");
        m.disarm(0);
        assert!(m.migrate(1, 1));
        assert!(m.replicate(2, 1));
        assert_eq!(m.armed_pages(), 2, "a fault and a migration drop the bit; a replica keeps it");
        m.collapse(2, 1);
        assert_eq!(m.armed_pages(), 2, "a collapse keeps the bit");
        m.release(3);
        m.release(2);
        assert_eq!(m.armed_pages(), 0);
    }

    /// `slowed` moves exactly when a page turns slow: the fast engine trusts a scan of fast
    /// pages until it does.
    #[test]
    fn slowed_counts_the_pages_that_turn_slow() {
        let mut m = Memory::new(4, vec![4, 4]);
        m.place(0, 0);
        m.place(1, 0);
        assert_eq!(m.slowed(), 0, "placing makes a page fast");
        m.arm(0);
        m.arm(0);
        assert_eq!(m.slowed(), 1, "arming an armed page turns nothing slow");
        m.disarm(0);
        assert!(m.migrate(1, 1));
        assert_eq!(m.slowed(), 1, "a fault and a migration keep pages fast");
        assert!(m.replicate(1, 0));
        assert_eq!(m.slowed(), 2);
        m.release(0);
        assert_eq!(m.slowed(), 3, "a freed page is slow");
    }

    #[test]
    fn the_journal_records_every_change_until_it_starts_over() {
        let mut m = Memory::new(4, vec![4, 4]);
        let g0 = m.generation();
        m.place(1, 0);
        m.arm(1);
        assert!(m.migrate(1, 1), "a migration clears the hint marker");
        assert_eq!(
            m.changes_since(g0).unwrap(),
            [Change { page: 1, old: UNPLACED, new: 0 }, Change { page: 1, old: 0, new: ARMED }, Change { page: 1, old: ARMED, new: 1 }]
        );
        assert_eq!(m.changes_since(m.generation()).unwrap(), []);
        let g1 = m.generation();
        for _ in 0..JOURNAL_MAX {
            m.arm(1);
        }
        assert_eq!(m.changes_since(g0), None, "the journal no longer reaches back");
        assert_eq!(m.changes_since(g1).map(|c| c.len()), None);
        assert_eq!(m.changes_since(m.generation() - 3).map(|c| c.len()), Some(3));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Place(u64, NodeId),
        Migrate(u64, NodeId),
        Replicate(u64, NodeId),
        Read(u64, NodeId),
        Write(u64, NodeId),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let (p, n) = (0u64..6, 0 as NodeId..4);
        prop_oneof![
            (p.clone(), n.clone()).prop_map(|(p, n)| Op::Place(p, n)),
            (p.clone(), n.clone()).prop_map(|(p, n)| Op::Migrate(p, n)),
            (p.clone(), n.clone()).prop_map(|(p, n)| Op::Replicate(p, n)),
            (p.clone(), n.clone()).prop_map(|(p, n)| Op::Read(p, n)),
            (p, n).prop_map(|(p, n)| Op::Write(p, n)),
        ]
    }

    proptest::proptest! {
        /// Replication coherence (docs/simulator.md, "Replicated pages"): a write leaves one
        /// copy, on the writer's node if it had one; every later read sees that copy until a
        /// new replica is made; a read is served locally exactly when the reader's node holds
        /// a copy; copies count against capacity and pages are conserved.
        #[test]
        fn replicas_stay_coherent_and_counted(ops in proptest::collection::vec(op(), 1..80)) {
            let mut m = Memory::new(6, vec![3, 2, 4, 3]);
            for o in ops {
                match o {
                    Op::Place(p, n) => if m.node_of(p).is_none() && m.free[n as usize] > 0 { m.place(p, n) },
                    Op::Migrate(p, n) => { m.migrate(p, n); }
                    Op::Replicate(p, n) => { m.replicate(p, n); }
                    Op::Read(p, n) => if let Some(home) = m.node_of(p) {
                        let has = m.replica_mask(p) & (1 << n) != 0 || home == n;
                        let served = m.read_copy(p, n);
                        proptest::prop_assert_eq!(served == n, has);
                        proptest::prop_assert!(served == n || served == home);
                    },
                    Op::Write(p, n) => if let Some(home) = m.node_of(p) {
                        // The engine's write path: collapse to the writer's copy if any.
                        let had = m.replica_mask(p) & (1 << n) != 0;
                        m.collapse(p, n);
                        proptest::prop_assert_eq!(m.replica_mask(p), 0, "one writable copy");
                        proptest::prop_assert_eq!(m.home()[p as usize] & REPLICATED, 0);
                        let now = m.node_of(p).unwrap();
                        proptest::prop_assert_eq!(now, if had { n } else { home });
                        for r in 0..4 {
                            proptest::prop_assert_eq!(m.read_copy(p, r), now, "reads see the written copy");
                        }
                    },
                }
                let used: u64 = m.resident_per_node().iter().sum();
                proptest::prop_assert_eq!(used, m.copies());
                let placed = (0..6).filter(|&p| m.node_of(p).is_some()).count() as u64;
                proptest::prop_assert_eq!(m.copies(), placed + m.replica_copies());
                let masks: u64 = (0..6).map(|p| u64::from(m.replica_mask(p).count_ones())).sum();
                proptest::prop_assert_eq!(masks, m.replica_copies());
                for (n, (&c, &f)) in m.capacity.iter().zip(&m.free).enumerate() {
                    proptest::prop_assert!(f <= c, "node {} over capacity", n);
                }
            }
        }
    }

    /// Program exit (docs/simulator.md, "Program exit"): a released page gives back its home
    /// copy and its replicas, is never placed or moved again, and pages stay conserved as
    /// placed + unplaced + freed.
    #[test]
    fn released_pages_return_every_copy_and_stay_freed() {
        let mut m = Memory::new(4, vec![3, 3, 3]);
        m.place(0, 0);
        m.place(1, 1);
        assert!(m.replicate(1, 2));
        m.arm(0);
        assert_eq!(m.free, vec![2, 2, 2]);
        assert_eq!(m.release(0), 1);
        assert_eq!(m.release(1), 2, "the home and the replica");
        assert_eq!(m.release(2), 0, "an unplaced page held nothing");
        assert_eq!(m.release(0), 0, "freed once");
        assert_eq!(m.free, vec![3, 3, 3]);
        assert_eq!((m.home()[0], m.home()[1], m.home()[2]), (FREED, FREED, UNPLACED));
        assert_eq!(m.replica_copies(), 0);
        assert_eq!(m.replica_mask(1), 0);
        assert_eq!((m.node_of(0), m.copies()), (None, 0));
        assert!(!m.migrate(0, 1) && !m.replicate(0, 1) && m.collapse(1, 1) == 0);
        const { assert!(FREED >= SLOW, "a freed page never takes the hot path") };
        let placed = (0..4).filter(|&p| m.node_of(p).is_some()).count() as u64;
        assert_eq!(placed + m.unplaced_pages() + m.freed_pages(), 4);
    }

    #[test]
    fn a_full_node_refuses() {
        let mut m = Memory::new(2, vec![1, 1]);
        m.place(0, 0);
        m.place(1, 1);
        assert!(!m.migrate(0, 1));
        assert!(!m.replicate(0, 1));
    }
}
