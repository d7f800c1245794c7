//! VM-mode settings (docs/vm.md), as TOML tables mirroring the components:
//! `[hypervisor]` for the host, `[vm]` for one virtual machine and `[vm.queue]` for its
//! page free/alloc notification queue. Unknown keys are errors; every value is range-checked
//! with a typed error (docs/vm.md, "Settings").

use super::credit::{CreditConfig, VcpuScheduler};
use super::error::VmError;
use crate::carrefour::CarrefourConfig;
use crate::statics::{FtFallback, Hole, Indexing};
use serde::{Deserialize, Serialize};

/// The static placement policy of a VM (docs/vm.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StaticKind {
    FirstTouch,
    /// The default in VM mode, as in the source's hypervisor (§2.1).
    #[default]
    #[serde(rename = "round-4k")]
    Round4K,
    #[serde(rename = "round-1g")]
    Round1G,
}

impl StaticKind {
    /// Every kind, in declaration order (the VM conformance suite runs each).
    pub const ALL: [StaticKind; 3] = [StaticKind::FirstTouch, StaticKind::Round4K, StaticKind::Round1G];

    /// The kind's place in [`StaticKind::ALL`] (a new kind must be added to both).
    pub fn index(self) -> usize {
        match self {
            StaticKind::FirstTouch => 0,
            StaticKind::Round4K => 1,
            StaticKind::Round1G => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StaticKind::FirstTouch => "first-touch",
            StaticKind::Round4K => "round-4k",
            StaticKind::Round1G => "round-1g",
        }
    }
}

/// `[hypervisor]`: settings of the host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HypervisorConfig {
    /// A node is full when placing would leave fewer free frames than this (§1, default 0).
    pub node_reserve_frames: u64,
    /// Home-node selection searches every node subset up to this many nodes, greedily above
    /// (§5.1, default 16).
    pub r1g_exhaustive_max_nodes: u32,
    /// `[hypervisor.carrefour]`: Carrefour run by the hypervisor over every VM's placement
    /// (docs/vm.md, "Carrefour in the hypervisor"), with the keys of docs/policies/carrefour.md
    /// but `base`, `min_vaddr` and `max_vaddr`. `None`: no Carrefour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub carrefour: Option<CarrefourConfig>,
    /// How vCPUs get physical CPUs (docs/vm.md, "The hypervisor's vCPU scheduler"): pinned
    /// by the home-node selection (default) or Xen's credit scheduler.
    #[serde(skip_serializing_if = "is_pinned")]
    pub vcpu_scheduler: VcpuScheduler,
    /// `[hypervisor.credit]`: the credit scheduler's settings (read only under `credit`).
    #[serde(skip_serializing_if = "is_default_credit")]
    pub credit: CreditConfig,
}

fn is_pinned(s: &VcpuScheduler) -> bool {
    *s == VcpuScheduler::Pinned
}

fn is_default_credit(c: &CreditConfig) -> bool {
    *c == CreditConfig::default()
}

impl Default for HypervisorConfig {
    fn default() -> Self {
        HypervisorConfig {
            node_reserve_frames: 0,
            r1g_exhaustive_max_nodes: 16,
            carrefour: None,
            vcpu_scheduler: VcpuScheduler::Pinned,
            credit: CreditConfig::default(),
        }
    }
}

/// Largest `r1g_exhaustive_max_nodes`: 2^20 subsets at most [ours].
pub const MAX_EXHAUSTIVE_NODES: u32 = 20;

impl HypervisorConfig {
    pub fn validate(&self) -> Result<(), VmError> {
        if !(1..=MAX_EXHAUSTIVE_NODES).contains(&self.r1g_exhaustive_max_nodes) {
            return Err(VmError::Config {
                key: "hypervisor.r1g_exhaustive_max_nodes",
                message: format!("{} is outside 1..={MAX_EXHAUSTIVE_NODES}", self.r1g_exhaustive_max_nodes),
            });
        }
        self.credit.validate()?;
        if let Some(c) = &self.carrefour {
            let bad = |message: String| Err(VmError::Config { key: "hypervisor.carrefour", message });
            if let Some(b) = c.base {
                return bad(format!("base = \"{}\": the base of the hypervisor's Carrefour is each VM's own placement", b.as_str()));
            }
            if c.min_vaddr.is_some() || c.max_vaddr.is_some() {
                return bad("min_vaddr and max_vaddr bound guest virtual addresses, which a hypervisor does not see".into());
            }
            if let Err(e) = c.validate("carrefour") {
                return bad(e.to_string());
            }
        }
        Ok(())
    }
}

