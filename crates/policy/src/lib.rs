//! Placement policies.
//!
//! A policy is a [`Policy`]: a type with a serde `Config`, built once per address space, whose
//! hooks return *decisions* (place this page here, migrate that page, move that thread) rather
//! than touching memory. The simulator and the live agent both drive policies through the
//! object-safe [`DynPolicy`]; neither the policy nor its tests know which one is driving.
//!
//! Adding a policy: write one file with the type and its `Policy` impl, add one line to
//! [`registry::REGISTRY`], and one page under `docs/policies/`.

pub mod carrefour;
pub mod decision;
pub mod dunx;
pub mod dynamic;
pub mod error;
pub mod fallback;
pub mod hydm;
pub mod kmaf;
pub mod oracle;
pub mod policy;
pub mod registry;
pub mod scan;
pub mod stable_numa;
pub mod statics;
pub mod testing;
pub mod tiering;
pub mod vm;

pub use decision::space_move_takes;
pub use decision::{
    AccessSample, CacheRefills, Decision, DecisionRecord, EventRef, Extent, HintFault, MempolicyIntent, MempolicyMode, MoveCause, NodeMask,
    Outcome, PageScan, PlaceRequest, Refusal, RegionHeat, ScanStepDone, ScannedPage, SpaceId, SpaceWindow, TaskTick, ThreadMigrated, Tick,
};
pub use error::{OutOfMemory, PolicyError};
pub use policy::{AddressSpaceInfo, AppMove, AppMoveKind, DynPolicy, MemoryState, Policy, PolicyEnv, SystemView};
pub use registry::{build, find, PolicyEntry, PolicyKind, REGISTRY};
