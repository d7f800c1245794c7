//! Task placement (docs/policies/autonuma.md, "Task placement"): Linux's `task_numa_migrate`
//! and `task_numa_compare` with the counting simplification (load = runnable tasks, capacity =
//! CPUs, every task's load 1).

use super::stats;
use super::AutoNuma;
use crate::policy::SystemView;
use numalab_core::{CpuId, NodeId, ThreadId};

/// Improvement (per-mille weight) below which a swap is not worth it.
const SMALLIMP: i64 = 30;
/// `NUMA_IMBALANCE_MIN`.
const NUMA_IMBALANCE_MIN: i64 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Move { cpu: CpuId },
    Swap { with: ThreadId },
}

/// What placement reads of the policy's statistics.
pub struct Ctx<'a> {
    pol: &'a AutoNuma,
    t: ThreadId,
}

impl<'a> Ctx<'a> {
    pub fn new(pol: &'a AutoNuma, t: ThreadId, _view: &dyn SystemView) -> Ctx<'a> {
        Ctx { pol, t }
    }

    fn task_weight(&self, th: ThreadId, n: NodeId) -> i64 {
        self.pol.tasks.get(th as usize).map_or(0, |p| stats::weight(&p.mem, p.total, n))
    }

    fn group(&self, th: ThreadId) -> Option<usize> {
        self.pol.tasks.get(th as usize).and_then(|p| p.group)
    }

    fn group_weight(&self, th: ThreadId, n: NodeId) -> i64 {
        self.group(th).map_or(0, |g| self.pol.groups[g].weight(n))
    }

    fn preferred(&self, th: ThreadId) -> Option<NodeId> {
        self.pol.tasks.get(th as usize).and_then(|p| p.preferred)
    }
}

/// `load_too_imbalanced` for moving one task from `src` to `dst` (or swapping with a task of
/// equal load): the imbalance after the move is strictly larger than before.
fn load_too_imbalanced(src_load: i64, dst_load: i64, src_cap: i64, dst_cap: i64, delta: i64) -> bool {
    let before = (dst_load * src_cap - src_load * dst_cap).abs();
    let after = ((dst_load + delta) * src_cap - (src_load - delta) * dst_cap).abs();
    after > before
}

struct Best {
    choice: Option<Choice>,
    imp: i64,
    /// The chosen swap partner prefers the source node.
    partner_prefers_src: bool,
}

/// Steps 3–5 of `task_numa_migrate` for one destination node. Returns true to stop the search.
fn evaluate(ctx: &Ctx, view: &dyn SystemView, src: NodeId, dst: NodeId, taskimp: i64, groupimp: i64, best: &mut Best) -> bool {
    let t = ctx.t;
    let (nr_s, nr_d) = (view.nr_running(src) as i64, view.nr_running(dst) as i64);
    let (cap_s, cap_d) = (view.node_cpu_count(src) as i64, view.node_cpu_count(dst) as i64);
    let dst_spare = nr_d < cap_d;
    let imb_numa_nr = (cap_d / 8).max(1);
    let move_allowed = if dst_spare {
        let mut imb = ((nr_d + 1) - (nr_s - 1)).max(0);
        if nr_d < imb_numa_nr && imb <= NUMA_IMBALANCE_MIN {
            imb = 0;
        }
        imb == 0
    } else {
        !load_too_imbalanced(nr_s, nr_d, cap_s, cap_d, 1)
    };
    let grouped = ctx.group(t).is_some();
    let moveimp = if grouped { groupimp } else { taskimp };
    for x in (0..view.cpu_count()).filter(|&c| view.node_of_cpu(c) == dst) {
        let cur = view.current_thread(x);
        let Some(cur) = cur.filter(|_| !view.cpu_idle(x)) else {
            if move_allowed && moveimp >= best.imp {
                best.choice = Some(Choice::Move { cpu: x });
                best.imp = moveimp;
                best.partner_prefers_src = false;
                return true;
            }
            continue;
        };
        if cur == t || view.thread_pinned(cur) {
            continue;
        }
        let cur_prefers_src = ctx.preferred(cur) == Some(src);
        if best.partner_prefers_src && !cur_prefers_src {
            continue;
        }
        let same_group = ctx.group(t) == ctx.group(cur);
        let mut imp = if same_group {
            if dst_spare {
                continue;
            }
            let mut i = taskimp + ctx.task_weight(cur, src) - ctx.task_weight(cur, dst);
            if grouped {
                i -= i / 16;
            }
            i
        } else if grouped && ctx.group(cur).is_some() {
            moveimp + ctx.group_weight(cur, src) - ctx.group_weight(cur, dst)
        } else {
            moveimp + ctx.task_weight(cur, src) - ctx.task_weight(cur, dst)
        };
        if ctx.preferred(cur) == Some(dst) {
            imp -= imp / 16;
        }
        if cur_prefers_src {
            imp += imp / 8;
        }
        if move_allowed && moveimp > imp && moveimp > best.imp {
            best.choice = Some(Choice::Move { cpu: x });
            best.imp = moveimp;
            best.partner_prefers_src = false;
            continue;
        }
        // A partner that prefers the source is taken when the best so far does not; any other
        // swap must gain SMALLIMP and beat the best by half of it.
        let takes_src_lover = cur_prefers_src && !best.partner_prefers_src;
        if !takes_src_lover && (imp < SMALLIMP || imp <= best.imp + SMALLIMP / 2) {
            continue;
        }
        best.choice = Some(Choice::Swap { with: cur });
        best.imp = imp;
        best.partner_prefers_src = cur_prefers_src;
        if cur_prefers_src && !move_allowed {
            return true;
        }
    }
    false
}

/// `task_numa_migrate`: the best move or swap toward the preferred node (then the other
/// nodes, when nothing was found or the group spans several active nodes), and for a grouped
/// task the preferred node it settles on.
pub fn task_numa_migrate(ctx: &Ctx, view: &dyn SystemView) -> (Option<Choice>, Option<NodeId>) {
    let t = ctx.t;
    let src = view.node_of_thread(t);
    let Some(pref) = ctx.preferred(t) else { return (None, None) };
    let imps = |n: NodeId| (ctx.task_weight(t, n) - ctx.task_weight(t, src), ctx.group_weight(t, n) - ctx.group_weight(t, src));
    let mut best = Best { choice: None, imp: 0, partner_prefers_src: false };
    let (ti, gi) = imps(pref);
    let stopped = evaluate(ctx, view, src, pref, ti, gi, &mut best);
    let grouped = ctx.group(t);
    let spread = grouped.is_some_and(|g| ctx.pol.groups[g].active_count() > 1);
    if !stopped && (best.choice.is_none() || spread) {
        for n in 0..ctx.pol.nodes as NodeId {
            if n == src || n == pref || view.node_cpu_count(n) == 0 {
                continue;
            }
            let (ti, gi) = imps(n);
            if ti < 0 && gi < 0 {
                continue;
            }
            if evaluate(ctx, view, src, n, ti, gi, &mut best) {
                break;
            }
        }
    }
    let preferred_after = grouped.map(|_| match best.choice {
        Some(Choice::Move { cpu }) => view.node_of_cpu(cpu),
        Some(Choice::Swap { with }) => view.node_of_thread(with),
        None => src,
    });
    (best.choice, preferred_after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamic::autonuma::{AutoNuma, AutoNumaConfig};
    use crate::policy::{Policy, PolicyEnv};
    use crate::testing::FakeSystem;
    use numalab_core::machine::presets;
    use std::sync::Arc;

    /// 2 nodes x 4 CPUs; p = thread 0 on N1 (CPU 4), preferred N0; `n0`/`n1` tasks running on
    /// each node (threads on CPUs in order, p counted in N1).
    fn setup(n0: u32, n1: u32, p_w: (u64, u64)) -> (AutoNuma, FakeSystem) {
        // A 2-node machine; the FakeSystem gives it 4 CPUs per node, as the table has.
        let m = presets::load("xeon-e5-2690-2s").unwrap();
        let env = PolicyEnv::new(Arc::new(m));
        let mut pol = AutoNuma::new(AutoNumaConfig::default(), &env).unwrap();
        let threads = 1 + n0 as usize + (n1 as usize - 1);
        let mut sys = FakeSystem::new(2, 4, threads.min(8), 1000, 1000);
        // p on CPU 4; N0's tasks on CPUs 0..n0; the rest of N1 on CPUs 5.. (doubling up).
        let mut cpus = vec![4];
        cpus.extend(0..n0);
        cpus.extend((0..n1 - 1).map(|k| 5 + (k % 3)));
        sys.cpu_of_thread = cpus.clone();
        sys.space_of_thread = vec![0; cpus.len()];
        sys.alive = vec![true; cpus.len()];
        sys.runtime_ns = vec![0; cpus.len()];
        sys.preferred = vec![None; cpus.len()];
        sys.pinned = vec![false; cpus.len()];
        for t in 0..cpus.len() as u32 {
            pol.task(t);
        }
        set_weights(&mut pol, 0, p_w);
        pol.tasks[0].preferred = Some(0);
        (pol, sys)
    }

    fn set_weights(pol: &mut AutoNuma, t: ThreadId, (w0, w1): (u64, u64)) {
        let p = pol.task(t);
        p.mem = vec![[0, w0], [0, w1]];
        p.total = w0 + w1;
    }

    fn choose(pol: &AutoNuma, sys: &FakeSystem) -> Option<Choice> {
        task_numa_migrate(&Ctx::new(pol, 0, sys), sys).0
    }

    /// The move table of docs/policies/autonuma.md ("Task placement").
    #[test]
    fn move_or_stick_by_node_load() {
        let (pol, sys) = setup(3, 5, (600, 400));
        assert_eq!(choose(&pol, &sys), Some(Choice::Move { cpu: 3 }), "N0 has spare, imb 0: N0's idle CPU");
        let (pol, sys) = setup(0, 1, (600, 400));
        assert_eq!(choose(&pol, &sys), Some(Choice::Move { cpu: 0 }), "imb 1 tolerated");
        let (pol, sys) = setup(3, 3, (600, 400));
        assert_eq!(choose(&pol, &sys), None, "imb 2 not tolerated; busy CPUs skipped: stick");
        // N0 fully busy (4), N1 6: a move is allowed; C2 on CPU 0 swaps for 150 < 200: the
        // result is a move onto C2's CPU.
        let (mut pol, sys) = setup(4, 6, (600, 400));
        set_weights(&mut pol, 1, (520, 480));
        pol.tasks[1].preferred = Some(0);
        for c in [2, 3, 4] {
            set_weights(&mut pol, c, (1000, 0));
        }
        assert_eq!(choose(&pol, &sys), Some(Choice::Move { cpu: 0 }));
    }

    /// The swap-candidate table: N0 fully busy (4 tasks), N1 4: no move allowed.
    #[test]
    fn swap_candidates() {
        // C1 on CPU 0: weights (300, 700), prefers N1 (src): 600 + 600/8 = 675, swap, stop.
        let (mut pol, sys) = setup(4, 4, (600, 400));
        set_weights(&mut pol, 1, (300, 700));
        pol.tasks[1].preferred = Some(1);
        for c in [2, 3, 4] {
            set_weights(&mut pol, c, (1000, 0));
        }
        let mut best = Best { choice: None, imp: 0, partner_prefers_src: false };
        assert!(evaluate(&Ctx::new(&pol, 0, &sys), &sys, 1, 0, 200, 0, &mut best), "search stops");
        assert_eq!((best.choice, best.imp), (Some(Choice::Swap { with: 1 }), 675));
        // C2: (520, 480), prefers N0 (dst): 160 - 160/16 = 150.
        set_weights(&mut pol, 1, (520, 480));
        pol.tasks[1].preferred = Some(0);
        let mut best = Best { choice: None, imp: 0, partner_prefers_src: false };
        evaluate(&Ctx::new(&pol, 0, &sys), &sys, 1, 0, 200, 0, &mut best);
        assert_eq!((best.choice, best.imp), (Some(Choice::Swap { with: 1 }), 150));
        // C3: p 510/490 (taskimp 20), cur (500, 505), no preference: 25 < 30, rejected.
        set_weights(&mut pol, 0, (510, 490));
        set_weights(&mut pol, 1, (500, 505));
        pol.tasks[1].preferred = None;
        let mut best = Best { choice: None, imp: 0, partner_prefers_src: false };
        evaluate(&Ctx::new(&pol, 0, &sys), &sys, 1, 0, 20, 0, &mut best);
        assert_eq!(best.choice, None);
        // C1 in p's group: 600 - 600/16 = 563.
        set_weights(&mut pol, 0, (600, 400));
        set_weights(&mut pol, 1, (300, 700));
        pol.groups.push(crate::dynamic::autonuma::stats::Group::new(2));
        pol.tasks[0].group = Some(0);
        pol.tasks[1].group = Some(0);
        let mut best = Best { choice: None, imp: 0, partner_prefers_src: false };
        evaluate(&Ctx::new(&pol, 0, &sys), &sys, 1, 0, 200, 0, &mut best);
        assert_eq!((best.choice, best.imp), (Some(Choice::Swap { with: 1 }), 563));
    }

    #[test]
    fn load_balance_test_allows_equal_imbalance() {
        assert!(load_too_imbalanced(4, 4, 4, 4, 1), "|5*4 - 3*4| = 8 > 0");
        assert!(!load_too_imbalanced(6, 4, 4, 4, 1), "|5*4 - 5*4| = 0 <= 8");
    }
}
