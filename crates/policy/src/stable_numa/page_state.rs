//! Per-page metadata of Stable-NUMA: the seven page states, the bypass exponent, the memory of
//! an in-transition state, their one-byte encoding, fault classification and the transition
//! rules R0–R6 (docs/policies/stable-numa.md, "Page states" and "Metadata byte").

use numalab_core::{CpuId, NodeId, ThreadId};

/// The three stable kinds a classified fault points to (P → TP, SL → NP, SR → SS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Thread-private.
    Tp,
    /// Node-private (shared by threads of one node).
    Np,
    /// System-shared (shared by threads of two or more nodes).
    Ss,
}

impl Kind {
    /// 1, 2, 3: the code of the stable state, also the `prev` encoding.
    pub fn code(self) -> u8 {
        match self {
            Kind::Tp => 1,
            Kind::Np => 2,
            Kind::Ss => 3,
        }
    }

    fn from_code(c: u8) -> Option<Kind> {
        match c {
            1 => Some(Kind::Tp),
            2 => Some(Kind::Np),
            3 => Some(Kind::Ss),
            _ => None,
        }
    }
}

/// A page state. Codes 0–6 are the byte encoding (code 7 is reserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// Fresh page: no classified fault yet.
    Un,
    /// A stable state.
    Stable(Kind),
    /// In transition toward a stable state (one fault of that type seen).
    It(Kind),
}

impl State {
    pub const TP: State = State::Stable(Kind::Tp);
    pub const NP: State = State::Stable(Kind::Np);
    pub const SS: State = State::Stable(Kind::Ss);
    pub const TP_IT: State = State::It(Kind::Tp);
    pub const NP_IT: State = State::It(Kind::Np);
    pub const SS_IT: State = State::It(Kind::Ss);

    pub fn code(self) -> u8 {
        match self {
            State::Un => 0,
            State::Stable(k) => k.code(),
            State::It(k) => 3 + k.code(),
        }
    }

    pub fn from_code(c: u8) -> Option<State> {
        match c {
            0 => Some(State::Un),
            1..=3 => Kind::from_code(c).map(State::Stable),
            4..=6 => Kind::from_code(c - 3).map(State::It),
            _ => None,
        }
    }

    /// UN and the in-transition states are unmapped at every scanner visit.
    pub fn always_unmapped(self) -> bool {
        !matches!(self, State::Stable(_))
    }
}

/// The metadata of one page: state, bypass exponent `e` (0..=7) and, for an in-transition
/// state, the last stable state it came from (`prev`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub state: State,
    pub e: u8,
    pub prev: Option<Kind>,
}

/// Largest exponent the 3-bit field holds.
pub const E_BITS_MAX: u8 = 7;

impl Meta {
    pub const FRESH: Meta = Meta { state: State::Un, e: 0, prev: None };

    pub fn new(state: State, e: u8, prev: Option<Kind>) -> Meta {
        Meta { state, e, prev }
    }

    /// `byte = state | e << 3 | prev << 6` (prev: 0 none, 1 TP, 2 NP, 3 SS).
    pub fn pack(self) -> u8 {
        debug_assert!(self.e <= E_BITS_MAX);
        self.state.code() | (self.e & 7) << 3 | self.prev.map_or(0, Kind::code) << 6
    }

    /// The inverse of [`Meta::pack`]; `None` for a byte no valid page can hold (code 7, a
    /// `prev` outside an in-transition state, or a `prev` equal to the state's own target).
    pub fn unpack(byte: u8) -> Option<Meta> {
        let state = State::from_code(byte & 7)?;
        let e = (byte >> 3) & 7;
        let prev_code = byte >> 6;
        let prev = Kind::from_code(prev_code);
        match state {
            State::It(k) if prev == Some(k) => None,
            State::It(_) => Some(Meta { state, e, prev }),
            _ if prev_code != 0 => None,
            _ => Some(Meta { state, e, prev: None }),
        }
    }
}

