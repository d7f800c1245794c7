//! The per-application parts of a run's result (docs/metrics.md, "Per application" and
//! "Application moves"): when each program of a multi-program workload finished, and every
//! whole-application move the policy took, named by program, with the arithmetic intensity the
//! policy chose it by.

use crate::metrics::{AppFinish, AppMoveRecord};
use numalab_core::Machine;
use numalab_policy::{AppMove, Outcome};
use numalab_workload::Program;

/// One entry per member of a mix, in member order; empty for a single program.
/// `finish_ns[t]` is thread t's finishing time.
pub(crate) fn finishes(p: &Program, finish_ns: &[f64]) -> Vec<AppFinish> {
    p.members
        .iter()
        .map(|mb| {
            let threads = mb.first_thread as usize..(mb.first_thread + mb.program.threads) as usize;
            let end_ns = finish_ns[threads].iter().copied().fold(0.0, f64::max);
            AppFinish { app: mb.name.clone(), threads: mb.program.threads, pages: mb.program.total_pages, finish_s: end_ns / 1e9 }
        })
        .collect()
}

/// The policy's moves as the run reports them (names for spaces, tiers for nodes).
pub(crate) fn move_records(p: &Program, m: &Machine, moves: &[AppMove]) -> Vec<AppMoveRecord> {
    moves
        .iter()
        .enumerate()
        .map(|(k, mv)| {
            let app = p.members.get(mv.space as usize).map_or_else(|| format!("space {}", mv.space), |mb| mb.name.clone());
            let (outcome, moved_pages) = match mv.outcome {
                None => (None, None),
                Some(Outcome::Applied) => (Some("applied".to_string()), None),
                Some(Outcome::Partial { moved_pages, .. }) => (Some("partial".to_string()), Some(moved_pages)),
                Some(Outcome::Refused(r)) => (Some(format!("refused: {}", r.as_str())), Some(0)),
            };
            AppMoveRecord {
                order: k as u32 + 1,
                t_s: mv.time_ns as f64 / 1e9,
                window: mv.window,
                app,
                kind: mv.kind.as_str().to_string(),
                to_node: mv.to,
                to_tier: m.nodes.get(mv.to as usize).map(|n| n.tier.as_str().to_string()),
                intensity_flop_per_byte: mv.intensity_flop_per_byte.filter(|x| x.is_finite()),
                resident_pages: mv.resident_pages,
                outcome,
                moved_pages,
            }
        })
        .collect()
}
