//! Built-in workload presets (`*-like`: synthetic approximations of real programs).

use crate::error::WorkloadError;
use crate::schema::WorkloadFile;

/// `(name, what it mimics, TOML text)`.
pub const PRESETS: &[(&str, &str, &str)] = &[
    (
        "is-like",
        "NPB IS class C: owned key blocks, private histograms, all-to-all random scatter into a shared bucket array",
        include_str!("../presets/is-like.toml"),
    ),
    (
        "ep-like",
        "NPB EP class C: small private batch buffers, compute-bound (131 flops per access), one final reduction",
        include_str!("../presets/ep-like.toml"),
    ),
    (
        "cg-like",
        "NPB CG class C: private sparse-matrix rows streamed by their owners, a shared vector gathered by all",
        include_str!("../presets/cg-like.toml"),
    ),
    (
        "mg-like",
        "NPB MG class C: z-slab 1-plane stencils on every multigrid level, small shared coarse levels",
        include_str!("../presets/mg-like.toml"),
    ),
    ("ft-like", "NPB FT class C: slab-owned 3-D FFT whose z pass is an all-to-all transpose", include_str!("../presets/ft-like.toml")),
    (
        "bt-like",
        "NPB BT class C: 2-plane stencil RHS, x/y solves on owned planes, z solve striding across every slab",
        include_str!("../presets/bt-like.toml"),
    ),
    ("sp-like", "NPB SP class C: like BT with more memory traffic per flop", include_str!("../presets/sp-like.toml")),
    (
        "lu-like",
        "NPB LU class C: SSOR lower/upper sweeps as pipelined wavefronts with point-to-point waits",
        include_str!("../presets/lu-like.toml"),
    ),
    (
        "ua-like",
        "NPB UA class C: gathers over an adaptive mesh whose page ownership drifts every few steps",
        include_str!("../presets/ua-like.toml"),
    ),
    (
        "xsbench-like",
        "XSBench: master-built read-only cross-section grids, binary-search chases plus random lookups",
        include_str!("../presets/xsbench-like.toml"),
    ),
    (
        "graph500-like",
        "Graph500 BFS scale 26: once-built CSR graph, 64 searches with random shared parent updates",
        include_str!("../presets/graph500-like.toml"),
    ),
    (
        "stream-like",
        "STREAM triad: per-thread arrays, parallel first touch, sequential a = b + s*c",
        include_str!("../presets/stream-like.toml"),
    ),
    (
        "master-slave",
        "kmeans/streamcluster: one master thread allocates and fills everything, workers scan their slices",
        include_str!("../presets/master-slave.toml"),
    ),
    (
        "dunx-synth",
        "DUnX synth: five page classes (PR, RO, RM, SS, SP) with exact run schedules, 8 processes one per node",
        include_str!("../presets/dunx-synth.toml"),
    ),
    (
        "msort-like",
        "DUnX msort: private sort slices, sorted runs handed between process pairs at merge levels (SS)",
        include_str!("../presets/msort-like.toml"),
    ),
    (
        "gauss-like",
        "DUnX gauss: integer Gaussian elimination, owned rows (PR), pivot rows read by all (RO), barrier per step",
        include_str!("../presets/gauss-like.toml"),
    ),
    (
        "hh3d-like",
        "DUnX hh3d: cardiac conduction on a block-partitioned grid (PR), block-edge pages shared by two (SS)",
        include_str!("../presets/hh3d-like.toml"),
    ),
    (
        "hough-like",
        "DUnX hough: Hough transform, read-only shared image (RO), per-process accumulators (PR)",
        include_str!("../presets/hough-like.toml"),
    ),
    (
        "psolu-like",
        "DUnX psolu: block chaotic relaxation, owned blocks (PR), others' blocks read asynchronously (RM), no barriers",
        include_str!("../presets/psolu-like.toml"),
    ),
    (
        "wave-like",
        "DUnX wave: wave equation, row blocks (PR), wrap-around halo rows read-mostly (RM)",
        include_str!("../presets/wave-like.toml"),
    ),
    (
        "fish-like",
        "DUnX fish: sharks and fishes, sea grid written by all at fine grain (SP), small private lists (PR)",
        include_str!("../presets/fish-like.toml"),
    ),
    (
        "mandel-like",
        "DUnX mandel: Mandelbrot set, compute-bound, disjoint output rows (PR), one read-only parameter page (RO)",
        include_str!("../presets/mandel-like.toml"),
    ),
];

/// Built-in mixes (several programs at once), `(name, what it mimics, TOML text)`.
pub const MIXES: &[(&str, &str, &str)] = &[
    (
        "hydm-npb-mix",
        "HyDM multi-program run: 16 NPB-like programs, 4 threads each, random pinned cores",
        include_str!("../presets/hydm-npb-mix.toml"),
    ),
    (
        "hydm-npb-mix-32",
        "HyDM multi-program run: 32 NPB-like programs, 2 threads each, random pinned cores",
        include_str!("../presets/hydm-npb-mix-32.toml"),
    ),
    (
        "tiering-mix",
        "tiering scenario: stream-like, xsbench-like and graph500-like at once, 16 threads each",
        include_str!("../presets/tiering-mix.toml"),
    ),
];

/// Every built-in workload: single programs, then mixes.
pub fn all() -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str)> {
    PRESETS.iter().chain(MIXES.iter())
}

/// Names of the single-program presets (mixes: [`MIXES`]).
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.0).collect()
}

/// The text of any built-in workload (single program or mix).
pub fn text(name: &str) -> Result<&'static str, WorkloadError> {
    all()
        .find(|p| p.0 == name)
        .map(|p| p.2)
        .ok_or_else(|| WorkloadError::UnknownPreset { name: name.to_string(), valid: all().map(|p| p.0).collect::<Vec<_>>().join(", ") })
}

/// Parse workload TOML (`origin` names it in errors).
pub fn parse(text: &str, origin: &str) -> Result<WorkloadFile, WorkloadError> {
    toml::from_str(text).map_err(|e| WorkloadError::parse(origin, text, e))
}

/// Load a single-program preset (mixes: `WorkloadSpec::parse(text(name)?, ..)`).
pub fn load(name: &str) -> Result<WorkloadFile, WorkloadError> {
    parse(text(name)?, &format!("preset:{name}"))
}
