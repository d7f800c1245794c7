//! HyDM's control-loop state and its three pure steps (docs/policies/hydm.md): the window
//! history `W`, the fast-tier set `F`, the misprediction list `V` and the window counter `g`;
//! selection by predicted arithmetic intensity with the page-fault filter; the capacity
//! threshold; and the flops check that picks an application to roll back.
//!
//! Nothing here knows the simulator: records come in, a [`Step`] goes out.

use super::roofline::{intensity, predict};
use crate::decision::{Outcome, Refusal, SpaceId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What one application did in one window (deltas), and where its memory was at its end.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Record {
    /// Floating-point operations.
    pub fp: f64,
    /// Memory references.
    pub pref: u64,
    /// Page faults.
    pub pf: u64,
    /// Resident bytes, all tiers.
    pub rss_bytes: u64,
    /// Resident bytes on the fast tier.
    pub fast_bytes: u64,
}

/// One monitoring window: its global index and a record per running application.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Window {
    pub index: u64,
    pub apps: BTreeMap<SpaceId, Record>,
}

/// What the migration step decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// No candidate.
    Idle,
    /// Move every page of the application to the fast tier.
    Migrate(SpaceId),
    /// The candidate does not fit under the threshold and nothing is rolled back.
    Blocked { candidate: SpaceId },
    /// The candidate does not fit; `back` returns to the slow tier (and joins `V`).
    Rollback { candidate: SpaceId, back: SpaceId },
}

/// `fast_used + rss ≤ t × capacity` (the source's isMigrationPossible).
pub fn migration_possible(fast_used_bytes: u64, rss_bytes: u64, fast_capacity_bytes: u64, threshold: f64) -> bool {
    (fast_used_bytes as f64 + rss_bytes as f64) <= threshold * fast_capacity_bytes as f64
}

#[derive(Clone, Debug, PartialEq)]
pub struct LoopState {
    /// Global window counter: the index of `W_0`.
    pub g: u64,
    /// `W_0` first.
    pub windows: VecDeque<Window>,
    /// `F`: applications on the fast tier, with the index of the window after which they moved.
    pub fast: BTreeMap<SpaceId, u64>,
    /// `V`: applications whose move brought no improvement; never selected again.
    pub mispredicted: BTreeSet<SpaceId>,
    /// Per application in `F`: the bytes HyDM's own moves put on the fast tier, as the
    /// outcomes reported them (docs/policies/hydm.md, "Outcomes").
    pub moved_bytes: BTreeMap<SpaceId, u64>,
    history: usize,
}

/// A move HyDM decided whose outcome it has not seen yet: the step, and for a rollback the
/// window index the application had in `F` before the step took it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    pub step: Step,
    pub fast_since: Option<u64>,
}

impl LoopState {
    pub fn new(history: u32) -> LoopState {
        LoopState {
            g: 0,
            windows: VecDeque::new(),
            fast: BTreeMap::new(),
            mispredicted: BTreeSet::new(),
            moved_bytes: BTreeMap::new(),
            history: history.max(1) as usize,
        }
    }

    /// Monitoring: the records of the window just ended, one per running application. An
    /// application no longer running leaves `F` and `V` (its id may be reused).
    pub fn push_window(&mut self, apps: BTreeMap<SpaceId, Record>) {
        self.g += 1;
        self.fast.retain(|a, _| apps.contains_key(a));
        self.moved_bytes.retain(|a, _| apps.contains_key(a));
        self.mispredicted.retain(|a| apps.contains_key(a));
        self.windows.push_front(Window { index: self.g, apps });
        self.windows.truncate(self.history);
    }

    /// The retained window with global index `k`.
    pub fn window(&self, k: u64) -> Option<&Window> {
        let j = self.g.checked_sub(k)?;
        self.windows.get(usize::try_from(j).ok()?)
    }

