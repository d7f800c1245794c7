//! The `PERF_FORMAT_GROUP | ID | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING` read buffer:
//! `nr, time_enabled, time_running, nr × {value, id}` as native-endian u64.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRead {
    pub time_enabled_ns: u64,
    pub time_running_ns: u64,
    /// `(id, value)` per member, in the kernel's order; map by id, never by position.
    pub values: Vec<(u64, u64)>,
}

impl GroupRead {
    pub fn value_of(&self, id: u64) -> Option<u64> {
        self.values.iter().find(|(i, _)| *i == id).map(|(_, v)| *v)
    }
}

pub fn parse_group_read(buf: &[u8]) -> Result<GroupRead, String> {
    let words: Vec<u64> = buf.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]))).collect();
    if !buf.len().is_multiple_of(8) || words.len() < 3 {
        return Err(format!("group read of {} bytes is not nr, enabled, running, entries", buf.len()));
    }
    let nr = words[0] as usize;
    if words.len() < 3 + 2 * nr {
        return Err(format!("group read announces {nr} entries but holds {}", (words.len() - 3) / 2));
    }
    let values = (0..nr).map(|k| (words[3 + 2 * k + 1], words[3 + 2 * k])).collect();
    Ok(GroupRead { time_enabled_ns: words[1], time_running_ns: words[2], values })
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab_core::profile::{EventReading, Scope};

    fn buf(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    #[test]
    fn spec_vector_2_maps_by_id_and_flags_multiplexing() {
        // Entries deliberately in id order 12, 11: the mapping must use ids.
        let r = parse_group_read(&buf(&[2, 1000, 1000, 3, 12, 7, 11])).unwrap();
        assert_eq!(r.value_of(11), Some(7));
        assert_eq!(r.value_of(12), Some(3));
        let e = EventReading::ok("a", Scope::Thread, r.value_of(11).unwrap(), r.time_enabled_ns, r.time_running_ns);
        assert!(!e.multiplexed);
        let r = parse_group_read(&buf(&[2, 1000, 500, 7, 11, 3, 12])).unwrap();
        let a = EventReading::ok("a", Scope::Thread, r.value_of(11).unwrap(), r.time_enabled_ns, r.time_running_ns);
        let b = EventReading::ok("b", Scope::Thread, r.value_of(12).unwrap(), r.time_enabled_ns, r.time_running_ns);
        assert_eq!((a.scaled_value, b.scaled_value), (Some(14.0), Some(6.0)));
        assert!(a.multiplexed && b.multiplexed);
    }

    #[test]
    fn short_buffers_are_errors_not_zeros() {
        assert!(parse_group_read(&[]).unwrap_err().contains("0 bytes"));
        assert!(parse_group_read(&buf(&[3, 1, 1, 5, 1])).unwrap_err().contains("announces 3"));
    }
}
