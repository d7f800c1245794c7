//! `numalab`: NUMA and tiered-memory placement — simulate, model, observe.

mod cmd;
mod engines;
mod output;
mod scenario;
mod study;

use clap::{Parser, Subcommand};
use output::OutputOpts;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "numalab",
    version,
    about = "NUMA and tiered-memory placement: simulate policies, model machines, observe Linux",
    long_about = "numalab evaluates page and thread placement policies (first-touch, interleave, \
bind, preferred, weighted interleave, Xen's 1 GiB round-robin) on NUMA and tiered-memory machines. `sim` and `compare` run \
the deterministic simulator; `model` runs analytic models; `topo` and `profile` observe this Linux host; `run` launches a program under a policy; `attach` places a running one."
)]
struct Cli {
    #[command(flatten)]
    output: OutputOpts,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List built-in machines, workloads or policies.
    List(cmd::list::ListArgs),
    /// Show a machine as TOML, or import this host's topology.
    #[command(subcommand)]
    Machine(cmd::machine::MachineCmd),
    /// Show a workload preset as TOML.
    #[command(subcommand)]
    Workload(cmd::workload::WorkloadCmd),
    /// Simulate one policy on one machine and workload, over several seeded runs.
    Sim(cmd::sim::SimArgs),
    /// Simulate several policies on the same machine and workload and compare them.
    Compare(cmd::compare::CompareArgs),
    /// Run a study: machines × workloads × policies × a parameter grid × runs, cached and
    /// resumable, shardable across machines (docs/study.md).
    Study(cmd::study::StudyArgs),
    /// Measure the simulator's throughput (simulated memory accesses per second).
    Bench(cmd::bench::BenchArgs),
    /// Run built-in probes (STREAM triad, pointer chase, loaded latency) on a simulated machine
    /// and print them beside the machine's published measurements (docs/calibration.md).
    Calibrate(cmd::calibrate::CalibrateArgs),
    /// Analytic models: mean-value analysis and the roofline.
    #[command(subcommand)]
    Model(cmd::model::ModelCmd),
    /// This host's NUMA topology: nodes, CPUs, memory, distances, tiers, numastat.
    Topo(cmd::topo::TopoArgs),
    /// Profile a process: perf counters and NUMA state over time.
    Profile(cmd::profile::ProfileArgs),
    /// Launch a program under a static placement policy (memory policy and CPU nodes), as
    /// numactl does, through the same policy code the simulator runs.
    Run(cmd::run::RunArgs),
    /// Apply a static placement policy to a running process: move its resident pages.
    Attach(cmd::attach::AttachArgs),
    /// Charts and a self-contained HTML report from numalab JSON results (docs/report.md).
    Report(cmd::report::ReportArgs),
    /// VM churn run: VMs under hypervisor-level placement, guests that free and reuse frames
    /// (docs/vm.md).
    Vm(cmd::vm::VmArgs),
}

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    // `--out -` is standard output, as for most command-line tools, not a file named "-".
    if cli.output.out.as_deref() == Some(std::path::Path::new("-")) {
        cli.output.out = None;
    }
    let result = match &cli.command {
        Command::List(a) => cmd::list::run(a, &cli.output),
        Command::Machine(c) => cmd::machine::run(c, &cli.output),
        Command::Workload(c) => cmd::workload::run(c, &cli.output),
        Command::Sim(a) => cmd::sim::run(a, &cli.output),
        Command::Compare(a) => cmd::compare::run(a, &cli.output),
        Command::Study(a) => cmd::study::run(a, &cli.output),
        Command::Bench(a) => cmd::bench::run(a, &cli.output),
        Command::Calibrate(a) => cmd::calibrate::run(a, &cli.output),
        Command::Model(c) => cmd::model::run(c, &cli.output),
        Command::Topo(a) => cmd::topo::run(a, &cli.output),
        Command::Profile(a) => cmd::profile::run(a, &cli.output),
        Command::Run(a) => cmd::run::run(a, &cli.output),
        Command::Attach(a) => cmd::attach::run(a, &cli.output),
        Command::Report(a) => cmd::report::run(a, &cli.output),
        Command::Vm(a) => cmd::vm::run(a, &cli.output),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A profiled command's own exit status is passed through, as `perf stat` does.
            if let Some(cmd::profile::ChildStatus(code)) = e.downcast_ref::<cmd::profile::ChildStatus>() {
                return ExitCode::from(*code);
            }
            eprintln!("error: {e:#}");
            ExitCode::from(exit_code(&e))
        }
    }
}

/// 2 for usage errors (bad flags, values, files or settings: the user can fix the command),
/// 1 for runtime failures (I/O, the kernel, perf, the simulator itself) and a failed
/// `calibrate --check`. An error is a
/// runtime failure when its chain holds one of those; everything else the commands reject
/// is a usage error.
fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<scenario::Usage>()) {
        return 2;
    }
    let runtime = e.chain().any(|c| {
        c.is::<std::io::Error>()
            || c.is::<cmd::calibrate::CheckFailed>()
            || c.is::<numalab_linux::session::SessionError>()
            || c.is::<numalab_linux::act::pages::MoveError>()
            || matches!(c.downcast_ref::<numalab_linux::LinuxError>(), Some(numalab_linux::LinuxError::Io { .. }))
            || matches!(
                c.downcast_ref::<numalab_sim::SimError>(),
                Some(numalab_sim::SimError::Internal(_) | numalab_sim::SimError::OutOfMemory { .. } | numalab_sim::SimError::Io(_))
            )
    });
    if runtime {
        1
    } else {
        2
    }
}
