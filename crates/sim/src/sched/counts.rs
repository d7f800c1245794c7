//! Thread migrations counted by cause (metric `thread_migrations_by_cause`, docs/metrics.md).

use super::Cause;
use serde::Serialize;

/// Moves of one cause, within a node and across nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CauseCount {
    pub in_node: u64,
    pub cross_node: u64,
}

/// Thread migrations by cause (metric `thread_migrations_by_cause`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct MigrationCounts {
    pub idle_balance: CauseCount,
    pub load_balance: CauseCount,
    pub wakeup: CauseCount,
    pub numa_move: CauseCount,
    pub numa_swap: CauseCount,
    pub cluster_move: CauseCount,
    pub cluster_swap: CauseCount,
    pub policy: CauseCount,
}

impl MigrationCounts {
    pub fn of(&self, cause: Cause) -> CauseCount {
        match cause {
            Cause::IdleBalance => self.idle_balance,
            Cause::LoadBalance => self.load_balance,
            Cause::Wakeup => self.wakeup,
            Cause::NumaMove => self.numa_move,
            Cause::NumaSwap => self.numa_swap,
            Cause::ClusterMove => self.cluster_move,
            Cause::ClusterSwap => self.cluster_swap,
            Cause::Policy => self.policy,
        }
    }
    fn slot(&mut self, cause: Cause) -> &mut CauseCount {
        match cause {
            Cause::IdleBalance => &mut self.idle_balance,
            Cause::LoadBalance => &mut self.load_balance,
            Cause::Wakeup => &mut self.wakeup,
            Cause::NumaMove => &mut self.numa_move,
            Cause::NumaSwap => &mut self.numa_swap,
            Cause::ClusterMove => &mut self.cluster_move,
            Cause::ClusterSwap => &mut self.cluster_swap,
            Cause::Policy => &mut self.policy,
        }
    }
    /// Every CPU change (Linux's `se.nr_migrations`).
    pub fn total(&self) -> u64 {
        Cause::ALL.iter().map(|&c| self.of(c).in_node + self.of(c).cross_node).sum()
    }
    pub fn cross_node(&self) -> u64 {
        Cause::ALL.iter().map(|&c| self.of(c).cross_node).sum()
    }
    pub fn count(&mut self, cause: Cause, cross: bool) {
        let c = self.slot(cause);
        if cross {
            c.cross_node += 1;
        } else {
            c.in_node += 1;
        }
    }
}
