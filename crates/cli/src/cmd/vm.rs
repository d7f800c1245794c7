//! `numalab vm`: a VM churn run (docs/vm.md, "Churn runs"): VMs on one machine under
//! hypervisor-level placement, guests that allocate, touch and free frames. The run lives in
//! `numalab_sim::vm`; this module parses and prints. JSON contract `numalab.vm-run/1`.

use crate::output::{emit, OutputOpts, Table};
use anyhow::Result;
use numalab_sim::vm::{run as run_vms, VmRunConfig};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

pub const VM_RUN_SCHEMA: &str = "numalab.vm-run/1";

#[derive(clap::Args, Debug)]
pub struct VmArgs {
    /// The run file: `[hypervisor]`, `[[vm]]` (with `[vm.queue]`) and one `[[guest]]` per VM.
    pub file: PathBuf,
    /// A machine preset (`numalab list machines`) or a machine TOML file.
    #[arg(long, default_value = "amd48")]
    pub machine: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(a: &VmArgs, out: &OutputOpts) -> Result<()> {
    let machine = Arc::new(crate::scenario::load_machine(&a.machine)?);
    let text = crate::scenario::read_user_file_as(&a.file, "vm run file ")?;
    let cfg = VmRunConfig::from_toml_str(&text)?;
    let vms = run_vms(machine.clone(), &cfg, a.seed)?;
    let mut t = Table::new(["vm", "policy", "queue", "home", "local_ratio", "makespan_ms", "queue_ms", "placed", "unbacked", "deliveries"]);
    for m in &vms {
        t.row([
            m.vm.to_string(),
            m.static_policy.to_string(),
            if m.queue_active { "on" } else { "off" }.to_string(),
            format!("{:?}{}", m.home_nodes, if m.pinned { "" } else { " (unpinned)" }),
            format!("{:.3}", m.local_ratio),
            format!("{:.3}", m.makespan_ns / 1e6),
            format!("{:.3}", m.queue_ns / 1e6),
            m.access_placements.to_string(),
            m.frames_unbacked.to_string(),
            m.queue_deliveries.to_string(),
        ]);
    }
    let doc = json!({
        "schema": VM_RUN_SCHEMA,
        "machine": machine.name,
        "seed": a.seed,
        "config": cfg,
        "vms": vms,
    });
    emit(out, &doc, &t)
}
