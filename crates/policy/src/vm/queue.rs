//! The page free/alloc notification queue (docs/vm.md; docs/vm.md, "The
//! notification queue"): how a guest tells a first-touch hypervisor which frames it freed
//! without one call per page.
//!
//! The guest records `(op, pfn)` pairs in `P` independent partitions chosen by the low bits
//! of the frame number, each with its own lock and capacity. An append that fills a partition
//! delivers it to the hypervisor in one call *while holding the partition's lock*, so no other
//! CPU can append to it (and so reuse one of its frames) during the delivery. The hypervisor
//! walks a delivery from the newest entry to the oldest; the first entry it meets for a frame
//! decides. Pure: the caller supplies the time and applies the verdicts.

use super::config::QueueConfig;

/// What the guest did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameOp {
    /// Taken off the guest's free list (it may now hold its new owner's data).
    Alloc,
    /// Put on the guest's free list.
    Free,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueEntry {
    pub op: FrameOp,
    pub pfn: u64,
}

/// The hypervisor's verdict on one frame of a delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub pfn: u64,
    /// The frame's most recent op in the delivery: `Free` unbacks it, `Alloc` leaves its
    /// mapping as it is.
    pub op: FrameOp,
}

/// The verdicts of one delivery (entries oldest first), newest entry first: the most recent
/// entry of each frame decides, older ones are ignored.
pub fn verdicts(entries: &[QueueEntry]) -> Vec<Verdict> {
    let mut seen: Vec<u64> = Vec::with_capacity(entries.len());
    let mut out = Vec::new();
    for e in entries.iter().rev() {
        // A delivery holds at most `capacity` entries; a sorted list of seen frames keeps the
        // walk deterministic without a hash set.
        if let Err(i) = seen.binary_search(&e.pfn) {
            seen.insert(i, e.pfn);
            out.push(Verdict { pfn: e.pfn, op: e.op });
        }
    }
    out
}

/// One delivery to the hypervisor.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    pub partition: usize,
    /// Entries oldest first.
    pub entries: Vec<QueueEntry>,
    /// Time the call holds the partition's lock: `call_cost_ns + entries × entry_cost_ns`.
    pub cost_ns: f64,
}

/// What an append cost the appending CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Append {
    /// Time spent waiting for the partition's lock (held by a delivery still under way).
    pub wait_ns: f64,
    /// The delivery this append triggered, if it filled the partition (its cost is paid by
    /// the appending CPU, which holds the lock through it).
    pub delivery: Option<Delivery>,
}

impl Append {
    /// Everything the appending CPU paid.
    pub fn charged_ns(&self) -> f64 {
        self.wait_ns + self.delivery.as_ref().map_or(0.0, |d| d.cost_ns)
    }
}

#[derive(Clone, Debug, Default)]
struct Partition {
    entries: Vec<QueueEntry>,
    /// The lock is held until this time (by a delivery).
    locked_until_ns: f64,
}

/// The queue of one VM.
#[derive(Clone, Debug)]
pub struct NotificationQueue {
    parts: Vec<Partition>,
    capacity: usize,
    call_cost_ns: f64,
    entry_cost_ns: f64,
}

impl NotificationQueue {
    /// A queue with `config`'s geometry and costs (validated by `QueueConfig::validate`).
    pub fn new(config: &QueueConfig) -> NotificationQueue {
        NotificationQueue {
            parts: vec![Partition::default(); config.partitions as usize],
            capacity: config.capacity as usize,
            call_cost_ns: config.call_cost_ns,
            entry_cost_ns: config.entry_cost_ns,
        }
    }

    /// The partition of a frame: its low bits (`pfn mod P`, `P` a power of two).
    pub fn partition_of(&self, pfn: u64) -> usize {
        (pfn & (self.parts.len() as u64 - 1)) as usize
    }

    /// Entries waiting in every partition.
    pub fn pending(&self) -> usize {
        self.parts.iter().map(|p| p.entries.len()).sum()
    }

    fn deliver(&mut self, partition: usize, start_ns: f64) -> Option<Delivery> {
        let part = &mut self.parts[partition];
        if part.entries.is_empty() {
            return None;
        }
        let entries = std::mem::take(&mut part.entries);
        let cost_ns = self.call_cost_ns + entries.len() as f64 * self.entry_cost_ns;
        part.locked_until_ns = start_ns + cost_ns;
        Some(Delivery { partition, entries, cost_ns })
    }

    /// The guest records `op` on `pfn` at `now_ns`: take the partition's lock (waiting while a
    /// delivery holds it), push, and deliver the whole partition if it is now full.
    pub fn append(&mut self, op: FrameOp, pfn: u64, now_ns: f64) -> Append {
        let partition = self.partition_of(pfn);
        let part = &mut self.parts[partition];
        let start = now_ns.max(part.locked_until_ns);
        part.entries.push(QueueEntry { op, pfn });
        let delivery = if part.entries.len() >= self.capacity { self.deliver(partition, start) } else { None };
        Append { wait_ns: start - now_ns, delivery }
    }

