//! Two-level thread clustering: the thread–node and thread–thread tables of one root group
//! (one address space), their smoothing at each sequence end, and the decision (plain move,
//! swap, or nothing) taken from the smoothed tables (docs/policies/stable-numa.md, "Thread
//! clustering").

use numalab_core::{NodeId, ThreadId};

/// The window counts `W` and smoothed values `S` of one root group. Threads are the group's
/// contiguous id range `first..first + threads`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tables {
    pub first: ThreadId,
    pub threads: usize,
    pub nodes: usize,
    /// `TN[t][node]`, row-major, threads × nodes.
    pub w_tn: Vec<u64>,
    pub s_tn: Vec<f64>,
    /// `TT[t][u]`, row = faulting thread, column = previous thread.
    pub w_tt: Vec<u64>,
    pub s_tt: Vec<f64>,
}

impl Tables {
    pub fn new(first: ThreadId, threads: usize, nodes: usize) -> Tables {
        Tables {
            first,
            threads,
            nodes,
            w_tn: vec![0; threads * nodes],
            s_tn: vec![0.0; threads * nodes],
            w_tt: vec![0; threads * threads],
            s_tt: vec![0.0; threads * threads],
        }
    }

    /// Row of a thread, if it belongs to the group.
    pub fn row(&self, t: ThreadId) -> Option<usize> {
        let i = t.checked_sub(self.first)? as usize;
        (i < self.threads).then_some(i)
    }

    pub fn contains(&self, t: ThreadId) -> bool {
        self.row(t).is_some()
    }

    /// One hinting fault by `t` on a page whose home before any migration is `home`;
    /// `prev` is the group thread credited as the previous accessor of a shared fault.
    pub fn record(&mut self, t: ThreadId, home: NodeId, prev: Option<ThreadId>) {
        let Some(r) = self.row(t) else { return };
        if (home as usize) < self.nodes {
            self.w_tn[r * self.nodes + home as usize] += 1;
        }
        if let Some(c) = prev.and_then(|u| self.row(u)) {
            if c != r {
                self.w_tt[r * self.threads + c] += 1;
            }
        }
    }

    /// `S := alpha·W + (1 − alpha)·S`, then `W := 0`, for every entry of both tables.
    pub fn smooth(&mut self, alpha: f64) {
        for (s, w) in self.s_tn.iter_mut().zip(self.w_tn.iter_mut()).chain(self.s_tt.iter_mut().zip(self.w_tt.iter_mut())) {
            *s = alpha * *w as f64 + (1.0 - alpha) * *s;
            *w = 0;
        }
    }

    pub fn s_tn(&self, t: ThreadId, node: NodeId) -> f64 {
        self.row(t).map_or(0.0, |r| self.s_tn[r * self.nodes + node as usize])
    }

    pub fn w_tn(&self, t: ThreadId, node: NodeId) -> u64 {
        self.row(t).map_or(0, |r| self.w_tn[r * self.nodes + node as usize])
    }

    pub fn s_tt(&self, t: ThreadId, u: ThreadId) -> f64 {
        match (self.row(t), self.row(u)) {
            (Some(r), Some(c)) => self.s_tt[r * self.threads + c],
            _ => 0.0,
        }
    }

    pub fn w_tt(&self, t: ThreadId, u: ThreadId) -> u64 {
        match (self.row(t), self.row(u)) {
            (Some(r), Some(c)) => self.w_tt[r * self.threads + c],
            _ => 0,
        }
    }

    /// Symmetric sharing weight `w(x, y) = S_TT[x][y] + S_TT[y][x]`.
    pub fn w(&self, x: ThreadId, y: ThreadId) -> f64 {
        self.s_tt(x, y) + self.s_tt(y, x)
    }

    /// `share(x, G) = Σ_{y ∈ G, y ≠ x} w(x, y)`.
    pub fn share(&self, x: ThreadId, group: &[ThreadId]) -> f64 {
        group.iter().filter(|&&y| y != x).map(|&y| self.w(x, y)).sum()
    }

    /// Forget a thread that exited: its row and column no longer count.
    pub fn clear(&mut self, t: ThreadId) {
        let Some(r) = self.row(t) else { return };
        for n in 0..self.nodes {
            self.w_tn[r * self.nodes + n] = 0;
            self.s_tn[r * self.nodes + n] = 0.0;
        }
        for c in 0..self.threads {
            for (a, b) in [(r, c), (c, r)] {
                self.w_tt[a * self.threads + b] = 0;
                self.s_tt[a * self.threads + b] = 0.0;
            }
        }
    }
}

