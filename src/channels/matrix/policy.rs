//! Who and what the bot answers in a Matrix room, as a pure decision so it can be unit-tested
//! without a homeserver.
//!
//! The rules, in order: never its own messages; only the configured rooms (none configured:
//! every joined room); only allowed senders (an empty allowlist allows nobody, `"*"` everyone:
//! the bot has a shell, so letting strangers in must be a deliberate choice); then, in a
//! room with more than one other member, the group policy. A mention is a real one: the
//! event's `m.mentions`, a pill (a `matrix.to` link to the bot in the HTML body), or the bot's
//! display name as a whole word. The original treated any substring of the user id as a
//! mention, so `@squidbot2` woke it up.

use crate::config::GroupPolicy;

/// The allowlist entry that lets every sender in.
pub const EVERYONE: &str = "*";

/// What the policy needs to know about one message.
#[derive(Debug, Clone, Copy)]
pub struct MessageFacts<'a> {
    /// The room id.
    pub room_id: &'a str,
    /// The sender's user id.
    pub sender: &'a str,
    /// Joined members other than the bot.
    pub other_members: u64,
    /// Whether the message mentions the bot (see [`mentions_bot`]).
    pub mentioned: bool,
}

/// Why a message is not answered, for the DEBUG log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Answer it.
    Answer,
    /// The bot sent it.
    Own,
    /// The room is not in `room_ids`.
    OtherRoom,
    /// The sender is not in the allowlist.
    UnknownSender,
    /// A group room under `mention`, and the bot was not mentioned.
    NotMentioned,
    /// A group room under `allowlist`, and the sender is not in it.
    NotAllowlisted,
}

/// The configured rules.
#[derive(Debug, Clone)]
pub struct RoomPolicy {
    own_user_id: String,
    room_ids: Vec<String>,
    group_policy: GroupPolicy,
    allowlist: Vec<String>,
    auto_join: bool,
}

impl RoomPolicy {
    /// The rules for the bot `own_user_id`.
    pub fn new(
        own_user_id: &str,
        room_ids: &[String],
        group_policy: GroupPolicy,
        allowlist: &[String],
        auto_join: bool,
    ) -> Self {
        Self {
            own_user_id: own_user_id.to_owned(),
            room_ids: room_ids.to_vec(),
            group_policy,
            allowlist: allowlist.to_vec(),
            auto_join,
        }
    }

    /// Whether the message is answered, and if not, why.
    pub fn judge(&self, facts: &MessageFacts<'_>) -> Verdict {
        if facts.sender == self.own_user_id {
            return Verdict::Own;
        }
        if !self.room_ids.is_empty() && !self.room_ids.iter().any(|r| r == facts.room_id) {
            return Verdict::OtherRoom;
        }
        if !self.listed(facts.sender) {
            return Verdict::UnknownSender;
        }
        if facts.other_members <= 1 {
            return Verdict::Answer;
        }
        match self.group_policy {
            GroupPolicy::Open => Verdict::Answer,
            GroupPolicy::Mention if facts.mentioned => Verdict::Answer,
            GroupPolicy::Mention => Verdict::NotMentioned,
            GroupPolicy::Allowlist if self.listed(facts.sender) => Verdict::Answer,
            GroupPolicy::Allowlist => Verdict::NotAllowlisted,
        }
    }

    /// Whether an invite from `inviter` is joined: only with `auto_join`, and only from a user
    /// named in the allowlist (`"*"` does not count), since joining a stranger's room would let
    /// anyone pull the owner's agent into their rooms.
    pub fn accepts_invite(&self, inviter: &str) -> bool {
        self.auto_join && self.allowlist.iter().any(|u| u == inviter)
    }

    /// Whether messages from `room_id` are read at all (for the UTD notice too).
    pub fn listens_in(&self, room_id: &str) -> bool {
        self.room_ids.is_empty() || self.room_ids.iter().any(|r| r == room_id)
    }

    /// Whether `user` is in the allowlist, by name or through `"*"`.
    fn listed(&self, user: &str) -> bool {
        self.allowlist.iter().any(|u| u == user || u == EVERYONE)
    }
}

/// Whether a message mentions the bot: listed in `m.mentions`, linked as a pill in the HTML
/// body, or its display name written as a whole word (case-insensitive) in the plain body.
pub fn mentions_bot(
    own_user_id: &str,
    display_name: &str,
    body: &str,
    formatted_body: Option<&str>,
    mentioned_users: &[String],
) -> bool {
    if mentioned_users.iter().any(|u| u == own_user_id) {
        return true;
    }
    if let Some(html) = formatted_body {
        let pill = format!("matrix.to/#/{own_user_id}");
        let encoded = format!("matrix.to/#/{}", own_user_id.replace('@', "%40"));
        if html.contains(&pill) || html.contains(&encoded) {
            return true;
        }
    }
    contains_word(body, display_name)
}

