//! What each thread asks of the memory system in an epoch, and when the last contention solve
//! still holds for it (docs/simulator.md, "Contention").

/// One thread's demand for the next epoch.
#[derive(Debug, Default)]
pub struct Demand {
    pub node: usize,
    /// CPU share this epoch (0 = not running).
    pub share: f64,
    /// Compute time per access, ns.
    pub compute_ns: f64,
    /// Mean of 1/MLP over the thread's accesses.
    pub inv_mlp: f64,
    /// Mean controller occupancy multiplier (1 for streams, 1/random_efficiency for random).
    pub svc_mult: f64,
    /// Fraction of the thread's accesses going to each memory node (sums to 1).
    pub frac: Vec<f64>,
    /// Fraction of accesses that are writes.
    pub write_frac: f64,
}

impl Clone for Demand {
    fn clone(&self) -> Demand {
        let mut d = Demand::default();
        d.clone_from(self);
        d
    }

    /// Field by field, so the access mix reuses its buffer: the engine keeps the demands of
    /// the last solve (docs/simulator.md, "Contention") by copying every thread's at each
    /// solve, and a derived `clone_from` would allocate a new mix for each.
    fn clone_from(&mut self, source: &Demand) {
        let Demand { node, share, compute_ns, inv_mlp, svc_mult, frac, write_frac } = source;
        (self.node, self.share, self.compute_ns, self.inv_mlp, self.svc_mult) = (*node, *share, *compute_ns, *inv_mlp, *svc_mult);
        self.frac.clone_from(frac);
        self.write_frac = *write_frac;
    }
}

impl Demand {
    /// Whether `self` is within `tol` of `other`: the same node and CPU share, access and
    /// write fractions within `tol` (absolute), compute, MLP and service multiplier within
    /// `tol` (relative).
    pub fn close_to(&self, other: &Demand, tol: f64) -> bool {
        self.share == other.share && self.mix_close_to(other, tol)
    }

    /// [`Demand::close_to`] without the CPU share.
    fn mix_close_to(&self, other: &Demand, tol: f64) -> bool {
        let rel = |a: f64, b: f64| (a - b).abs() <= tol * a.abs().max(b.abs());
        self.node == other.node
            && rel(self.compute_ns, other.compute_ns)
            && rel(self.inv_mlp, other.inv_mlp)
            && rel(self.svc_mult, other.svc_mult)
            && (self.write_frac - other.write_frac).abs() <= tol
            && self.frac.len() == other.frac.len()
            && self.frac.iter().zip(&other.frac).all(|(a, b)| (a - b).abs() <= tol)
    }
}

/// Whether a solve made for the demands `solved` still holds for `now` (the fast engine's
/// reuse, docs/simulator.md "Contention"): every thread keeps its node and whether it runs,
/// its access mix, compute, MLP and service multiplier stay within `tol` ([`Demand::close_to`]
/// without the CPU share), and the machine's population, the misses in flight of all threads
/// (`N_t = m·share`), moves by at most `population_tol` of the solved one in sum. A thread
/// that loses part of its CPU to a background task changes its own population only; in a
/// closed network no station's queue grows by a larger fraction than the total population,
/// so the latencies move by at most about `population_tol`.
pub fn solve_holds(now: &[Demand], solved: &[Demand], tol: f64, population_tol: f64) -> bool {
    if now.len() != solved.len() {
        return false;
    }
    let (mut moved, mut total) = (0.0, 0.0);
    for (a, b) in now.iter().zip(solved) {
        if (a.share > 0.0) != (b.share > 0.0) || !a.mix_close_to(b, tol) {
            return false;
        }
        let pop = |d: &Demand| d.share / d.inv_mlp.max(1e-9);
        moved += (pop(a) - pop(b)).abs();
        total += pop(b);
    }
    moved <= population_tol * total
}
