//! Principals through the library API (no CLI, no server): a principal can neither read nor
//! change a bank it has no right on — not by recall, get with a guessed id, history, forget,
//! feedback or tasks — and is told which bank and which right; a shared bank is read by all and
//! written only by those allowed; what a principal writes carries its name.

use hindsight::{access::Principal, types::FeedbackOutcome, Error, Memory};
use hindsight_tests::{bank, memory, query};

fn denied<T: std::fmt::Debug>(result: hindsight::Result<T>, right: &str, bank: &str) {
    match result {
        Err(Error::Denied(message)) => {
            assert!(message.contains(&format!("no {right} right on bank {bank:?}")), "{message}")
        }
        other => panic!("expected a denial of {right} on {bank}, got {other:?}"),
    }
}

#[test]
fn a_principal_reaches_only_the_banks_it_has_rights_on() {
    let hs = memory();
    let coder =
        hs.as_principal(Principal::new("coder").read(["agent:coder", "shared"]).write(["agent:coder"]));
    let analyst = hs.as_principal(
        Principal::new("analyst")
            .read(["agent:analyst", "shared", "user:*"])
            .write(["agent:analyst", "shared"]),
    );

    let secret = bank(&coder, "agent:coder")
        .retain([Memory::new("The staging database password rotates every Monday")])
        .unwrap()
        .remove(0)
        .id
        .unwrap();
    let kept = bank(&coder, "agent:coder").get(&secret).unwrap();
    assert_eq!(kept.agent_id.as_deref(), Some("coder"), "the writer's name is recorded");

    // The analyst cannot see or touch the coder's private bank, even with the id.
    let private = bank(&analyst, "agent:coder");
    denied(private.recall(query("staging database password", 3)), "read", "agent:coder");
    denied(private.get(&secret), "read", "agent:coder");
    denied(private.history(&secret), "read", "agent:coder");
    denied(private.stats(), "read", "agent:coder");
    denied(private.tasks(hindsight::types::TaskFilter::All), "read", "agent:coder");
    denied(private.forget(&secret), "write", "agent:coder");
    denied(private.forget_hard(&secret), "write", "agent:coder");
    denied(private.feedback([secret.clone()], FeedbackOutcome::Failure), "write", "agent:coder");
    denied(private.retain([Memory::new("planted")]), "write", "agent:coder");
    denied(private.begin_task("snoop"), "write", "agent:coder");
    assert_eq!(analyst.banks().unwrap(), Vec::<String>::new(), "banks lists only readable ones");

    // Nothing changed: the memory is intact, unrecalled, at its confidence.
    let after = bank(&hs, "agent:coder").get(&secret).unwrap();
    assert_eq!((after.access_count, after.confidence), (kept.access_count, kept.confidence));

    // A shared bank: the analyst writes, both read, the coder may not write.
    bank(&analyst, "shared")
        .retain([Memory::new("Vendor model X-200 fails its firmware update over Wi-Fi")])
        .unwrap();
    let hits = bank(&coder, "shared").recall(query("firmware update failures", 1)).unwrap();
    assert!(hits.items[0].memory.content.contains("X-200"));
    assert_eq!(hits.items[0].memory.agent_id.as_deref(), Some("analyst"));
    denied(bank(&coder, "shared").retain([Memory::new("overwrite")]), "write", "shared");
    assert_eq!(coder.banks().unwrap(), ["agent:coder", "shared"]);

    // A name the caller gives wins over the principal's.
    let named = bank(&analyst, "user:42")
        .retain([Memory::new("The user wants weekly reports").agent_id("report-bot")])
        .map(|mut o| o.remove(0));
    denied(named, "write", "user:42");
    let mine = bank(&analyst, "agent:analyst")
        .retain([Memory::new("Use the EU region for every new bucket").agent_id("report-bot")])
        .unwrap()
        .remove(0)
        .id
        .unwrap();
    assert_eq!(bank(&analyst, "agent:analyst").get(&mine).unwrap().agent_id.as_deref(), Some("report-bot"));
}

