//! The gateway's router with a real agent: a turn's typed origin decides whether it moves the
//! activity log (the heartbeat's default target) and which per-turn tools it is offered, and
//! history keeps the original's sender ids.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use squidbot::core::memory_manager::MemorySettings;
use squidbot::core::origin::Origin;
use squidbot::core::ports::channel::{
    ActivityLog, CollectingSink, Dispatch, Inbound, TurnResult, TurnTools,
};
use squidbot::core::ports::tool::Tool;
use squidbot::core::session::SessionId;
use squidbot::gateway::{GatewayState, Metrics, Router};

use crate::harness::Harness;

/// Remembers every session a person was recorded active in.
#[derive(Default)]
struct Activity(Mutex<Vec<SessionId>>);

impl ActivityLog for Activity {
    fn record(&self, session: &SessionId, _metadata: &Map<String, Value>) {
        self.0.lock().unwrap().push(session.clone());
    }

    fn last(&self) -> Option<(SessionId, Map<String, Value>)> {
        let last = self.0.lock().unwrap().last().cloned();
        last.map(|session| (session, Map::new()))
    }
}

/// Remembers the origin each turn's tools were asked for.
#[derive(Default)]
struct Tools(Mutex<Vec<(SessionId, Origin)>>);

impl TurnTools for Tools {
    fn for_turn(
        &self,
        session: &SessionId,
        _metadata: &Map<String, Value>,
        origin: &Origin,
    ) -> Vec<Arc<dyn Tool>> {
        self.0
            .lock()
            .unwrap()
            .push((session.clone(), origin.clone()));
        Vec::new()
    }
}

#[tokio::test]
async fn only_a_persons_turn_moves_the_activity_log_and_history_keeps_sender_ids() {
    let harness = Harness::start(MemorySettings::default()).await;
    let activity = Arc::new(Activity::default());
    let tools = Arc::new(Tools::default());
    let state = Arc::new(GatewayState::new(Arc::new(Metrics::new())));
    let router = Router::new(
        harness.agent.clone(),
        tools.clone(),
        Some(activity.clone() as Arc<dyn ActivityLog>),
        state,
        4,
    );
    let room = SessionId::parse("matrix:!room:x").unwrap();
    let other = SessionId::parse("email:owner@x.org").unwrap();
    let turns = [
        (room.clone(), Origin::person("@owner:x")),
        (other.clone(), Origin::Heartbeat),
        (
            other.clone(),
            Origin::Cron {
                job: "j1".to_owned(),
            },
        ),
        // A person whose address reads like a built-in source stays a person.
        (other.clone(), Origin::person("cron:spoof")),
    ];
    for (session, origin) in &turns {
        let inbound = Inbound::new(
            session.clone(),
            "hello",
            origin.clone(),
            Arc::new(CollectingSink::new()),
        );
        let outcome = router.submit(inbound).unwrap().await.unwrap();
        assert!(matches!(outcome, TurnResult::Replied(_)), "{outcome:?}");
    }
    assert_eq!(
        *activity.0.lock().unwrap(),
        vec![room.clone(), other.clone()]
    );
    let asked: Vec<(SessionId, Origin)> = turns.to_vec();
    assert_eq!(*tools.0.lock().unwrap(), asked);
    let senders = |session: &SessionId| -> Vec<String> {
        harness
            .history(session)
            .into_iter()
            .filter(|m| m.role == squidbot::core::message::Role::User)
            .filter_map(|m| m.sender_id)
            .collect()
    };
    assert_eq!(senders(&room), ["@owner:x"]);
    assert_eq!(senders(&other), ["heartbeat", "cron:j1", "cron:spoof"]);
    assert!(router.shutdown(std::time::Duration::from_secs(5)).await);
}

/// An edit (`corrects`) of a message still waiting for its turn takes its place; an edit by
/// someone else, or of a message already answered, is a turn that says it corrects.
#[tokio::test]
async fn an_edit_takes_the_place_of_its_waiting_message_only_from_its_sender() {
    use crate::support::scripted_llm::Reply;
    let harness = Harness::start(MemorySettings::default()).await;
    harness.llm.set_handler(|request| {
        let reply = crate::harness::default_reply(request);
        if request.to_string().contains("hold on") {
            return Reply::Delay {
                ms: 1500,
                then: Box::new(reply),
            };
        }
        reply
    });
    let state = Arc::new(GatewayState::new(Arc::new(Metrics::new())));
    let router = Router::new(
        harness.agent.clone(),
        Arc::new(Tools::default()),
        None,
        state,
        4,
    );
    let room = SessionId::parse("matrix:!room:x").unwrap();
    let message = |text: &str, sender: &str, id: &str, corrects: Option<&str>| {
        let mut inbound = Inbound::new(
            room.clone(),
            text,
            Origin::person(sender),
            Arc::new(CollectingSink::new()),
        );
        inbound.message_id = Some(id.to_owned());
        inbound.corrects = corrects.map(str::to_owned);
        router.submit(inbound).unwrap()
    };
    let slow = message("hold on", "@owner:x", "$0", None);
    let first = message("meet at 5", "@owner:x", "$1", None);
    let second = message("lunch at 1", "@owner:x", "$2", None);
    let foreign = message("lunch at 2", "@guest:x", "$3", Some("$2"));
    let own = message("meet at 6", "@owner:x", "$4", Some("$1"));
    assert!(matches!(slow.await.unwrap(), TurnResult::Replied(_)));
    assert!(matches!(first.await.unwrap(), TurnResult::Replaced));
    assert!(matches!(second.await.unwrap(), TurnResult::Replied(_)));
    assert!(matches!(foreign.await.unwrap(), TurnResult::Replied(_)));
    assert!(matches!(own.await.unwrap(), TurnResult::Replied(_)));
    // An edit of an answered message.
    let late = message("meet at 7", "@owner:x", "$5", Some("$4"));
    assert!(matches!(late.await.unwrap(), TurnResult::Replied(_)));
    let users: Vec<String> = harness
        .history(&room)
        .into_iter()
        .filter(|m| m.role == squidbot::core::message::Role::User)
        .map(|m| m.content)
        .collect();
    let note = "[The person edited an earlier message; this is the corrected text.]";
    assert_eq!(
        users,
        [
            "hold on".to_owned(),
            "lunch at 1".to_owned(),
            format!("{note}\nlunch at 2"),
            "meet at 6".to_owned(),
            format!("{note}\nmeet at 7"),
        ]
    );
    assert!(router.shutdown(std::time::Duration::from_secs(5)).await);
}
