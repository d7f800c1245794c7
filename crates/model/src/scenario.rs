//! One complete set of local/remote model inputs, addressable by parameter name, and sweeps
//! over them (`e_sp=0:0.5:0.05`). The CLI builds a [`Scenario`], applies each sweep point with
//! [`Scenario::set`] and calls [`Scenario::solve`].

use crate::classes::{ClassField, ClassKind, ClassSet};
use crate::error::ModelError;
use crate::local_remote::Hardware;
use crate::policy::{PolicyKind, PolicyParams};
use crate::validate::{predict, Calibration, Prediction};

/// A parameter that `--sweep` (or `Scenario::set`) can change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// Compute time between references (us).
    Tau,
    /// Node count `n`.
    Nodes,
    CostScale,
    TL,
    TX,
    CMig,
    CRep,
    CCoh,
    KMig,
    KRep,
    /// Error fraction of a shared class (error policy).
    Error(ClassKind),
    /// Other faults per reference and their cost.
    QO,
    CO,
    /// A class parameter, `SS.run_granularity` or `SS.r`.
    Class(ClassKind, ClassField),
}

/// Scalar parameter names accepted by [`Param::parse`] (class parameters are `CLASS.FIELD`).
pub const SCALAR_NAMES: &[&str] =
    &["tau", "n", "cost_scale", "t_l", "t_x", "c_mig", "c_rep", "c_coh", "k_mig", "k_rep", "e_ro", "e_rm", "e_ss", "e_sp", "q_o", "c_o"];

impl Param {
    pub fn parse(name: &str) -> Result<Param, ModelError> {
        let p = match name {
            "tau" => Param::Tau,
            "n" | "nodes" => Param::Nodes,
            "cost_scale" => Param::CostScale,
            "t_l" => Param::TL,
            "t_x" => Param::TX,
            "c_mig" => Param::CMig,
            "c_rep" => Param::CRep,
            "c_coh" => Param::CCoh,
            "k_mig" => Param::KMig,
            "k_rep" => Param::KRep,
            "e_ro" => Param::Error(ClassKind::Ro),
            "e_rm" => Param::Error(ClassKind::Rm),
            "e_ss" => Param::Error(ClassKind::Ss),
            "e_sp" => Param::Error(ClassKind::Sp),
            "q_o" => Param::QO,
            "c_o" => Param::CO,
            _ => {
                let parsed = name.split_once('.').and_then(|(c, f)| Some((ClassKind::parse(c)?, ClassField::parse(f)?)));
                match parsed {
                    Some((c, f)) => Param::Class(c, f),
                    None => {
                        return Err(ModelError::InvalidParameter {
                            name: name.to_string(),
                            value: f64::NAN,
                            problem: format!(
                                "unknown parameter; valid: {}, or CLASS.FIELD with CLASS one of PR, RO, RM, SS, SP and FIELD one of pages, reads, writes, run_granularity, write_granularity, sharers",
                                SCALAR_NAMES.join(", ")
                            ),
                        })
                    }
                }
            }
        };
        Ok(p)
    }

    /// Canonical name (used as the JSON key and table column).
    pub fn name(self) -> String {
        match self {
            Param::Tau => "tau".into(),
            Param::Nodes => "n".into(),
            Param::CostScale => "cost_scale".into(),
            Param::TL => "t_l".into(),
            Param::TX => "t_x".into(),
            Param::CMig => "c_mig".into(),
            Param::CRep => "c_rep".into(),
            Param::CCoh => "c_coh".into(),
            Param::KMig => "k_mig".into(),
            Param::KRep => "k_rep".into(),
            Param::Error(k) => format!("e_{}", k.as_str().to_ascii_lowercase()),
            Param::QO => "q_o".into(),
            Param::CO => "c_o".into(),
            Param::Class(k, f) => format!("{}.{}", k.as_str(), f.as_str()),
        }
    }
}

/// All inputs of one local/remote model solve.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub hardware: Hardware,
    pub classes: ClassSet,
    pub policy: PolicyKind,
    pub params: PolicyParams,
    /// `tau` and the other-fault rate/cost.
    pub calibration: Calibration,
}

