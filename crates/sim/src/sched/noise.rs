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

#[derive(Clone)]
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
            self.start_next(rng, cpus, &idle_sibling);
        }
    }

    /// Start the next task: its CPU, length and kind are drawn in this order, then the time
    /// of the one after it. Returns the task.
    fn start_next(
        &mut self,
        rng: &mut StreamRng,
        cpus: usize,
        idle_sibling: &impl Fn(usize, f64, &[NoiseTask]) -> Option<usize>,
    ) -> NoiseTask {
        let at = self.next_ns;
        let mut cpu = rng.random_range(0..cpus);
        let dur = -(1.0 - rng.random::<f64>()).ln() * self.mean_ns;
        let bound = rng.random::<f64>() < self.bound_share;
        if !bound {
            if let Some(idle) = idle_sibling(cpu, at, &self.tasks) {
                cpu = idle;
            }
        }
        let task = NoiseTask { cpu, start_ns: at, end_ns: at + dur };
        self.tasks.push(task);
        self.next_ns = at + self.interarrival(rng);
        task
    }

    /// When the first task arriving before `until` starts on a CPU for which `lands(cpu)`
    /// holds (infinite if none does), found by drawing ahead on copies: the tasks `arrive`
    /// will start are the same, since their draws come from `rng` alone in that order.
    pub fn first_landing(
        &self,
        until: f64,
        rng: &StreamRng,
        cpus: usize,
        idle_sibling: impl Fn(usize, f64, &[NoiseTask]) -> Option<usize>,
        lands: impl Fn(usize) -> bool,
    ) -> f64 {
        let (mut ahead, mut rng) = (self.clone(), rng.clone());
        while ahead.next_ns < until {
            let task = ahead.start_next(&mut rng, cpus, &idle_sibling);
            if lands(task.cpu) {
                return task.start_ns;
            }
        }
        f64::INFINITY
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