/// The type of a hinting fault, from the page's previous fault and the current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultType {
    /// No previous fault recorded.
    U,
    /// Same thread as the previous fault.
    P,
    /// Another thread, whose previous fault was on a CPU of the same node.
    Sl,
    /// Another thread, on a CPU of another node.
    Sr,
}

impl FaultType {
    /// The stable kind this fault type points to.
    pub fn target(self) -> Option<Kind> {
        match self {
            FaultType::U => None,
            FaultType::P => Some(Kind::Tp),
            FaultType::Sl => Some(Kind::Np),
            FaultType::Sr => Some(Kind::Ss),
        }
    }
}

/// Mask of the thread-id bits kept in a page's `last` record (`pid_bits`; 32 = all).
pub fn tid_mask(pid_bits: u32) -> u32 {
    if pid_bits >= 32 {
        u32::MAX
    } else {
        (1u32 << pid_bits) - 1
    }
}

/// Classify a fault by thread `t` on CPU `c` against the page's previous fault `last`.
/// Thread ids are compared on their low `mask` bits (Linux keeps 8 of them).
pub fn classify(last: Option<(ThreadId, CpuId)>, t: ThreadId, c: CpuId, mask: u32, node_of_cpu: impl Fn(CpuId) -> NodeId) -> FaultType {
    match last {
        None => FaultType::U,
        Some((lt, _)) if lt & mask == t & mask => FaultType::P,
        Some((_, lc)) if node_of_cpu(lc) == node_of_cpu(c) => FaultType::Sl,
        Some(_) => FaultType::Sr,
    }
}

/// Which rule of the transition table fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Unclassified fault: nothing changes.
    R0,
    /// UN → X~[none].
    R1,
    /// Loop in a stable state: `e + 1` (saturating).
    R2,
    /// Stable S → X~[S].
    R3,
    /// Confirmed change Y~ → Y: `e = 0`.
    R4,
    /// Return Y~[q] → q: `e` kept.
    R5,
    /// Y~[q] → X~[q].
    R6,
}

/// The result of one fault on a page's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    pub next: Meta,
    pub rule: Rule,
    /// The placement rule to run: the stable state reached by R2, R4 or R5.
    pub placement: Option<Kind>,
}

/// Apply a classified fault to a page's metadata. `it_memory = false` is the strict mode:
/// in-transition states remember nothing, so a return needs two faults (R6 then R4).
/// `e_max` is where R2 saturates (at most 7).
pub fn transition(m: Meta, f: FaultType, it_memory: bool, e_max: u8) -> Transition {
    let Some(x) = f.target() else {
        return Transition { next: m, rule: Rule::R0, placement: None };
    };
    let remember = |q: Option<Kind>| if it_memory { q } else { None };
    let (next, rule, placement) = match m.state {
        State::Un => (Meta::new(State::It(x), m.e, None), Rule::R1, None),
        State::Stable(s) if s == x => (Meta::new(m.state, (m.e + 1).min(e_max), None), Rule::R2, Some(s)),
        State::Stable(s) => (Meta::new(State::It(x), m.e, remember(Some(s))), Rule::R3, None),
        State::It(y) if y == x => (Meta::new(State::Stable(y), 0, None), Rule::R4, Some(y)),
        State::It(_) if it_memory && m.prev == Some(x) => (Meta::new(State::Stable(x), m.e, None), Rule::R5, Some(x)),
        State::It(_) => (Meta::new(State::It(x), m.e, remember(m.prev)), Rule::R6, None),
    };
    Transition { next, rule, placement }
}

