fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let only = std::env::var("ONLY").unwrap_or_default();
    for b in numalab_sim::bench::scenarios(quick).unwrap().into_iter().filter(|b| b.name.contains(only.as_str())) {
        let r = numalab_sim::bench::measure(&b).unwrap();
        println!(
            "{} {:.1} M/s bare {:.1} M/s ratio {:.2} events {} in {:.2}s",
            r.name,
            r.events_per_s / 1e6,
            r.bare_loop_events_per_s / 1e6,
            r.ratio_to_bare,
            r.events,
            r.seconds
        );
    }
}
