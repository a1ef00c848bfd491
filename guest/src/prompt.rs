//! The block of recalled memories an agent puts in its prompt, kept within a token budget.

use crate::record::{Kind, Memory, DAY_MS};

/// Rough token count: one per CJK character, one per four other characters. Close enough to
/// keep a block within budget without the model's own tokenizer.
pub fn estimate_tokens(text: &str) -> usize {
    let mut cjk = 0usize;
    let mut other = 0usize;
    for c in text.chars() {
        if (c as u32) >= 0x2E80 {
            cjk += 1;
        } else {
            other += 1;
        }
    }
    cjk + other.div_ceil(4)
}

const HEADER: &str = "Relevant memories from earlier tasks (most relevant first):";

/// Formats memories best first, stopping before the budget is passed. Empty when none fit.
pub fn block(memories: &[&Memory], budget_tokens: usize) -> String {
    let mut out = String::from(HEADER);
    let mut used = estimate_tokens(HEADER);
    let mut lines = 0;
    for m in memories {
        let line = format!("\n- {} {}", label(m), one_line(&m.content));
        let cost = estimate_tokens(&line);
        if used + cost > budget_tokens {
            break;
        }
        used += cost;
        out.push_str(&line);
        lines += 1;
    }
    if lines == 0 {
        String::new()
    } else {
        out
    }
}

fn label(m: &Memory) -> String {
    let kind = match m.kind {
        Kind::Episodic => "experience",
        Kind::Semantic => "fact",
        Kind::Procedural => "how-to",
    };
    let mut parts = vec![kind.to_string(), format!("confidence {:.2}", m.confidence)];
    if let Some(task) = &m.task_type {
        parts.push(format!("task {task}"));
    }
    parts.push(date(m.occurred_at));
    format!("[{}]", parts.join(", "))
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// "May 2023": the words a question about a time would use.
pub fn month_year(ms: i64) -> String {
    let (year, month, _) = civil(ms);
    format!("{} {year}", MONTHS[(month - 1) as usize])
}

/// YYYY-MM-DD of a UTC timestamp.
pub fn date(ms: i64) -> String {
    let (year, month, day) = civil(ms);
    format!("{year:04}-{month:02}-{day:02}")
}

/// (year, month, day) of a UTC timestamp (civil-from-days, Howard Hinnant's algorithm).
fn civil(ms: i64) -> (i64, i64, i64) {
    let days = ms.div_euclid(DAY_MS);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::NewMemory;
    use crate::settings::Settings;

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(1_700_000_000_000), "2023-11-14");
        assert_eq!(date(951_782_400_000), "2000-02-29");
        assert_eq!(month_year(1_683_554_160_000), "May 2023");
    }

    #[test]
    fn block_stops_at_the_budget() {
        let m = NewMemory::text("use utf-8-sig for Chinese CSV files")
            .into_memory("a".into(), 0, &Settings::default(), "m")
            .unwrap();
        let full = block(&[&m, &m, &m], 10_000);
        assert_eq!(full.lines().count(), 4);
        let tight = block(&[&m, &m, &m], estimate_tokens(&full) - 5);
        assert_eq!(tight.lines().count(), 3);
        assert_eq!(block(&[&m], 3), "");
    }
}
