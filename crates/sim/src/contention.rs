//! Load-dependent latency: queueing at memory controllers and interconnect links, solved as
//! a closed queueing network with Schweitzer–Bard approximate mean-value analysis.
//!
//! Every thread is a customer class. A thread with memory-level parallelism `m` keeps `m`
//! misses in flight, so its class has population `N_t = m·share` (a descheduled thread has
//! fewer misses in flight) and, per access, a pure delay of `m·compute + Σ_j f_j·L0[i][j]`
//! minus the service it receives at the queues, so an idle machine shows exactly the idle
//! latency `L0`. Queue stations are the memory controllers (a line occupies one for
//! `S = access_bytes / bandwidth`, random lines `S / random_efficiency`) and each direction of
//! each limited link (`S = access_bytes / capacity`; reads load memory → CPU, writes CPU →
//! memory). Schweitzer's approximation gives the response time at station k,
//! `R_tk = D_tk (1 + Q_k − Q_tk / N_t)`; throughputs follow from `X_t = N_t / (Z_t + Σ_k R_tk)`.
//! The loaded latency of an access of thread t to node j is `L0[i][j]` plus its queueing
//! waits `S·(Q − Q_t/N_t)` at the controller and on the links of its route.
//!
//! Properties that follow (and are tested): an idle machine has idle latency; a controller's
//! throughput never exceeds its bandwidth; with N threads saturating one controller the
//! latency tends to `N·S` (the closed-system asymptote), which is how the contended figures of
//! docs/machines.md (amd48) arise. The solve is warm-started each epoch from the previous one.

use numalab_core::machine::{Interconnect, LinkId};
use numalab_core::Machine;

mod demand;
pub use demand::{solve_holds, Demand};

pub struct Contention {
    n: usize,
    /// Stations: controllers 0..n, then links.
    k: usize,
    l0: Vec<f64>,
    /// Service time of one line at each station, ns.
    svc: Vec<f64>,
    /// Links crossed by data from memory node j to CPU node i (reads): `routes_rd[i*n + j]`.
    routes_rd: Vec<Vec<LinkId>>,
    /// Links crossed by data from CPU node i to memory node j (writes).
    routes_wr: Vec<Vec<LinkId>>,
    /// Per thread: where its queue lengths of the last solve are (the warm start of the next
    /// one and its own latencies). A thread takes its population's part `warm_part[t]` of its
    /// class's queues, so most keep only that: `warm_class[t]` is its class in the last solve
    /// and its queue at station s is `q_ck[c * k + s] · warm_part[t]`, made when read rather
    /// than copied out for every thread. `NO_CLASS`: it did not run, its queues are zero;
    /// `OWN_QUEUES`: they are in `q_t` (a thread that runs without population keeps the
    /// queues it had, and a part that is not finite would not give a zero queue at the
    /// stations its class does not load).
    warm_class: Vec<u32>,
    warm_part: Vec<f64>,
    /// Per thread and station: queue length contributed, of the threads with `OWN_QUEUES`.
    q_t: Vec<f64>,
    /// Per class of the last solve and station: its queue length (`q_ck[c * k + s]`, zero at
    /// the stations the class does not load).
    q_ck: Vec<f64>,
    /// Per station: total queue length.
    q: Vec<f64>,
    /// Per thread and station: service demand per access (scratch), of the last solve's
    /// leaders only; a class's other threads have their leader's.
    d_t: Vec<f64>,
    /// Per thread: loaded latency to each memory node, ns.
    lat_t: Vec<f64>,
    /// Per thread: throughput, accesses per ns.
    x_t: Vec<f64>,
    /// Per thread scratch of a solve: population (misses in flight), kept to avoid
    /// allocating at every epoch.
    pop: Vec<f64>,
    /// Classes of a solve (docs/simulator.md, "Contention"): threads whose demands are within
    /// the merge tolerance of a class's first thread share one customer class. `class_of[t]`
    /// is thread t's class (`NO_CLASS` when it is not running), `leader[c]` the thread whose
    /// demand stands for class c.
    class_of: Vec<u32>,
    leader: Vec<usize>,
    /// Scratch of the grouping: per node, the classes whose leader runs on it, in class order.
    classes_of_node: Vec<Vec<u32>>,
    /// Per class: population (sum of its threads'), throughput, and pure delay per access
    /// (its leader's).
    pop_c: Vec<f64>,
    /// `1 / pop_c`, made once per solve.
    inv_pop_c: Vec<f64>,
    x_c: Vec<f64>,
    z_c: Vec<f64>,
    /// Per class: the stations it loads (its leader's service demand above zero), in station
    /// order, with its service demand and queue length at each, class c's at
    /// `class_at[c]..class_at[c + 1]`. A class reaches few stations (its node's controller,
    /// the controllers it reads remotely and the links on the way), so iterating only these
    /// is most of the solve's saving, and keeping them contiguous lets the steps run over
    /// slices without looking a station up in a per-station table but for the totals `q`.
    class_at: Vec<usize>,
    station_c: Vec<u32>,
    d_c: Vec<f64>,
    q_c: Vec<f64>,
    /// Scratch of a solve's step: the station queues being summed for the next step.
    q_next: Vec<f64>,
    /// Scratch of a solve's step: each class's stretch at each station it loads (along
    /// `station_c`), and its response time per access, the sum of its stations' service
    /// demands times their stretch.
    w_c: Vec<f64>,
    r_c: Vec<f64>,
    /// Scratch of a solve's latencies: per node, the first thread on it without population.
    idle_of_node: Vec<usize>,
}

