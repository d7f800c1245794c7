//! The workload file schema (docs/workloads.md, "File layout").
//! Every table rejects unknown keys.

use serde::{Deserialize, Serialize};

/// A whole workload file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    pub workload: Header,
    #[serde(default)]
    pub region: Vec<Region>,
    #[serde(default)]
    pub phase: Vec<Phase>,
}

/// `threads = 48` or `threads = "cores"` (one per physical core of the machine's CPU nodes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Threads {
    Count(u32),
    Named(String),
}

impl Default for Threads {
    fn default() -> Self {
        Threads::Named("cores".into())
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitStyle {
    /// Each thread first-touches the block it will own.
    #[default]
    ParallelFt,
    /// Thread 0 touches everything before the workers start.
    Master,
    /// Every region names its `home`.
    OwnerExplicit,
    /// Pages spread round-robin over memory nodes (numactl --interleave).
    Interleave,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadPlacement {
    /// Thread t on CPU node t mod N, lowest free core.
    #[default]
    Scatter,
    /// Thread t on core t, node-major.
    Compact,
    /// Distinct cores drawn with the workload seed.
    Random,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunSpec {
    pub iterations: u32,
    /// Information only.
    pub est_seconds: f64,
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec { iterations: 1, est_seconds: 0.0 }
    }
}

/// Operating-system activity over the whole run. Only zeros are accepted today: the
/// simulator does not model these yet, and silently ignoring them would mislead.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SysSpec {
    pub disk_mbps: f64,
    pub ctx_switch_kps: f64,
    pub page_free_interval_us: f64,
    pub alloc_mb_per_iter: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default)]
    pub threads: Threads,
    #[serde(default = "one")]
    pub copies: u32,
    /// Bytes; required when a region gives `frac`.
    #[serde(default)]
    pub footprint: u64,
    #[serde(default)]
    pub init: InitStyle,
    #[serde(default)]
    pub placement: ThreadPlacement,
    #[serde(default)]
    pub pinned: bool,
    #[serde(default = "one_u64")]
    pub seed: u64,
    #[serde(default = "line_bytes")]
    pub access_bytes: u64,
    #[serde(default)]
    pub run: RunSpec,
    #[serde(default)]
    pub sys: SysSpec,
}

fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}
fn line_bytes() -> u64 {
    64
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sharing {
    Private,
    Partitioned,
    SharedRo,
    SharedRw,
    Replicated,
}

impl Sharing {
    /// The name used in workload files.
    pub fn as_str(self) -> &'static str {
        match self {
            Sharing::Private => "private",
            Sharing::Partitioned => "partitioned",
            Sharing::SharedRo => "shared_ro",
            Sharing::SharedRw => "shared_rw",
            Sharing::Replicated => "replicated",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Partition {
    Block,
    Cyclic,
    None,
}

/// `home = 2`, `home = "owner"` or `home = "interleave"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Home {
    Node(u16),
    Named(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Region {
    pub name: String,
    pub bytes: Option<u64>,
    pub frac: Option<f64>,
    pub pages: Option<u64>,
    pub sharing: Sharing,
    pub partition: Option<Partition>,
    #[serde(default = "full_share")]
    pub owner_share: f64,
    /// `owner`, `master`, `thread:K` or `none`; default from `workload.init`.
    pub init_by: Option<String>,
    pub home: Option<Home>,
    #[serde(default)]
    pub plane_bytes: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dunx_class: String,
    pub sharers: Option<u32>,
    pub run_granularity: Option<f64>,
    pub write_granularity: Option<f64>,
    pub reads: Option<f64>,
    pub writes: Option<f64>,
}

fn full_share() -> f64 {
    1.0
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Barrier {
    None,
    #[default]
    End,
    EachRepeat,
    P2pNeighbours,
    P2pNeighboursRev,
    EachRun,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GapDist {
    #[default]
    Const,
    Exp,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Gap {
    pub us: f64,
    pub dist: GapDist,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Repartition {
    pub region: String,
    pub every: u32,
    pub frac: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    pub name: String,
    #[serde(default)]
    pub once: bool,
    #[serde(default = "one")]
    pub repeat: u32,
    #[serde(default = "yes")]
    pub parallel: bool,
    #[serde(default)]
    pub barrier: Barrier,
    #[serde(default = "sixteen")]
    pub chunks: u32,
    #[serde(default)]
    pub refs: u64,
    #[serde(default)]
    pub flops_per_access: f64,
    pub gap: Option<Gap>,
    pub repartition: Option<Repartition>,
    pub accesses: Vec<Access>,
}

fn yes() -> bool {
    true
}
fn sixteen() -> u32 {
    16
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Who {
    Owner,
    All,
    Neighbours,
    Master,
    Any,
    Sharers,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    pub region: String,
    pub who: Who,
    /// `seq`, `strided:S`, `random`, `gather`, `chase`, `stencil:H`, `transpose`,
    /// `reduction` or `runs`.
    pub pattern: String,
    #[serde(default)]
    pub share: f64,
    #[serde(default = "full_share")]
    pub read_frac: f64,
}

/// A parsed access pattern.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    Seq,
    Strided { stride_bytes: u64 },
    Random,
    Gather,
    Chase,
    Stencil { halo_planes: u64 },
    Transpose,
    Reduction,
    Runs,
}

impl Pattern {
    pub fn parse(s: &str) -> Result<Pattern, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let num = |what: &str| -> Result<u64, String> {
            let a =
                arg.ok_or_else(|| format!("pattern '{name}' needs a {what}, e.g. '{name}:{}'", if name == "strided" { 8192 } else { 1 }))?;
            a.trim().parse::<u64>().ok().filter(|&v| v > 0).ok_or_else(|| format!("pattern '{s}': '{a}' is not a positive whole number"))
        };
        let plain = |p: Pattern| {
            if arg.is_some() {
                Err(format!("pattern '{name}' takes no argument (got '{s}')"))
            } else {
                Ok(p)
            }
        };
        match name {
            "seq" => plain(Pattern::Seq),
            "random" => plain(Pattern::Random),
            "gather" => plain(Pattern::Gather),
            "chase" => plain(Pattern::Chase),
            "transpose" => plain(Pattern::Transpose),
            "reduction" => plain(Pattern::Reduction),
            "runs" => plain(Pattern::Runs),
            "strided" => Ok(Pattern::Strided { stride_bytes: num("stride in bytes")? }),
            "stencil" => Ok(Pattern::Stencil { halo_planes: num("halo depth in planes")? }),
            _ => Err(format!("unknown pattern '{s}'; valid: seq, strided:S, random, gather, chase, stencil:H, transpose, reduction, runs")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_parse_with_clear_errors() {
        assert_eq!(Pattern::parse("strided:8192"), Ok(Pattern::Strided { stride_bytes: 8192 }));
        assert_eq!(Pattern::parse("stencil:2"), Ok(Pattern::Stencil { halo_planes: 2 }));
        assert!(Pattern::parse("stencil").unwrap_err().contains("needs a halo depth"));
        assert!(Pattern::parse("seq:3").unwrap_err().contains("takes no argument"));
        assert!(Pattern::parse("zigzag").unwrap_err().contains("unknown pattern 'zigzag'"));
        assert!(Pattern::parse("strided:0").unwrap_err().contains("not a positive"));
    }
}