/// A live member of a root group as the decision sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    pub tid: ThreadId,
    /// Its sub-group (node).
    pub sub: NodeId,
    /// Counts in the load `L` of its sub-group.
    pub runnable: bool,
    /// May be moved (not pinned).
    pub movable: bool,
}

/// The thresholds of the decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub min_gain: f64,
    pub imbalance_pct: u64,
    pub swap_threshold: f64,
}

/// What the decision at a sequence end does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Choice {
    /// No positive gain, or neither a move nor a swap passed its test.
    Nothing,
    Move {
        thread: ThreadId,
        from: NodeId,
        to: NodeId,
    },
    Swap {
        thread: ThreadId,
        victim: ThreadId,
        from: NodeId,
        to: NodeId,
    },
}

/// The single move `(t*, d*)` that most raises the group's local pages:
/// `gain(t, d) = S_TN[t][d] − S_TN[t][s]`; ties to the lower tid, then the lower node. `None`
/// if the best gain is not above `min_gain`.
pub fn candidate(tables: &Tables, members: &[Member], cpu_nodes: &[NodeId], min_gain: f64) -> Option<(ThreadId, NodeId, NodeId, f64)> {
    let mut best: Option<(ThreadId, NodeId, NodeId, f64)> = None;
    let mut sorted: Vec<&Member> = members.iter().filter(|m| m.movable).collect();
    sorted.sort_by_key(|m| m.tid);
    for m in sorted {
        let here = tables.s_tn(m.tid, m.sub);
        for &d in cpu_nodes.iter().filter(|&&d| d != m.sub) {
            let gain = tables.s_tn(m.tid, d) - here;
            // Strictly greater: earlier (lower tid, lower node) wins ties.
            if best.is_none_or(|b| gain > b.3) {
                best = Some((m.tid, m.sub, d, gain));
            }
        }
    }
    best.filter(|b| b.3 > min_gain)
}

/// C1: the source is sufficiently more loaded, per CPU: `100·L(s)·n_d > pct·L(d)·n_s`.
pub fn c1(ls: u64, ld: u64, ns: u64, nd: u64, pct: u64) -> bool {
    100 * ls * nd > pct * ld * ns
}

/// C2: loads stay balanced after the move (`delta` = 1 if the thread is runnable):
/// with `A = (L(s) − δ)·n_d`, `B = (L(d) + δ)·n_s`, `100·max(A, B) ≤ pct·min(A, B)`.
pub fn c2(ls: u64, ld: u64, delta: u64, ns: u64, nd: u64, pct: u64) -> bool {
    let a = ls.saturating_sub(delta) * nd;
    let b = (ld + delta) * ns;
    100 * a.max(b) <= pct * a.min(b)
}

/// A plain move is allowed under C1 or C2.
pub fn may_move(ls: u64, ld: u64, delta: u64, ns: u64, nd: u64, pct: u64) -> bool {
    c1(ls, ld, ns, nd, pct) || c2(ls, ld, delta, ns, nd, pct)
}

/// The member of `dest` that shares least with the rest of `dest`; ties to the smaller
/// `w(v, t*)`, then the lower tid.
pub fn victim(tables: &Tables, dest: &[ThreadId], t_star: ThreadId) -> Option<ThreadId> {
    let mut best: Option<(f64, f64, ThreadId)> = None;
    for &v in dest {
        let key = (tables.share(v, dest), tables.w(v, t_star), v);
        if best.is_none_or(|b| key.0 < b.0 || (key.0 == b.0 && (key.1 < b.1 || (key.1 == b.1 && key.2 < b.2)))) {
            best = Some(key);
        }
    }
    best.map(|b| b.2)
}

/// Swap `t*` with `v` iff `share(t*, G_d∖{v}) ≥ threshold · share(v, G_d∖{v})` and
/// `share(t*, G_d∖{v}) > 0`.
pub fn swap_ok(share_t: f64, share_v: f64, threshold: f64) -> bool {
    share_t > 0.0 && share_t >= threshold * share_v
}