/// `[vm.queue]`: the page free/alloc notification queue of §7.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// The queue runs while the VM's static policy is first-touch (§10 `queue_enabled`);
    /// `false` never runs it ("first-touch without the queue").
    pub enabled: bool,
    /// Independent queues, selected by the low bits of the frame number (power of two).
    pub partitions: u32,
    /// Entries per partition before it is delivered.
    pub capacity: u32,
    /// Deliver every partition this often; `None` = only when full or on a policy switch.
    pub flush_ms: Option<f64>,
    /// Cost of one delivery (one guest→hypervisor call) [A].
    pub call_cost_ns: f64,
    /// Cost per entry the hypervisor processes [A].
    pub entry_cost_ns: f64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig { enabled: true, partitions: 4, capacity: 512, flush_ms: None, call_cost_ns: 1000.0, entry_cost_ns: 200.0 }
    }
}

/// Largest partition count [ours]: more than one queue per CPU brings nothing.
pub const MAX_PARTITIONS: u32 = 4096;
/// Largest partition capacity [ours].
pub const MAX_CAPACITY: u32 = 1 << 20;

impl QueueConfig {
    pub fn validate(&self) -> Result<(), VmError> {
        let bad = |key, message: String| Err(VmError::Config { key, message });
        if !self.partitions.is_power_of_two() || self.partitions > MAX_PARTITIONS {
            return bad("vm.queue.partitions", format!("{} is not a power of two in 1..={MAX_PARTITIONS}", self.partitions));
        }
        if !(1..=MAX_CAPACITY).contains(&self.capacity) {
            return bad("vm.queue.capacity", format!("{} is outside 1..={MAX_CAPACITY}", self.capacity));
        }
        if let Some(ms) = self.flush_ms {
            if !(ms.is_finite() && ms > 0.0) {
                return bad("vm.queue.flush_ms", format!("{ms} is not a positive number of milliseconds"));
            }
        }
        for (key, v) in [("vm.queue.call_cost_ns", self.call_cost_ns), ("vm.queue.entry_cost_ns", self.entry_cost_ns)] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(key, format!("{v} is not a finite non-negative number of nanoseconds"));
            }
        }
        Ok(())
    }
}

/// `[vm]`: one virtual machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VmConfig {
    pub vcpus: u32,
    /// Guest-physical span, holes included; a multiple of the page size.
    pub mem_bytes: u64,
    pub static_policy: StaticKind,
    pub ft_fallback: FtFallback,
    pub r4k_indexing: Indexing,
    /// Guest-physical ranges that are not RAM: never backed, under every static policy [I].
    pub r1g_holes: Vec<Hole>,
    /// Freed guest pages hold no content, so any free machine frame may back them (§3).
    pub guest_free_pages_are_content_free: bool,
    pub queue: QueueConfig,
    /// What the guest OS did with its memory before the measured workload (timed runs,
    /// docs/vm.md, "Guest frame reuse").
    pub guest: GuestConfig,
}

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig {
            vcpus: 1,
            mem_bytes: 1 << 30,
            static_policy: StaticKind::default(),
            ft_fallback: FtFallback::default(),
            r4k_indexing: Indexing::default(),
            r1g_holes: Vec::new(),
            guest_free_pages_are_content_free: true,
            queue: QueueConfig::default(),
            guest: GuestConfig::default(),
        }
    }
}

