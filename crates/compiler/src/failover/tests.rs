//! The failover machine driven by hand: which candidate is sent, what is skipped and why, how a
//! status and a lost owner end the attempts.

use super::*;
use crate::fixture::PolicyBuilder;
use crate::hir::BackendDef;
use src_dsl::ast::BackendApi;

const SMALL: ModelId = ModelId(0);
const STRONG: ModelId = ModelId(1);

fn view(prompt: &str) -> RequestView {
    RequestView::from_prompt(prompt, None, Vec::<(String, String)>::new())
}

/// `small` and `strong` on one OpenAI backend; `strong` moved to an Anthropic one when `anthropic`.
fn policy(anthropic: bool) -> CheckedPolicy {
    let mut policy = PolicyBuilder::new().policy;
    if anthropic {
        let mut claude: BackendDef = policy.backends[0].clone();
        claude.name = "claude".into();
        claude.api = BackendApi::Anthropic;
        policy.backends.push(claude);
        policy.models[1].backend = crate::hir::BackendId(1);
    }
    policy
}

fn never(_: &ModelDef) -> Option<Duration> {
    None
}

#[test]
fn the_first_candidate_is_sent_and_its_answer_relayed() {
    let policy = policy(false);
    let mut a = Attempts::new(&[STRONG, SMALL], Wire::Chat, None);
    assert_eq!(
        a.next(&policy, &view("hi"), never),
        Next::Send {
            model: STRONG,
            reach: Reach::Native
        }
    );
    assert_eq!(a.answered(STRONG, 200), Judged::Answer(Health::Pending));
    assert!(a.failures().is_empty());
}

#[test]
fn a_backend_that_does_not_speak_the_api_is_skipped_for_chat_and_responses_only() {
    let policy = policy(true);
    for wire in [Wire::Chat, Wire::Responses] {
        let mut a = Attempts::new(&[STRONG, SMALL], wire, None);
        assert_eq!(
            a.next(&policy, &view("hi"), never),
            Next::Send {
                model: SMALL,
                reach: Reach::Native
            },
            "{wire:?}"
        );
        assert_eq!(a.fallback_list(&policy), vec!["strong:api".to_string()]);
    }
    let mut a = Attempts::new(&[STRONG, SMALL], Wire::Messages, None);
    assert_eq!(
        a.next(&policy, &view("hi"), never),
        Next::Send {
            model: STRONG,
            reach: Reach::Native
        }
    );
    let mut a = Attempts::new(&[SMALL], Wire::Messages, None);
    assert_eq!(
        a.next(&policy, &view("hi"), never),
        Next::Send {
            model: SMALL,
            reach: Reach::ChatForMessages
        }
    );
}

#[test]
fn only_unspoken_and_too_long_skips_are_a_400() {
    let mut policy = policy(true);
    policy.models[0].context = Some(1);
    let mut a = Attempts::new(&[STRONG, SMALL], Wire::Chat, None);
    let long = view("a request of a good many words, longer than one token");
    assert_eq!(a.next(&policy, &long, never), Next::Done(End::Exhausted));
    assert_eq!(a.exhausted(), Exhausted::Unspoken);
    assert_eq!(a.exhausted().status(), 400);
    let mut a = Attempts::new(&[SMALL], Wire::Chat, None);
    assert_eq!(a.next(&policy, &long, never), Next::Done(End::Exhausted));
    assert_eq!(a.exhausted(), Exhausted::TooLong);
}

#[test]
fn a_model_cooling_down_is_skipped_with_its_time_left() {
    let policy = policy(false);
    let mut a = Attempts::new(&[STRONG, SMALL], Wire::Chat, None);
    let cooling = |m: &ModelDef| (m.name == "strong").then_some(Duration::from_millis(1500));
    assert_eq!(
        a.next(&policy, &view("hi"), cooling),
        Next::Send {
            model: SMALL,
            reach: Reach::Native
        }
    );
    assert_eq!(
        a.failures()[0].why,
        Why::Cooldown {
            left: Duration::from_millis(1500)
        }
    );
    assert!(a.detail(&policy).contains("1.5 s left"));
}

