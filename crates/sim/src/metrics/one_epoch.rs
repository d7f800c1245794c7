//! What kept a step of the epoch loop to one epoch (`EngineCounts::one_epoch`).

use serde::Serialize;

/// What kept a step of the loop to one epoch (docs/simulator.md, "Fast-forward": the rules a
/// window follows). Each such step is counted once, under the bound that set its length: the
/// first to bring it down to what it became, in the order the engine checks them (the
/// fields from `no_fast_forward` to `metrics_interval` in order, then the running threads in
/// the order of their ids, each by `spin`, `arrival` and `load_move`, then `sleep` and
/// `release` of the waiting ones); `scheduler_cut` for a longer window the scheduler ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OneEpochSteps {
    /// The exact engine, or fast-forward switched off (`sim.fast_forward_max_us` under two
    /// epochs).
    pub no_fast_forward: u64,
    /// A thread began a step in the loop's last step: the demand the solve took is not yet
    /// that step's traffic.
    pub step_begun: u64,
    /// The policy's follow-up events were waiting to be delivered.
    pub follow_ups: u64,
    /// The step after a window that ended where a walk's load moved to another node.
    pub after_load_move: u64,
    /// The scheduler's next periodic balance (background tasks inside a window are replayed,
    /// `scheduler_cut`).
    pub scheduler_event: u64,
    /// The policy's periodic tick.
    pub policy_tick: u64,
    /// The scheduler tick of the running threads (which the policy's task tick follows).
    pub task_tick: u64,
    /// The per-node mappings' next scan (policies that keep them).
    pub mappings: u64,
    /// The end of the metrics interval (the timeline's next point).
    pub metrics_interval: u64,
    /// A thread in a pipelined step, or with nothing left to issue, may wait and spin.
    pub spin: u64,
    /// A running thread may arrive at its barrier (its predicted arrival, with the margin).
    pub arrival: u64,
    /// A walk's own load moves to another node.
    pub load_move: u64,
    /// A thread waiting at a barrier falls asleep, after its barrier may be released.
    pub sleep: u64,
    /// The barrier of a thread asleep or napping may be released.
    pub release: u64,
    /// The window was longer, and the scheduler ended it after one epoch (where a newidle
    /// balance would pull a thread, or a nap would change another thread's share).
    pub scheduler_cut: u64,
}

/// One bound of [`OneEpochSteps`] (the engine notes which one set a step's length), in the
/// order of its fields: a bound's index is its count's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StepBound {
    NoFastForward,
    StepBegun,
    FollowUps,
    AfterLoadMove,
    SchedulerEvent,
    PolicyTick,
    TaskTick,
    Mappings,
    MetricsInterval,
    Spin,
    Arrival,
    LoadMove,
    Sleep,
    Release,
    SchedulerCut,
}

impl OneEpochSteps {
    /// The counts in the order of the fields, which is also the order of [`StepBound`]'s
    /// variants: the one list that `add`, `total` and the sums over runs go through.
    fn counts_mut(&mut self) -> [&mut u64; 15] {
        let OneEpochSteps {
            no_fast_forward,
            step_begun,
            follow_ups,
            after_load_move,
            scheduler_event,
            policy_tick,
            task_tick,
            mappings,
            metrics_interval,
            spin,
            arrival,
            load_move,
            sleep,
            release,
            scheduler_cut,
        } = self;
        [
            no_fast_forward,
            step_begun,
            follow_ups,
            after_load_move,
            scheduler_event,
            policy_tick,
            task_tick,
            mappings,
            metrics_interval,
            spin,
            arrival,
            load_move,
            sleep,
            release,
            scheduler_cut,
        ]
    }

    /// Count one step of one epoch under `bound`.
    pub(crate) fn add(&mut self, bound: StepBound) {
        *self.counts_mut()[bound as usize] += 1;
    }

    /// Every step counted.
    pub fn total(&self) -> u64 {
        let mut copy = *self;
        copy.counts_mut().into_iter().map(|c| *c).sum()
    }
}

impl std::ops::AddAssign for OneEpochSteps {
    /// Sums over runs.
    fn add_assign(&mut self, mut other: Self) {
        for (c, o) in self.counts_mut().into_iter().zip(other.counts_mut()) {
            *c += *o;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY_BOUND: [StepBound; 15] = [
        StepBound::NoFastForward,
        StepBound::StepBegun,
        StepBound::FollowUps,
        StepBound::AfterLoadMove,
        StepBound::SchedulerEvent,
        StepBound::PolicyTick,
        StepBound::TaskTick,
        StepBound::Mappings,
        StepBound::MetricsInterval,
        StepBound::Spin,
        StepBound::Arrival,
        StepBound::LoadMove,
        StepBound::Sleep,
        StepBound::Release,
        StepBound::SchedulerCut,
    ];

    /// Each bound counts in a field of its own, and the total counts each step once; runs sum
    /// field by field.
    #[test]
    fn each_bound_has_its_own_count() {
        let mut counts = OneEpochSteps::default();
        for (i, &bound) in EVERY_BOUND.iter().enumerate() {
            for _ in 0..=i {
                counts.add(bound);
            }
        }
        assert_eq!(counts.total(), (1..=15).sum::<u64>());
        // The JSON names every field once, with the count of its bound (1 to 15 in order).
        let json = serde_json::to_value(counts).unwrap();
        let mut values: Vec<u64> = json.as_object().unwrap().values().map(|v| v.as_u64().unwrap()).collect();
        values.sort_unstable();
        assert_eq!(values, (1..=15).collect::<Vec<u64>>(), "{json}");
        let names = [
            "no_fast_forward",
            "step_begun",
            "follow_ups",
            "after_load_move",
            "scheduler_event",
            "policy_tick",
            "task_tick",
            "mappings",
            "metrics_interval",
            "spin",
            "arrival",
            "load_move",
            "sleep",
            "release",
            "scheduler_cut",
        ];
        for (i, name) in names.iter().enumerate() {
            assert_eq!(json[name], i as u64 + 1, "{name}: {json}");
        }
        let mut twice = counts;
        twice += counts;
        assert_eq!(twice.total(), 2 * counts.total());
        assert_eq!(twice.load_move, 2 * counts.load_move);
    }
}
