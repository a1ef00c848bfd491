//! `hindsight-dev eval --compare A.json B.json`: two `eval --json` runs on the same questions,
//! question by question — per-category recall before and after, how many questions each run won,
//! and a two-sided sign test over the questions that changed (averages of ~70 questions move a
//! point on one question; a paired count says whether a change is more than noise).

use std::path::Path;

use serde_json::{json, Value};

use crate::error::{CliError, CliResult};
use crate::eval::{category_name, mean_recall, QuestionRecall};
use crate::Global;

fn read_run(path: &Path, field: &str) -> CliResult<Vec<QuestionRecall>> {
    let bytes = crate::read_input(path)?;
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| CliError::field(field, format!("{} is not JSON: {e}", path.display())))?;
    let rows = v["per_question"].as_array().ok_or_else(|| {
        CliError::field(
            field,
            format!("{} has no per_question list: give the output of `eval --json`", path.display()),
        )
    })?;
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let bad = || {
                CliError::field(
                    field,
                    format!("{}: per_question[{i}] lacks qid, category or recall", path.display()),
                )
            };
            let recall = r["recall"]
                .as_object()
                .ok_or_else(bad)?
                .iter()
                .map(|(k, v)| Ok((k.parse::<u32>().map_err(|_| bad())?, v.as_f64().ok_or_else(bad)?)))
                .collect::<CliResult<_>>()?;
            Ok(QuestionRecall {
                qid: r["qid"].as_str().ok_or_else(bad)?.to_string(),
                category: r["category"].as_u64().and_then(|c| u32::try_from(c).ok()).ok_or_else(bad)?,
                recall,
            })
        })
        .collect()
}

/// Two-sided exact sign test: the chance of a split at least this uneven among `won + lost`
/// changed questions if neither run were better.
pub fn sign_test(won: usize, lost: usize) -> f64 {
    let n = won + lost;
    if n == 0 {
        return 1.0;
    }
    // ln C(n, i) summed in log space: n may be in the thousands.
    let ln_choose = |i: usize| -> f64 { (1..=i).map(|j| ((n + 1 - j) as f64 / j as f64).ln()).sum() };
    let tail: f64 =
        (0..=won.min(lost)).map(|i| (ln_choose(i) - n as f64 * std::f64::consts::LN_2).exp()).sum();
    (2.0 * tail).min(1.0)
}

/// The comparison of one group of questions at one k.
struct Delta {
    n: usize,
    before: f64,
    after: f64,
    won: usize,
    lost: usize,
}

fn delta(pairs: &[(&QuestionRecall, &QuestionRecall)], k: u32) -> Delta {
    let at = |q: &QuestionRecall| q.recall.get(&k).copied().unwrap_or(0.0);
    Delta {
        n: pairs.len(),
        before: mean_recall(pairs.iter().map(|(a, _)| *a), &[k])[&k],
        after: mean_recall(pairs.iter().map(|(_, b)| *b), &[k])[&k],
        won: pairs.iter().filter(|(a, b)| at(b) > at(a) + 1e-9).count(),
        lost: pairs.iter().filter(|(a, b)| at(a) > at(b) + 1e-9).count(),
    }
}

pub fn run(g: &Global, a_path: &Path, b_path: &Path) -> CliResult<()> {
    let a = read_run(a_path, "compare")?;
    let b = read_run(b_path, "compare")?;
    if a.len() != b.len() || a.iter().zip(&b).any(|(x, y)| x.qid != y.qid) {
        return Err(CliError::field(
            "compare",
            format!(
                "the runs asked different questions ({} and {}): compare runs on the same questions file",
                a.len(),
                b.len()
            ),
        ));
    }
    let ks: Vec<u32> = a
        .first()
        .map(|r| r.recall.keys().copied().filter(|k| b[0].recall.contains_key(k)).collect())
        .unwrap_or_default();
    let mut groups: Vec<(String, Vec<(&QuestionRecall, &QuestionRecall)>)> =
        vec![("overall".into(), a.iter().zip(&b).collect())];
    let mut categories: Vec<u32> = a.iter().map(|r| r.category).collect();
    categories.sort_unstable();
    categories.dedup();
    for c in categories {
        let name = format!("category {c} ({})", category_name(c));
        groups.push((name, a.iter().zip(&b).filter(|(x, _)| x.category == c).collect()));
    }
    let mut out = Vec::new();
    let mut table = format!(
        "{:<24}{:>5}{:>6}{:>9}{:>9}{:>8}{:>6}{:>6}{:>9}\n",
        "", "n", "k", "A", "B", "B-A", "won", "lost", "sign p"
    );
    for (name, pairs) in &groups {
        for &k in &ks {
            let d = delta(pairs, k);
            let p = sign_test(d.won, d.lost);
            table.push_str(&format!(
                "{name:<24}{:>5}{:>6}{:>9.1}{:>9.1}{:>+8.1}{:>6}{:>6}{:>9.3}\n",
                d.n,
                format!("R@{k}"),
                d.before,
                d.after,
                d.after - d.before,
                d.won,
                d.lost,
                p
            ));
            out.push(json!({"group": name, "n": d.n, "k": k, "a": d.before, "b": d.after,
                            "delta": d.after - d.before, "won": d.won, "lost": d.lost, "sign_p": p}));
        }
    }
    crate::print(g, &json!({ "a": a_path, "b": b_path, "rows": out }), || {
        format!(
            "A = {}\nB = {}\n{table}won: questions B recalls more of; lost: fewer",
            a_path.display(),
            b_path.display()
        )
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::sign_test;

    #[test]
    fn sign_test_matches_the_binomial_tails() {
        assert_eq!(sign_test(0, 0), 1.0);
        // 8 of 8 one way: 2 · 0.5^8.
        assert!((sign_test(8, 0) - 2.0 / 256.0).abs() < 1e-12);
        // 6 of 10: 2 · P(X ≤ 4) = 2 · 386/1024.
        assert!((sign_test(6, 4) - 2.0 * 386.0 / 1024.0).abs() < 1e-12);
        assert!(sign_test(700, 300) < 1e-30);
    }
}
