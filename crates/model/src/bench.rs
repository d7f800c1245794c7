//! Throughput benchmark of the local/remote model, for `numalab bench`.

use crate::classes::preset;
use crate::local_remote::{solve, Hardware, RefMix};
use crate::policy::{map, PolicyKind, PolicyParams};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Run `iterations` complete local/remote model solves on the GP1000 parameters and the built-in
/// `dunx-synth-8c` class set: each solve maps a policy (cycling through all six) to
/// `p_l, q_m, q_r, q_c` and solves the §4 wait fixed point for a varying `tau`. Returns the number
/// of solves and the wall time they took (setup excluded). Allocates nothing in the loop.
pub fn bench_local_remote(iterations: u64) -> (u64, Duration) {
    let hw = Hardware::gp1000();
    let classes = preset("dunx-synth-8c").expect("built-in class preset is valid");
    let mut params = PolicyParams::default();
    params.errors[crate::classes::ClassKind::Ss.index()] = 0.5;
    params.errors[crate::classes::ClassKind::Sp.index()] = 0.1;
    let mut acc = 0.0;
    let start = Instant::now();
    for i in 0..iterations {
        let kind = PolicyKind::ALL[(i % 6) as usize];
        let tau = 0.5 + (i % 1000) as f64 * 0.01;
        let p = map(black_box(&hw), black_box(&classes), kind, &params).expect("valid inputs");
        let mix = RefMix { tau, p_l: p.p_l, q_m: p.q_m, q_r: p.q_r, q_c: p.q_c, q_o: 0.0, c_o: 0.0 };
        acc += solve(&hw, &mix).expect("converges").r;
    }
    let elapsed = start.elapsed();
    black_box(acc);
    (iterations, elapsed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn bench_runs_and_counts() {
        let (n, d) = super::bench_local_remote(600);
        assert_eq!(n, 600);
        assert!(d.as_nanos() > 0);
    }
}
