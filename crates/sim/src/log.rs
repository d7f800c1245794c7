//! The decision log: one JSON object per line for every decision a policy made, with the
//! simulated time, the event that caused it and what became of it (docs/json.md,
//! `numalab.decisions/1`). The live agent's audit log uses the same record.

use crate::SimError;
use numalab_policy::{Decision, DecisionRecord, EventRef, Outcome};
use std::io::Write;

/// Writes records to any writer; the first write error is kept and reported at the end, so a
/// full disk fails the run instead of silently truncating the log.
pub struct DecisionLog<'w> {
    run: u32,
    out: Box<dyn Write + 'w>,
    error: Option<std::io::Error>,
    what: String,
}

impl<'w> DecisionLog<'w> {
    /// `what` names the destination in error messages (a path).
    pub fn new(run: u32, out: Box<dyn Write + 'w>, what: impl Into<String>) -> DecisionLog<'w> {
        DecisionLog { run, out, error: None, what: what.into() }
    }

    pub fn record(&mut self, time_ns: u64, cause: &EventRef, decision: &Decision, outcome: &Outcome) {
        if self.error.is_some() {
            return;
        }
        let rec = DecisionRecord::new(self.run, time_ns, cause, decision, outcome);
        let res = serde_json::to_writer(&mut self.out, &rec).map_err(std::io::Error::from).and_then(|_| self.out.write_all(b"\n"));
        if let Err(e) = res {
            self.error = Some(e);
        }
    }

    pub fn finish(mut self) -> Result<(), SimError> {
        let flushed = self.out.flush();
        match self.error.take().map_or(flushed, Err) {
            Ok(()) => Ok(()),
            Err(e) => Err(SimError::Io(format!("cannot write the decision log {}: {e}", self.what))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab_policy::{MoveCause, Refusal};

    #[test]
    fn records_are_one_json_object_per_line() {
        let mut buf = Vec::new();
        {
            let mut log = DecisionLog::new(3, Box::new(&mut buf), "memory");
            let cause = EventRef::HintFault { space: 0, thread: 2, page: 7, page_node: 1, cpu_node: 0 };
            log.record(1500, &cause, &Decision::MigratePage { space: 0, page: 7, to: 0 }, &Outcome::Applied);
            log.record(
                1600,
                &EventRef::TaskTick { thread: 1 },
                &Decision::MoveThread { thread: 1, to: 1, cpu: Some(5), cause: MoveCause::NumaMove },
                &Outcome::Refused(Refusal::Pinned),
            );
            log.record(
                1700,
                &EventRef::Tick,
                &Decision::MoveSpace { space: 2, to: 1, from: None },
                &Outcome::Partial { moved_pages: 5, left_pages: 3 },
            );
            log.finish().unwrap();
        }
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"run":3,"time_ns":1500,"cause":{"event":"hint_fault","space":0,"thread":2,"page":7,"page_node":1,"cpu_node":0},"decision":{"kind":"migrate_page","space":0,"page":7,"to":0},"outcome":"applied"}"#
        );
        assert_eq!(
            lines[1],
            r#"{"run":3,"time_ns":1600,"cause":{"event":"task_tick","thread":1},"decision":{"kind":"move_thread","thread":1,"to":1,"cpu":5,"cause":"numa_move"},"outcome":"refused","reason":"pinned"}"#
        );
        assert_eq!(
            lines[2],
            r#"{"run":3,"time_ns":1700,"cause":{"event":"tick"},"decision":{"kind":"move_space","space":2,"to":1},"outcome":"partial","reason":"node_full","moved_pages":5,"left_pages":3}"#
        );
    }

    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left on device"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_write_error_fails_the_run() {
        let mut log = DecisionLog::new(0, Box::new(Full), "/tmp/x.jsonl");
        log.record(0, &EventRef::Tick, &Decision::Unmap { space: 0, page: 0 }, &Outcome::Applied);
        let e = log.finish().unwrap_err().to_string();
        assert!(e.contains("cannot write the decision log /tmp/x.jsonl: no space left on device"), "{e}");
    }
}
