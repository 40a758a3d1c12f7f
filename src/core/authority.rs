//! [`Authority`]: whether the person who asked for a turn is the owner, and so whether its
//! tools may do what lasts.
//!
//! [`Audience`](crate::core::audience::Audience) answers who *reads* a turn (the owner's
//! private memory stays out of a room others are in); this answers who *asked*. In a shared
//! room the owner and a guest read the same replies, but only the owner's requests may
//! schedule jobs, run sub-agents, call MCP servers or rewrite the instructions every later turn
//! of the owner obeys (AGENTS.md, SOUL.md, HEARTBEAT.md, skills, …): a guest who could would
//! act with the owner's rights long after the conversation.
//!
//! It is decided once per turn from the [`Origin`] the channel stated at its edge: a person is
//! the owner only when the channel vouched for it (the owner's Matrix id; a mail's From only
//! with an authentication pass, see the email channel). The heartbeat, cron jobs and
//! sub-agents act with the owner's authority because only the owner can start them: the
//! configuration is the owner's, and `cron_add` and `spawn` are themselves owner-only.

use crate::core::audience::Audience;
use crate::core::origin::Origin;

/// Whose authority a turn's tools act with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Authority {
    /// The owner asked (or the owner's own automation runs).
    Owner,
    /// Someone else asked, or it is not known who (the default: fail closed).
    #[default]
    Other,
}

impl Authority {
    /// The authority of a turn of `origin`.
    pub fn of(origin: &Origin) -> Self {
        match origin {
            Origin::Person { owner: true, .. } => Self::Owner,
            Origin::Person { .. } => Self::Other,
            Origin::Heartbeat | Origin::Cron { .. } | Origin::SubAgent { .. } => Self::Owner,
        }
    }

    /// Whether the owner asked.
    pub fn is_owner(self) -> bool {
        self == Self::Owner
    }
}

/// One kind of thing a tool does that reaches past the turn: what it reads, what it changes,
/// where its bytes go. Every tool declares the set of these it has ([`Effects`]); whether a
/// turn may have them is decided from that declaration alone, in [`Effects::refusal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads or writes the owner's private memory (MEMORY.md, USER.md): only in a turn no one
    /// but the owner takes part in.
    PrivateMemory,
    /// Reads files by path. Which paths is decided per call by the workspace's one file rule
    /// (`WorkspaceGuard::authorize`): the owner's private files and other conversations'
    /// attachments only with an owner-only audience.
    ReadsFiles,
    /// Writes files by path. Per call too: someone other than the owner writes only in their
    /// own conversation's directory, never a dotfile, never where the owner's turns, commands
    /// or jobs read from.
    WritesFiles,
    /// Sends a file's bytes to the conversation's readers: as [`Effect::ReadsFiles`], since
    /// what is sent is read.
    SendsFiles,
    /// Reads conversation history: a turn others take part in reads only its own session.
    ReadsHistory,
    /// Starts commands: each one passes the turn's approval gate, which asks the owner for
    /// every command someone else asked for.
    RunsCommands,
    /// Reaches the network (fetches cannot reach private addresses).
    Network,
    /// Schedules work that later runs with the owner's authority.
    Schedules,
    /// Starts other agents, which act with the owner's authority.
    RunsAgents,
    /// Uses an outside service with the owner's credentials (MCP servers).
    OwnerCredentials,
}

impl Effect {
    /// Every effect, in declaration order.
    pub const ALL: [Effect; 10] = [
        Effect::PrivateMemory,
        Effect::ReadsFiles,
        Effect::WritesFiles,
        Effect::SendsFiles,
        Effect::ReadsHistory,
        Effect::RunsCommands,
        Effect::Network,
        Effect::Schedules,
        Effect::RunsAgents,
        Effect::OwnerCredentials,
    ];

    const fn bit(self) -> u16 {
        1 << self as u16
    }

    /// What a turn needs for a tool with this effect to be offered and run at all.
    pub const fn rule(self) -> Rule {
        match self {
            Effect::PrivateMemory => Rule::OwnerAudience,
            Effect::Schedules | Effect::RunsAgents | Effect::OwnerCredentials => {
                Rule::OwnerAuthority
            }
            Effect::ReadsFiles | Effect::WritesFiles | Effect::SendsFiles => Rule::PerPath,
            Effect::ReadsHistory => Rule::PerSession,
            Effect::RunsCommands => Rule::Gate,
            Effect::Network => Rule::Open,
        }
    }
}

