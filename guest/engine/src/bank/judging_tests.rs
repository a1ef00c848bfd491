//! The write path's judgement with a scripted LLM (every branch of its answer) and the undo of
//! a wrong supersede.

use std::sync::Arc;

use hindsight_types::*;

use super::test_support::*;
use super::*;
use crate::llm::{LlmError, LlmOperation};
use crate::store::MemoryStore;

/// A bank whose every item reaches judgement (no write filter, so no importance call).
fn judged_bank(store: &Arc<MemoryStore>, llm: Rc<Scripted>) -> Bank {
    let mut settings = Settings::default();
    settings.write.filter = false;
    open_with(store, llm, settings)
}

fn judgement(item: usize, candidate: &str, verdict: &str) -> String {
    format!(
        r#"{{"judgements": [{{"item": {item}, "candidate": "{candidate}", "verdict": "{verdict}", "reason": "the scripted judge says {verdict}"}}]}}"#
    )
}

/// The old memory, then a judged retain of `new` answered with `verdict`.
fn judged(verdict: &str, new: &str) -> (Bank, Rc<Scripted>, String, RetainOutcome) {
    let store = Arc::new(MemoryStore::new());
    let first = Scripted::new(vec![]);
    let mut bank = judged_bank(&store, first.clone());
    let old = retain_one(&mut bank, semantic("The team deploys with Jenkins"), NOW).id.unwrap();
    assert!(first.requests().is_empty(), "no candidate, no judge call");
    let llm = Scripted::new(vec![Ok(&judgement(0, &old, verdict))]);
    let mut bank = judged_bank(&store, llm.clone());
    let outcome = retain_one(&mut bank, semantic(new), NOW + 1);
    (bank, llm, old, outcome)
}

#[test]
fn the_llm_says_update_and_the_old_memory_is_superseded() {
    let (mut bank, llm, old, out) = judged("update", "Deploys go out through GitHub Actions");
    assert_eq!(out.action, RetainAction::Superseded, "{out:?}");
    assert!(out.reason.contains("the scripted judge says update, by the LLM"), "{}", out.reason);
    assert_eq!(bank.record(&old).unwrap().status, Status::Superseded);
    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].operation, LlmOperation::Judge);
    assert!(requests[0].prompt.contains(&format!("existing {old}: The team deploys with Jenkins")));
}

#[test]
fn the_llm_says_duplicate_and_the_old_memory_is_reinforced_or_absorbed() {
    let (mut bank, _, old, out) = judged("duplicate", "Jenkins is what the team deploys with");
    assert!(matches!(out.action, RetainAction::Reinforced | RetainAction::Merged), "{out:?}");
    assert_eq!(out.id.as_deref(), Some(old.as_str()));
    assert_eq!(bank.record(&old).unwrap().status, Status::Active);
}

#[test]
fn the_llm_says_compatible_where_the_rules_would_update() {
    let (mut bank, _, old, out) = judged("compatible", "The team now also deploys docs with Netlify");
    assert_eq!(out.action, RetainAction::Created, "{out:?}");
    assert_eq!(bank.record(&old).unwrap().status, Status::Active);
}

#[test]
fn the_llm_says_both_hold_and_both_are_kept_flagged() {
    let (mut bank, _, old, out) =
        judged("conflict_both_hold", "The team deploys with ArgoCD in the EU region");
    assert_eq!(out.action, RetainAction::Created, "{out:?}");
    assert_eq!(out.related.as_deref(), Some(old.as_str()));
    let new = out.id.unwrap();
    assert_eq!(bank.record(&old).unwrap().conflicts_with, vec![new.clone()]);
    assert_eq!(bank.record(&new).unwrap().conflicts_with, vec![old]);
}

#[test]
fn an_unusable_or_unknown_answer_falls_back_to_the_rules_and_says_so() {
    for answer in [
        "I think it is an update.",
        &judgement(0, "m-not-a-candidate", "update"),
        &judgement(0, "x", "replace"),
    ] {
        let store = Arc::new(MemoryStore::new());
        let mut bank = judged_bank(&store, Scripted::new(vec![]));
        let old =
            retain_one(&mut bank, semantic("The user prefers Java for backend services"), NOW).id.unwrap();
        let llm = Scripted::new(vec![Ok(answer)]);
        let mut bank = judged_bank(&store, llm.clone());
        let out = retain_one(
            &mut bank,
            semantic("The user now prefers Python for backend services instead of Java"),
            NOW + 1,
        );
        assert_eq!(out.action, RetainAction::Superseded, "{answer}: {out:?}");
        assert_eq!(out.related.as_deref(), Some(old.as_str()));
        assert!(
            out.reason.contains("by the rules") && out.reason.contains("judged by the rules:"),
            "{}",
            out.reason
        );
    }
}

#[test]
fn a_failing_llm_leaves_the_rules_to_decide() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = judged_bank(&store, Scripted::new(vec![]));
    retain_one(&mut bank, semantic("The office Wi-Fi network name is tiger42"), NOW);
    let llm = Scripted::new(vec![Err(LlmError::Failed("HTTP 500".into()))]);
    let mut bank = judged_bank(&store, llm);
    let out = retain_one(&mut bank, semantic("The office Wi-Fi network name is falcon77"), NOW + 1);
    assert_eq!(out.action, RetainAction::Superseded, "{out:?}");
    assert!(out.reason.contains("HTTP 500"), "{}", out.reason);
}

