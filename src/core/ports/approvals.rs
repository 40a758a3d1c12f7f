//! **API Boundary.** Where pending approvals are kept while the owner decides, and the gate
//! a turn's tools wait on ([`ApprovalGate`]), with why it refused ([`Refusal`]).
//!
//! The gateway writes the whole list each time it changes, so after a crash or restart it knows
//! which requests were still open: those are expired, the owner is told, and their commands
//! never run (the turn that waited for them is gone).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::core::session::SessionId;

/// One request for the owner's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The request's id (the HTTP API's `approval_id`).
    pub id: String,
    /// The one-time code the owner answers with (`yes CODE`).
    pub code: String,
    /// The session whose turn asks.
    pub session: SessionId,
    /// The tool that would run (`shell`).
    pub tool: String,
    /// What would run, exactly as it would run.
    pub command: String,
    /// Why it was not allowed without asking.
    pub reason: String,
    /// When it counts as denied.
    pub expires_at: DateTime<Utc>,
    /// Who asked for the turn that wants it: in a room the owner shares, the owner must know
    /// whether it is their own request or someone else's. `None` in a list an older version
    /// wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<Requester>,
}

/// Who asked for a turn whose tool waits for approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requester {
    /// Their id on the channel (a Matrix user id, a mail address).
    pub id: String,
    /// Whether the channel vouched that they are the owner.
    pub owner: bool,
}

/// The longest question a channel is asked to show, in bytes: it must arrive as one message
/// (a Matrix event splits at 16 KB, and a question cut in pieces renders each piece on its
/// own, so a fence opened in the first is never closed and the second hides what it holds).
/// A command too long for that is refused, not shown in part.
pub const MAX_QUESTION_BYTES: usize = 12 * 1024;

impl ApprovalRequest {
    /// A request of `tool` for `command` as it would be asked, without an id, a code or a
    /// session: for measuring its question before anything is opened. The code and the
    /// expiry take the room the real ones take.
    pub fn sketch(tool: &str, command: &str, reason: &str, requester: Option<Requester>) -> Self {
        Self {
            id: String::new(),
            code: "XXXXXX".to_owned(),
            session: SessionId::cli_local(),
            tool: tool.to_owned(),
            command: command.to_owned(),
            reason: reason.to_owned(),
            expires_at: DateTime::<Utc>::MIN_UTC,
            requester,
        }
    }

    /// The text that asks the owner, for channels that ask in words (Matrix, email).
    ///
    /// The command is shown so that every client renders all of it: control, invisible and
    /// bidirectional characters become visible escapes ([`visible`]), and the fence is longer
    /// than any run of backticks in the command, so nothing in it can close the fence early
    /// and hide the rest (a `$(…)` behind a line of four backticks and a link definition was
    /// the attack). Markdown inside a fence is literal, and HTML renderers escape it.
    pub fn question(&self) -> String {
        let command = visible(&self.command);
        let fence = "`".repeat(longest_backtick_run(&command).max(2) + 1);
        format!(
            "Approval needed: the `{tool}` tool wants to run\n\n{fence}\n{command}\n{fence}\n\n\
             {asked}({reason}.) Answer `yes {code}` to run it once or `no {code}` to refuse. \
             Without an answer it is refused at {expires} UTC.",
            tool = self.tool,
            asked = self.asked_by(),
            reason = visible(&self.reason).replace('`', "'"),
            code = self.code,
            expires = self.expires_at.format("%Y-%m-%d %H:%M"),
        )
    }

    /// Who asked, as the question says it: plainly when it is not the owner.
    fn asked_by(&self) -> String {
        match &self.requester {
            Some(Requester { id, owner: true }) => {
                format!("Asked by you ({}). ", inline_code(&visible(id)))
            }
            Some(Requester { id, owner: false }) => format!(
                "Asked by {}, who is NOT the owner: approve only if you want them to run it. ",
                inline_code(&visible(id).replace('\n', "\\n"))
            ),
            None => String::new(),
        }
    }

    /// The command on one line with every character that could hide another shown as an
    /// escape, for short mentions ("Approved: …") in channels that render Markdown.
    pub fn command_inline(&self) -> String {
        inline_code(&visible(&self.command).replace('\n', "\\n"))
    }
}

/// `shown` (one line, already [`visible`]) as Markdown inline code that nothing in it can close.
fn inline_code(shown: &str) -> String {
    let fence = "`".repeat(longest_backtick_run(shown) + 1);
    // CommonMark drops one space on each side, which lets a text start or end with a backtick
    // without merging into the fence.
    let pad = if shown.starts_with('`') || shown.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{shown}{pad}{fence}")
}

