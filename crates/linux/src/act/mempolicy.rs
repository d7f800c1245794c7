//! A policy's [`MempolicyIntent`] as the arguments of `set_mempolicy(2)` (docs/live.md,
//! "Memory policies").
//!
//! Node numbers: a policy speaks of the machine's nodes `0..n` in the order of the host's
//! online nodes (`machine import` numbers them that way); the kernel speaks of its own node
//! ids, which may be sparse (`0,2`). [`KernelMempolicy::from_intent`] maps one to the other.
//!
//! `maxnode`: the kernel's `get_nodes()` decrements `maxnode` before reading the mask, so a
//! mask of `B` bits is passed with `maxnode = B + 1` (the off-by-one `numactl` also handles).

use super::ActError;
use numalab_policy::{MempolicyIntent, MempolicyMode};
use serde::Serialize;

/// `MPOL_*` modes of `include/uapi/linux/mempolicy.h`.
pub const MPOL_DEFAULT: i32 = libc::MPOL_DEFAULT;
pub const MPOL_PREFERRED: i32 = libc::MPOL_PREFERRED;
pub const MPOL_BIND: i32 = libc::MPOL_BIND;
pub const MPOL_INTERLEAVE: i32 = libc::MPOL_INTERLEAVE;
pub const MPOL_LOCAL: i32 = libc::MPOL_LOCAL;
/// Linux 5.15 (not in the libc crate).
pub const MPOL_PREFERRED_MANY: i32 = 5;
/// Linux 6.9 (not in the libc crate).
pub const MPOL_WEIGHTED_INTERLEAVE: i32 = 6;

const WORD_BITS: u32 = 64;

/// The kernel's form of a memory policy: mode, node ids and the mask words handed to the call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelMempolicy {
    /// The policy's mode, as the decision log names it.
    pub mode: MempolicyMode,
    /// Kernel node ids, ascending (empty for `default` and `local`).
    pub nodes: Vec<u32>,
    /// Why the kernel's behaviour differs from the simulated policy, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caveat: Option<String>,
}

impl KernelMempolicy {
    /// `kernel_node_ids[i]` is the kernel id of the machine's node `i`.
    pub fn from_intent(intent: &MempolicyIntent, kernel_node_ids: &[u32]) -> Result<KernelMempolicy, ActError> {
        let mut nodes = Vec::with_capacity(intent.nodes.len());
        for &n in &intent.nodes {
            let id = *kernel_node_ids.get(n as usize).ok_or(ActError::NoSuchNode { node: n as u32, nodes: kernel_node_ids.len() })?;
            if !nodes.contains(&id) {
                nodes.push(id);
            }
        }
        nodes.sort_unstable();
        let wants_nodes = !matches!(intent.mode, MempolicyMode::Default | MempolicyMode::Local);
        if wants_nodes && nodes.is_empty() {
            return Err(ActError::Mempolicy(format!("mode {} needs at least one node", mode_name(intent.mode))));
        }
        if !wants_nodes && !nodes.is_empty() {
            return Err(ActError::Mempolicy(format!("mode {} takes no nodes", mode_name(intent.mode))));
        }
        if intent.mode == MempolicyMode::Preferred && nodes.len() != 1 {
            return Err(ActError::Mempolicy(format!("mode preferred takes one node, not {}", nodes.len())));
        }
        Ok(KernelMempolicy { mode: intent.mode, nodes, caveat: intent.caveat.clone() })
    }

    /// The `mode` argument.
    pub fn mode_value(&self) -> i32 {
        match self.mode {
            MempolicyMode::Default => MPOL_DEFAULT,
            MempolicyMode::Local => MPOL_LOCAL,
            MempolicyMode::Bind => MPOL_BIND,
            MempolicyMode::Preferred => MPOL_PREFERRED,
            MempolicyMode::PreferredMany => MPOL_PREFERRED_MANY,
            MempolicyMode::Interleave => MPOL_INTERLEAVE,
            MempolicyMode::WeightedInterleave => MPOL_WEIGHTED_INTERLEAVE,
        }
    }

