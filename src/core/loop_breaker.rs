//! [`LoopBreaker`]: stops a turn that calls the same tool with the same arguments over and
//! over, which is how unattended agents burn money (one peer's heartbeat made 810 identical
//! calls in one turn).
//!
//! Within one turn, the third identical call (same tool, same arguments) is not run: the model
//! gets an error result saying it is repeating itself. The fifth ends the turn with a message to
//! the person. Arguments are compared as JSON values, so key order and spacing do not matter
//! (serde_json's map is sorted). Different arguments, or the same call in another turn, count
//! separately.

use std::collections::HashMap;

use serde_json::Value;

/// The identical call that is refused instead of run.
pub const REFUSE_AT: u32 = 3;
/// The identical call that ends the turn.
pub const STOP_AT: u32 = 5;

/// What to do with one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Run,
    /// Do not run it; answer with [`refusal`].
    Refuse,
    /// End the turn: the call was made [`STOP_AT`] times.
    Stop,
}

/// Counts one turn's calls.
#[derive(Debug, Default)]
pub struct LoopBreaker {
    seen: HashMap<(String, String), u32>,
}

impl LoopBreaker {
    /// Counts a call of `tool` with `arguments` and says what to do with it.
    pub fn check(&mut self, tool: &str, arguments: &Value) -> Verdict {
        let count = self
            .seen
            .entry((tool.to_owned(), arguments.to_string()))
            .or_insert(0);
        *count += 1;
        match *count {
            n if n >= STOP_AT => Verdict::Stop,
            n if n >= REFUSE_AT => Verdict::Refuse,
            _ => Verdict::Run,
        }
    }
}

/// The error result a refused call gets.
pub fn refusal(tool: &str) -> String {
    format!(
        "Error: you already called {tool} with exactly these arguments twice in this turn; it \
         was not run again. You are repeating yourself: use the earlier results, change the \
         arguments, or answer. Repeating it again ends the turn."
    )
}

/// What the person is told when a turn is ended.
pub fn stop_message(tool: &str) -> String {
    format!(
        "I stopped this turn: I called {tool} with the same arguments {STOP_AT} times without \
         getting anywhere. Ask again, perhaps with more detail."
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_third_identical_call_is_refused_and_the_fifth_stops() {
        let mut breaker = LoopBreaker::default();
        let args = json!({"path": "a", "n": 1});
        let same_reordered: Value = serde_json::from_str(r#"{ "n": 1, "path": "a" }"#).unwrap();
        assert_eq!(breaker.check("read_file", &args), Verdict::Run);
        assert_eq!(breaker.check("read_file", &same_reordered), Verdict::Run);
        assert_eq!(breaker.check("read_file", &args), Verdict::Refuse);
        // Other arguments and other tools count on their own.
        assert_eq!(
            breaker.check("read_file", &json!({"path": "b"})),
            Verdict::Run
        );
        assert_eq!(breaker.check("list_dir", &args), Verdict::Run);
        assert_eq!(breaker.check("read_file", &args), Verdict::Refuse);
        assert_eq!(breaker.check("read_file", &args), Verdict::Stop);
    }
}