    /// Deliver every non-empty partition at `now_ns` (a policy switch, the flush timer). Each
    /// delivery takes its partition's lock when it is free.
    pub fn flush(&mut self, now_ns: f64) -> Vec<Delivery> {
        (0..self.parts.len())
            .filter_map(|i| {
                let start = now_ns.max(self.parts[i].locked_until_ns);
                self.deliver(i, start)
            })
            .collect()
    }

    /// Drop what is pending without delivering it (the queue is switched off).
    pub fn clear(&mut self) -> usize {
        self.parts.iter_mut().map(|p| std::mem::take(&mut p.entries).len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FrameOp::{Alloc, Free};

    fn q(partitions: u32, capacity: u32) -> NotificationQueue {
        NotificationQueue::new(&QueueConfig { partitions, capacity, call_cost_ns: 1000.0, entry_cost_ns: 200.0, ..Default::default() })
    }

    /// docs/vm.md, test vector 5: frame 8, entries oldest first. `[Free 8, Alloc 8]`:
    /// the newest (Alloc) decides, the frame stays backed; `[Alloc 8, Free 8]`: unbacked.
    /// Frames 8 and 9 go to queues 0 and 1.
    #[test]
    fn spec_vector_5() {
        let e = |op, pfn| QueueEntry { op, pfn };
        assert_eq!(verdicts(&[e(Free, 8), e(Alloc, 8)]), vec![Verdict { pfn: 8, op: Alloc }]);
        assert_eq!(verdicts(&[e(Alloc, 8), e(Free, 8)]), vec![Verdict { pfn: 8, op: Free }]);
        let q = q(4, 512);
        assert_eq!((q.partition_of(8), q.partition_of(9)), (0, 1));
        assert_eq!((q.partition_of(10), q.partition_of(11), q.partition_of(12)), (2, 3, 0));
    }

    #[test]
    fn the_newest_entry_of_each_frame_decides_and_verdicts_come_newest_first() {
        let e = |op, pfn| QueueEntry { op, pfn };
        let got = verdicts(&[e(Free, 4), e(Free, 8), e(Alloc, 4), e(Free, 12), e(Alloc, 8), e(Free, 8)]);
        assert_eq!(got, vec![Verdict { pfn: 8, op: Free }, Verdict { pfn: 12, op: Free }, Verdict { pfn: 4, op: Alloc }]);
    }

    /// A partition is delivered by the append that fills it, as one call costing
    /// `call + entries × entry`; other partitions keep their entries.
    #[test]
    fn a_full_partition_is_delivered_whole_by_the_append_that_fills_it() {
        let mut q = q(2, 3);
        assert_eq!(q.append(Free, 0, 0.0), Append { wait_ns: 0.0, delivery: None });
        assert_eq!(q.append(Free, 1, 0.0).delivery, None);
        assert_eq!(q.append(Alloc, 2, 0.0).delivery, None);
        let a = q.append(Free, 4, 10.0);
        let d = a.delivery.clone().unwrap();
        assert_eq!(d.partition, 0);
        assert_eq!(d.entries, vec![QueueEntry { op: Free, pfn: 0 }, QueueEntry { op: Alloc, pfn: 2 }, QueueEntry { op: Free, pfn: 4 }]);
        assert_eq!(d.cost_ns, 1000.0 + 3.0 * 200.0);
        assert_eq!(a.charged_ns(), 1600.0);
        assert_eq!(q.pending(), 1, "partition 1 keeps frame 1");
    }

    /// Delivery under the lock: an append to the partition being delivered waits until the
    /// delivery ends (so no CPU reuses one of its frames meanwhile); other partitions do not.
    #[test]
    fn appends_wait_for_a_delivery_holding_their_partitions_lock() {
        let mut q = q(2, 2);
        q.append(Free, 0, 0.0);
        let d = q.append(Free, 2, 100.0).delivery.unwrap();
        assert_eq!(d.cost_ns, 1400.0, "the lock is held until 1500 ns");
        let a = q.append(Alloc, 0, 600.0);
        assert_eq!(a.wait_ns, 900.0);
        assert_eq!(q.append(Free, 1, 600.0).wait_ns, 0.0, "partition 1 has its own lock");
        // Filled at 2000 ns: the lock is free again, the delivery starts at once.
        let a = q.append(Free, 4, 2000.0);
        assert_eq!((a.wait_ns, a.delivery.unwrap().cost_ns), (0.0, 1400.0));
    }

    #[test]
    fn flush_delivers_every_non_empty_partition_and_clear_drops() {
        let mut q = q(4, 512);
        q.append(Free, 5, 0.0);
        q.append(Free, 7, 0.0);
        q.append(Alloc, 9, 0.0);
        let ds = q.flush(50.0);
        assert_eq!(ds.iter().map(|d| (d.partition, d.entries.len())).collect::<Vec<_>>(), vec![(1, 2), (3, 1)]);
        assert_eq!(q.pending(), 0);
        assert!(q.flush(60.0).is_empty());
        q.append(Free, 1, 5000.0);
        assert_eq!(q.clear(), 1);
        assert_eq!(q.pending(), 0);
    }
}