    /// Predicted intensity of `a` for the next window: least squares over the retained
    /// windows with a finite intensity for it, `W_j` at `x = −j`.
    pub fn predicted_intensity(&self, a: SpaceId, bytes_per_ref: u64) -> Option<f64> {
        let pts: Vec<(f64, f64)> = self
            .windows
            .iter()
            .enumerate()
            .filter_map(|(j, w)| {
                let r = w.apps.get(&a)?;
                let ai = intensity(r.fp, r.pref, bytes_per_ref);
                ai.is_finite().then_some((-(j as f64), ai))
            })
            .collect();
        predict(&pts)
    }

    /// Candidates not on the fast tier, by predicted intensity ascending, then id.
    pub fn ranked(&self, bytes_per_ref: u64) -> Vec<(f64, SpaceId)> {
        let Some(w0) = self.windows.front() else { return Vec::new() };
        let mut s: Vec<(f64, SpaceId)> = w0
            .apps
            .keys()
            .filter(|a| !self.fast.contains_key(a))
            .filter_map(|&a| Some((self.predicted_intensity(a, bytes_per_ref)?, a)))
            .collect();
        s.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        s
    }

    /// Mean page faults of the applications recorded in `W_0`.
    pub fn pf_avg(&self) -> f64 {
        match self.windows.front() {
            Some(w) if !w.apps.is_empty() => w.apps.values().map(|r| r.pf as f64).sum::<f64>() / w.apps.len() as f64,
            _ => 0.0,
        }
    }

    /// Selection: the first ranked application not in `V`, with no more page faults than the
    /// mean, and (if `max_intensity` is given) a predicted intensity below it.
    pub fn select(&self, bytes_per_ref: u64, max_intensity: Option<f64>) -> Option<SpaceId> {
        let w0 = self.windows.front()?;
        let avg = self.pf_avg();
        self.ranked(bytes_per_ref)
            .into_iter()
            .filter(|(_, a)| !self.mispredicted.contains(a))
            .filter(|(_, a)| w0.apps[a].pf as f64 <= avg)
            .find(|(ai, _)| max_intensity.is_none_or(|m| *ai < m))
            .map(|(_, a)| a)
    }

    /// The oldest-moved application in `F` whose flops never grew by more than `eps` from one
    /// window to the next since it moved (the first window after the move compared with the
    /// last one before). Applications with no retained window after their move are skipped,
    /// and so are those HyDM's moves put nothing on the fast tier for (moved bytes settled at
    /// 0: a promotion refused `already_there`): rolling one back would move pages that first
    /// touch put on the fast tier, which HyDM never took, and would not undo a move of its
    /// own (docs/policies/hydm.md, "Migration, threshold and rollback").
    pub fn check_flops(&self, eps: f64) -> Option<SpaceId> {
        let mut order: Vec<(u64, SpaceId)> =
            self.fast.iter().filter(|(a, _)| self.moved_bytes.get(a) != Some(&0)).map(|(&a, &k)| (k, a)).collect();
        order.sort_unstable();
        order.into_iter().map(|(_, a)| a).find(|&a| {
            let moved = self.fast[&a];
            let post: Vec<u64> = self.windows.iter().map(|w| w.index).filter(|&k| k > moved).collect();
            if post.is_empty() {
                return false;
            }
            let fp = |k: u64| self.window(k).and_then(|w| w.apps.get(&a)).map(|r| r.fp);
            let improved = post.iter().any(|&k| match (fp(k), fp(k - 1)) {
                (Some(now), Some(before)) => now > (1.0 + eps) * before,
                _ => false,
            });
            !improved
        })
    }

    /// Bytes HyDM believes its moves put on the fast tier, over every application in `F`.
    pub fn believed_fast_bytes(&self) -> u64 {
        self.moved_bytes.values().sum()
    }

    /// The step [`LoopState::migrate_step`] just took, to settle once its move's outcome is
    /// known (`None` for a step that moves nothing).
    pub fn pending(&self, step: Step, fast_before: &BTreeMap<SpaceId, u64>) -> Option<Pending> {
        match step {
            Step::Migrate(_) => Some(Pending { step, fast_since: None }),
            Step::Rollback { back, .. } => Some(Pending { step, fast_since: fast_before.get(&back).copied() }),
            Step::Idle | Step::Blocked { .. } => None,
        }
    }

