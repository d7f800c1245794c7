//! System-shared balancing: per-node counts of SS pages and the rule that moves one SS page
//! from a most-loaded node to the least-loaded one (docs/policies/stable-numa.md,
//! "System-shared balancing").

use numalab_core::NodeId;

/// Where an SS page whose home is `home` should go, given `counts[node]` (already including
/// the transition's own +1/−1) over the memory nodes `nodes`: to the lowest-id min node if
/// `min < ratio · max` and `home` is a max node; otherwise nowhere.
pub fn balance_target(counts: &[u64], nodes: &[NodeId], home: NodeId, ratio: f64) -> Option<NodeId> {
    let max = nodes.iter().map(|&n| counts[n as usize]).max()?;
    let (min_node, min) = nodes.iter().map(|&n| (n, counts[n as usize])).min_by_key(|&(n, c)| (c, n))?;
    let home_count = counts.get(home as usize).copied()?;
    if (min as f64) < ratio * max as f64 && home_count == max && nodes.contains(&home) {
        Some(min_node)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bal(counts: &[u64], home: NodeId) -> Option<NodeId> {
        let nodes: Vec<NodeId> = (0..counts.len() as NodeId).collect();
        balance_target(counts, &nodes, home, 0.75)
    }

    /// Test vector 9.5 (docs/policies/stable-numa.md, "Test vectors"): SS balancing.
    #[test]
    fn vector_9_5_ss_balancing() {
        assert_eq!(bal(&[1, 0], 0), Some(1));
        assert_eq!(bal(&[4, 3], 0), None, "12 < 12 is false");
        assert_eq!(bal(&[5, 3], 0), Some(1));
        assert_eq!(bal(&[5, 3, 5], 2), Some(1), "N0 and N2 tie for max");
        assert_eq!(bal(&[5, 3, 5], 1), None, "not a max node");
        assert_eq!(bal(&[4, 1, 1], 0), Some(1), "lowest-id min");
        assert_eq!(bal(&[2, 1], 0), Some(1));
        assert_eq!(bal(&[1, 2], 1), Some(0), "back and forth with small counts");
    }

    #[test]
    fn only_memory_nodes_count() {
        // Node 1 has no memory: it is neither min nor a target.
        assert_eq!(balance_target(&[3, 0, 3], &[0, 2], 0, 0.75), None);
        assert_eq!(balance_target(&[4, 0, 2], &[0, 2], 0, 0.75), Some(2));
    }

    #[test]
    fn balanced_counts_never_move() {
        assert_eq!(bal(&[0, 0], 0), None);
        assert_eq!(bal(&[3, 3, 3], 1), None);
    }
}