/// A preset of guest behaviour before the measured workload (docs/vm.md, "Guest frame
/// reuse"; docs/workloads.md, "Guest behaviour presets").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuestPreset {
    /// A freshly booted guest: no process ran before the workload.
    Fresh,
    /// A guest booted to run one long-lived HPC job: boot and the job launcher ran a few
    /// short processes on one vCPU, then the job starts.
    HpcJobLike,
    /// A guest that has been building software (`make -j<vcpus>`): thousands of short
    /// compiler processes, one per vCPU at a time, on every vCPU.
    BuildLike,
}

/// Guest behaviour as numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestChurn {
    /// Processes that ran and exited since boot, before the workload.
    pub processes: u32,
    /// Memory each of them touched (rounded up to whole pages).
    pub process_bytes: u64,
    /// How many ran at once; `0` = one per vCPU.
    pub concurrency: u32,
}

impl GuestPreset {
    /// The preset's figures (docs/workloads.md, "Guest behaviour presets", gives their
    /// sources and [A] labels).
    pub fn churn(self) -> GuestChurn {
        match self {
            GuestPreset::Fresh => GuestChurn { processes: 0, process_bytes: 0, concurrency: 1 },
            GuestPreset::HpcJobLike => GuestChurn { processes: 64, process_bytes: 4 << 20, concurrency: 1 },
            GuestPreset::BuildLike => GuestChurn { processes: 1024, process_bytes: 32 << 20, concurrency: 0 },
        }
    }
}

/// `[vm.guest]`: what the guest OS did before the measured workload started. A preset, with
/// any of its figures overridden by the keys beside it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuestConfig {
    /// Default `fresh`.
    pub preset: Option<GuestPreset>,
    pub processes: Option<u32>,
    pub process_bytes: Option<u64>,
    /// Processes alive at once; `0` = one per vCPU.
    pub concurrency: Option<u32>,
    /// The guest keeps starting and ending processes while the workload runs, so frames are
    /// freed and reused mid-run (docs/vm.md, "Guest churn during the run"). Default `false`:
    /// the history happens before the run only.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub during_run: bool,
}

/// Most guest processes a history may replay [ours]: keeps a VM's setup under a second.
pub const MAX_GUEST_PROCESSES: u32 = 1 << 20;

impl GuestConfig {
    /// The preset with the overrides applied.
    pub fn churn(&self) -> GuestChurn {
        let base = self.preset.unwrap_or(GuestPreset::Fresh).churn();
        GuestChurn {
            processes: self.processes.unwrap_or(base.processes),
            process_bytes: self.process_bytes.unwrap_or(base.process_bytes),
            concurrency: self.concurrency.unwrap_or(base.concurrency),
        }
    }

    pub fn validate(&self) -> Result<(), VmError> {
        let c = self.churn();
        if c.processes > MAX_GUEST_PROCESSES {
            return Err(VmError::Config {
                key: "vm.guest.processes",
                message: format!("{} is more than {MAX_GUEST_PROCESSES}", c.processes),
            });
        }
        if self.during_run && c.process_bytes == 0 {
            return Err(VmError::Config {
                key: "vm.guest.during_run",
                message: "guest processes during the run need process_bytes of at least one byte (the preset `fresh` has none)".into(),
            });
        }
        if c.processes > 0 && c.process_bytes == 0 {
            return Err(VmError::Config { key: "vm.guest.process_bytes", message: "guest processes must touch at least one byte".into() });
        }
        Ok(())
    }
}

/// Largest vCPU count [ours] (Xen's HVM limit is 128; room for larger machines).
pub const MAX_VCPUS: u32 = 4096;

impl VmConfig {
    pub fn validate(&self, page_bytes: u64) -> Result<(), VmError> {
        let bad = |key, message: String| Err(VmError::Config { key, message });
        if !(1..=MAX_VCPUS).contains(&self.vcpus) {
            return bad("vm.vcpus", format!("{} is outside 1..={MAX_VCPUS}", self.vcpus));
        }
        if self.mem_bytes == 0 || !self.mem_bytes.is_multiple_of(page_bytes) {
            return bad("vm.mem_bytes", format!("{} is not a positive multiple of the page size ({page_bytes} bytes)", self.mem_bytes));
        }
        if let Some(h) = self.r1g_holes.iter().find(|h| h.start_bytes >= h.end_bytes || h.start_bytes >= self.mem_bytes) {
            return bad(
                "vm.r1g_holes",
                format!("hole [{}, {}) is empty or starts past the vm's {} bytes", h.start_bytes, h.end_bytes, self.mem_bytes),
            );
        }
        if self.static_policy == StaticKind::FirstTouch && !self.guest_free_pages_are_content_free {
            return Err(VmError::FreePagesHoldContent);
        }
        self.queue.validate()?;
        self.guest.validate()
    }