    /// Bring `F`, `V` and the moved bytes in line with what a step's move actually did
    /// (docs/policies/hydm.md, "Outcomes"). `migrate_step` recorded the step as if its move
    /// had happened in full:
    ///
    /// - a migration applied in full moved the application's resident bytes not yet on the
    ///   fast tier (from `W_0`); a partial one moved `moved_pages`, and the application stays
    ///   in `F` with those; `already_there` (every placed page was on the fast tier) keeps it
    ///   in `F` with nothing moved; any other refusal takes it out of `F`.
    /// - a rollback applied in full stands. A partial one left pages on the fast tier: the
    ///   application returns to `F` with its old window index (so a later rollback takes the
    ///   rest) and its moved bytes less what came back. A refusal for lack of room returns it
    ///   to `F` the same way; `already_there` (nothing on the fast tier) stands. It stays in
    ///   `V` either way: the misprediction was judged.
    /// - a space that exited is out of `F` and `V` (its memory is gone, its id may be reused).
    pub fn settle(&mut self, pending: Pending, outcome: Outcome, page_bytes: u64) {
        match pending.step {
            Step::Migrate(a) => match outcome {
                Outcome::Applied => {
                    let moved = self.windows.front().and_then(|w| w.apps.get(&a)).map_or(0, |r| r.rss_bytes.saturating_sub(r.fast_bytes));
                    self.moved_bytes.insert(a, moved);
                }
                Outcome::Partial { moved_pages, .. } => {
                    self.moved_bytes.insert(a, moved_pages * page_bytes);
                }
                Outcome::Refused(Refusal::AlreadyThere) => {
                    self.moved_bytes.insert(a, 0);
                }
                Outcome::Refused(r) => {
                    self.fast.remove(&a);
                    self.moved_bytes.remove(&a);
                    if r == Refusal::SpaceExited {
                        self.mispredicted.remove(&a);
                    }
                }
            },
            Step::Rollback { back, .. } => {
                let restore = |s: &mut LoopState| {
                    if let Some(k) = pending.fast_since {
                        s.fast.insert(back, k);
                    }
                };
                match outcome {
                    Outcome::Applied | Outcome::Refused(Refusal::AlreadyThere) => {
                        self.moved_bytes.remove(&back);
                    }
                    Outcome::Partial { moved_pages, .. } => {
                        restore(self);
                        let left = self.moved_bytes.get(&back).copied().unwrap_or(0).saturating_sub(moved_pages * page_bytes);
                        self.moved_bytes.insert(back, left);
                    }
                    Outcome::Refused(Refusal::SpaceExited) => {
                        self.mispredicted.remove(&back);
                        self.moved_bytes.remove(&back);
                    }
                    Outcome::Refused(_) => restore(self),
                }
            }
            Step::Idle | Step::Blocked { .. } => {}
        }
    }

    /// The migration step for candidate `b`: move it if it fits under the threshold (and
    /// record it in `F`); otherwise roll back what [`LoopState::check_flops`] names, if
    /// anything (it joins `V` and leaves `F`), and leave `b` where it is this window.
    pub fn migrate_step(&mut self, b: Option<SpaceId>, fast_used_bytes: u64, fast_capacity_bytes: u64, threshold: f64, eps: f64) -> Step {
        let Some(b) = b else { return Step::Idle };
        let rss = self.windows.front().and_then(|w| w.apps.get(&b)).map_or(0, |r| r.rss_bytes);
        if migration_possible(fast_used_bytes, rss, fast_capacity_bytes, threshold) {
            self.fast.insert(b, self.g);
            return Step::Migrate(b);
        }
        match self.check_flops(eps) {
            Some(r) => {
                self.mispredicted.insert(r);
                self.fast.remove(&r);
                Step::Rollback { candidate: b, back: r }
            }
            None => Step::Blocked { candidate: b },
        }
    }
}
