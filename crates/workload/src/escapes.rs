//! The blocks an owner entry escapes to, kept between steps.
//!
//! An owner entry with `owner_share < 1` sends a share of its references to a random line of
//! another thread's block (docs/workloads.md, "Generator semantics"): its escape list holds the
//! blocks of every other thread, one or two segments each. On a machine with 80 threads that
//! is 79 blocks, each computed with divisions, at every step of every thread, for a list that
//! changes only when the region is repartitioned. [`EscapeLists`] keeps the lists a thread
//! built last, shared (`Arc`), so a step whose region has not moved takes its list without
//! building it, and two entries of one step over the same region share one list. It gives
//! exactly the list that building it gives: the key names everything the list depends on.

use std::sync::Arc;

use crate::stream::Seg;

/// What an escape list depends on: the program (a member of a mix, or the single program),
/// the region, its repartition offset, the thread and the thread count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EscapeKey {
    pub member: usize,
    pub region: usize,
    pub offset_pages: u64,
    pub thread: u32,
    pub threads: u32,
}

/// The escape lists one thread built last (the simulator keeps one per thread). A memo with
/// no room ([`EscapeLists::none`]) builds every list anew, as a caller without a memo needs.
#[derive(Clone, Debug)]
pub struct EscapeLists {
    recent: Vec<(EscapeKey, Arc<[Seg]>)>,
    room: usize,
}

/// Lists a thread's memo keeps: a step has at most a few escaping regions.
const LISTS_PER_THREAD: usize = 4;

impl Default for EscapeLists {
    fn default() -> EscapeLists {
        EscapeLists { recent: Vec::with_capacity(LISTS_PER_THREAD), room: LISTS_PER_THREAD }
    }
}

impl EscapeLists {
    /// A memo that keeps nothing: every list is built.
    pub fn none() -> EscapeLists {
        EscapeLists { recent: Vec::new(), room: 0 }
    }

    /// The list for `key`, built by `build` unless this memo holds it.
    pub(crate) fn get(&mut self, key: EscapeKey, build: impl FnOnce() -> Vec<Seg>) -> Arc<[Seg]> {
        if let Some((_, list)) = self.recent.iter().find(|(k, _)| *k == key) {
            return Arc::clone(list);
        }
        let list: Arc<[Seg]> = build().into();
        if self.room > 0 {
            if self.recent.len() == self.room {
                self.recent.remove(0);
            }
            self.recent.push((key, Arc::clone(&list)));
        }
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(offset_pages: u64) -> EscapeKey {
        EscapeKey { member: 0, region: 1, offset_pages, thread: 3, threads: 8 }
    }

    #[test]
    fn a_kept_list_is_shared_and_not_built_again() {
        let mut lists = EscapeLists::default();
        let mut builds = 0;
        let a = lists.get(key(0), || {
            builds += 1;
            vec![Seg::contiguous(0, 8)]
        });
        let b = lists.get(key(0), || {
            builds += 1;
            vec![Seg::contiguous(99, 1)]
        });
        assert_eq!(builds, 1);
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn another_offset_builds_and_the_oldest_list_leaves() {
        let mut lists = EscapeLists::default();
        for off in 0..=LISTS_PER_THREAD as u64 {
            lists.get(key(off), || vec![Seg::contiguous(off, 1)]);
        }
        let mut built = false;
        let first = lists.get(key(0), || {
            built = true;
            vec![Seg::contiguous(7, 1)]
        });
        assert!(built, "offset 0 was the oldest of five lists and must have left");
        assert_eq!(first[0].start, 7);
        let mut built_again = false;
        lists.get(key(LISTS_PER_THREAD as u64), || {
            built_again = true;
            vec![]
        });
        assert!(!built_again, "the newest list stays");
    }

    #[test]
    fn a_memo_without_room_builds_every_time() {
        let mut lists = EscapeLists::none();
        let mut builds = 0;
        for _ in 0..3 {
            lists.get(key(0), || {
                builds += 1;
                vec![]
            });
        }
        assert_eq!(builds, 3);
    }
}
