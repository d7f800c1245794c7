//! Errors of VM mode (docs/vm.md).

use numalab_core::{CpuId, NodeId};
use thiserror::Error;

/// Why a VM could not be created, configured or driven. Every error names what was wrong.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum VmError {
    #[error("vm setting '{key}': {message}")]
    Config { key: &'static str, message: String },
    #[error("vm needs {wanted_pages} pages of {page_bytes} bytes but the machine has only {free_pages} free pages on its memory nodes")]
    MachineTooSmall { wanted_pages: u64, free_pages: u64, page_bytes: u64 },
    #[error("first-touch in a vm needs guest_free_pages_are_content_free = true: a guest that keeps data in its free pages cannot have them backed by any free machine frame")]
    FreePagesHoldContent,
    #[error("round-1g lays a vm out at creation only; it cannot be switched to at run time")]
    Round1GOnlyAtCreation,
    #[error("no vm {vm} on this host")]
    NoSuchVm { vm: u32 },
    #[error("vm {vm}: guest frame {pfn} is outside its {frames} frames")]
    NoSuchFrame { vm: u32, pfn: u64, frames: u64 },
    #[error("vm {vm}: guest frame {pfn} lies in a hole of the guest-physical map and is not RAM")]
    HoleFrame { vm: u32, pfn: u64 },
    #[error("vm {vm}: the guest allocated frame {pfn}, which it had not freed")]
    GuestDoubleAlloc { vm: u32, pfn: u64 },
    #[error("vm {vm}: the guest freed frame {pfn}, which it had not allocated")]
    GuestDoubleFree { vm: u32, pfn: u64 },
    #[error("vm {vm}: physical CPU {cpu} does not exist (the machine has {cpus})")]
    NoSuchCpu { vm: u32, cpu: CpuId, cpus: usize },
    #[error("vm {vm}: vCPU {vcpu} does not exist (the vm has {vcpus})")]
    NoSuchVcpu { vm: u32, vcpu: u32, vcpus: u32 },
    #[error("vm {vm}: out of memory placing guest frame {pfn} (first choice was node {wanted})")]
    OutOfMemory { vm: u32, pfn: u64, wanted: NodeId },
    #[error("vm {vm}: guest frame {pfn} has no machine frame to move")]
    FrameNotBacked { vm: u32, pfn: u64 },
    #[error("vm {vm}: node {to} has no free machine frame for guest frame {pfn}")]
    NodeFull { vm: u32, pfn: u64, to: NodeId },
    #[error("vm {vm}: {message}")]
    Policy { vm: u32, message: String },
}