impl Scenario {
    pub fn get(&self, p: Param) -> f64 {
        let hw = &self.hardware;
        match p {
            Param::Tau => self.calibration.tau_us,
            Param::Nodes => hw.nodes as f64,
            Param::CostScale => hw.cost_scale,
            Param::TL => hw.t_l,
            Param::TX => hw.t_x,
            Param::CMig => hw.c_mig,
            Param::CRep => hw.c_rep,
            Param::CCoh => hw.c_coh,
            Param::KMig => self.params.k_mig.unwrap_or(f64::NAN),
            Param::KRep => self.params.k_rep.unwrap_or(f64::NAN),
            Param::Error(k) => self.params.errors[k.index()],
            Param::QO => self.calibration.q_o,
            Param::CO => self.calibration.c_o_us,
            Param::Class(k, f) => self.classes.get(k).get(f),
        }
    }

    /// Set one parameter. Range checks happen here for the node count and class parameters, and
    /// in [`Scenario::solve`] for the rest.
    pub fn set(&mut self, p: Param, v: f64) -> Result<(), ModelError> {
        let hw = &mut self.hardware;
        match p {
            Param::Tau => self.calibration.tau_us = v,
            Param::Nodes => {
                if !(v >= 1.0 && v.fract() == 0.0 && v <= u32::MAX as f64) {
                    return Err(ModelError::param("n", v, "must be a whole number >= 1"));
                }
                hw.nodes = v as u32;
            }
            Param::CostScale => hw.cost_scale = v,
            Param::TL => hw.t_l = v,
            Param::TX => hw.t_x = v,
            Param::CMig => hw.c_mig = v,
            Param::CRep => hw.c_rep = v,
            Param::CCoh => hw.c_coh = v,
            Param::KMig => self.params.k_mig = Some(v),
            Param::KRep => self.params.k_rep = Some(v),
            Param::Error(k) => self.params.errors[k.index()] = v,
            Param::QO => self.calibration.q_o = v,
            Param::CO => self.calibration.c_o_us = v,
            Param::Class(k, f) => self.classes.set(k, f, v)?,
        }
        Ok(())
    }

    /// Map the policy and solve the model.
    pub fn solve(&self) -> Result<Prediction, ModelError> {
        predict(&self.hardware, &self.classes, self.policy, &self.params, &self.calibration)
    }
}

/// One `--sweep` axis: a parameter and its values.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    pub param: Param,
    pub values: Vec<f64>,
}

/// Most points one sweep axis may have.
pub const MAX_SWEEP_POINTS: usize = 1_000_000;

impl Sweep {
    /// Parse `NAME=START:END:STEP` (inclusive end, `STEP > 0`, `START <= END`) or
    /// `NAME=V1,V2,...`.
    pub fn parse(spec: &str) -> Result<Sweep, ModelError> {
        let bad = |problem: String| ModelError::Sweep { spec: spec.to_string(), problem };
        let (name, range) = spec.split_once('=').ok_or_else(|| bad("expected NAME=START:END:STEP or NAME=V1,V2,...".to_string()))?;
        let param = Param::parse(name.trim()).map_err(|e| bad(e.to_string()))?;
        let num = |s: &str| -> Result<f64, ModelError> {
            let t = s.trim();
            let v: f64 = t.parse().map_err(|_| bad(format!("'{t}' is not a number")))?;
            if v.is_nan() {
                return Err(bad(format!("'{t}' is not a number")));
            }
            Ok(v)
        };
        let values = if range.contains(':') {
            let parts: Vec<&str> = range.split(':').collect();
            if parts.len() != 3 {
                return Err(bad("a range needs exactly START:END:STEP".to_string()));
            }
            let (start, end, step) = (num(parts[0])?, num(parts[1])?, num(parts[2])?);
            if !(start.is_finite() && end.is_finite()) {
                return Err(bad("START and END must be finite".to_string()));
            }
            if !(step.is_finite() && step > 0.0) {
                return Err(bad(format!("STEP must be > 0, got {step}")));
            }
            if start > end {
                return Err(bad(format!("START {start} is above END {end}")));
            }
            let count = ((end - start) / step * (1.0 + 1e-12) + 1e-9).floor() + 1.0;
            if count > MAX_SWEEP_POINTS as f64 {
                return Err(bad(format!("{count} points; at most {MAX_SWEEP_POINTS}")));
            }
            (0..count as usize).map(|i| tidy(start + i as f64 * step)).collect()
        } else {
            range.split(',').map(num).collect::<Result<Vec<f64>, _>>()?
        };
        Ok(Sweep { param, values })
    }
}

