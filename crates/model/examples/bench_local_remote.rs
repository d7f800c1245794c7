//! Measure local/remote model solves per second:
//! `cargo run --release -p numalab-model --example bench_local_remote [ITERATIONS]`.

fn main() {
    let iterations: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let (solves, elapsed) = numalab_model::bench_local_remote(iterations);
    let rate = solves as f64 / elapsed.as_secs_f64();
    println!("{solves} local/remote solves (policy mapping + wait fixed point) in {elapsed:.3?}: {rate:.0} solves/s");
}
