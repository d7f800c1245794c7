//! Published measurements of the hardware a preset models, stored with the preset so that
//! `numalab calibrate` can print the simulated machine beside them (docs/machines.md,
//! "Published figures").

use serde::{Deserialize, Serialize};

/// One published measurement and where it was published.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub value: f64,
    /// A URL or a paper reference.
    pub source: String,
    /// How the figure was measured (compiler, threads, which nodes), when the source says.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// A known gap: the mechanism the simulator lacks to reproduce the figure through the
    /// documented parameters (docs/calibration.md). Such a figure is printed but not held to
    /// the tolerance.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gap: String,
}

/// The published figures of one machine. Every figure is optional: where nothing is
/// published for the hardware, the field is absent (never invented).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    /// Largest relative error (percent) the preset may show on any of its figures; the
    /// calibration test fails beyond it.
    pub tolerance_pct: f64,
    /// STREAM triad, every core of the machine, GB/s as STREAM counts bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_triad_all_gbps: Option<Figure>,
    /// STREAM triad, the cores of one socket on their own memory, GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_triad_socket_gbps: Option<Figure>,
    /// STREAM triad, one thread on its own node's memory, GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_triad_thread_gbps: Option<Figure>,
    /// STREAM triad, the cores of one socket on the socket's first CPU-less memory node (HBM,
    /// MCDRAM, CXL), GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_triad_cpuless_gbps: Option<Figure>,
    /// STREAM triad, one thread of that socket on the same CPU-less node, GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_triad_cpuless_thread_gbps: Option<Figure>,
    /// Idle latency to the local node (dependent pointer chase), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_local_ns: Option<Figure>,
    /// Idle latency to a node one hop away, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_remote_ns: Option<Figure>,
    /// Contended latency to the local node: a dependent chase while one thread per core of the
    /// machine loads that node (the condition of `latency_ns_contended`), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_contended_local_ns: Option<Figure>,
    /// The same, seen from a node one hop away from the loaded node, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_contended_remote_ns: Option<Figure>,
}

impl Published {
    /// Problems with the figures, for the machine validator.
    pub fn check(&self) -> Result<(), String> {
        if !(self.tolerance_pct > 0.0 && self.tolerance_pct <= 100.0) {
            return Err(format!("published.tolerance_pct must be in (0, 100], got {}", self.tolerance_pct));
        }
        for (name, f) in self.figures() {
            if let Some(f) = f {
                if !(f.value.is_finite() && f.value > 0.0) {
                    return Err(format!("published.{name}.value must be positive, got {}", f.value));
                }
                if f.source.trim().is_empty() {
                    return Err(format!("published.{name}.source must name where the figure was published"));
                }
            }
        }
        Ok(())
    }

    /// `(field name, figure)` of every figure, in file order.
    pub fn figures(&self) -> [(&'static str, Option<&Figure>); 9] {
        [
            ("stream_triad_all_gbps", self.stream_triad_all_gbps.as_ref()),
            ("stream_triad_socket_gbps", self.stream_triad_socket_gbps.as_ref()),
            ("stream_triad_thread_gbps", self.stream_triad_thread_gbps.as_ref()),
            ("stream_triad_cpuless_gbps", self.stream_triad_cpuless_gbps.as_ref()),
            ("stream_triad_cpuless_thread_gbps", self.stream_triad_cpuless_thread_gbps.as_ref()),
            ("latency_local_ns", self.latency_local_ns.as_ref()),
            ("latency_remote_ns", self.latency_remote_ns.as_ref()),
            ("latency_contended_local_ns", self.latency_contended_local_ns.as_ref()),
            ("latency_contended_remote_ns", self.latency_contended_remote_ns.as_ref()),
        ]
    }
}
