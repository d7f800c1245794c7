//! Background tasks (docs/scheduler.md, "Background noise"). Two kinds [A]:
//! - per-CPU kernel threads (bound kworkers, ksoftirqd): they run on the CPU they belong to,
//!   preempting whatever runs there, and can never be moved;
//! - unbound tasks (daemons, unbound kworkers): they wake on an idle CPU of the node where they
//!   were woken if there is one (`select_idle_sibling`), else where they were woken.
//!
//! Neither kind is ever moved by the balancer, and neither counts in the load the balancer
//! compares: a task of a few hundred microseconds adds almost nothing to a CPU's PELT load
//! average, whose half-life is 32 ms.

use numalab_core::rng::StreamRng;
use rand::Rng;

#[derive(Clone, Copy, Debug)]
pub struct NoiseTask {
    pub cpu: usize,
    pub start_ns: f64,
    pub end_ns: f64,
}

pub struct Noise {
    /// Arrivals per nanosecond over the whole machine.
    rate_per_ns: f64,
    mean_ns: f64,
    bound_share: f64,
    next_ns: f64,
    pub tasks: Vec<NoiseTask>,
}

impl Noise {
    pub fn new(rate_per_cpu_hz: f64, mean_us: f64, bound_share: f64, cpus: usize, rng: &mut StreamRng) -> Noise {
        let mut n = Noise {
            rate_per_ns: rate_per_cpu_hz * cpus as f64 * 1e-9,
            mean_ns: mean_us * 1e3,
            bound_share,
            next_ns: 0.0,
            tasks: Vec::new(),
        };
        n.next_ns = n.interarrival(rng);
        n
    }

    fn interarrival(&self, rng: &mut StreamRng) -> f64 {
        if self.rate_per_ns <= 0.0 || self.mean_ns <= 0.0 {
            return f64::INFINITY;
        }
        -(1.0 - rng.random::<f64>()).ln() / self.rate_per_ns
    }

    /// Start the tasks that arrive before `end`; `idle_sibling(cpu, at, running)` answers an
    /// idle CPU of `cpu`'s node (the woken task's sibling search), or `None` to stay.
    pub fn arrive(&mut self, end: f64, rng: &mut StreamRng, cpus: usize, idle_sibling: impl Fn(usize, f64, &[NoiseTask]) -> Option<usize>) {
        while self.next_ns < end {
            let at = self.next_ns;
            let mut cpu = rng.random_range(0..cpus);
            let dur = -(1.0 - rng.random::<f64>()).ln() * self.mean_ns;
            let bound = rng.random::<f64>() < self.bound_share;
            if !bound {
                if let Some(idle) = idle_sibling(cpu, at, &self.tasks) {
                    cpu = idle;
                }
            }
            self.tasks.push(NoiseTask { cpu, start_ns: at, end_ns: at + dur });
            self.next_ns = at + self.interarrival(rng);
        }
    }

    /// When the next background task arrives (infinite when there is no noise).
    pub fn next_arrival_ns(&self) -> f64 {
        self.next_ns
    }

    /// Set when the next task arrives: with the generator's state saved at the same point as
    /// `next_arrival_ns` was read, the draws from there repeat (a fast-forward window that ends
    /// early draws again up to its end).
    pub fn set_next_arrival_ns(&mut self, next_ns: f64) {
        self.next_ns = next_ns;
    }

    /// Forget tasks that ended before `start`.
    pub fn expire(&mut self, start: f64) {
        self.tasks.retain(|t| t.end_ns > start);
    }

    /// The task running on `cpu` at `at`, if any (the latest started).
    pub fn running_on(&self, cpu: usize, at: f64) -> Option<&NoiseTask> {
        self.tasks.iter().filter(|t| t.cpu == cpu && t.start_ns <= at && t.end_ns > at).max_by(|a, b| a.start_ns.total_cmp(&b.start_ns))
    }
}