/// Whether `word` occurs in `text` (case-insensitive) with no letter, digit or `_` glued to
/// either side.
fn contains_word(text: &str, word: &str) -> bool {
    let word = word.trim().to_lowercase();
    if word.is_empty() {
        return false;
    }
    let text = text.to_lowercase();
    let glued = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut from = 0;
    while let Some(at) = text[from..].find(&word) {
        let start = from + at;
        let end = start + word.len();
        if !glued(text[..start].chars().next_back()) && !glued(text[end..].chars().next()) {
            return true;
        }
        from = start + word.chars().next().map_or(1, char::len_utf8);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOT: &str = "@squidbot:example.org";

    fn policy(group: GroupPolicy, allowlist: &[&str]) -> RoomPolicy {
        let allowlist: Vec<String> = allowlist.iter().map(|s| (*s).to_owned()).collect();
        RoomPolicy::new(BOT, &[], group, &allowlist, true)
    }

    fn facts<'a>(sender: &'a str, other_members: u64, mentioned: bool) -> MessageFacts<'a> {
        MessageFacts {
            room_id: "!room:example.org",
            sender,
            other_members,
            mentioned,
        }
    }

    #[test]
    fn own_messages_and_unknown_senders_are_never_answered() {
        let open = policy(GroupPolicy::Open, &["*"]);
        assert_eq!(open.judge(&facts(BOT, 1, true)), Verdict::Own);
        assert_eq!(open.judge(&facts("@eve:x", 1, false)), Verdict::Answer);
        let nobody = policy(GroupPolicy::Open, &[]);
        assert_eq!(
            nobody.judge(&facts("@eve:x", 1, true)),
            Verdict::UnknownSender,
            "an empty allowlist lets nobody in"
        );
        let listed = policy(GroupPolicy::Open, &["@alice:x"]);
        assert_eq!(
            listed.judge(&facts("@eve:x", 1, true)),
            Verdict::UnknownSender
        );
        assert_eq!(listed.judge(&facts("@alice:x", 1, false)), Verdict::Answer);
    }

    #[test]
    fn the_group_policy_applies_only_with_more_than_one_other_member() {
        let mention = policy(GroupPolicy::Mention, &["*"]);
        assert_eq!(mention.judge(&facts("@a:x", 1, false)), Verdict::Answer);
        assert_eq!(
            mention.judge(&facts("@a:x", 2, false)),
            Verdict::NotMentioned
        );
        assert_eq!(mention.judge(&facts("@a:x", 2, true)), Verdict::Answer);
        let allow = policy(GroupPolicy::Allowlist, &["@a:x"]);
        assert_eq!(allow.judge(&facts("@a:x", 3, false)), Verdict::Answer);
        assert_eq!(allow.judge(&facts("@b:x", 3, true)), Verdict::UnknownSender);
    }

    #[test]
    fn rooms_outside_room_ids_are_ignored() {
        let only = RoomPolicy::new(
            BOT,
            &["!a:x".into()],
            GroupPolicy::Open,
            &["*".into()],
            true,
        );
        let mut f = facts("@a:x", 1, false);
        f.room_id = "!b:x";
        assert_eq!(only.judge(&f), Verdict::OtherRoom);
        f.room_id = "!a:x";
        assert_eq!(only.judge(&f), Verdict::Answer);
    }

    #[test]
    fn invites_are_joined_only_from_listed_users_with_auto_join() {
        assert!(policy(GroupPolicy::Open, &["@a:x"]).accepts_invite("@a:x"));
        assert!(!policy(GroupPolicy::Open, &["@a:x"]).accepts_invite("@b:x"));
        assert!(!policy(GroupPolicy::Open, &[]).accepts_invite("@a:x"));
        assert!(
            !policy(GroupPolicy::Open, &["*"]).accepts_invite("@a:x"),
            "\"*\" lets anyone talk, not anyone pull the bot into a room"
        );
        let off = RoomPolicy::new(BOT, &[], GroupPolicy::Open, &["@a:x".into()], false);
        assert!(!off.accepts_invite("@a:x"));
    }

    #[test]
    fn a_mention_is_real_not_a_substring() {
        let check = |body: &str, html: Option<&str>, users: &[&str]| {
            let users: Vec<String> = users.iter().map(|s| (*s).to_owned()).collect();
            mentions_bot(BOT, "Squid", body, html, &users)
        };
        assert!(check("hi", None, &[BOT]));
        assert!(check(
            "hi",
            Some("<a href=\"https://matrix.to/#/@squidbot:example.org\">x</a>"),
            &[]
        ));
        assert!(check(
            "hi",
            Some("<a href=\"https://matrix.to/#/%40squidbot:example.org\">x</a>"),
            &[]
        ));
        assert!(check("hey squid, what's up?", None, &[]));
        assert!(check("SQUID", None, &[]));
        assert!(!check("squidward and squids", None, &[]));
        assert!(!check(
            "@squidbot:example.org2 is someone else",
            None,
            &["@other:x"]
        ));
        assert!(!check("hello", Some("<b>hello</b>"), &["@other:x"]));
    }
}