/// `class_of` of a thread that is not running this epoch.
const NO_CLASS: u32 = u32::MAX;
/// `warm_class` of a thread whose queues are in `q_t`.
const OWN_QUEUES: u32 = u32::MAX - 1;

impl Contention {
    pub fn new(m: &Machine, ic: &Interconnect, access_bytes: u64, threads: usize) -> Contention {
        let n = m.node_count();
        let mut l0 = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                l0[i * n + j] = m.latency_ns[i][j];
            }
        }
        let mut svc: Vec<f64> =
            m.nodes.iter().map(|node| if node.mem_bw_gbps > 0.0 { access_bytes as f64 / node.mem_bw_gbps } else { 0.0 }).collect();
        svc.extend(ic.links.iter().map(|l| access_bytes as f64 / l.capacity_gbps));
        let mut routes_rd = vec![Vec::new(); n * n];
        let mut routes_wr = vec![Vec::new(); n * n];
        for i in 0..n {
            for j in 0..n {
                routes_rd[i * n + j] = ic.route(j as u16, i as u16).to_vec();
                routes_wr[i * n + j] = ic.route(i as u16, j as u16).to_vec();
            }
        }
        let k = svc.len();
        let mut lat_t = Vec::with_capacity(threads * n);
        for _ in 0..threads {
            lat_t.extend_from_slice(&l0[..n]);
        }
        Contention {
            n,
            k,
            l0,
            svc,
            routes_rd,
            routes_wr,
            warm_class: vec![NO_CLASS; threads],
            warm_part: vec![0.0; threads],
            q_t: vec![0.0; threads * k],
            q_ck: Vec::with_capacity(threads * k),
            q: vec![0.0; k],
            d_t: vec![0.0; threads * k],
            lat_t,
            x_t: vec![0.0; threads],
            pop: Vec::with_capacity(threads),
            class_of: Vec::with_capacity(threads),
            leader: Vec::with_capacity(threads),
            classes_of_node: vec![Vec::with_capacity(threads); n],
            pop_c: Vec::with_capacity(threads),
            inv_pop_c: Vec::with_capacity(threads),
            x_c: Vec::with_capacity(threads),
            z_c: Vec::with_capacity(threads),
            class_at: Vec::with_capacity(threads + 1),
            station_c: Vec::with_capacity(threads * k),
            d_c: Vec::with_capacity(threads * k),
            q_c: Vec::with_capacity(threads * k),
            q_next: vec![0.0; k],
            w_c: Vec::with_capacity(threads * k),
            r_c: Vec::with_capacity(threads),
            idle_of_node: Vec::with_capacity(n),
        }
    }

    pub fn links(&self) -> usize {
        self.k - self.n
    }

    pub fn route_rd(&self, cpu_node: usize, mem_node: usize) -> &[LinkId] {
        &self.routes_rd[cpu_node * self.n + mem_node]
    }

    pub fn route_wr(&self, cpu_node: usize, mem_node: usize) -> &[LinkId] {
        &self.routes_wr[cpu_node * self.n + mem_node]
    }

    /// Loaded latency of thread t's accesses to each memory node, from the last solve.
    pub fn latency(&self, t: usize) -> &[f64] {
        &self.lat_t[t * self.n..(t + 1) * self.n]
    }

    /// The thread whose latencies thread t, on memory node `node` in the demands of the last
    /// solve, took in that solve: its class's leader (a class's threads see the same queues,
    /// docs/simulator.md "Contention"), or for a thread without population the first such
    /// thread of its node (it sees all of every queue). Threads with the same source have
    /// bitwise the same [`Contention::latency`].
    pub fn latency_source(&self, t: usize, node: usize) -> usize {
        match self.class_of.get(t) {
            Some(&c) if c != NO_CLASS => self.leader[c as usize],
            Some(_) => self.idle_of_node[node],
            None => t,
        }
    }

    /// Throughput of thread t in the last solve, accesses per ns.
    pub fn rate(&self, t: usize) -> f64 {
        self.x_t[t]
    }

    /// Customer classes of the last solve (threads merged by demand, running threads only).
    pub fn classes(&self) -> usize {
        self.leader.len()
    }

    /// What thread t's own queues add to its latency from CPU node `cpu_node` to memory node
    /// `mem_node` in the last solve, ns: Schweitzer's `S_k·Q_tk·(1 − 1/N_t)` summed over the
    /// controller and the links of the route, the part of those queues it waits behind that
    /// is its own (zero for a thread that did not run).
    pub fn own_wait_ns(&self, t: usize, cpu_node: usize, mem_node: usize) -> f64 {
        let (k, n) = (self.k, self.n);
        let queues = match self.warm_class.get(t) {
            Some(&OWN_QUEUES) => (&self.q_t[t * k..(t + 1) * k], 1.0),
            Some(&c) if c != NO_CLASS => (&self.q_ck[c as usize * k..(c as usize + 1) * k], self.warm_part[t]),
            _ => return 0.0,
        };
        let pop = self.pop.get(t).copied().unwrap_or(0.0);
        if pop <= 0.0 {
            return 0.0;
        }
        let own = |s: usize| self.svc[s] * queues.0[s] * queues.1;
        let links: f64 = self.routes_rd[cpu_node * n + mem_node].iter().map(|&l| own(n + l as usize)).sum();
        (own(mem_node) + links) * (1.0 - 1.0 / pop).max(0.0)
    }

    /// Utilisation of station k (controller j = station j) implied by the last solve.
    pub fn utilisation(&self, station: usize) -> f64 {
        let demand = |t: usize| match self.class_of.get(t) {
            Some(&c) if c != NO_CLASS => self.d_t[self.leader[c as usize] * self.k + station],
            _ => 0.0,
        };
        (0..self.x_t.len()).map(|t| self.x_t[t] * demand(t)).sum()
    }

    /// Schweitzer steps for these demands, warm-started from the last solve, until no class's
    /// throughput changes by more than `tolerance` (relative) or `max_iterations` are done.
    /// Threads whose demands are within `merge_tolerance` of each other ([`Demand::close_to`]:
    /// same node and CPU share; `None`: never merged) are one customer class of their summed population, which is
    /// exact for identical demands under Schweitzer's approximation: each of `c` identical
    /// classes sees `Q - Q_t/N_t`, and the merged one `Q - c·Q_t/(c·N_t)`, the same queue.
    /// Returns the iterations used.
    pub fn solve(
        &mut self,
        demands: &[Demand],
        max_iterations: u32,
        tolerance: f64,
        merge_tolerance: Option<f64>,
        extrapolate: bool,
    ) -> u32 {
        let (n, k) = (self.n, self.k);
        // Each running thread's population (misses in flight).
        let mut pop = std::mem::take(&mut self.pop);
        pop.clear();
        pop.resize(demands.len(), 0.0);
        for (t, d) in demands.iter().enumerate() {
            if d.share <= 0.0 {
                self.warm_class[t] = NO_CLASS;
                continue;
            }
            pop[t] = (1.0 / d.inv_mlp.max(1e-9)) * d.share;
            let c = self.warm_class[t];
            if pop[t] == 0.0 && c < OWN_QUEUES {
                // It runs in no class this time and keeps its queues: copy them out before
                // this solve's classes replace the last one's.
                let (part, last) = (self.warm_part[t], &self.q_ck[c as usize * k..(c as usize + 1) * k]);
                for (q, &q_c) in self.q_t[t * k..(t + 1) * k].iter_mut().zip(last) {
                    *q = q_c * part;
                }
                self.warm_class[t] = OWN_QUEUES;
            }
        }
        self.group(demands, &pop, merge_tolerance);
        // Service demands of each class at every station, and its pure delay per access, from
        // its leader's demand.
        self.class_at.clear();
        self.class_at.push(0);
        self.station_c.clear();
        self.d_c.clear();
        self.z_c.clear();
        for &t in &self.leader {
            let d = &demands[t];
            let dt = &mut self.d_t[t * k..(t + 1) * k];
            dt.iter_mut().for_each(|x| *x = 0.0);
            let m = 1.0 / d.inv_mlp.max(1e-9);
            let i = d.node;
            let mut delay = m * d.compute_ns;
            for (j, &f) in d.frac.iter().enumerate() {
                if f == 0.0 {
                    continue;
                }
                let mut served = self.svc[j] * d.svc_mult;
                dt[j] += f * self.svc[j] * d.svc_mult;
                for &l in &self.routes_rd[i * n + j] {
                    let s = self.svc[n + l as usize];
                    dt[n + l as usize] += f * (1.0 - d.write_frac) * s;
                    served += (1.0 - d.write_frac) * s;
                }
                for &l in &self.routes_wr[i * n + j] {
                    let s = self.svc[n + l as usize];
                    dt[n + l as usize] += f * d.write_frac * s;
                    served += d.write_frac * s;
                }
                delay += f * (self.l0[i * n + j] - served).max(0.0);
            }
            self.z_c.push(delay);
            for (s, &ds) in dt.iter().enumerate() {
                if ds > 0.0 {
                    self.station_c.push(s as u32);
                    self.d_c.push(ds);
                }
            }
            self.class_at.push(self.station_c.len());
        }
        // A class's queues start from the sum of its threads' last queues (the warm start), on
        // the stations it loads: one it no longer loads holds none of its queue at the fixed
        // point, so it starts there instead of letting the damped iteration halve it away.
        let classes = self.leader.len();
        self.pop_c.clear();
        self.pop_c.resize(classes, 0.0);
        self.x_c.clear();
        self.x_c.resize(classes, 0.0);
        self.q_c.clear();
        self.q_c.resize(self.station_c.len(), 0.0);
        for (t, &pop_t) in pop.iter().enumerate() {
            let c = self.class_of[t];
            if c == NO_CLASS {
                continue;
            }
            let c = c as usize;
            self.pop_c[c] += pop_t;
            self.x_c[c] += self.x_t[t];
            let at = self.class_at[c]..self.class_at[c + 1];
            let (queues, stations) = (&mut self.q_c[at.clone()], &self.station_c[at]);
            match self.warm_class[t] {
                // Its queues are zero: the sums start at +0.0 and add no -0.0, so adding a zero
                // changes none of them.
                NO_CLASS => {}
                OWN_QUEUES => {
                    let q_t = &self.q_t[t * k..(t + 1) * k];
                    for (q, &s) in queues.iter_mut().zip(stations) {
                        *q += q_t[s as usize];
                    }
                }
                last_c => {
                    let (part, last) = (self.warm_part[t], &self.q_ck[last_c as usize * k..(last_c as usize + 1) * k]);
                    for (q, &s) in queues.iter_mut().zip(stations) {
                        *q += last[s as usize] * part;
                    }
                }
            }
        }
        // Multiplying by the reciprocal in the steps: a division per station and step was
        // most of a step's cost, and one per class and step still a tenth of a solve.
        self.inv_pop_c.clear();
        self.inv_pop_c.extend(self.pop_c.iter().map(|&pop_c| 1.0 / pop_c));
        self.q.iter_mut().for_each(|x| *x = 0.0);
        for (&s, &q) in self.station_c.iter().zip(&self.q_c) {
            self.q[s as usize] += q;
        }
        let mut used = 0;
        let mut q_next = std::mem::take(&mut self.q_next);
        q_next.resize(k, 0.0);
        self.w_c.clear();
        self.w_c.resize(self.station_c.len(), 0.0);
        self.r_c.clear();
        self.r_c.resize(classes, 0.0);
        // The last two steps' changes, for the extrapolation below.
        let (mut change_1, mut change_2) = (f64::NAN, f64::NAN);
        while used < max_iterations {
            used += 1;
            let mut change: f64 = 0.0;
            q_next.iter_mut().for_each(|x| *x = 0.0);
            // Extrapolation (docs/simulator.md, "Contention", extrapolated steps): after two
            // plain steps whose changes shrank by a steady ratio `r`, this step moves every
            // queue `1/(1 − r)` times its damped update, about to where the plain steps
            // would converge; the next two steps are plain again.
            let ratio_1 = change_1 / change_2;
            let extrapolate_by = (extrapolate && ratio_1 > 0.3 && ratio_1 < 0.98).then(|| 1.0 / (1.0 - ratio_1));
            // Three passes over the classes, each value made by the same operations in the same
            // order as one pass would. A class's response time is a sum along its stations, a
            // chain of dependent additions followed by a division: made class after class in
            // one pass, each class's update waited for its own chain. Made for all classes
            // first, the chains of consecutive classes, which do not depend on each other,
            // overlap in the processor.
            let q = &self.q[..];
            let mut start = 0;
            for ((&end, &inv_pop), r_c) in self.class_at[1..].iter().zip(&self.inv_pop_c).zip(self.r_c.iter_mut()) {
                let stations = &self.station_c[start..end];
                let dc = &self.d_c[start..end];
                let qc = &self.q_c[start..end];
                // Schweitzer's stretch `1 + Q_k − Q_ck/N_c` of each station the class loads,
                // from the last step's queues: the class's response time now, its new queues
                // below.
                let w_c = &mut self.w_c[start..end];
                start = end;
                let mut r_sum = 0.0;
                for ((w, &s), (&d, &q_cs)) in w_c.iter_mut().zip(stations).zip(dc.iter().zip(qc)) {
                    *w = 1.0 + (q[s as usize] - q_cs * inv_pop).max(0.0);
                    r_sum += d * *w;
                }
                *r_c = r_sum;
            }
            for (((&pop_c, &z_c), &r_sum), x_c) in self.pop_c.iter().zip(&self.z_c).zip(&self.r_c).zip(self.x_c.iter_mut()) {
                let x = pop_c / (z_c + r_sum).max(1e-12);
                change = change.max((x - *x_c).abs() / x);
                *x_c = x;
            }
            let mut start = 0;
            for (&end, &x) in self.class_at[1..].iter().zip(&self.x_c) {
                let stations = &self.station_c[start..end];
                let dc = &self.d_c[start..end];
                let w_c = &self.w_c[start..end];
                let qc = &mut self.q_c[start..end];
                start = end;
                // New queue lengths, damped (an undamped Jacobi step makes many symmetric
                // classes overshoot together and oscillate), summed into the next step's
                // station totals as they are made: per station, the classes in the same order
                // as a separate sum. A class holds no queue at the stations it does not load
                // (the warm start above).
                for ((&w, &s), (&d, q)) in w_c.iter().zip(stations).zip(dc.iter().zip(qc.iter_mut())) {
                    let cur = *q;
                    let damped = 0.5 * cur + 0.5 * (x * d * w);
                    let updated = extrapolate_by.map_or(damped, |by| (cur + (damped - cur) * by).max(0.0));
                    *q = updated;
                    q_next[s as usize] += updated;
                }
            }
            std::mem::swap(&mut self.q, &mut q_next);
            if change <= tolerance {
                break;
            }
            (change_2, change_1) = if extrapolate_by.is_none() { (change_1, change) } else { (f64::NAN, f64::NAN) };
        }
        self.q_next = q_next;
        // The classes' queues at every station, zero where they load none, for the threads'
        // parts.
        self.q_ck.clear();
        self.q_ck.resize(classes * k, 0.0);
        for c in 0..classes {
            let at = self.class_at[c]..self.class_at[c + 1];
            let q_ck = &mut self.q_ck[c * k..(c + 1) * k];
            for (&q, &s) in self.q_c[at.clone()].iter().zip(&self.station_c[at]) {
                q_ck[s as usize] = q;
            }
        }
        // Each thread takes its population's part of its class's throughput and queues.
        for (t, &pop_t) in pop.iter().enumerate() {
            let c = self.class_of[t];
            if c == NO_CLASS {
                self.x_t[t] = 0.0;
                continue;
            }
            let part = pop_t / self.pop_c[c as usize];
            self.x_t[t] = self.x_c[c as usize] * part;
            if part.is_finite() {
                // A zero queue times a finite part (never negative) is zero, as it should.
                (self.warm_class[t], self.warm_part[t]) = (c, part);
            } else {
                let c = c as usize;
                let q_t = &mut self.q_t[t * k..(t + 1) * k];
                q_t.iter_mut().for_each(|x| *x = 0.0);
                let at = self.class_at[c]..self.class_at[c + 1];
                for (&q, &s) in self.q_c[at.clone()].iter().zip(&self.station_c[at]) {
                    q_t[s as usize] = q * part;
                }
                self.warm_class[t] = OWN_QUEUES;
            }
        }
        // Loaded latency per thread: idle latency plus queueing waits on the way.
        // A class's threads see the same queues: they take the leader's latencies. A thread
        // without population sees all of every queue, so its latencies depend on its node
        // only: the first such thread of a node computes them, the others take its.
        let mut idle_of_node = std::mem::take(&mut self.idle_of_node);
        idle_of_node.clear();
        idle_of_node.resize(n, usize::MAX);
        for (t, d) in demands.iter().enumerate() {
            let c = self.class_of[t];
            if c != NO_CLASS && self.leader[c as usize] != t {
                let lead = self.leader[c as usize];
                self.lat_t.copy_within(lead * n..(lead + 1) * n, t * n);
                continue;
            }
            let i = d.node;
            if pop[t] > 0.0 {
                // Its queues, where the distribution above left them (times 1.0 is exact).
                let (queues, part) = match self.warm_class[t] {
                    OWN_QUEUES => (&self.q_t[t * k..(t + 1) * k], 1.0),
                    c => (&self.q_ck[c as usize * k..(c as usize + 1) * k], self.warm_part[t]),
                };
                for j in 0..n {
                    let mut w = 0.0;
                    let own = |s: usize| queues[s] * part / pop[t];
                    w += self.svc[j] * d.svc_mult * (self.q[j] - own(j)).max(0.0);
                    for &l in &self.routes_rd[i * n + j] {
                        let s = n + l as usize;
                        w += self.svc[s] * (self.q[s] - own(s)).max(0.0);
                    }
                    self.lat_t[t * n + j] = self.l0[i * n + j] + w;
                }
                continue;
            }
            let first = idle_of_node[i];
            if first != usize::MAX {
                self.lat_t.copy_within(first * n..(first + 1) * n, t * n);
                continue;
            }
            idle_of_node[i] = t;
            for j in 0..n {
                let mut w = 0.0;
                w += self.svc[j] * self.q[j];
                for &l in &self.routes_rd[i * n + j] {
                    w += self.svc[n + l as usize] * self.q[n + l as usize];
                }
                self.lat_t[t * n + j] = self.l0[i * n + j] + w;
            }
        }
        self.idle_of_node = idle_of_node;
        self.pop = pop;
        used
    }

    /// Sort the running threads into classes: each joins the first class whose leader's
    /// demand it is close to, in thread order (deterministic), or leads a new one.
    fn group(&mut self, demands: &[Demand], pop: &[f64], merge_tolerance: Option<f64>) {
        self.class_of.clear();
        self.leader.clear();
        // A class's leader has the thread's node (`close_to` requires it), so only the classes
        // of that node are looked at; each node's list is in class order, so the first close
        // one is the first close one of all classes.
        self.classes_of_node.iter_mut().for_each(Vec::clear);
        for (t, d) in demands.iter().enumerate() {
            if pop[t] == 0.0 {
                self.class_of.push(NO_CLASS);
                continue;
            }
            let of_node = &mut self.classes_of_node[d.node];
            // The CPU share first: most leaders of a node differ in it, and comparing it here
            // is cheaper than a call of `close_to`, which requires it equal anyway.
            let found = merge_tolerance.and_then(|tol| {
                of_node.iter().copied().find(|&c| {
                    let e = &demands[self.leader[c as usize]];
                    e.share == d.share && e.close_to(d, tol)
                })
            });
            let c = found.unwrap_or_else(|| {
                let c = self.leader.len() as u32;
                self.leader.push(t);
                of_node.push(c);
                c
            });
            self.class_of.push(c);
        }
    }
}

#[cfg(test)]
mod tests;
