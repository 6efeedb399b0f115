//! The meter's arithmetic: sums, prices, budgets, the day's renewal and
//! the day's file.

use std::path::Path;

use chrono::TimeZone;

use super::*;

fn at(day: u32, hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, day, hour, 0, 0).unwrap()
}

fn pair(repo: &str, user: &str) -> Owner {
    Owner {
        repo: Some(repo.parse().unwrap()),
        user: Some(user.parse().unwrap()),
    }
}

fn call(kind: CallKind, owner: Owner, prompt: u64, completion: u64) -> Call<'static> {
    Call {
        kind,
        model: "gpt-4o-mini",
        owner,
        tokens: Tokens { prompt, completion },
        estimated: false,
    }
}

/// A meter keeping its day in `config`'s data directory, as files mode does.
fn file_meter(config: &Config, now: DateTime<Utc>) -> Meter {
    Meter::open_at(config, Keep::File(config.data_dir.join(FILE_NAME)), now)
}

fn config(dir: &Path, adjust: impl FnOnce(&mut Config)) -> Config {
    let mut config = Config {
        data_dir: dir.to_owned(),
        ..Config::default()
    };
    config.prices.insert(
        "gpt-4o-mini".to_owned(),
        Price {
            input_per_million: 0.15,
            output_per_million: 0.60,
        },
    );
    adjust(&mut config);
    config
}

#[test]
fn calls_sum_by_kind_and_model_and_by_owner_with_their_cost() {
    let dir = tempfile::tempdir().unwrap();
    let meter = file_meter(&config(dir.path(), |_| {}), at(26, 9));
    let metered = meter.record_at(
        call(
            CallKind::Classifier,
            pair("forge", "ana"),
            1_000_000,
            100_000,
        ),
        at(26, 9),
    );
    assert!((metered.cost.unwrap() - 0.21).abs() < 1e-12);
    meter.record_at(
        call(CallKind::Classifier, pair("web", "ana"), 10, 5),
        at(26, 10),
    );
    meter.record_at(
        Call {
            model: "unpriced",
            ..call(CallKind::Hyde, Owner::default(), 7, 3)
        },
        at(26, 11),
    );
    let view = meter.view_at(at(26, 12));
    assert_eq!(view.today.len(), 2);
    let classifier = &view.today[0];
    assert_eq!(
        (
            classifier.kind,
            classifier.calls,
            classifier.prompt_tokens,
            classifier.completion_tokens
        ),
        (CallKind::Classifier, 2, 1_000_010, 100_005)
    );
    assert_eq!(view.today[1].cost, None, "no price, no cost");
    assert_eq!(view.pairs_today.len(), 3);
    assert_eq!(view.budgets.capture.used, 1_100_015);
    assert_eq!(view.budgets.retrieval.used, 10);
    let cost = view.cost_today.unwrap();
    assert!((cost - (0.21 + (10.0 * 0.15 + 5.0 * 0.6) / 1e6)).abs() < 1e-12);
}

#[test]
fn a_spent_budget_closes_capture_until_the_day_renews() {
    let dir = tempfile::tempdir().unwrap();
    let meter = file_meter(
        &config(dir.path(), |config| {
            config.capture.daily_token_budget = 1000;
            config.capture.pair_daily_token_budget = 100;
        }),
        at(26, 9),
    );
    let (forge, web) = (pair("forge", "ana"), pair("web", "ana"));
    let ids = |owner: &Owner| (owner.repo.clone().unwrap(), owner.user.clone().unwrap());
    let (forge_repo, ana) = ids(&forge);
    let (web_repo, _) = ids(&web);

    meter.record_at(call(CallKind::Classifier, forge.clone(), 90, 20), at(26, 9));
    let gate = meter.capture_gate_at(at(26, 9));
    assert!(
        !gate.admits(&forge_repo, &ana),
        "forge spent its own budget"
    );
    assert!(gate.admits(&web_repo, &ana));
    assert_eq!(gate.reopens_at(), Some(at(27, 0)));

    // Retrieval's calls count against a budget of their own.
    meter.record_at(call(CallKind::Hyde, web.clone(), 5000, 0), at(26, 10));
    assert!(meter.capture_gate_at(at(26, 10)).admits(&web_repo, &ana));

    meter.record_at(call(CallKind::Classifier, web.clone(), 800, 90), at(26, 11));
    let gate = meter.capture_gate_at(at(26, 11));
    assert!(!gate.admits(&web_repo, &ana), "the global budget is spent");
    assert!(meter.view_at(at(26, 11)).budgets.capture.exhausted);

    let renewed = meter.capture_gate_at(at(27, 0));
    assert!(renewed.admits(&forge_repo, &ana) && renewed.admits(&web_repo, &ana));
    assert_eq!(renewed.reopens_at(), None);
    assert_eq!(meter.view_at(at(27, 0)).budgets.capture.used, 0);
    assert_eq!(
        meter.view_at(at(27, 0)).since_start[0].calls,
        2,
        "totals since start outlive the day"
    );
}