/// Selective profiling: may the scanner unmap a page with this metadata in sequence `seq`?
/// UN and in-transition pages: always. Stable pages: iff `seq mod 2^e == 0`.
pub fn unmap_due(m: Meta, seq: u64) -> bool {
    m.state.always_unmapped() || seq.is_multiple_of(1u64 << m.e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use FaultType::{Sl, Sr, P, U};

    const A: ThreadId = 10;
    const B: ThreadId = 11;

    fn node(c: CpuId) -> NodeId {
        (c / 2) as NodeId
    }

    /// Test vector 9.1 (docs/policies/stable-numa.md, "Test vectors"): fault classification (CPUs 0–1 on N0, 2–3 on N1).
    #[test]
    fn vector_9_1_fault_classification() {
        let m = u32::MAX;
        assert_eq!(classify(None, A, 0, m, node), U);
        assert_eq!(classify(Some((A, 0)), A, 3, m, node), P, "a node change does not matter");
        assert_eq!(classify(Some((A, 0)), B, 1, m, node), Sl);
        assert_eq!(classify(Some((A, 0)), B, 2, m, node), Sr);
        assert_eq!(classify(Some((A, 2)), B, 3, m, node), Sl);
    }

    #[test]
    fn truncated_tids_compare_low_bits() {
        let m = tid_mask(8);
        assert_eq!(m, 0xff);
        assert_eq!(classify(Some((5, 0)), 256 + 5, 2, m, node), P, "tids 5 and 261 look alike in 8 bits");
        assert_eq!(classify(Some((5, 0)), 6, 2, m, node), Sr);
        assert_eq!(tid_mask(32), u32::MAX);
    }

    /// Test vector 9.4 (docs/policies/stable-numa.md, "Test vectors"): the metadata byte.
    #[test]
    fn vector_9_4_metadata_byte() {
        let cases = [
            (Meta::new(State::Un, 0, None), 0x00),
            (Meta::new(State::TP, 7, None), 0x39),
            (Meta::new(State::TP_IT, 2, Some(Kind::Np)), 0x94),
            (Meta::new(State::NP_IT, 0, Some(Kind::Ss)), 0xC5),
            (Meta::new(State::SS_IT, 5, Some(Kind::Tp)), 0x6E),
        ];
        for (m, byte) in cases {
            assert_eq!(m.pack(), byte, "{m:?}");
            assert_eq!(Meta::unpack(byte), Some(m));
        }
    }

    /// Invariant 16 (lossless packing) and invariant 1 (valid bytes only), over all 256 bytes.
    #[test]
    fn every_valid_byte_round_trips_and_invalid_ones_are_rejected() {
        let mut valid = 0;
        for b in 0..=255u8 {
            match Meta::unpack(b) {
                Some(m) => {
                    valid += 1;
                    assert_eq!(m.pack(), b);
                    assert!(m.e <= 7);
                    if let State::It(k) = m.state {
                        assert_ne!(m.prev, Some(k));
                    } else {
                        assert_eq!(m.prev, None);
                    }
                }
                None => {
                    let code = b & 7;
                    let prev = b >> 6;
                    assert!(code == 7 || (code <= 3 && prev != 0) || (code >= 4 && prev == code - 3), "{b:#x}");
                }
            }
        }
        // 8 exponents × (4 non-IT states + 3 IT states × 3 allowed prev values).
        assert_eq!(valid, 8 * (4 + 3 * 3));
    }

    fn t(m: Meta, f: FaultType) -> Transition {
        transition(m, f, true, 7)
    }

    fn stable(k: Kind, e: u8) -> Meta {
        Meta::new(State::Stable(k), e, None)
    }

    fn it(k: Kind, prev: Option<Kind>, e: u8) -> Meta {
        Meta::new(State::It(k), e, prev)
    }

    /// The full transition table: every (state, fault type) pair, with the rule, the next
    /// state, `e`, and the placement rule run.
    #[test]
    fn full_transition_table() {
        use Kind::{Np, Ss, Tp};
        let e = 3;
        // (current, [P, SL, SR] → (next, rule))
        let loopy = |k: Kind| (stable(k, e + 1), Rule::R2, Some(k));
        let conf = |k: Kind| (stable(k, 0), Rule::R4, Some(k));
        let ret = |k: Kind| (stable(k, e), Rule::R5, Some(k));
        let to_it = |k: Kind, q: Option<Kind>, r: Rule| (it(k, q, e), r, None);
        type Row = (Meta, [(Meta, Rule, Option<Kind>); 3]);
        let rows: Vec<Row> = vec![
            (Meta::new(State::Un, e, None), [to_it(Tp, None, Rule::R1), to_it(Np, None, Rule::R1), to_it(Ss, None, Rule::R1)]),
            (stable(Tp, e), [loopy(Tp), to_it(Np, Some(Tp), Rule::R3), to_it(Ss, Some(Tp), Rule::R3)]),
            (stable(Np, e), [to_it(Tp, Some(Np), Rule::R3), loopy(Np), to_it(Ss, Some(Np), Rule::R3)]),
            (stable(Ss, e), [to_it(Tp, Some(Ss), Rule::R3), to_it(Np, Some(Ss), Rule::R3), loopy(Ss)]),
            (it(Tp, None, e), [conf(Tp), to_it(Np, None, Rule::R6), to_it(Ss, None, Rule::R6)]),
            (it(Tp, Some(Np), e), [conf(Tp), ret(Np), to_it(Ss, Some(Np), Rule::R6)]),
            (it(Tp, Some(Ss), e), [conf(Tp), to_it(Np, Some(Ss), Rule::R6), ret(Ss)]),
            (it(Np, None, e), [to_it(Tp, None, Rule::R6), conf(Np), to_it(Ss, None, Rule::R6)]),
            (it(Np, Some(Tp), e), [ret(Tp), conf(Np), to_it(Ss, Some(Tp), Rule::R6)]),
            (it(Np, Some(Ss), e), [to_it(Tp, Some(Ss), Rule::R6), conf(Np), ret(Ss)]),
            (it(Ss, None, e), [to_it(Tp, None, Rule::R6), to_it(Np, None, Rule::R6), conf(Ss)]),
            (it(Ss, Some(Tp), e), [ret(Tp), to_it(Np, Some(Tp), Rule::R6), conf(Ss)]),
            (it(Ss, Some(Np), e), [to_it(Tp, Some(Np), Rule::R6), ret(Np), conf(Ss)]),
        ];
        assert_eq!(rows.len(), 13, "UN, 3 stable states, 3 IT states × 3 memories");
        for (cur, expected) in rows {
            assert_eq!(t(cur, U), Transition { next: cur, rule: Rule::R0, placement: None }, "U on {cur:?}");
            for (f, (next, rule, placement)) in [P, Sl, Sr].into_iter().zip(expected) {
                let got = t(cur, f);
                assert_eq!(got, Transition { next, rule, placement }, "{f:?} on {cur:?}");
                assert!(Meta::unpack(got.next.pack()).is_some(), "invariant 1 after {f:?} on {cur:?}");
            }
        }
    }

    fn run(start: Meta, faults: &[FaultType], it_memory: bool) -> (Meta, Vec<Option<Kind>>) {
        let mut m = start;
        let mut placements = Vec::new();
        for &f in faults {
            let tr = transition(m, f, it_memory, 7);
            m = tr.next;
            placements.push(tr.placement);
        }
        (m, placements)
    }

    /// Test vector 9.2 (docs/policies/stable-numa.md, "Test vectors"): transitions and `e`, faults applied left to right.
    #[test]
    fn vector_9_2_transitions_and_exponent() {
        use Kind::{Np, Ss, Tp};
        let un = Meta::FRESH;
        assert_eq!(run(un, &[U], true), (un, vec![None]));
        assert_eq!(run(stable(Tp, 3), &[Sl], true), (it(Np, Some(Tp), 3), vec![None]));
        assert_eq!(run(stable(Tp, 3), &[Sl, P], true), (stable(Tp, 3), vec![None, Some(Tp)]));
        assert_eq!(run(stable(Tp, 3), &[Sl, Sr], true), (it(Ss, Some(Tp), 3), vec![None, None]));
        assert_eq!(run(stable(Tp, 3), &[Sl, Sr, Sr], true), (stable(Ss, 0), vec![None, None, Some(Ss)]));
        assert_eq!(run(stable(Tp, 7), &[P], true), (stable(Tp, 7), vec![Some(Tp)]));
        assert_eq!(run(it(Np, Some(Ss), 4), &[Sl], true), (stable(Np, 0), vec![Some(Np)]));
        assert_eq!(run(stable(Ss, 5), &[P, Sl], true), (it(Np, Some(Ss), 5), vec![None, None]));
        // Strict mode.
        assert_eq!(run(stable(Tp, 3), &[Sl, P], false), (it(Tp, None, 3), vec![None, None]));
        assert_eq!(run(stable(Tp, 3), &[Sl, P, P], false), (stable(Tp, 0), vec![None, None, Some(Tp)]));
    }

    /// Invariants 3, 4 and 5, from every valid metadata byte.
    #[test]
    fn invariants_3_4_5_from_every_state() {
        for b in 0..=255u8 {
            let Some(m) = Meta::unpack(b) else { continue };
            for it_memory in [true, false] {
                for f in [P, Sl, Sr] {
                    let one = transition(m, f, it_memory, 7).next;
                    if let (State::Stable(a), State::Stable(b)) = (m.state, one.state) {
                        assert_eq!(a, b, "invariant 3: {m:?} {f:?}");
                    }
                    assert!(it_memory || one.prev.is_none(), "strict mode never stores prev");
                    let two = transition(one, f, it_memory, 7).next;
                    assert_eq!(two.state, State::Stable(f.target().unwrap()), "invariant 4: {m:?} {f:?} {f:?}");
                }
            }
            if let State::Stable(s) = m.state {
                for f in [P, Sl, Sr].into_iter().filter(|f| f.target() != Some(s)) {
                    let back = [P, Sl, Sr].into_iter().find(|g| g.target() == Some(s)).unwrap();
                    assert_eq!(run(m, &[f, back], true).0, m, "invariant 5: {m:?}");
                }
            }
        }
    }

    /// Test vector 9.3 (docs/policies/stable-numa.md, "Test vectors") (schedule part): UN and IT pages always; stable pages iff seq mod 2^e = 0.
    #[test]
    fn unmap_schedule_follows_the_exponent() {
        for seq in 0..20 {
            assert!(unmap_due(Meta::FRESH, seq));
            assert!(unmap_due(it(Kind::Ss, Some(Kind::Tp), 7), seq));
            assert!(unmap_due(stable(Kind::Tp, 0), seq));
            assert_eq!(unmap_due(stable(Kind::Np, 2), seq), seq % 4 == 0);
            assert_eq!(unmap_due(stable(Kind::Ss, 7), seq), seq % 128 == 0);
        }
    }

    /// The owner touches the page right after every unmap (vector 9.3): it becomes TP with
    /// e = 0 in sequence 3 and is then unmapped in 4, 6, 8, 16, 32, ..., 512.
    #[test]
    fn vector_9_3_unmap_sequences_of_a_private_page() {
        let mut m = stable(Kind::Tp, 0);
        let mut unmapped = Vec::new();
        let mut e_after = Vec::new();
        let mut bypasses_9_to_15 = 0;
        for seq in 4..=512u64 {
            if unmap_due(m, seq) {
                unmapped.push(seq);
                m = transition(m, P, true, 7).next;
                e_after.push(m.e);
            } else if (9..=15).contains(&seq) {
                bypasses_9_to_15 += 1;
            }
        }
        assert_eq!(unmapped, [4, 6, 8, 16, 32, 64, 128, 256, 384, 512]);
        assert_eq!(e_after, [1, 2, 3, 4, 5, 6, 7, 7, 7, 7]);
        assert_eq!(bypasses_9_to_15, 7);
    }

    #[test]
    fn e_max_caps_the_loop() {
        assert_eq!(transition(stable(Kind::Tp, 2), P, true, 2).next.e, 2);
        assert_eq!(transition(stable(Kind::Tp, 1), P, true, 2).next.e, 2);
    }
}