/// How an effect is decided (see [`Effect::rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Only in a turn no one but the owner takes part in.
    OwnerAudience,
    /// Only when the owner asked.
    OwnerAuthority,
    /// Offered to anyone; each path is decided by the workspace's file rule.
    PerPath,
    /// Offered to anyone; a turn others take part in reaches only its own session.
    PerSession,
    /// Offered to anyone; each command waits on the turn's approval gate.
    Gate,
    /// Offered to anyone.
    Open,
}

/// The effects a tool declares. There is no default: a tool that does not say what it does
/// does not compile, and a tool with no effect says [`Effects::NONE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effects(u16);

impl Effects {
    /// No effect past the turn (a pure computation, a listing of the tool's own state).
    pub const NONE: Effects = Effects(0);

    /// The set of `effects`.
    pub const fn of(effects: &[Effect]) -> Self {
        let mut bits = 0;
        let mut i = 0;
        while i < effects.len() {
            bits |= effects[i].bit();
            i += 1;
        }
        Self(bits)
    }

    /// Whether `effect` is among these.
    pub const fn has(self, effect: Effect) -> bool {
        self.0 & effect.bit() != 0
    }

    /// The effects in the set.
    pub fn iter(self) -> impl Iterator<Item = Effect> {
        Effect::ALL.into_iter().filter(move |e| self.has(*e))
    }

    /// Why a turn asked with `authority`, read by `audience`, may not have these effects;
    /// `None` when it may (per-path, per-session and gated effects are decided again when
    /// the call names its path, session or command). The one decision every tool call and
    /// every offer of a tool goes through.
    pub fn refusal(self, authority: Authority, audience: Audience) -> Option<Refused> {
        self.iter().find_map(|effect| match effect.rule() {
            Rule::OwnerAudience if !audience.is_owner() => Some(Refused::Audience(effect)),
            Rule::OwnerAuthority if !authority.is_owner() => Some(Refused::Authority(effect)),
            _ => None,
        })
    }
}

/// Why a tool may not run in a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Someone besides the owner takes part in the turn and the effect reaches the owner's
    /// private memory.
    Audience(Effect),
    /// Someone other than the owner asked and the effect acts with the owner's authority.
    Authority(Effect),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Audience(_) => f.write_str(
                "it reaches the owner's private memory, and other people take part in this \
                 conversation",
            ),
            Refused::Authority(effect) => {
                let what = match effect {
                    Effect::Schedules => "schedules work that runs with the owner's authority",
                    Effect::RunsAgents => "starts agents that act with the owner's authority",
                    _ => "uses the owner's own services and credentials",
                };
                write!(f, "it {what}, and only the owner can ask for that")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_and_the_owners_automation_have_the_owners_authority() {
        assert_eq!(
            Authority::of(&Origin::owner_as("@alex:example.org")),
            Authority::Owner
        );
        // The id alone proves nothing: only what the channel vouched for counts.
        assert_eq!(
            Authority::of(&Origin::person("@alex:example.org")),
            Authority::Other
        );
        assert_eq!(Authority::of(&Origin::owner()), Authority::Owner);
        assert_eq!(Authority::of(&Origin::Heartbeat), Authority::Owner);
        assert_eq!(Authority::default(), Authority::Other);
    }

    #[test]
    fn effects_are_refused_by_their_rule_alone() {
        let (owner, other) = (Authority::Owner, Authority::Other);
        let (alone, shared) = (Audience::Owner, Audience::Shared);
        let memory = Effects::of(&[Effect::PrivateMemory]);
        assert_eq!(memory.refusal(owner, alone), None);
        assert_eq!(
            memory.refusal(owner, shared),
            Some(Refused::Audience(Effect::PrivateMemory))
        );
        let cron = Effects::of(&[Effect::Schedules, Effect::ReadsFiles]);
        assert_eq!(cron.refusal(owner, shared), None);
        assert_eq!(
            cron.refusal(other, shared),
            Some(Refused::Authority(Effect::Schedules))
        );
        let files = Effects::of(&[Effect::ReadsFiles, Effect::WritesFiles, Effect::Network]);
        assert_eq!(files.refusal(other, shared), None);
        assert_eq!(Effects::NONE.refusal(other, shared), None);
        assert_eq!(
            cron.iter().collect::<Vec<_>>(),
            [Effect::ReadsFiles, Effect::Schedules]
        );
        for effect in Effect::ALL {
            assert!(Effects::of(&[effect]).has(effect));
        }
    }
}