/// Round away binary noise (`0.15000000000000002` → `0.15`), keeping 12 significant digits.
fn tidy(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let digits = 11 - v.abs().log10().floor() as i32;
    let scale = 10f64.powi(digits.clamp(-300, 300));
    (v * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::preset;

    fn scenario() -> Scenario {
        Scenario {
            hardware: Hardware::gp1000(),
            classes: preset("dunx-synth-8c").unwrap(),
            policy: PolicyKind::Error,
            params: PolicyParams::default(),
            calibration: Calibration { tau_us: 2.0, q_o: 0.0, c_o_us: 0.0 },
        }
    }

    #[test]
    fn range_sweep_is_inclusive_and_tidy() {
        let s = Sweep::parse("e_sp=0:0.5:0.05").unwrap();
        assert_eq!(s.param, Param::Error(ClassKind::Sp));
        assert_eq!(s.values.len(), 11);
        assert_eq!(s.values[3], 0.15);
        assert_eq!(*s.values.last().unwrap(), 0.5);
        let s = Sweep::parse("SS.r=1000,1200,2500").unwrap();
        assert_eq!(s.param, Param::Class(ClassKind::Ss, ClassField::RunGranularity));
        assert_eq!(s.values, vec![1000.0, 1200.0, 2500.0]);
        assert_eq!(Sweep::parse("n=2:16:2").unwrap().values.len(), 8);
    }

    #[test]
    fn bad_sweeps_say_why() {
        let msg = |s: &str| Sweep::parse(s).unwrap_err().to_string();
        assert_eq!(msg("e_sp"), "bad sweep 'e_sp': expected NAME=START:END:STEP or NAME=V1,V2,...");
        assert_eq!(msg("e_sp=0:0.5"), "bad sweep 'e_sp=0:0.5': a range needs exactly START:END:STEP");
        assert_eq!(msg("e_sp=0:0.5:0"), "bad sweep 'e_sp=0:0.5:0': STEP must be > 0, got 0");
        assert_eq!(msg("e_sp=1:0:0.1"), "bad sweep 'e_sp=1:0:0.1': START 1 is above END 0");
        assert_eq!(msg("e_sp=a:1:0.1"), "bad sweep 'e_sp=a:1:0.1': 'a' is not a number");
        assert!(msg("bogus=1").contains("parameter 'bogus' = NaN: unknown parameter; valid: tau, n,"));
        assert!(msg("tau=0:1e9:1e-3").contains("at most 1000000"));
    }

    #[test]
    fn error_sweep_moves_between_ideal_and_cache_for_sp() {
        let mut s = scenario();
        let mut last = 0.0;
        for e in Sweep::parse("e_sp=0:1:0.25").unwrap().values {
            s.set(Param::Error(ClassKind::Sp), e).unwrap();
            let p = s.solve().unwrap();
            assert!(p.solution.r > last, "R must grow with e_sp");
            last = p.solution.r;
        }
    }

    #[test]
    fn set_and_get_agree() {
        let mut s = scenario();
        for name in SCALAR_NAMES.iter().copied().chain(["SS.reads", "rm.w", "PR.pages"]) {
            let p = Param::parse(name).unwrap();
            let v = if p == Param::Nodes { 4.0 } else { s.get(p).max(0.0) + 1.0 };
            s.set(p, v).unwrap();
            assert_eq!(s.get(p), v, "{name}");
            assert_eq!(Param::parse(&p.name()).unwrap(), p);
        }
        assert!(s.set(Param::Nodes, 2.5).unwrap_err().to_string().contains("whole number"));
    }

    #[test]
    fn node_sweep_checks_sharers() {
        let mut s = scenario();
        s.set(Param::Nodes, 4.0).unwrap();
        let e = s.solve().unwrap_err();
        assert!(e.to_string().contains("8 sharers on a 4-node machine"), "{e}");
    }
}
