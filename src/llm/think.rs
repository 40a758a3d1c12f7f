//! [`TagSplitter`]: reasoning and tool-call markup taken out of a reply's text as it streams.
//!
//! Many servers have no reasoning parser, or one that is off: DeepSeek-R1 on Together, LM
//! Studio, llama.cpp without `--reasoning-format`, vLLM without `--reasoning-parser` put the
//! model's thinking inside `content` between `<think>` and `</think>`. Models trained on the
//! Hermes format (Qwen, many fine-tunes) served without a tool parser write their calls into
//! `content` as `<tool_call>{"name": …, "arguments": …}</tool_call>`. Shown as they are, the
//! person reads the model's scratchpad or raw JSON, and the history keeps it. The splitter routes
//! text between those tags away from the reply, holding back any tail that could be the start of
//! a tag until the next piece says what it is, so no half tag is ever shown.
//!
//! One more shape: chat templates of the R1 family put `<think>` into the *prompt*, so the
//! answer begins inside the reasoning and only `</think>` appears. Text streamed before that
//! closing tag was reasoning after all: [`Split::Reclassified`] tells the caller to withdraw it.

/// The tags recognised, in `content`.
const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";
const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";

/// Where the splitter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// In the reply's text.
    #[default]
    Text,
    /// Between `<think>` and `</think>`.
    Think,
    /// Between `<tool_call>` and `</tool_call>`.
    Call,
}

/// What one piece of content turned into.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Split {
    /// Reply text, safe to show now.
    pub(crate) text: String,
    /// Reasoning.
    pub(crate) reasoning: String,
    /// Whether the text shown so far turned out to be reasoning (a lone `</think>`): the caller
    /// withdraws what it showed; [`TagSplitter::take_shown`] hands it over as reasoning.
    pub(crate) reclassified: bool,
}

/// Splits streamed content into reply text, reasoning and tool-call markup.
#[derive(Debug, Default)]
pub(crate) struct TagSplitter {
    state: State,
    /// A tail held back because it may be the start of a tag.
    pending: String,
    /// Everything released as text so far (a lone `</think>` turns it into reasoning).
    shown: String,
    /// Whether any tag was seen: only a reply that never opened one can be reclassified.
    seen_tag: bool,
    /// The bodies of `<tool_call>` blocks, in order.
    calls: Vec<String>,
    /// A block just closed: the newline after its tag belongs to it, not to the answer.
    after_close: bool,
}

impl TagSplitter {
    /// Feeds one piece of `content`.
    pub(crate) fn push(&mut self, piece: &str) -> Split {
        let mut split = Split::default();
        let mut rest = std::mem::take(&mut self.pending);
        rest.push_str(piece);
        let mut rest = rest.as_str();
        loop {
            if self.after_close && !rest.is_empty() {
                rest = rest.strip_prefix('\n').unwrap_or(rest);
                self.after_close = false;
            }
            if self.state == State::Text {
                let found = [
                    (THINK_OPEN, State::Think),
                    (CALL_OPEN, State::Call),
                    (THINK_CLOSE, State::Text),
                ]
                .into_iter()
                .filter_map(|(tag, next)| rest.find(tag).map(|at| (at, tag, next)))
                .min_by_key(|(at, ..)| *at);
                match found {
                    Some((at, THINK_CLOSE, _)) => {
                        let before = &rest[..at];
                        if self.seen_tag {
                            // A stray closing tag inside an answer: it is text.
                            self.release(&rest[..at + THINK_CLOSE.len()], &mut split);
                        } else {
                            // Everything so far was reasoning whose `<think>` was in the prompt.
                            split.reclassified = true;
                            split.reasoning.push_str(&self.shown);
                            split.reasoning.push_str(&split.text);
                            split.reasoning.push_str(before);
                            split.text.clear();
                            self.shown.clear();
                            self.seen_tag = true;
                        }
                        rest = &rest[at + THINK_CLOSE.len()..];
                    }
                    Some((at, tag, next)) => {
                        self.release(&rest[..at], &mut split);
                        self.seen_tag = true;
                        self.state = next;
                        if next == State::Call {
                            self.calls.push(String::new());
                        }
                        rest = &rest[at + tag.len()..];
                    }
                    None => {
                        let keep = partial_tag_len(rest, &[THINK_OPEN, CALL_OPEN, THINK_CLOSE]);
                        self.release(&rest[..rest.len() - keep], &mut split);
                        self.pending = rest[rest.len() - keep..].to_owned();
                        return split;
                    }
                }
                continue;
            }
            let close = if self.state == State::Think {
                THINK_CLOSE
            } else {
                CALL_CLOSE
            };
            match rest.find(close) {
                Some(at) => {
                    self.take_inside(&rest[..at], &mut split);
                    self.state = State::Text;
                    self.after_close = true;
                    rest = &rest[at + close.len()..];
                }
                None => {
                    let keep = partial_tag_len(rest, &[close]);
                    self.take_inside(&rest[..rest.len() - keep], &mut split);
                    self.pending = rest[rest.len() - keep..].to_owned();
                    return split;
                }
            }
        }
    }

