//! `numalab list machines|workloads|policies`.

use crate::output::{emit, OutputOpts, Table};
use anyhow::Result;
use numalab_core::machine::presets as machines;
use numalab_policy::{PolicyKind, REGISTRY};
use numalab_workload::presets as workloads;
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum What {
    Machines,
    Workloads,
    Policies,
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// What to list.
    #[arg(value_enum)]
    pub what: What,
}

pub fn run(a: &ListArgs, out: &OutputOpts) -> Result<()> {
    match a.what {
        What::Machines => {
            let mut t = Table::new(["name", "nodes", "sockets", "cores", "memory_gib", "tiers", "description"]);
            let mut items = Vec::new();
            for name in machines::names() {
                let m = machines::load(name)?;
                let mut tiers: Vec<&str> = m.nodes.iter().map(|n| n.tier.as_str()).collect();
                tiers.dedup();
                t.row([
                    name.to_string(),
                    m.node_count().to_string(),
                    m.sockets.to_string(),
                    m.total_cores().to_string(),
                    format!("{:.1}", m.total_mem_bytes() as f64 / (1u64 << 30) as f64),
                    tiers.join("+"),
                    m.description.clone(),
                ]);
                items.push(json!({"name": name, "nodes": m.node_count(), "sockets": m.sockets, "cores": m.total_cores(), "mem_bytes": m.total_mem_bytes(), "description": m.description}));
            }
            emit(out, &json!({"schema": "numalab.list/1", "machines": items}), &t)
        }
        What::Workloads => {
            let mut t = Table::new(["name", "mimics"]);
            let mut items = Vec::new();
            for (name, what, _) in workloads::all() {
                t.row([name.to_string(), what.to_string()]);
                items.push(json!({"name": name, "mimics": what}));
            }
            emit(out, &json!({"schema": "numalab.list/1", "workloads": items}), &t)
        }
        What::Policies => {
            let mut t = Table::new(["name", "kind", "summary"]);
            let mut items = Vec::new();
            for e in REGISTRY {
                let kind = match e.kind {
                    PolicyKind::Static => "static",
                    PolicyKind::Dynamic => "dynamic",
                };
                t.row([e.name.to_string(), kind.to_string(), e.summary.to_string()]);
                items.push(json!({"name": e.name, "kind": kind, "summary": e.summary, "default_config": serde_json::to_value(e.default_config()).unwrap_or_default()}));
            }
            let aliases: Vec<String> = crate::scenario::POLICY_ALIASES
                .iter()
                .map(|(a, p, extra)| {
                    let set: Vec<String> = extra.iter().map(|(k, v)| format!("{k} = \"{v}\"")).collect();
                    if set.is_empty() {
                        format!("{a} = {p}")
                    } else {
                        format!("{a} = {p} with {}", set.join(", "))
                    }
                })
                .collect();
            t.notes.push(format!("numactl names accepted as aliases: {}", aliases.join("; ")));
            emit(out, &json!({"schema": "numalab.list/1", "policies": items}), &t)
        }
    }
}