/// `text` with every character a reader could not see, or that moves what they see,
/// replaced by a visible escape (`\r`, `\t`, `\x1b`, `\u{202e}`, …): control characters but
/// the newline, bidirectional controls, zero-width and other format characters. What the
/// owner reads is then what would run, at a terminal as in a chat client.
pub fn visible(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => shown.push('\n'),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                shown.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if is_hidden(c) => shown.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => shown.push(c),
        }
    }
    shown
}

/// Characters that render as nothing or rearrange the text around them.
fn is_hidden(c: char) -> bool {
    matches!(c as u32,
        0x80..=0x9f            // C1 controls
        | 0xad                 // soft hyphen
        | 0x034f               // combining grapheme joiner
        | 0x061c               // Arabic letter mark
        | 0x115f | 0x1160      // Hangul fillers
        | 0x17b4 | 0x17b5
        | 0x180b..=0x180f      // Mongolian variation selectors and vowel separator
        | 0x200b..=0x200f      // zero-width space, joiners, LRM, RLM
        | 0x2028..=0x202e      // line/paragraph separators, bidi embeddings and overrides
        | 0x2060..=0x206f      // word joiner, invisible operators, bidi isolates
        | 0x3164 | 0xffa0      // Hangul fillers
        | 0xfe00..=0xfe0f      // variation selectors
        | 0xfeff               // byte order mark
        | 0xfff9..=0xfffb      // interlinear annotations
        | 0x1d173..=0x1d17a    // musical format characters
        | 0xe0000..=0xe007f    // tags
        | 0xe0100..=0xe01ef    // variation selectors supplement
    )
}

/// The longest run of backticks in `text`.
fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// The pending list could not be kept.
#[derive(Debug, thiserror::Error)]
#[error("pending approvals in {path}: {error}")]
pub struct ApprovalStoreError {
    /// The file.
    pub path: String,
    /// What failed.
    pub error: std::io::Error,
}

/// Keeps the pending approvals across restarts.
pub trait ApprovalStore: Send + Sync {
    /// Replaces the stored list with `pending`.
    fn save(&self, pending: &[ApprovalRequest]) -> Result<(), ApprovalStoreError>;

    /// The list a previous run left (empty when there is none).
    fn load(&self) -> Result<Vec<ApprovalRequest>, ApprovalStoreError>;
}

/// Why a command was not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The owner said no.
    Denied,
    /// Nobody answered in time.
    Expired,
    /// An earlier request of this turn was refused.
    EarlierRefusal,
    /// The turn has no one to ask (heartbeat, cron, a sub-agent, or a channel that cannot ask).
    Unattended(String),
    /// The daemon is stopping.
    Stopping,
    /// The question would not fit one message ([`MAX_QUESTION_BYTES`]), so it was not asked.
    TooLong {
        /// The question's length in bytes.
        bytes: usize,
    },
}

impl Refusal {
    /// The tool result the model reads: what happened, and that it must not look for a way
    /// around it.
    pub fn message(&self, command: &str) -> String {
        let what = match self {
            Self::Denied => "the owner refused to run".to_owned(),
            Self::Expired => "the owner did not approve in time, so it was refused:".to_owned(),
            Self::EarlierRefusal => {
                "a command was refused earlier in this turn, so this one was not run either:"
                    .to_owned()
            }
            Self::Unattended(why) => format!("it needs the owner's approval, and {why}:"),
            Self::Stopping => {
                "squidbot is stopping, so the approval was refused and this did not run:".to_owned()
            }
            Self::TooLong { bytes } => {
                let command: String = command.chars().take(200).collect();
                return format!(
                    "Error: the approval question for this command would be {bytes} bytes, over \
                     the {MAX_QUESTION_BYTES} the owner can be shown whole in one message, so it \
                     was not asked and did not run: `{command}…`. Write a shorter command, or \
                     write the script to a file first and ask to run that file."
                );
            }
        };
        format!(
            "Error: {what} `{command}`. Do not try to reach the same result another way; tell \
             the owner what you wanted to do and why."
        )
    }
}

/// A turn's approval gate, as tools see it (`ToolContext::approvals`): a tool about to do what
/// the owner must approve waits on it. The gateway's is
/// `crate::approval::TurnApprovals`; a trait here so tools depend on
/// the port, not on how questions reach the owner.
#[async_trait]
pub trait ApprovalGate: Send + Sync + std::fmt::Debug {
    /// Whether no one can be asked in this turn (the heartbeat, a cron job, a sub-agent).
    fn is_unattended(&self) -> bool;

    /// Waits for permission to run `command` with `tool`; `reason` says why it needs it.
    async fn permit(&self, tool: &str, command: &str, reason: &str) -> Result<(), Refusal>;
}