#[test]
fn recall_across_spaces_ranks_together_and_skips_what_the_principal_may_not_read() {
    let hs = memory();
    bank(&hs, "agent:coder").retain([Memory::new("Lunch orders go through the office chat")]).unwrap();
    let original = bank(&hs, "agent:analyst")
        .retain([Memory::new("Vendor model X-200 fails its firmware update over Wi-Fi; use the USB cable")])
        .unwrap()
        .remove(0)
        .id
        .unwrap();
    // Sharing copies through the shared bank's write path, with provenance.
    let shared = bank(&hs, "agent:analyst").share(&original, "shared").unwrap();
    let copy = bank(&hs, "shared").get(shared.id.as_deref().unwrap()).unwrap();
    assert_eq!(copy.meta("shared_from"), Some(format!("agent:analyst/{original}").as_str()));
    let again = bank(&hs, "agent:analyst").share(&original, "shared").unwrap();
    assert_eq!(
        again.action,
        hindsight::types::RetainAction::Reinforced,
        "a second share is a duplicate there"
    );

    let at = |q: &str| query(q, 2).at(hindsight_tests::NOW);
    let hits = hs.recall(["agent:coder", "shared"], at("firmware update fails")).unwrap();
    assert_eq!(hits.items[0].bank, "shared", "{hits:?}");
    assert!(hits.items[0].memory.content.contains("X-200"));
    assert_eq!(hits.items[1].bank, "agent:coder");
    assert!(hits.prompt.contains("shared, from shared]"), "{}", hits.prompt);

    let coder = hs.as_principal(Principal::new("coder").read(["agent:coder", "shared"]));
    let seen = coder.recall(["agent:coder", "agent:analyst", "shared"], at("firmware update fails")).unwrap();
    assert_eq!(seen.skipped_banks, ["agent:analyst"]);
    assert!(seen.items.iter().all(|i| i.bank != "agent:analyst"));
    match coder.recall(["agent:analyst"], at("firmware")) {
        Err(Error::Denied(m)) => assert!(m.contains("may read none of the banks agent:analyst"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(hs.recall(["shared", "shared"], at("x")), Err(Error::InvalidInput(_))));
}

/// Answers extraction with one private and one shared lesson; every other call is "no model".
struct SharingLlm;

impl hindsight::llm::Llm for SharingLlm {
    fn complete(
        &self,
        request: &hindsight::llm::LlmRequest,
    ) -> Result<hindsight::llm::LlmResponse, hindsight::llm::LlmError> {
        if request.operation != hindsight::llm::LlmOperation::Extract {
            return Err(hindsight::llm::LlmError::Unavailable("scripted: extraction only".into()));
        }
        let text = r#"{"memories": [
            {"kind": "procedural", "content": "This user wants answers in bullet points", "confidence": 0.9},
            {"kind": "semantic", "content": "Vendor model X-200 fails its firmware update over Wi-Fi; flash it over USB", "confidence": 0.9, "share": true}
        ]}"#;
        Ok(hindsight::llm::LlmResponse { text: text.into(), prompt_tokens: 10, completion_tokens: 10 })
    }
}

/// With `spaces.share_lessons` on, a lesson the LLM marks `share` is copied to the shared bank
/// (the task's own bank keeps it); off, the default, it stays private (hard edge 0.2 #5).
#[test]
fn a_lesson_the_llm_marks_share_is_copied_to_the_shared_bank_when_sharing_is_on() {
    let private = hindsight_tests::open(hindsight_tests::builder().memory().llm(SharingLlm));
    let task = bank(&private, "agent:support").begin_task("update the customer's X-200").unwrap();
    task.step(hindsight::Step::tool_call("flash", "firmware over wifi")).unwrap();
    let end =
        task.end(hindsight::types::EndTask { force: true, ..hindsight::Outcome::Success.into() }).unwrap();
    assert!(end.items.iter().all(|d| d.bank == "agent:support"), "{:?}", end.items);

    let hs = hindsight_tests::open(
        hindsight_tests::builder().memory().llm(SharingLlm).settings(|s| s.spaces.share_lessons = true),
    );
    let support = bank(&hs, "agent:support");
    let task = support.begin_task("update the customer's X-200").unwrap();
    task.step(hindsight::Step::tool_call("flash", "firmware over wifi")).unwrap();
    let end =
        task.end(hindsight::types::EndTask { force: true, ..hindsight::Outcome::Success.into() }).unwrap();
    let placed: Vec<&str> = end.items.iter().map(|d| d.bank.as_str()).collect();
    assert_eq!(placed, ["agent:support", "agent:support", "shared"], "{:?}", end.items);
    let hits = hs.recall(["agent:coder", "shared"], query("X-200 firmware update", 1)).unwrap();
    assert_eq!(hits.items[0].bank, "shared");
    assert!(hits.items[0].memory.content.contains("over USB"));
    let private = hs.recall(["agent:coder", "shared"], query("answers in bullet points", 3)).unwrap();
    assert!(
        private.items.iter().all(|i| !i.memory.content.contains("bullet points")),
        "the preference stayed private"
    );
}
