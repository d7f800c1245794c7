//! The inner epoch starts of a fast-forward window, replayed as the epoch-by-epoch loop runs
//! them (docs/simulator.md, "Fast-forward"; docs/scheduler.md).

use super::{Move, Scheduler, TaskState};

impl Scheduler {
    /// The inner epoch starts of the window `[start, end)`, after `start` was run and made the
    /// moves `moved`: what the epoch-by-epoch loop does there while no thread changes its CPU.
    /// A CPU's idle state changes only at the first inner start for a CPU a move left or
    /// reached, at the epoch start at or after a background task's start or end on it, and at
    /// the one at or after a nap's (the loop sees a thread asleep from there), so only those
    /// starts are visited. At each, the CPUs that changed fold their idle transitions.
    ///
    /// The window ends early at a start where the loop would do more: where a newidle balance
    /// of a CPU that went idle would find a thread to pull (one that finds none leaves no
    /// trace), or where a thread falls asleep on a CPU it shares with another thread, whose
    /// share would change. No periodic balance falls due inside a window
    /// ([`Scheduler::next_event`] ends it). Background tasks arrive segment by segment
    /// between the naps, each placed from the threads' CPUs and states of its segment, as the
    /// loop places them, and an early end keeps only those that arrive before it. Returns the
    /// window's end.
    pub(super) fn replay_inner(
        &mut self,
        start: f64,
        end: f64,
        epoch_ns: f64,
        states: &[TaskState],
        naps: &[(usize, f64)],
        moved: &[Move],
    ) -> f64 {
        let epochs = ((end - start) / epoch_ns).round();
        let index = |at: f64| ((at - start) / epoch_ns).ceil();
        // (epoch index, thread) of the naps the loop sees at an inner start, in time order.
        let mut asleep_at: Vec<(u64, usize)> =
            naps.iter().map(|&(t, at)| (index(at), t)).filter(|&(k, _)| k >= 1.0 && k < epochs).map(|(k, t)| (k as u64, t)).collect();
        asleep_at.sort_unstable();
        let mut states_now: Vec<TaskState> = states.to_vec();
        // (epoch index, CPU) of every change still to visit. The CPUs that `start`'s moves
        // left or reached change their idle state at the first inner start.
        let mut marks: Vec<(u64, usize)> = moved.iter().flat_map(|m| [(1, m.from as usize), (1, m.to as usize)]).collect();
        let mut marked_tasks = 0;
        let balance_idle = !self.pinned && self.cfg.idle_balance;
        let (mut cpus, mut was) = (Vec::new(), Vec::new());
        let mut next_nap = 0;
        let mut segment_start = 1.0;
        // The CPUs of the naps at the segment's start, given back if the window ends there.
        let mut napped: Vec<usize> = Vec::new();
        loop {
            // The segment up to the next nap, or to the end. Where the draws stood at its start,
            // to draw again up to an early end.
            let segment_end = asleep_at.get(next_nap).map_or(epochs, |&(k, _)| k as f64);
            let (rng, next_ns, drawn) = (self.rng.clone(), self.noise.next_arrival_ns(), self.noise.tasks.len());
            self.arrive(start + segment_end * epoch_ns);
            // The grid point at or after each new task's start and end, and the one after in
            // case rounding put the time a hair past its grid point (a visit where nothing
            // changed changes nothing).
            for task in &self.noise.tasks[marked_tasks..] {
                for at in [task.start_ns, task.end_ns] {
                    let k = index(at);
                    for k in [k, k + 1.0] {
                        if k >= segment_start && k < epochs {
                            marks.push((k as u64, task.cpu));
                        }
                    }
                }
            }
            marked_tasks = self.noise.tasks.len();
            marks.sort_unstable();
            marks.dedup();
            let visit = marks.partition_point(|&(k, _)| (k as f64) < segment_end);
            for group in marks[..visit].chunk_by(|a, b| a.0 == b.0) {
                let at = start + group[0].0 as f64 * epoch_ns;
                cpus.clear();
                cpus.extend(group.iter().map(|&(_, c)| c));
                was.clear();
                was.extend(cpus.iter().map(|&c| self.noise_now[c]));
                for &c in &cpus {
                    self.noise_now[c] = u32::from(self.noise.running_on(c, at).is_some());
                }
                let pulls = balance_idle
                    && cpus
                        .iter()
                        .any(|&c| self.idle(c) && self.idle_since[c].is_none() && self.newidle_pull(c, at, &states_now).is_some());
                if pulls {
                    for (&c, &n) in cpus.iter().zip(&was) {
                        self.noise_now[c] = n;
                    }
                    if group[0].0 as f64 == segment_start {
                        napped.iter().for_each(|&c| self.load[c] = 1);
                    }
                    self.noise.tasks.truncate(drawn);
                    self.noise.set_next_arrival_ns(next_ns);
                    self.rng = rng;
                    self.arrive(at);
                    return at;
                }
                for &c in &cpus {
                    self.idle_transition(c, at);
                }
            }
            marks.drain(..visit);
            if segment_end >= epochs {
                return end;
            }
            // The naps seen at the segment's end: each leaves its CPU, which the loop visits
            // there; one that leaves another thread on its CPU ends the window.
            let k = segment_end as u64;
            napped.clear();
            while let Some(&(_, t)) = asleep_at.get(next_nap).filter(|&&(at_k, _)| at_k == k) {
                let cpu = self.cpu_of[t] as usize;
                if self.load[cpu] != 1 {
                    napped.iter().for_each(|&c| self.load[c] = 1);
                    return start + segment_end * epoch_ns;
                }
                states_now[t] = TaskState::Sleeping;
                self.load[cpu] = 0;
                napped.push(cpu);
                marks.push((k, cpu));
                next_nap += 1;
            }
            segment_start = segment_end;
        }
    }
}