    /// The `nodemask` words (empty: a NULL mask) and `maxnode`.
    pub fn mask_and_maxnode(&self) -> (Vec<u64>, u64) {
        let Some(&top) = self.nodes.last() else {
            return (Vec::new(), 0);
        };
        let words = (top / WORD_BITS + 1) as usize;
        let mut mask = vec![0u64; words];
        for &n in &self.nodes {
            mask[(n / WORD_BITS) as usize] |= 1 << (n % WORD_BITS);
        }
        (mask, words as u64 * WORD_BITS as u64 + 1)
    }

    /// The Linux version that introduced the mode, for error messages.
    pub fn needs_kernel(&self) -> Option<&'static str> {
        match self.mode {
            MempolicyMode::PreferredMany => Some("5.15"),
            MempolicyMode::WeightedInterleave => Some("6.9"),
            _ => None,
        }
    }
}

pub fn mode_name(mode: MempolicyMode) -> &'static str {
    match mode {
        MempolicyMode::Default => "default",
        MempolicyMode::Local => "local",
        MempolicyMode::Bind => "bind",
        MempolicyMode::Preferred => "preferred",
        MempolicyMode::PreferredMany => "preferred_many",
        MempolicyMode::Interleave => "interleave",
        MempolicyMode::WeightedInterleave => "weighted_interleave",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(mode: MempolicyMode, nodes: &[u16]) -> MempolicyIntent {
        MempolicyIntent { mode, nodes: nodes.to_vec(), caveat: None }
    }

    #[test]
    fn interleave_over_two_nodes_is_mask_3_with_maxnode_65() {
        let k = KernelMempolicy::from_intent(&intent(MempolicyMode::Interleave, &[1, 0]), &[0, 1]).unwrap();
        assert_eq!(k.mode_value(), 3);
        assert_eq!(k.nodes, vec![0, 1]);
        assert_eq!(k.mask_and_maxnode(), (vec![0b11], 65));
    }

    #[test]
    fn sparse_kernel_ids_are_mapped_and_high_ids_take_more_words() {
        // Machine node 1 is the kernel's node 70 (a sparse numbering).
        let k = KernelMempolicy::from_intent(&intent(MempolicyMode::Bind, &[1]), &[0, 70]).unwrap();
        assert_eq!(k.nodes, vec![70]);
        assert_eq!(k.mask_and_maxnode(), (vec![0, 1 << 6], 129));
    }

    #[test]
    fn default_and_local_pass_a_null_mask() {
        for m in [MempolicyMode::Default, MempolicyMode::Local] {
            let k = KernelMempolicy::from_intent(&intent(m, &[]), &[0, 1]).unwrap();
            assert_eq!(k.mask_and_maxnode(), (vec![], 0));
        }
        assert_eq!(KernelMempolicy::from_intent(&intent(MempolicyMode::Local, &[]), &[0]).unwrap().mode_value(), 4);
    }

    #[test]
    fn every_mode_has_its_uapi_number() {
        let modes = [
            (MempolicyMode::Default, 0, &[][..]),
            (MempolicyMode::Preferred, 1, &[0][..]),
            (MempolicyMode::Bind, 2, &[0][..]),
            (MempolicyMode::Interleave, 3, &[0][..]),
            (MempolicyMode::Local, 4, &[][..]),
            (MempolicyMode::PreferredMany, 5, &[0, 1][..]),
            (MempolicyMode::WeightedInterleave, 6, &[0, 1][..]),
        ];
        for (mode, value, nodes) in modes {
            assert_eq!(KernelMempolicy::from_intent(&intent(mode, nodes), &[0, 1]).unwrap().mode_value(), value, "{mode:?}");
        }
    }

    #[test]
    fn bad_intents_are_refused_with_the_reason() {
        let e = KernelMempolicy::from_intent(&intent(MempolicyMode::Bind, &[2]), &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("node 2") && e.contains("2 nodes"), "{e}");
        let e = KernelMempolicy::from_intent(&intent(MempolicyMode::Interleave, &[]), &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("needs at least one node"), "{e}");
        let e = KernelMempolicy::from_intent(&intent(MempolicyMode::Preferred, &[0, 1]), &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("takes one node"), "{e}");
        let e = KernelMempolicy::from_intent(&intent(MempolicyMode::Local, &[0]), &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("takes no nodes"), "{e}");
    }
}