#[test]
fn one_judge_call_covers_a_whole_batch() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = judged_bank(&store, Scripted::new(vec![]));
    let olds: Vec<String> =
        ["The cache TTL is 5 minutes", "The API runs on 4 pods", "Deploys happen on Tuesdays"]
            .iter()
            .map(|t| retain_one(&mut bank, semantic(t), NOW).id.unwrap())
            .collect();
    let answer = format!(
        r#"{{"judgements": [{{"item": 0, "candidate": "{}", "verdict": "update"}}, {{"item": 2, "candidate": "{}", "verdict": "duplicate"}}]}}"#,
        olds[0], olds[2]
    );
    let llm = Scripted::new(vec![Ok(&answer)]);
    let mut bank = judged_bank(&store, llm.clone());
    let out = bank
        .retain(
            vec![
                semantic("The cache TTL was raised to 10 minutes"),
                semantic("Our billing emails are sent by Postmark"),
                semantic("Deploys happen every Tuesday"),
            ],
            NOW + 1,
        )
        .unwrap();
    let judge_calls = llm.requests().iter().filter(|r| r.operation == LlmOperation::Judge).count();
    assert_eq!(judge_calls, 1);
    assert_eq!(out[0].action, RetainAction::Superseded);
    assert_eq!(out[2].id.as_deref(), Some(olds[2].as_str()));
}

#[test]
fn unsupersede_restores_the_memory_and_the_pair_stays_side_by_side() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    let images = retain_one(&mut bank, semantic("The CDN cache TTL for images is 1 day"), NOW).id.unwrap();
    let confidence = bank.record(&images).unwrap().confidence;
    // A wrong update (as a user would correct it): forced through the rules with a change word.
    let video = retain_one(&mut bank, semantic("The CDN cache TTL for images now is 7 days"), NOW + 1);
    assert_eq!(video.action, RetainAction::Superseded, "{video:?}");
    let video = video.id.unwrap();

    let back = bank.unsupersede(&images, NOW + 2).unwrap();
    assert_eq!(back.status, Status::Active);
    assert!((back.confidence - confidence).abs() < 1e-6);
    assert_eq!(back.conflicts_with, vec![video.clone()]);
    let newer = bank.record(&video).unwrap();
    assert!(newer.supersedes.is_empty() && newer.conflicts_with == vec![images.clone()]);
    let hits = bank.recall(query("CDN cache TTL for images")).unwrap();
    assert_eq!(hits.items.len(), 2, "{:?}", texts(&hits));

    // The same pair again: the repeat reinforces the kept one, the old one is not superseded.
    let again = retain_one(&mut bank, semantic("The CDN cache TTL for images now is 7 days"), NOW + 3);
    assert_eq!(again.id.as_deref(), Some(video.as_str()), "{again:?}");
    assert_eq!(bank.record(&images).unwrap().status, Status::Active);

    let err = bank.unsupersede(&images, NOW + 4).unwrap_err();
    assert!(err.to_string().contains("only a superseded memory"), "{err}");
}

#[test]
fn finding_05_a_different_subject_never_replaces_or_absorbs_a_fact() {
    let store = Arc::new(MemoryStore::new());
    let mut bank = open(&store);
    for (old, new) in [
        ("The CDN cache TTL for images is 1 day", "The CDN cache TTL for video is 7 days"),
        ("Static .js files are cached for 1 hour", "Static .css files are cached for 1 hour"),
    ] {
        let first = retain_one(&mut bank, semantic(old), NOW).id.unwrap();
        let second = retain_one(&mut bank, semantic(new), NOW);
        assert_eq!(second.action, RetainAction::Created, "{new}: {second:?}");
        assert_eq!(bank.record(&first).unwrap().status, Status::Active);
    }
    let hits = bank.recall(query("CDN cache TTL for images")).unwrap();
    assert_eq!(texts(&hits)[0], "The CDN cache TTL for images is 1 day");
}

#[test]
fn finding_35_a_conversation_imported_turn_by_turn_keeps_every_turn() {
    let store = Arc::new(MemoryStore::new());
    let turns = [
        "Caroline: Hey Mel! I went to the support group yesterday, it was so powerful.",
        "Melanie: Wow, that sounds powerful! I went to a pottery class yesterday.",
        "Caroline: Yes, last week!",
        "Melanie: Yes, last week too!",
        "Caroline: Lately I have been thinking about a career in counseling now.",
        "Caroline: I love painting, it is so relaxing after the support group.",
        "Melanie: I love painting too, it is relaxing after work.",
        "Caroline: Yes, last week!",
    ];
    for sequence in [false, true] {
        let items: Vec<Memory> = turns.iter().map(|t| Memory { sequence, ..Memory::new(*t) }).collect();
        let bank_id = if sequence { "conversation" } else { "import" };
        let mut bank = Bank::open(
            bank_id,
            Box::new(store.clone()),
            Rc::new(crate::test_support::HashEmbedder { dimension: 64 }),
            Rc::new(crate::llm::NoLlm),
            Rc::new(Settings::default()),
        )
        .unwrap();
        let out = bank.retain(items, NOW).unwrap();
        let actions: Vec<RetainAction> = out.iter().map(|o| o.action).collect();
        // Only the literal repeat of a turn by the same speaker is not a new memory.
        assert!(actions[..7].iter().all(|a| *a == RetainAction::Created), "sequence {sequence}: {out:?}");
        assert_ne!(actions[7], RetainAction::Created, "{out:?}");
    }
}
