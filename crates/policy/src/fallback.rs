//! Fallback orders shared by the static policies (docs/policies/first-touch.md, docs/policies/bind.md).

use crate::policy::MemoryState;
use numalab_core::{Machine, NodeId};

/// First allowed node at or after `start` in the cyclic order of `allowed`, whose id is
/// greater than `after` (wrapping): `NextRoundRobin` of §3.
pub fn next_round_robin(allowed: &[NodeId], after: NodeId) -> impl Iterator<Item = NodeId> + '_ {
    let start = allowed.iter().position(|&n| n > after).unwrap_or(0);
    (0..allowed.len()).map(move |k| allowed[(start + k) % allowed.len()])
}

/// `candidates` ordered by increasing distance from `from`, ties to the lower node id.
pub fn by_distance(machine: &Machine, from: NodeId, candidates: &[NodeId]) -> Vec<NodeId> {
    let mut v = candidates.to_vec();
    v.sort_by_key(|&n| (machine.distance(from, n), n));
    v
}

/// First node of `order` that can take `pages`.
pub fn first_fit(order: impl IntoIterator<Item = NodeId>, mem: &dyn MemoryState, pages: u64) -> Option<NodeId> {
    order.into_iter().find(|&n| !mem.is_full(n, pages))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_starts_after_the_wanted_node() {
        let a = [0, 1, 2, 3];
        assert_eq!(next_round_robin(&a, 2).collect::<Vec<_>>(), vec![3, 0, 1, 2]);
        assert_eq!(next_round_robin(&a, 3).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert_eq!(next_round_robin(&[1, 3], 1).collect::<Vec<_>>(), vec![3, 1]);
    }
}
