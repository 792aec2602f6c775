//! Puts overlapping blocks one after another, for a client format whose
//! items must not interleave (Responses: a delta for an item that is not
//! the current one confuses its clients). The current block streams
//! through; a block that opens while another is current is held, events
//! and all, until the current one stops (translation.md §D.6). What is
//! held is only what overlaps: nothing when the provider sends one block
//! at a time, as nearly all do.

use std::collections::BTreeMap;

use crate::protocol::translate::ir::StreamEvent;

#[derive(Debug, Default)]
pub(crate) struct Sequencer {
    current: Option<usize>,
    held: BTreeMap<usize, Vec<StreamEvent>>,
}

impl Sequencer {
    /// Passes `event` on, with any held events it releases, in order.
    pub(crate) fn push(&mut self, event: &StreamEvent, emit: &mut dyn FnMut(&StreamEvent)) {
        match event {
            StreamEvent::BlockStart { index, .. } if self.current.is_none() => {
                self.current = Some(*index);
                emit(event);
            }
            StreamEvent::BlockStart { index, .. } => {
                self.held.entry(*index).or_default().push(event.clone());
            }
            StreamEvent::Delta { index, .. } | StreamEvent::BlockStop { index } if self.current != Some(*index) => {
                if let Some(events) = self.held.get_mut(index) {
                    events.push(event.clone());
                }
            }
            StreamEvent::BlockStop { .. } => {
                emit(event);
                self.current = None;
                self.release(emit);
            }
            StreamEvent::Finish { .. } => {
                self.release(emit);
                emit(event);
            }
            // An error ends the stream: what was held never reaches the client.
            StreamEvent::Error { .. } => {
                self.held.clear();
                emit(event);
            }
            StreamEvent::Start { .. } | StreamEvent::Delta { .. } => emit(event),
        }
    }

    /// Sends the held blocks, oldest first, up to one still open.
    fn release(&mut self, emit: &mut dyn FnMut(&StreamEvent)) {
        while self.current.is_none() {
            let Some((index, events)) = self.held.pop_first() else { return };
            let stopped = matches!(events.last(), Some(StreamEvent::BlockStop { .. }));
            for event in &events {
                emit(event);
            }
            if !stopped {
                self.current = Some(index);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::translate::ir::{BlockKind, Delta};

    fn tool(index: usize) -> StreamEvent {
        StreamEvent::BlockStart {
            index,
            block: BlockKind::ToolCall { id: format!("c{index}"), name: "f".into(), custom: false },
        }
    }
    fn args(index: usize, a: &str) -> StreamEvent {
        StreamEvent::Delta { index, delta: Delta::ToolArgs(a.into()) }
    }

    #[test]
    fn interleaved_blocks_come_out_one_after_another() {
        use StreamEvent::BlockStop;
        let input = [
            tool(0),
            tool(1),
            args(1, "b1"),
            args(0, "a1"),
            args(1, "b2"),
            BlockStop { index: 0 },
            tool(2),
            args(2, "c"),
            BlockStop { index: 1 },
            BlockStop { index: 2 },
        ];
        let mut s = Sequencer::default();
        let mut got = Vec::new();
        for e in &input {
            s.push(e, &mut |e| got.push(e.clone()));
        }
        let want = [
            tool(0),
            args(0, "a1"),
            BlockStop { index: 0 },
            tool(1),
            args(1, "b1"),
            args(1, "b2"),
            BlockStop { index: 1 },
            tool(2),
            args(2, "c"),
            BlockStop { index: 2 },
        ];
        assert_eq!(got, want);
    }
}