#[test]
fn zero_is_unlimited_and_retrieval_has_its_own_budget() {
    let dir = tempfile::tempdir().unwrap();
    let meter = file_meter(
        &config(dir.path(), |config| {
            config.capture.daily_token_budget = 0;
            config.retrieval.daily_token_budget = 50;
        }),
        at(26, 9),
    );
    meter.record_at(
        call(CallKind::Classifier, pair("forge", "ana"), u64::MAX / 2, 0),
        at(26, 9),
    );
    assert_eq!(meter.capture_gate_at(at(26, 9)).reopens_at(), None);
    assert!(meter.allows_retrieval_at(at(26, 9)));
    meter.record_at(
        call(CallKind::Expansion, Owner::default(), 40, 10),
        at(26, 9),
    );
    assert!(!meter.allows_retrieval_at(at(26, 9)));
    assert!(meter.allows_retrieval_at(at(27, 0)));
}

#[test]
fn embeddings_count_against_no_budget() {
    let dir = tempfile::tempdir().unwrap();
    let meter = file_meter(
        &config(dir.path(), |config| {
            config.capture.daily_token_budget = 10;
            config.retrieval.daily_token_budget = 10;
        }),
        at(26, 9),
    );
    meter.record_at(
        call(CallKind::Embeddings, pair("forge", "ana"), 1000, 0),
        at(26, 9),
    );
    assert!(meter.allows_retrieval_at(at(26, 9)));
    assert_eq!(meter.capture_gate_at(at(26, 9)).reopens_at(), None);
}

#[test]
fn the_days_totals_survive_a_reopen_but_not_the_day() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), |config| config.capture.daily_token_budget = 100);
    let meter = file_meter(&config, at(26, 9));
    meter.record_at(
        call(CallKind::Classifier, pair("forge", "ana"), 80, 30),
        at(26, 9),
    );
    meter.save().unwrap();

    let reopened = file_meter(&config, at(26, 18));
    let view = reopened.view_at(at(26, 18));
    assert_eq!(view.budgets.capture.used, 110);
    assert!(view.budgets.capture.exhausted);
    assert!(view.since_start.is_empty(), "since start is this process");

    let next_day = file_meter(&config, at(27, 1));
    assert_eq!(next_day.view_at(at(27, 1)).budgets.capture.used, 0);
}

#[test]
fn a_linked_day_file_is_not_followed() {
    let elsewhere = tempfile::tempdir().unwrap();
    let spent = config(elsewhere.path(), |_| {});
    let meter = file_meter(&spent, at(26, 9));
    meter.record_at(
        call(CallKind::Classifier, pair("forge", "ana"), 80, 30),
        at(26, 9),
    );
    meter.save().unwrap();

    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path().join(FILE_NAME), dir.path().join(FILE_NAME))
        .unwrap();
    let linked = file_meter(&config(dir.path(), |_| {}), at(26, 18));
    assert_eq!(linked.view_at(at(26, 18)).budgets.capture.used, 0);
    let own = file_meter(&spent, at(26, 18));
    assert_eq!(own.view_at(at(26, 18)).budgets.capture.used, 110);
}

#[test]
fn an_unreadable_file_starts_the_day_at_zero() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(FILE_NAME), b"{not json").unwrap();
    let meter = file_meter(&config(dir.path(), |_| {}), at(26, 9));
    assert_eq!(meter.view_at(at(26, 9)).budgets.capture.used, 0);
}

#[test]
fn reported_usage_is_read_and_anything_else_is_none() {
    let usage =
        serde_json::json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15});
    assert_eq!(
        Tokens::reported(Some(&usage)),
        Some(Tokens {
            prompt: 12,
            completion: 3
        })
    );
    let embeddings = serde_json::json!({"prompt_tokens": 8, "total_tokens": 8});
    assert_eq!(
        Tokens::reported(Some(&embeddings)),
        Some(Tokens {
            prompt: 8,
            completion: 0
        })
    );
    for odd in [
        serde_json::json!(null),
        serde_json::json!({"prompt_tokens": "12"}),
        serde_json::json!({"prompt_tokens": -1}),
        serde_json::json!({}),
    ] {
        assert_eq!(Tokens::reported(Some(&odd)), None, "{odd}");
    }
    assert_eq!(Tokens::reported(None), None);
}

#[test]
fn the_day_renews_at_the_next_utc_midnight() {
    assert_eq!(renewal(at(26, 0)), at(27, 0));
    assert_eq!(
        renewal(at(30, 23)),
        Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
    );
}