    /// Guest frames inside holes (the union of the hole ranges, clipped to the VM), counted
    /// from the ranges without walking the frames.
    pub fn hole_frames(&self, page_bytes: u64) -> u64 {
        let total = self.frames(page_bytes);
        let mut spans: Vec<(u64, u64)> = self
            .r1g_holes
            .iter()
            .map(|h| ((h.start_bytes / page_bytes).min(total), h.end_bytes.div_ceil(page_bytes).min(total)))
            .filter(|(a, b)| a < b)
            .collect();
        spans.sort_unstable();
        let (mut sum, mut end) = (0u64, 0u64);
        for (a, b) in spans {
            let a = a.max(end);
            if b > a {
                sum += b - a;
                end = b;
            }
        }
        sum
    }

    /// Guest frames (pages of the guest-physical span, holes included).
    pub fn frames(&self, page_bytes: u64) -> u64 {
        self.mem_bytes / page_bytes
    }

    /// Is guest frame `pfn` inside a hole?
    pub fn is_hole(&self, pfn: u64, page_bytes: u64) -> bool {
        self.r1g_holes.iter().any(|h| h.overlaps(pfn, 1, page_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_spec_defaults() {
        let q = QueueConfig::default();
        assert_eq!((q.enabled, q.partitions, q.capacity, q.flush_ms), (true, 4, 512, None));
        let h = HypervisorConfig::default();
        assert_eq!((h.node_reserve_frames, h.r1g_exhaustive_max_nodes), (0, 16));
        let v = VmConfig::default();
        assert_eq!(v.static_policy, StaticKind::Round4K, "Round4K is the VM-mode default (§2.1)");
        assert!(v.guest_free_pages_are_content_free);
        assert_eq!((v.ft_fallback, v.r4k_indexing), (FtFallback::NextRoundRobin, Indexing::AddressIndexed));
    }

    #[test]
    fn tables_parse_and_unknown_keys_are_refused() {
        let v: VmConfig = toml::from_str(
            "vcpus = 24\nmem_bytes = 4294967296\nstatic_policy = \"first-touch\"\n\
             r1g_holes = [{ start_bytes = 655360, end_bytes = 1048576 }]\n[queue]\ncapacity = 64\nflush_ms = 10.0\n",
        )
        .unwrap();
        assert_eq!((v.vcpus, v.static_policy, v.queue.capacity, v.queue.partitions), (24, StaticKind::FirstTouch, 64, 4));
        assert_eq!(v.r1g_holes, vec![Hole { start_bytes: 655360, end_bytes: 1048576 }]);
        v.validate(4096).unwrap();
        assert!(v.is_hole(160, 4096) && !v.is_hole(159, 4096) && !v.is_hole(256, 4096));
        let e = toml::from_str::<VmConfig>("vcpu = 2").unwrap_err();
        assert!(e.message().contains("unknown field `vcpu`"), "{}", e.message());
        let e = toml::from_str::<VmConfig>("[queue]\nsize = 2").unwrap_err();
        assert!(e.message().contains("unknown field `size`"), "{}", e.message());
        let e = toml::from_str::<VmConfig>("static_policy = \"round-2m\"").unwrap_err();
        assert!(e.message().contains("unknown variant `round-2m`"), "{}", e.message());
        let e = toml::from_str::<HypervisorConfig>("reserve = 1").unwrap_err();
        assert!(e.message().contains("unknown field `reserve`"), "{}", e.message());
    }

    #[test]
    fn out_of_range_values_are_typed_errors() {
        let key = |r: Result<(), VmError>| match r {
            Err(VmError::Config { key, .. }) => key,
            other => panic!("expected a config error, got {other:?}"),
        };
        let v = |f: fn(&mut VmConfig)| {
            let mut c = VmConfig::default();
            f(&mut c);
            c.validate(4096)
        };
        assert_eq!(key(v(|c| c.vcpus = 0)), "vm.vcpus");
        assert_eq!(key(v(|c| c.mem_bytes = 0)), "vm.mem_bytes");
        assert_eq!(key(v(|c| c.mem_bytes = 4097)), "vm.mem_bytes");
        assert_eq!(key(v(|c| c.r1g_holes = vec![Hole { start_bytes: 5, end_bytes: 5 }])), "vm.r1g_holes");
        assert_eq!(key(v(|c| c.r1g_holes = vec![Hole { start_bytes: 1 << 30, end_bytes: (1 << 30) + 1 }])), "vm.r1g_holes");
        assert_eq!(key(v(|c| c.queue.partitions = 3)), "vm.queue.partitions");
        assert_eq!(key(v(|c| c.queue.partitions = 0)), "vm.queue.partitions");
        assert_eq!(key(v(|c| c.queue.capacity = 0)), "vm.queue.capacity");
        assert_eq!(key(v(|c| c.queue.flush_ms = Some(0.0))), "vm.queue.flush_ms");
        assert_eq!(key(v(|c| c.queue.call_cost_ns = f64::NAN)), "vm.queue.call_cost_ns");
        assert_eq!(key(v(|c| c.queue.entry_cost_ns = -1.0)), "vm.queue.entry_cost_ns");
        assert_eq!(
            v(|c| {
                c.static_policy = StaticKind::FirstTouch;
                c.guest_free_pages_are_content_free = false
            }),
            Err(VmError::FreePagesHoldContent)
        );
        let h = HypervisorConfig { r1g_exhaustive_max_nodes: 0, ..Default::default() };
        assert_eq!(key(h.validate()), "hypervisor.r1g_exhaustive_max_nodes");
        let h = HypervisorConfig { r1g_exhaustive_max_nodes: 21, ..Default::default() };
        assert_eq!(key(h.validate()), "hypervisor.r1g_exhaustive_max_nodes");
    }

    #[test]
    fn hole_frames_count_the_union_of_the_holes() {
        let mut v = VmConfig { mem_bytes: 100 * 4096, ..Default::default() };
        assert_eq!(v.hole_frames(4096), 0);
        // [10, 20) and [15, 30) overlap; [95 pages + 1 byte, past the end) is clipped to 95..100.
        v.r1g_holes = vec![
            Hole { start_bytes: 15 * 4096, end_bytes: 30 * 4096 },
            Hole { start_bytes: 10 * 4096, end_bytes: 20 * 4096 },
            Hole { start_bytes: 95 * 4096 + 1, end_bytes: 1 << 40 },
        ];
        assert_eq!(v.hole_frames(4096), 20 + 5);
        assert_eq!(v.hole_frames(4096), (0..100).filter(|&f| v.is_hole(f, 4096)).count() as u64);
    }

    #[test]
    fn guest_presets_and_overrides() {
        let g = GuestConfig { preset: Some(GuestPreset::BuildLike), processes: Some(3), ..Default::default() };
        let c = g.churn();
        assert_eq!((c.processes, c.process_bytes, c.concurrency), (3, GuestPreset::BuildLike.churn().process_bytes, 0));
        assert_eq!(GuestConfig::default().churn().processes, 0, "a guest is fresh by default");
        let g: GuestConfig = toml::from_str("preset = \"hpc-job-like\"").unwrap();
        assert_eq!(g.preset, Some(GuestPreset::HpcJobLike));
        let bad = GuestConfig { processes: Some(1), process_bytes: Some(0), ..Default::default() };
        assert!(matches!(bad.validate(), Err(VmError::Config { key: "vm.guest.process_bytes", .. })));
        assert!(toml::from_str::<GuestConfig>("preset = \"idle\"").is_err());
    }
}