/// The decision of one root group at a sequence end, on the already smoothed tables.
/// `cpus(node)` is the node's CPU count.
pub fn decide(tables: &Tables, members: &[Member], cpu_nodes: &[NodeId], cpus: impl Fn(NodeId) -> u64, p: Params) -> Choice {
    let Some((t, s, d, _gain)) = candidate(tables, members, cpu_nodes, p.min_gain) else {
        return Choice::Nothing;
    };
    let load = |g: NodeId| members.iter().filter(|m| m.sub == g && m.runnable).count() as u64;
    let runnable = members.iter().any(|m| m.tid == t && m.runnable);
    if may_move(load(s), load(d), runnable as u64, cpus(s), cpus(d), p.imbalance_pct) {
        return Choice::Move { thread: t, from: s, to: d };
    }
    let dest: Vec<ThreadId> = members.iter().filter(|m| m.sub == d).map(|m| m.tid).collect();
    let Some(v) = victim(tables, &dest, t) else { return Choice::Nothing };
    if !members.iter().any(|m| m.tid == v && m.movable) {
        return Choice::Nothing;
    }
    let rest: Vec<ThreadId> = dest.iter().copied().filter(|&y| y != v).collect();
    if swap_ok(tables.share(t, &rest), tables.share(v, &rest), p.swap_threshold) {
        Choice::Swap { thread: t, victim: v, from: s, to: d }
    } else {
        Choice::Nothing
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const A: ThreadId = 0;
    const B: ThreadId = 1;
    const C: ThreadId = 2;
    const D: ThreadId = 3;

    fn members(subs: &[(ThreadId, NodeId)]) -> Vec<Member> {
        subs.iter().map(|&(tid, sub)| Member { tid, sub, runnable: true, movable: true }).collect()
    }

    fn set_tt(t: &mut Tables, x: ThreadId, y: ThreadId, v: f64) {
        let (r, c) = (t.row(x).unwrap(), t.row(y).unwrap());
        t.s_tt[r * t.threads + c] = v;
    }

    fn set_tn(t: &mut Tables, x: ThreadId, n: NodeId, v: f64) {
        let r = t.row(x).unwrap();
        t.s_tn[r * t.nodes + n as usize] = v;
    }

    const P125: Params = Params { min_gain: 0.0, imbalance_pct: 125, swap_threshold: 1.5 };

    /// The worked example's tables: S(k−1) in S, W(k) in W.
    pub(crate) fn worked_example(w_ab: (u64, u64)) -> Tables {
        let mut t = Tables::new(0, 4, 2);
        let tn = [(A, [28.0, 52.0], [32, 48]), (B, [50.0, 24.0], [70, 16]), (C, [26.0, 18.0], [24, 22]), (D, [12.0, 38.0], [8, 42])];
        for (x, s, w) in tn {
            let r = t.row(x).unwrap();
            for n in 0..2 {
                t.s_tn[r * 2 + n] = s[n];
                t.w_tn[r * 2 + n] = w[n];
            }
        }
        // TT entries chosen so that the smoothed values are those of the example (S = W
        // when S(k−1) = W(k)): w(A,B) = 22 + 18 unless overridden.
        let tt = [
            (A, B, w_ab.0),
            (B, A, w_ab.1),
            (A, C, 4),
            (C, A, 2),
            (A, D, 1),
            (D, A, 3),
            (B, C, 2),
            (C, B, 1),
            (B, D, 3),
            (D, B, 2),
            (C, D, 15),
            (D, C, 20),
        ];
        for (x, y, v) in tt {
            let (r, c) = (t.row(x).unwrap(), t.row(y).unwrap());
            t.s_tt[r * 4 + c] = v as f64;
            t.w_tt[r * 4 + c] = v;
        }
        t
    }

    /// The worked example: smoothing gives S(k), B → N0 has the largest gain (+40), the move
    /// fails C1 and C2 at loads 2/2, the victim is C (tie on share, broken by w(·, B)), and
    /// B and C swap.
    #[test]
    fn worked_example_swaps_b_and_c() {
        let mut t = worked_example((22, 18));
        t.smooth(0.5);
        let expect = [(A, [30.0, 50.0]), (B, [60.0, 20.0]), (C, [25.0, 20.0]), (D, [10.0, 40.0])];
        for (x, s) in expect {
            assert_eq!([t.s_tn(x, 0), t.s_tn(x, 1)], s, "S(k) of thread {x}");
            assert_eq!([t.w_tn(x, 0), t.w_tn(x, 1)], [0, 0], "W is cleared");
        }
        assert_eq!(t.w(A, B), 40.0);
        assert_eq!(t.w(C, D), 35.0);
        let m = members(&[(A, 0), B_N1, (C, 0), (D, 1)]);
        assert_eq!(candidate(&t, &m, &[0, 1], 0.0), Some((B, 1, 0, 40.0)));
        assert!(!c1(2, 2, 2, 2, 125));
        assert!(!c2(2, 2, 1, 2, 2, 125));
        assert_eq!(victim(&t, &[A, C], B), Some(C));
        assert_eq!(decide(&t, &m, &[0, 1], |_| 2, P125), Choice::Swap { thread: B, victim: C, from: 1, to: 0 });
    }
    const B_N1: (ThreadId, NodeId) = (B, 1);

    /// Test vector 9.8 (docs/policies/stable-numa.md, "Test vectors"), first bullet: the threshold at w(A,B) = 8, 9, 10.
    #[test]
    fn vector_9_8_swap_threshold() {
        let m = members(&[(A, 0), (B, 1), (C, 0), (D, 1)]);
        for (w_ab, swap) in [(8.0, false), (9.0, true), (10.0, true)] {
            let mut t = worked_example((0, 0));
            t.smooth(0.5);
            set_tt(&mut t, A, B, w_ab);
            assert_eq!(victim(&t, &[A, C], B), Some(C), "victim stays C while w(A,B) > 3");
            let expect = if swap { Choice::Swap { thread: B, victim: C, from: 1, to: 0 } } else { Choice::Nothing };
            assert_eq!(decide(&t, &m, &[0, 1], |_| 2, P125), expect, "w(A,B) = {w_ab}");
        }
    }

    /// Test vector 9.8 (docs/policies/stable-numa.md, "Test vectors"), second bullet: destination {P, Q, R}, source T.
    #[test]
    fn vector_9_8_victim_of_three() {
        let (p, q, r, tt) = (0, 1, 2, 3);
        let mut t = Tables::new(0, 4, 2);
        for (x, y, v) in [(p, q, 10.0), (p, r, 2.0), (q, r, 1.0), (tt, p, 12.0), (tt, q, 0.0), (tt, r, 3.0)] {
            set_tt(&mut t, x, y, v);
        }
        let dest = [p, q, r];
        assert_eq!([t.share(p, &dest), t.share(q, &dest), t.share(r, &dest)], [12.0, 11.0, 3.0]);
        assert_eq!(victim(&t, &dest, tt), Some(r));
        assert_eq!(t.share(tt, &[p, q]), 12.0);
        assert!(swap_ok(12.0, 3.0, 1.5));
        // Through `decide`: T on N1 wants N0 (gain 5), N0 holds P, Q, R and T is alone on N1.
        set_tn(&mut t, tt, 0, 5.0);
        let m = members(&[(p, 0), (q, 0), (r, 0), (tt, 1)]);
        assert_eq!(decide(&t, &m, &[0, 1], |_| 2, P125), Choice::Swap { thread: tt, victim: r, from: 1, to: 0 });
    }

    /// Test vector 9.8 (docs/policies/stable-numa.md, "Test vectors"), third bullet: a one-member destination never swaps (share 0).
    #[test]
    fn vector_9_8_one_member_destination() {
        assert!(!swap_ok(0.0, 0.0, 1.5));
        let mut t = Tables::new(0, 2, 2);
        set_tn(&mut t, 1, 0, 9.0);
        // Thread 0 alone on N0, thread 1 on N1 wants N0; loads 1/1 with 1 CPU each: C1 100 > 125
        // no, C2 after 0/2 no; the victim is thread 0, share(1, ∅) = 0 ⇒ nothing.
        let m = members(&[(0, 0), (1, 1)]);
        assert_eq!(decide(&t, &m, &[0, 1], |_| 1, P125), Choice::Nothing);
    }

    /// Test vector 9.8 (docs/policies/stable-numa.md, "Test vectors"), fourth bullet: gain ties and no positive gain.
    #[test]
    fn vector_9_8_gain_ties() {
        let mut t = Tables::new(0, 4, 2);
        set_tn(&mut t, B, 0, 40.0);
        set_tn(&mut t, D, 0, 40.0);
        let m = members(&[(A, 0), (B, 1), (C, 0), (D, 1)]);
        assert_eq!(candidate(&t, &m, &[0, 1], 0.0), Some((B, 1, 0, 40.0)), "lower tid wins");
        let zero = Tables::new(0, 4, 2);
        assert_eq!(candidate(&zero, &m, &[0, 1], 0.0), None, "gain 0 is not > min_gain");
        assert_eq!(decide(&zero, &m, &[0, 1], |_| 2, P125), Choice::Nothing);
        let mut neg = Tables::new(0, 4, 2);
        set_tn(&mut neg, A, 0, 5.0);
        assert_eq!(candidate(&neg, &m, &[0, 1], 0.0), None, "all gains ≤ 0");
    }

    /// Test vector 9.7 (docs/policies/stable-numa.md, "Test vectors"): move conditions.
    #[test]
    fn vector_9_7_move_conditions() {
        // (L(s), L(d), δ, pct, n_s, n_d, C1, C2)
        let rows = [
            (6, 4, 1, 125, 1, 1, true, false),
            (5, 4, 1, 125, 1, 1, false, true),
            (4, 4, 1, 125, 1, 1, false, false),
            (4, 4, 0, 125, 1, 1, false, true),
            (7, 6, 1, 117, 1, 1, false, true),
            (8, 8, 1, 117, 1, 1, false, false),
            (1, 0, 1, 125, 1, 1, true, false),
            (4, 1, 1, 125, 4, 2, true, false),
            (4, 2, 1, 125, 4, 2, false, false),
        ];
        for (ls, ld, delta, pct, ns, nd, want_c1, want_c2) in rows {
            assert_eq!(c1(ls, ld, ns, nd, pct), want_c1, "C1 {ls}/{ld} pct {pct}");
            if !want_c1 {
                assert_eq!(c2(ls, ld, delta, ns, nd, pct), want_c2, "C2 {ls}/{ld} δ {delta} pct {pct}");
            }
            assert_eq!(may_move(ls, ld, delta, ns, nd, pct), want_c1 || want_c2);
        }
    }

    /// Test vector 9.6 (docs/policies/stable-numa.md, "Test vectors"), third bullet: S = 10 and window counts 3, 0, 0.
    #[test]
    fn vector_9_6_smoothing() {
        let mut t = Tables::new(0, 1, 1);
        t.s_tn[0] = 10.0;
        let mut got = Vec::new();
        for w in [3, 0, 0] {
            t.w_tn[0] = w;
            t.smooth(0.5);
            got.push(t.s_tn[0]);
        }
        assert_eq!(got, [6.5, 3.25, 1.625]);
    }

    #[test]
    fn record_keeps_the_diagonal_zero_and_ignores_strangers() {
        let mut t = Tables::new(4, 2, 2);
        t.record(4, 1, Some(4));
        t.record(5, 0, Some(4));
        t.record(9, 0, Some(4));
        t.record(4, 0, Some(9));
        assert_eq!(t.w_tt(4, 4), 0);
        assert_eq!(t.w_tt(5, 4), 1);
        assert_eq!(t.w_tn(4, 1) + t.w_tn(4, 0), 2);
        assert_eq!(t.w_tn(5, 0), 1);
        t.clear(4);
        assert_eq!((t.w_tt(5, 4), t.w_tn(4, 0)), (0, 0));
    }

    #[test]
    fn a_non_runnable_candidate_adds_no_load() {
        // Vector 9.7 row 4 through `decide`: N0 holds the candidate (not runnable) and 4
        // runnable threads, N1 holds 4. δ = 0: C1 400 > 500 fails, C2 at 4/4 holds: move.
        let mut t = Tables::new(0, 9, 2);
        set_tn(&mut t, 0, 1, 3.0);
        let mut m: Vec<Member> = (0..9).map(|i| Member { tid: i, sub: if i < 5 { 0 } else { 1 }, runnable: true, movable: true }).collect();
        // Runnable, the candidate makes L(0) = 5: C1 500 > 500 fails, C2 after 4/5 holds.
        assert_eq!(decide(&t, &m, &[0, 1], |_| 4, P125), Choice::Move { thread: 0, from: 0, to: 1 });
        m[0].runnable = false;
        assert_eq!(decide(&t, &m, &[0, 1], |_| 4, P125), Choice::Move { thread: 0, from: 0, to: 1 });
        // One more runnable thread on N1 (L = 4/5, δ = 0): C2 500 ≤ 500 holds; two more: 4/6 fails.
        m.push(Member { tid: 9, sub: 1, runnable: true, movable: true });
        let mut t10 = Tables::new(0, 11, 2);
        set_tn(&mut t10, 0, 1, 3.0);
        assert_eq!(decide(&t10, &m, &[0, 1], |_| 4, P125), Choice::Move { thread: 0, from: 0, to: 1 });
        m.push(Member { tid: 10, sub: 1, runnable: true, movable: true });
        assert_eq!(decide(&t10, &m, &[0, 1], |_| 4, P125), Choice::Nothing, "no sharing, so no swap either");
        // A pinned thread is never a candidate.
        m[0].movable = false;
        assert_eq!(candidate(&t10, &m, &[0, 1], 0.0), None);
    }
}
