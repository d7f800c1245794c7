//! The policy driver: it owns the policy and its decision buffer, hands the policy events with
//! a [`View`] that borrows only the simulation state, carries out the decisions in order,
//! delivers their follow-up events (a scan step's outcome, a thread that changed node), and
//! writes the decision log (docs/simulator.md, "Policies and decisions").

use crate::engine::World;
use crate::log::DecisionLog;
use crate::view::View;
use crate::SimError;
use numalab_core::NodeId;
use numalab_policy::{AccessSample, Decision, DynPolicy, EventRef, Outcome, PlaceRequest, Refusal, ScanStepDone, ThreadMigrated};

/// An event produced while carrying out decisions or balancing, delivered to the policy next.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FollowUp {
    ScanStep(ScanStepDone),
    Migrated(ThreadMigrated),
}

pub(crate) struct Driver<'l> {
    policy: Box<dyn DynPolicy>,
    out: Vec<Decision>,
    /// Outcomes of the decisions being carried out (reused buffer).
    outcomes: Vec<Outcome>,
    log: Option<DecisionLog<'l>>,
}

impl<'l> Driver<'l> {
    pub fn new(policy: Box<dyn DynPolicy>, log: Option<DecisionLog<'l>>) -> Driver<'l> {
        Driver { policy, out: Vec::new(), outcomes: Vec::new(), log }
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    pub fn policy_mut(&mut self) -> &mut dyn DynPolicy {
        self.policy.as_mut()
    }

    /// An access sample for the policy (docs/simulator.md, "Access sampling").
    pub fn sample(&mut self, sample: &AccessSample) {
        self.policy.on_sample(sample);
    }

    /// The placement hook (pages are local to their space).
    pub fn place(&mut self, req: &PlaceRequest, w: &World) -> Result<NodeId, numalab_policy::OutOfMemory> {
        self.policy.place(req, &w.mem)
    }

    /// Extra time the last placement costs the faulting thread (a VM guest's queue appends).
    pub fn take_place_cost_ns(&mut self) -> f64 {
        self.policy.take_place_cost_ns()
    }

    /// Call one hook, carry out its decisions for `actor` (the thread in whose context the
    /// hook ran, which pays their cost), then deliver follow-up events. Returns the time
    /// charged to the actor. `in_fault` marks decisions taken while handling a hinting fault
    /// (their page migrations count as `numa_pages_migrated`).
    pub fn dispatch(
        &mut self,
        w: &mut World,
        cause: EventRef,
        actor: usize,
        in_fault: bool,
        hook: impl FnOnce(&mut dyn DynPolicy, &View, &mut Vec<Decision>),
    ) -> f64 {
        let mut out = std::mem::take(&mut self.out);
        hook(self.policy.as_mut(), &View { w }, &mut out);
        let charged = self.carry_out(w, cause, actor, in_fault, &out);
        out.clear();
        self.out = out;
        self.deliver_follow_ups(w);
        charged
    }

    fn carry_out(&mut self, w: &mut World, cause: EventRef, actor: usize, in_fault: bool, decisions: &[Decision]) -> f64 {
        let mut charged = 0.0;
        let mut outcomes = std::mem::take(&mut self.outcomes);
        outcomes.clear();
        for d in decisions {
            w.note_decision(d);
            let (outcome, ns) = match *d {
                Decision::ScanStep { space, thread, pages } => (self.scan_step(w, space, thread, pages), 0.0),
                _ => w.apply(d, actor, in_fault),
            };
            charged += ns;
            if let Outcome::Refused(_) = outcome {
                w.counters.refused_decisions += 1;
            }
            if let Some(log) = &mut self.log {
                log.record(w.now_ns(actor), &cause, d, &outcome);
            }
            outcomes.push(outcome);
        }
        if !decisions.is_empty() {
            self.policy.on_outcomes(&cause, decisions, &outcomes);
        }
        self.outcomes = outcomes;
        charged
    }

    /// Deliver queued follow-up events until none is left (a policy's answer to one may queue
    /// another).
    pub fn deliver_follow_ups(&mut self, w: &mut World) {
        while let Some(ev) = w.follow_ups.pop_front() {
            match ev {
                FollowUp::ScanStep(step) => {
                    let cause = EventRef::ScanStep { space: step.space, thread: step.thread, sequence: step.sequence };
                    let t = step.thread as usize;
                    let ns = self.dispatch(w, cause, t, false, |p, v, o| p.on_scan_step(&step, v, o));
                    w.charge_thread(t, ns);
                }
                FollowUp::Migrated(m) => {
                    let cause = EventRef::ThreadMigrated { thread: m.thread, from_node: m.from_node, to_node: m.to_node };
                    let t = m.thread as usize;
                    let ns = self.dispatch(w, cause, t, false, |p, v, o| p.on_thread_migrated(&m, v, o));
                    w.charge_thread(t, ns);
                }
            }
        }
    }

    /// One step of a space's hinting scanner (Linux's `task_numa_work`; docs/simulator.md,
    /// "The hinting scanner"). The scan itself lives in [`World::scan_step`]; the driver lends
    /// it the policy's `should_unmap`.
    fn scan_step(&mut self, w: &mut World, space: u32, thread: u32, pages: u64) -> Outcome {
        let policy = self.policy.as_mut();
        match w.scan_step(space, thread, pages, &mut |s, p, n| policy.should_unmap(s, p, n)) {
            Ok(()) => Outcome::Applied,
            Err(r) => Outcome::Refused(r),
        }
    }

    pub fn finish(self) -> Result<(), SimError> {
        match self.log {
            Some(log) => log.finish(),
            None => Ok(()),
        }
    }
}

/// `Refusal` for a thread id that is out of range.
pub(crate) fn check_thread(threads: u32, t: u32) -> Result<(), Refusal> {
    if t < threads {
        Ok(())
    } else {
        Err(Refusal::NoSuchTarget)
    }
}