    /// The end of the content: what was held back is released as what it would have been.
    pub(crate) fn finish(&mut self) -> Split {
        let mut split = Split::default();
        let rest = std::mem::take(&mut self.pending);
        match self.state {
            State::Text => self.release(&rest, &mut split),
            State::Think | State::Call => self.take_inside(&rest, &mut split),
        }
        split
    }

    /// The bodies of the `<tool_call>` blocks seen, in order.
    pub(crate) fn take_calls(&mut self) -> Vec<String> {
        std::mem::take(&mut self.calls)
    }

    fn release(&mut self, text: &str, split: &mut Split) {
        if text.is_empty() {
            return;
        }
        self.shown.push_str(text);
        split.text.push_str(text);
    }

    fn take_inside(&mut self, text: &str, split: &mut Split) {
        match self.state {
            State::Think => split.reasoning.push_str(text),
            State::Call => {
                if let Some(call) = self.calls.last_mut() {
                    call.push_str(text);
                }
            }
            State::Text => self.release(text, split),
        }
    }
}

/// The length of the longest tail of `text` that is a proper prefix of one of `tags`.
fn partial_tag_len(text: &str, tags: &[&str]) -> usize {
    let longest = tags.iter().map(|tag| tag.len() - 1).max().unwrap_or(0);
    (1..=longest.min(text.len()))
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n)
                && tags
                    .iter()
                    .any(|tag| tag.starts_with(&text[text.len() - n..]))
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `pieces` and returns (text, reasoning, calls, reclassified at any point).
    fn run(pieces: &[&str]) -> (String, String, Vec<String>, bool) {
        let mut splitter = TagSplitter::default();
        let (mut text, mut reasoning, mut again) = (String::new(), String::new(), false);
        for piece in pieces {
            let split = splitter.push(piece);
            if split.reclassified {
                text.clear();
                again = true;
            }
            text.push_str(&split.text);
            reasoning.push_str(&split.reasoning);
        }
        let split = splitter.finish();
        text.push_str(&split.text);
        reasoning.push_str(&split.reasoning);
        (text, reasoning, splitter.take_calls(), again)
    }

    #[test]
    fn think_blocks_leave_the_text_whatever_the_chunking() {
        let whole = "<think>\nfirst, the sky\n</think>\nIt is blue.";
        for cut in 0..whole.len() {
            let (text, reasoning, calls, _) = run(&[&whole[..cut], &whole[cut..]]);
            assert_eq!(text, "It is blue.", "cut at {cut}");
            assert_eq!(reasoning, "\nfirst, the sky\n", "cut at {cut}");
            assert!(calls.is_empty());
        }
        let chars: Vec<String> = whole.chars().map(String::from).collect();
        let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(run(&pieces).0, "It is blue.");
    }

    #[test]
    fn a_lone_closing_tag_makes_what_came_before_reasoning() {
        let (text, reasoning, _, again) = run(&["Let me think", " about it.</th", "ink>\n\nYes."]);
        assert!(again);
        assert_eq!(text, "\n\nYes.");
        assert_eq!(reasoning, "Let me think about it.");
    }

    #[test]
    fn tool_call_markup_is_collected_and_plain_text_passes() {
        let (text, _, calls, _) = run(&[
            "Checking.\n<tool_",
            "call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        ]);
        assert_eq!(text, "Checking.\n");
        assert_eq!(
            calls,
            vec!["\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"]
        );
        let (text, reasoning, calls, again) = run(&["a < b and x<y ", "<", "b>bold</b> é<"]);
        assert_eq!(text, "a < b and x<y <b>bold</b> é<");
        assert!(reasoning.is_empty() && calls.is_empty() && !again);
    }

    #[test]
    fn an_unclosed_think_is_reasoning_and_a_late_stray_close_is_text() {
        let (text, reasoning, ..) = run(&["<think>still going"]);
        assert_eq!((text.as_str(), reasoning.as_str()), ("", "still going"));
        let (text, ..) = run(&["<think>a</think>Use </think> to close."]);
        assert_eq!(text, "Use </think> to close.");
    }
}