#[test]
fn a_5xx_always_moves_on_and_a_404_or_429_only_while_another_remains() {
    let policy = policy(false);
    for status in [404, 429, 500, 503] {
        let mut a = Attempts::new(&[STRONG, SMALL], Wire::Chat, None);
        a.next(&policy, &view("hi"), never);
        assert_eq!(a.answered(STRONG, status), Judged::MovesOn, "{status}");
        a.next(&policy, &view("hi"), never);
        let last = a.answered(SMALL, status);
        if status >= 500 {
            assert_eq!(last, Judged::MovesOn);
            assert_eq!(
                a.next(&policy, &view("hi"), never),
                Next::Done(End::Exhausted)
            );
            assert_eq!(a.exhausted(), Exhausted::Unavailable);
        } else {
            assert_eq!(last, Judged::Answer(Health::Failed), "{status}");
        }
    }
    let mut a = Attempts::new(&[STRONG, SMALL], Wire::Chat, None);
    a.next(&policy, &view("hi"), never);
    assert_eq!(a.answered(STRONG, 400), Judged::Answer(Health::Neutral));
}

#[test]
fn the_last_failure_names_the_exhausted_answer() {
    let policy = policy(false);
    let unanswered = |kind| Why::Upstream {
        kind,
        reason: "x",
        detail: "d".into(),
    };
    for (why, end) in [
        (unanswered(Unanswered::Timeout), Exhausted::Timeout),
        (unanswered(Unanswered::Unreachable), Exhausted::BadGateway),
        (Why::Body("no".into()), Exhausted::BadGateway),
        (Why::Status(500), Exhausted::Unavailable),
    ] {
        let mut a = Attempts::new(&[SMALL], Wire::Chat, None);
        a.next(&policy, &view("hi"), never);
        a.failed(SMALL, why);
        assert_eq!(
            a.next(&policy, &view("hi"), never),
            Next::Done(End::Exhausted)
        );
        assert_eq!(a.exhausted(), end);
    }
}

#[test]
fn a_lost_owner_under_fail_keeps_the_call_unless_observed() {
    let policy = policy(false);
    let rule = |on_loss, observe| OwnerRule {
        model: STRONG,
        on_loss,
        observe,
    };
    let mut a = Attempts::new(
        &[STRONG, SMALL],
        Wire::Chat,
        Some(rule(OwnerLost::Fail, false)),
    );
    a.next(&policy, &view("hi"), never);
    assert_eq!(a.answered(STRONG, 502), Judged::MovesOn);
    assert_eq!(
        a.next(&policy, &view("hi"), never),
        Next::Done(End::OwnerKept)
    );
    assert_eq!(a.owner_lost(), None);

    for (on_loss, observe) in [
        (OwnerLost::Fail, true),
        (OwnerLost::Fallback, false),
        (OwnerLost::Move, false),
    ] {
        let mut a = Attempts::new(&[STRONG, SMALL], Wire::Chat, Some(rule(on_loss, observe)));
        a.next(&policy, &view("hi"), never);
        a.failed(STRONG, Why::Status(503));
        assert_eq!(
            a.next(&policy, &view("hi"), never),
            Next::Send {
                model: SMALL,
                reach: Reach::Native
            }
        );
        assert_eq!(a.owner_lost(), Some(rule(on_loss, observe)));
    }
}

#[test]
fn a_skipped_owner_is_not_lost() {
    let policy = policy(false);
    let rule = OwnerRule {
        model: STRONG,
        on_loss: OwnerLost::Fail,
        observe: false,
    };
    let cooling = |m: &ModelDef| (m.name == "strong").then_some(Duration::from_secs(3));
    let mut a = Attempts::new(&[STRONG, SMALL], Wire::Chat, Some(rule));
    assert_eq!(
        a.next(&policy, &view("hi"), cooling),
        Next::Send {
            model: SMALL,
            reach: Reach::Native
        }
    );
    assert_eq!(a.owner_lost(), None);
}
