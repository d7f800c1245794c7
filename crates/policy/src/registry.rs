//! The one list of every policy numalab knows.

use crate::carrefour::{Carrefour, FirstTouchCarrefour, Round4kCarrefour};
use crate::dunx::{Cache, Dunx, Mor};
use crate::dynamic::autonuma::AutoNuma;
use crate::error::PolicyError;
use crate::hydm::Hydm;
use crate::kmaf::Kmaf;
use crate::oracle::{ErrorPolicy, Ideal};
use crate::policy::{DynPolicy, Policy, PolicyEnv};
use crate::stable_numa::StableNuma;
use crate::statics::{Bind, FirstTouch, Linux, Preferred, Round1G, Round4K, TierStatic, WeightedInterleave};
use crate::tiering::LinuxTiering;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyKind {
    /// Chooses a node once per page and never moves it.
    Static,
    /// May migrate pages or move threads while the program runs.
    Dynamic,
}

/// Builds a policy from its config table.
type Builder = fn(toml::Table, &PolicyEnv) -> Result<Box<dyn DynPolicy>, PolicyError>;

/// A registered policy: its name, one-line summary, kind and how to build it.
pub struct PolicyEntry {
    pub name: &'static str,
    pub summary: &'static str,
    pub kind: PolicyKind,
    build: Builder,
    default_config: fn() -> toml::Table,
}

impl PolicyEntry {
    /// Build from a config table (the `[policy]` table without `name`).
    pub fn build(&self, config: toml::Table, env: &PolicyEnv) -> Result<Box<dyn DynPolicy>, PolicyError> {
        (self.build)(config, env)
    }
    pub fn default_config(&self) -> toml::Table {
        (self.default_config)()
    }
}

fn build_as<P: Policy>(config: toml::Table, env: &PolicyEnv) -> Result<Box<dyn DynPolicy>, PolicyError> {
    let cfg: P::Config = toml::Value::Table(config)
        .try_into()
        .map_err(|e: toml::de::Error| PolicyError::Config { policy: P::NAME.into(), message: numalab_core::one_line(e.message()) })?;
    Ok(Box::new(P::new(cfg, env)?))
}

fn default_as<P: Policy>() -> toml::Table {
    match toml::Value::try_from(P::Config::default()) {
        Ok(toml::Value::Table(t)) => t,
        _ => toml::Table::new(),
    }
}

const fn entry<P: Policy>(kind: PolicyKind) -> PolicyEntry {
    PolicyEntry { name: P::NAME, summary: P::SUMMARY, kind, build: build_as::<P>, default_config: default_as::<P> }
}

/// Every policy, in the order `numalab list policies` prints them.
pub static REGISTRY: &[PolicyEntry] = &[
    entry::<FirstTouch>(PolicyKind::Static),
    entry::<Round4K>(PolicyKind::Static),
    entry::<Round1G>(PolicyKind::Static),
    entry::<Bind>(PolicyKind::Static),
    entry::<Preferred>(PolicyKind::Static),
    entry::<WeightedInterleave>(PolicyKind::Static),
    entry::<Linux>(PolicyKind::Static),
    entry::<TierStatic>(PolicyKind::Static),
    entry::<AutoNuma>(PolicyKind::Dynamic),
    entry::<StableNuma>(PolicyKind::Dynamic),
    entry::<Kmaf>(PolicyKind::Dynamic),
    entry::<Carrefour>(PolicyKind::Dynamic),
    entry::<FirstTouchCarrefour>(PolicyKind::Dynamic),
    entry::<Round4kCarrefour>(PolicyKind::Dynamic),
    entry::<Hydm>(PolicyKind::Dynamic),
    entry::<LinuxTiering>(PolicyKind::Dynamic),
    entry::<Dunx>(PolicyKind::Dynamic),
    entry::<Cache>(PolicyKind::Dynamic),
    entry::<Mor>(PolicyKind::Dynamic),
    entry::<Ideal>(PolicyKind::Dynamic),
    entry::<ErrorPolicy>(PolicyKind::Dynamic),
];

pub fn find(name: &str) -> Result<&'static PolicyEntry, PolicyError> {
    REGISTRY.iter().find(|e| e.name == name).ok_or_else(|| PolicyError::Unknown {
        name: name.to_string(),
        valid: REGISTRY.iter().map(|e| e.name).collect::<Vec<_>>().join(", "),
    })
}

/// Build a policy by name with a config table.
pub fn build(name: &str, config: toml::Table, env: &PolicyEnv) -> Result<Box<dyn DynPolicy>, PolicyError> {
    find(name)?.build(config, env)
}
