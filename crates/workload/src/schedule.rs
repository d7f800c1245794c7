//! The order of a run's steps: the first touches, the once phases, then the iterations over
//! the others, with each step's barrier and the regions' repartition offsets (semantics:
//! docs/workloads.md, "Generator semantics").

use crate::compile::{limits, CompiledPhase};
use crate::error::WorkloadError;
use crate::layout::RegionNames;
use crate::program::{P2p, Step};
use crate::schema::*;
use crate::work::Geo;

/// A run's steps, and per step the regions' repartition offsets (empty when no phase
/// repartitions) and a `runs` phase's synth phase.
pub(crate) struct Schedule {
    pub(crate) steps: Vec<Step>,
    pub(crate) offsets: Vec<Vec<u64>>,
    pub(crate) synth_k: Vec<Option<u64>>,
}

/// Bound the schedule before building it: a `runs` phase makes K steps per repeat, and
/// repartition keeps one offset per region per step.
pub(crate) fn check_size(file: &WorkloadFile, origin: &str, phases: &[CompiledPhase], regions: usize) -> Result<(), WorkloadError> {
    let bad = |m: String| WorkloadError::invalid(origin, m);
    let h = &file.workload;
    let mut total_steps: u64 = 1;
    for (ph, cp) in file.phase.iter().zip(phases) {
        let per_repeat = cp.synth.as_ref().map_or(1, |sy| sy.k);
        let passes = ph.repeat as u64 * if ph.once { 1 } else { h.run.iterations as u64 };
        total_steps = total_steps.saturating_add(passes.saturating_mul(per_repeat));
    }
    if total_steps > limits::MAX_STEPS {
        return Err(bad(format!(
            "the run has {total_steps} steps (phases × repeat × iterations, × synth phases of a `runs` phase): at most {}",
            limits::MAX_STEPS
        )));
    }
    let repartitions = file.phase.iter().any(|p| p.repartition.as_ref().is_some_and(|r| r.every > 0));
    if repartitions && total_steps.saturating_mul(regions as u64) > limits::MAX_STEPS * 8 {
        return Err(bad(format!(
            "repartition over {total_steps} steps and {} regions: at most {} step-regions",
            regions,
            limits::MAX_STEPS * 8
        )));
    }
    Ok(())
}

/// The steps of the run, in order.
pub(crate) fn schedule(
    file: &WorkloadFile,
    origin: &str,
    phases: &[CompiledPhase],
    geos: &[Geo],
    names: &RegionNames,
    threads: u32,
) -> Result<Schedule, WorkloadError> {
    let bad = |m: String| WorkloadError::invalid(origin, m);
    let h = &file.workload;
    let mut steps = vec![Step { phase: None, phase_name: "init".into(), iteration: 0, repeat: 0, barrier_after: true, p2p: None }];
    let order: Vec<(usize, u32)> = file
        .phase
        .iter()
        .enumerate()
        .filter(|(_, p)| p.once)
        .map(|(i, _)| (i, 0))
        .chain((0..h.run.iterations).flat_map(|it| file.phase.iter().enumerate().filter(|(_, p)| !p.once).map(move |(i, _)| (i, it))))
        .collect();
    let mut repeats_done = vec![0u64; file.phase.len()];
    let any_repartition = file.phase.iter().any(|p| p.repartition.as_ref().is_some_and(|r| r.every > 0));
    let mut offsets_now = vec![0u64; geos.len()];
    let mut offsets = Vec::new();
    if any_repartition {
        offsets.push(offsets_now.clone());
    }
    let mut repart: Vec<Option<(usize, u64, u64)>> = Vec::new();
    for ph in &file.phase {
        repart.push(match &ph.repartition {
            Some(r) if r.every > 0 => {
                let li = names
                    .index(&r.region)
                    .ok_or_else(|| bad(format!("phase '{}': repartition names unknown region '{}'", ph.name, r.region)))?;
                if geos[li].partition != Partition::Block {
                    return Err(bad(format!("phase '{}': repartition needs a block-partitioned region", ph.name)));
                }
                let s = (r.frac * geos[li].pages as f64 / threads as f64 + 0.5).floor() as u64;
                Some((li, r.every as u64, s))
            }
            _ => None,
        });
    }
    let mut synth_k: Vec<Option<u64>> = vec![None];
    for (pi, it) in order {
        let ph = &file.phase[pi];
        if let Some(sy) = &phases[pi].synth {
            // One step per synth phase; `repeat` counts synth phases across the phase's repeats.
            for r in 0..ph.repeat {
                for k in 0..sy.k {
                    let last = k + 1 == sy.k;
                    let barrier_after = match ph.barrier {
                        Barrier::EachRun => true,
                        Barrier::EachRepeat => last,
                        Barrier::End => last && r + 1 == ph.repeat,
                        _ => false,
                    };
                    let repeat = (r as u64 * sy.k + k).min(u32::MAX as u64) as u32;
                    steps.push(Step { phase: Some(pi), phase_name: ph.name.clone(), iteration: it, repeat, barrier_after, p2p: None });
                    synth_k.push(Some(k));
                    if any_repartition {
                        offsets.push(offsets_now.clone());
                    }
                }
            }
            continue;
        }
        for k in 0..ph.repeat {
            let last = k + 1 == ph.repeat;
            let barrier_after = match ph.barrier {
                Barrier::None => !ph.parallel && last,
                Barrier::End | Barrier::P2pNeighbours | Barrier::P2pNeighboursRev => last,
                Barrier::EachRepeat | Barrier::EachRun => true,
            };
            let p2p = match ph.barrier {
                Barrier::P2pNeighbours => Some(P2p { chunks: ph.chunks.max(1), reverse: false }),
                Barrier::P2pNeighboursRev => Some(P2p { chunks: ph.chunks.max(1), reverse: true }),
                _ => None,
            };
            steps.push(Step { phase: Some(pi), phase_name: ph.name.clone(), iteration: it, repeat: k, barrier_after, p2p });
            synth_k.push(None);
            if any_repartition {
                offsets.push(offsets_now.clone());
            }
            repeats_done[pi] += 1;
            if let Some((li, every, s)) = repart[pi] {
                if repeats_done[pi].is_multiple_of(every) {
                    offsets_now[li] += s;
                }
            }
        }
    }
    Ok(Schedule { steps, offsets, synth_k })
}
