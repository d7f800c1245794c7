//! VM mode (docs/vm.md; docs/vm.md): placement applied by a
//! hypervisor to the guest-physical frames of virtual machines.
//!
//! - [`home`]: home-node selection at VM creation, one reserved pCPU per vCPU (§5.1).
//! - [`queue`]: the guest's page free/alloc notification queue (§7).
//! - [`host`]: a host with several VMs, one static policy per VM switchable at run time
//!   (§2.1), first-touch's VM specifics (§3) and the round-1g / round-4k eager layouts.
//! - [`credit`]: Xen's credit scheduler for vCPUs (`[hypervisor] vcpu_scheduler = "credit"`).
//! - [`config`]: the `[hypervisor]`, `[vm]` and `[vm.queue]` settings (§10).
//!
//! Everything here is pure: no I/O, no clock, no randomness.

pub mod config;
pub mod credit;
pub mod error;
pub mod home;
pub mod host;
pub mod queue;

pub use config::{GuestChurn, GuestConfig, GuestPreset, HypervisorConfig, QueueConfig, StaticKind, VmConfig};
pub use credit::{CreditConfig, CreditScheduler, VcpuScheduler, VcpuSpec};
pub use error::VmError;
pub use home::{HomeChoice, NodeLoad};
pub use host::{Access, FrameState, Host, HostMemory, Touch, Vm, VmCounters, VmId};
pub use queue::{FrameOp, NotificationQueue, QueueEntry, Verdict};

#[cfg(test)]
mod tests;
