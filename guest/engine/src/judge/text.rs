//! A statement as the judge sees it: tokens that are stopwords, content words (stemmed), names,
//! or values — numbers with their units normalised ("five minutes" = "300 seconds" = 300 s,
//! "2 GB" = "2048 MB", 三十二 = 32, "2:05 PM" = 14:05), identifiers (`tiger42`, `us-east-1`,
//! paths, e-mail addresses) and dates.

use super::lexicon::{DATES, DATES_CJK, MONTHS, NUMBER_WORDS, QUANTITY_PHRASES, STOP, STOP_CJK, UNITS};
use crate::text::is_cjk;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Stop,
    Word,
    /// A capitalised word inside a sentence, a word with inner capitals, a Latin word inside
    /// Chinese text: a name.
    Name,
    /// A capitalised word opening a sentence: a name only if the other statement has it as one.
    Opening,
    Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub text: String,
    pub kind: Kind,
    /// For a number with a unit: the number as written ("34" of "34 years").
    pub raw: Option<f64>,
}

impl Token {
    fn new(text: impl Into<String>, kind: Kind) -> Token {
        Token { text: text.into(), kind, raw: None }
    }

    pub fn is_value(&self) -> bool {
        matches!(self.kind, Kind::Value | Kind::Name)
    }

    /// A number or a date (not an identifier or a name).
    pub fn is_number(&self) -> bool {
        let t = self.text.as_str();
        let numeric = t.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+')
            && t.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '+' | '-' | '%'))
            && t.trim_start_matches(|c: char| c.is_ascii_digit() || matches!(c, '.' | ':' | '+' | '-'))
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '%');
        numeric || ["day", "week", "month", "weekday"].iter().any(|p| t.starts_with(p))
    }

    /// A day or week relative to now: which occasion, not a quantity that can be updated.
    pub fn is_relative_date(&self) -> bool {
        ["day", "week", "month"].iter().any(|p| {
            self.text.strip_prefix(p).is_some_and(|rest| {
                let rest = rest.trim_start_matches(['+', '-']);
                rest.starts_with(|c: char| c.is_ascii_digit())
            })
        })
    }
}

pub fn stem(word: &str) -> String {
    let mut w = word.strip_suffix("'s").unwrap_or(word).trim_end_matches('\'').to_string();
    let n = w.chars().count();
    if n > 4 && w.ends_with("ies") {
        w.truncate(w.len() - 3);
        w.push('y');
    } else if n > 4 && ["sses", "ches", "shes", "xes", "zes"].iter().any(|s| w.ends_with(s)) {
        w.truncate(w.len() - 2);
    } else if n > 3 && w.ends_with('s') && !w.ends_with("ss") {
        w.truncate(w.len() - 1);
    }
    let n = w.chars().count();
    if n > 5 && w.ends_with("ing") {
        w.truncate(w.len() - 3);
    } else if n > 4 && w.ends_with("ed") {
        w.truncate(w.len() - 2);
    }
    if w.chars().count() > 3 && w.ends_with('e') {
        w.truncate(w.len() - 1);
    }
    w
}

fn number_word(w: &str) -> Option<f64> {
    NUMBER_WORDS.iter().find(|(n, _)| *n == w).map(|(_, v)| *v)
}

fn unit(w: &str) -> Option<(&'static str, f64)> {
    UNITS.iter().find(|(n, _, _)| *n == w).map(|(_, d, f)| (*d, *f))
}

/// A number as a token: no exponent, no trailing zeros.
pub fn format_number(x: f64) -> String {
    let s = format!("{x:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The value of Chinese numerals: 三十二 = 32, 两百 = 200, 一万 = 10000.
fn cjk_number(s: &str) -> Option<f64> {
    let digit = |c: char| {
        "零〇一二三四五六七八九".find(c).map(|_| match c {
            '零' | '〇' => 0.0,
            '一' => 1.0,
            '二' => 2.0,
            '三' => 3.0,
            '四' => 4.0,
            '五' => 5.0,
            '六' => 6.0,
            '七' => 7.0,
            '八' => 8.0,
            _ => 9.0,
        })
    };
    let (mut total, mut section, mut current) = (0.0, 0.0, 0.0);
    for c in s.chars() {
        if c == '两' {
            current = 2.0;
        } else if let Some(d) = digit(c) {
            current = d;
        } else {
            let u = match c {
                '十' => 10.0,
                '百' => 100.0,
                '千' => 1000.0,
                '万' => 10000.0,
                _ => return None,
            };
            if u == 10000.0 {
                total += (section + current) * u;
                section = 0.0;
            } else {
                section += if current == 0.0 { 1.0 } else { current } * u;
            }
            current = 0.0;
        }
    }
    Some(total + section + current)
}

fn is_cjk_numeral(c: char) -> bool {
    "零〇一二两三四五六七八九十百千万".contains(c)
}

/// A piece of the text before tokens are classified.
#[derive(Debug)]
enum Piece {
    /// Latin text as written (a word, a number, an identifier).
    Latin(String),
    Cjk(char),
    /// A value already made (a CJK number or date).
    Value(String),
    /// The end of a sentence.
    Stop,
}

/// `text` with each of `phrases` (matched ignoring ASCII case) replaced.
/// Latin phrases only as whole words ("a day" is not in "a daytime").
fn rewrite(text: &str, phrases: &[(&str, &str)]) -> String {
    let mut text = text.to_string();
    for (from, to) in phrases {
        let mut from_at = 0;
        while let Some(at) = text.to_ascii_lowercase()[from_at..].find(from).map(|at| at + from_at) {
            let end = at + from.len();
            let latin_edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
            if latin_edge(text[..at].chars().next_back()) || latin_edge(text[end..].chars().next()) {
                from_at = end;
                continue;
            }
            let to = format!(" {to} ");
            text.replace_range(at..end, &to);
            from_at = at + to.len();
        }
    }
    text
}

fn split(text: &str) -> Vec<Piece> {
    let mut text = rewrite(text, QUANTITY_PHRASES);
    for (from, to) in DATES_CJK {
        text = text.replace(from, &format!(" {to} "));
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '`' {
            if let Some(end) = chars[i + 1..].iter().position(|&d| d == '`') {
                let inner: String = chars[i + 1..i + 1 + end].iter().collect();
                out.push(Piece::Value(inner.trim().to_lowercase()));
                i += end + 2;
                continue;
            }
        }
        // A lone 一 is mostly "a" (一只猫), not the number one.
        let lone_one = c == '一' && !chars.get(i + 1).is_some_and(|&d| is_cjk_numeral(d));
        if is_cjk_numeral(c) && !lone_one {
            let start = i;
            while i < chars.len() && is_cjk_numeral(chars[i]) {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            match cjk_number(&s) {
                Some(v) => out.push(Piece::Latin(format_number(v))),
                None => out.extend(s.chars().map(Piece::Cjk)),
            }
            continue;
        }
        if is_cjk(c) {
            out.push(Piece::Cjk(c));
            i += 1;
            continue;
        }
        if c == '℃' {
            out.push(Piece::Latin("degc".into()));
            i += 1;
            continue;
        }
        if c == '°' && chars.get(i + 1).is_some_and(|d| d.eq_ignore_ascii_case(&'c')) {
            out.push(Piece::Latin("degc".into()));
            i += 2;
            continue;
        }
        if c == '°' && chars.get(i + 1).is_some_and(|d| d.eq_ignore_ascii_case(&'f')) {
            out.push(Piece::Latin("degf".into()));
            i += 2;
            continue;
        }
        if c.is_alphanumeric()
            || (matches!(c, '~' | '/' | '.') && chars.get(i + 1).is_some_and(|d| d.is_alphanumeric()))
        {
            let start = i;
            while i < chars.len()
                && !is_cjk(chars[i])
                && (chars[i].is_alphanumeric()
                    || "._-/@:+#'~%".contains(chars[i])
                    || (chars[i] == ','
                        && i > start
                        && chars[i - 1].is_ascii_digit()
                        && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())))
            {
                i += 1;
            }
            let mut word: String = chars[start..i].iter().collect();
            // Punctuation that ends the word rather than belonging to it.
            let mut ends_sentence = false;
            while let Some(last) = word.chars().last() {
                if ".:'-/".contains(last) && !(last == '/' && word.len() > 1 && word.contains('/')) {
                    ends_sentence |= last == '.' || last == ':';
                    word.pop();
                } else {
                    break;
                }
            }
            // "29/month" is a number per a unit, as "29 per month" is.
            let rate = word.split_once('/').filter(|(n, u)| {
                parse_number(n).is_some() && !u.is_empty() && u.chars().all(|c| c.is_ascii_alphabetic())
            });
            if let Some((n, u)) = rate {
                out.extend([
                    Piece::Latin(n.to_string()),
                    Piece::Latin("per".into()),
                    Piece::Latin(u.to_string()),
                ]);
                if ends_sentence {
                    out.push(Piece::Stop);
                }
                continue;
            }
            // host:port is two values
            match word.rsplit_once(':') {
                Some((host, port))
                    if !host.is_empty()
                        && host.chars().any(char::is_alphabetic)
                        && !port.is_empty()
                        && port.chars().all(|c| c.is_ascii_digit()) =>
                {
                    out.push(Piece::Latin(host.to_string()));
                    out.push(Piece::Latin(port.to_string()));
                }
                _ if !word.is_empty() => out.push(Piece::Latin(word)),
                _ => {}
            }
            if ends_sentence {
                out.push(Piece::Stop);
            }
            continue;
        }
        if "!?;。！？；：".contains(c) {
            out.push(Piece::Stop);
        }
        i += 1;
    }
    out
}

fn is_identifier(w: &str) -> bool {
    let letters = w.chars().any(|c| c.is_alphabetic());
    let digits = w.chars().any(|c| c.is_ascii_digit());
    w.contains("://")
        || (w.contains('@') && w.contains('.'))
        || (w.contains('/') && w.chars().filter(|c| c.is_alphanumeric()).count() >= 2)
        || (letters && digits)
        || (digits && w.contains('-') && w.chars().all(|c| c.is_ascii_digit() || c == '-'))
        || (digits && w.matches('.').count() >= 2)
        // file and host names: nginx.conf, status.acme.io
        || w.split('.').filter(|p| p.chars().any(char::is_alphabetic)).count() >= 2 && !w.ends_with('.')
}

/// `15k`, `1GB`, `30s`: a number glued to its unit.
fn glued(w: &str) -> Option<(f64, &str)> {
    let split = w.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (n, u) = w.split_at(split);
    let n: f64 = n.parse().ok()?;
    unit(&u.to_lowercase()).map(|_| (n, u))
}

fn parse_number(w: &str) -> Option<f64> {
    let plain = w.replace(',', "");
    if plain.chars().all(|c| c.is_ascii_digit() || c == '.')
        && plain.chars().filter(|&c| c == '.').count() <= 1
    {
        plain.parse().ok()
    } else {
        None
    }
}

/// A number and what follows it: its unit, scaled, or a time of day.
fn number_token(n: f64, next: Option<&str>, next2: Option<&str>) -> (Token, usize) {
    let lower = next.map(str::to_lowercase);
    if let Some(l) = lower.as_deref() {
        let l = l.trim_end_matches('.');
        if matches!(l, "am" | "pm" | "a.m" | "p.m") && n < 24.0 {
            let mut h = n.trunc();
            if l.starts_with('p') && h < 12.0 {
                h += 12.0;
            }
            if l.starts_with('a') && h == 12.0 {
                h = 0.0;
            }
            return (Token::new(format!("{}:00", h as u32), Kind::Value), 1);
        }
        if l == "degrees" && next2.is_some_and(|w| w.eq_ignore_ascii_case("celsius")) {
            return (Token::new(format!("{}c", format_number(n)), Kind::Value), 2);
        }
        // Fahrenheit as Celsius, to a tenth of a degree: 64.4 °F = 18 °C.
        let fahrenheit = l == "degf" || l == "fahrenheit";
        let spelled = l == "degrees" && next2.is_some_and(|w| w.eq_ignore_ascii_case("fahrenheit"));
        if fahrenheit || spelled {
            let c = ((n - 32.0) * 5.0 / 9.0 * 10.0).round() / 10.0;
            return (Token::new(format!("{}c", format_number(c)), Kind::Value), if spelled { 2 } else { 1 });
        }
        let found = unit(l).map(|u| (u, 1)).or_else(|| {
            // 个 between a Chinese number and its unit: 两个小时
            next2.filter(|_| l == "个").and_then(|w| unit(w).map(|u| (u, 2)))
        });
        if let Some(((dimension, factor), used)) = found {
            let mut t = Token::new(format!("{}{dimension}", format_number(n * factor)), Kind::Value);
            if !dimension.is_empty() {
                t.raw = Some(n);
            }
            return (t, used);
        }
    }
    (Token::new(format_number(n), Kind::Value), 0)
}

/// A clock time as written, `9:30` or `2:05 PM`, as 24-hour `H:MM`.
fn clock(w: &str, next: Option<&str>) -> Option<(Token, usize)> {
    let (h, m) = w.split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    if h > 24 || m > 59 || w.split(':').count() != 2 {
        return None;
    }
    let ampm =
        next.map(|n| n.trim_end_matches('.').to_lowercase()).filter(|n| matches!(n.as_str(), "am" | "pm"));
    let h = match ampm.as_deref() {
        Some("pm") if h < 12 => h + 12,
        Some("am") if h == 12 => 0,
        _ => h,
    };
    Some((Token::new(format!("{h}:{m:02}"), Kind::Value), usize::from(ampm.is_some())))
}

pub fn tokens(text: &str) -> Vec<Token> {
    let has_cjk = text.chars().any(is_cjk);
    let pieces = split(text);
    let mut out: Vec<Token> = Vec::new();
    let mut opening = true;
    let latin = |i: usize| match pieces.get(i) {
        Some(Piece::Latin(w)) => Some(w.as_str()),
        Some(Piece::Cjk(_)) => None,
        _ => None,
    };
    let mut i = 0;
    while i < pieces.len() {
        match &pieces[i] {
            Piece::Stop => {
                opening = true;
                i += 1;
                continue;
            }
            Piece::Value(v) => out.push(Token::new(v.clone(), Kind::Value)),
            Piece::Cjk(c) => {
                // A Chinese unit after a number was taken with the number.
                let kind = if STOP_CJK.contains(*c) { Kind::Stop } else { Kind::Word };
                out.push(Token::new(c.to_string(), kind));
            }
            Piece::Latin(w) => {
                let lower = w.to_lowercase();
                let cjk_unit = |from: usize| -> Option<(String, usize)> {
                    // 分钟, 小时, 个月 …: the longest unit spelled by the next CJK pieces.
                    let mut s = String::new();
                    let mut best = None;
                    for (k, p) in pieces[from..].iter().take(3).enumerate() {
                        let Piece::Cjk(c) = p else { break };
                        s.push(*c);
                        if unit(&s).is_some() {
                            best = Some((s.clone(), k + 1));
                        }
                    }
                    best
                };
                if let Some((t, used)) = clock(&lower, latin(i + 1)) {
                    out.push(t);
                    i += 1 + used;
                    opening = false;
                    continue;
                }
                let number = parse_number(&lower).or_else(|| number_word_run(&pieces, i).map(|(v, _)| v));
                if let Some(mut n) = number {
                    let mut used_words = 0;
                    if parse_number(&lower).is_none() {
                        let (v, k) = number_word_run(&pieces, i).expect("checked");
                        n = v;
                        used_words = k - 1;
                    }
                    let j = i + 1 + used_words;
                    if let Some((u, k)) = cjk_unit(j) {
                        let (t, _) = number_token(n, Some(&u), None);
                        out.push(t);
                        i = j + k;
                    } else {
                        // "six in the morning", "7 in the evening": a time of day.
                        let part = [latin(j), latin(j + 1), latin(j + 2)].map(|w| w.map(str::to_lowercase));
                        let day_part = match (part[0].as_deref(), part[1].as_deref(), part[2].as_deref()) {
                            (Some("in"), Some("the"), Some("morning")) => Some("am"),
                            (Some("in"), Some("the"), Some("afternoon" | "evening")) => Some("pm"),
                            _ => None,
                        };
                        let (t, used) = match day_part {
                            Some(ampm) => (number_token(n, Some(ampm), None).0, 3),
                            None => number_token(n, latin(j), latin(j + 1)),
                        };
                        out.push(t);
                        i = j + used;
                    }
                    opening = false;
                    continue;
                }
                // 3pm, 9am: a time of day; 4th, 21st: a number.
                let digits_end = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
                let (digits, suffix) = lower.split_at(digits_end);
                if !digits.is_empty() && matches!(suffix, "am" | "pm" | "st" | "nd" | "rd" | "th") {
                    let n: f64 = digits.parse().unwrap_or(0.0);
                    let ampm = matches!(suffix, "am" | "pm").then_some(suffix);
                    out.push(number_token(n, ampm, None).0);
                    opening = false;
                    i += 1;
                    continue;
                }
                if let Some((n, u)) = glued(w) {
                    let (t, _) = number_token(n, Some(u), None);
                    out.push(t);
                } else if is_identifier(w) {
                    out.push(Token::new(lower.trim_end_matches('.'), Kind::Value));
                } else if let Some((_, value)) =
                    DATES.iter().find(|(d, _)| *d == lower.strip_suffix("'s").unwrap_or(&lower))
                {
                    out.push(Token::new(*value, Kind::Value));
                } else if let Some(m) = MONTHS
                    .iter()
                    .position(|m| *m == lower || (lower.len() == 3 && m.starts_with(lower.as_str())))
                    .filter(|_| lower != "may" || latin(i + 1).is_some_and(|n| parse_number(n).is_some()))
                {
                    out.push(Token::new(format!("month{}", m + 1), Kind::Value));
                } else if lower.starts_with("day") || lower.starts_with("week") || lower.starts_with("month")
                {
                    // The dates made from Chinese text above ("day-1") and plain words alike.
                    let kind =
                        if lower.chars().any(|c| c.is_ascii_digit()) { Kind::Value } else { Kind::Word };
                    out.push(Token::new(
                        if kind == Kind::Value { lower.clone() } else { stem(&lower) },
                        kind,
                    ));
                } else {
                    let bare =
                        lower.strip_suffix("'s").unwrap_or(&lower).trim_matches(|c| c == '\'' || c == '-');
                    let word = w.strip_suffix("'s").unwrap_or(w).trim_matches(|c| c == '\'' || c == '-');
                    if !bare.is_empty() {
                        let first = word.chars().next().unwrap_or(' ');
                        let inner_capital = word.chars().skip(1).any(char::is_uppercase)
                            && !word.chars().all(|c| !c.is_lowercase());
                        let acronym = word.chars().count() > 1 && word.chars().all(|c| !c.is_lowercase());
                        let kind = if STOP.contains(&bare) && (!acronym || opening) {
                            Kind::Stop
                        } else if has_cjk {
                            Kind::Name
                        } else if acronym {
                            Kind::Word
                        } else if (first.is_uppercase() && !opening) || inner_capital {
                            Kind::Name
                        } else if opening && first.is_uppercase() {
                            Kind::Opening
                        } else {
                            Kind::Word
                        };
                        let text = if kind == Kind::Word && !acronym { stem(bare) } else { bare.to_string() };
                        out.push(Token::new(text, kind));
                    }
                }
            }
        }
        opening = false;
        i += 1;
    }
    out
}

/// Number words from piece `i` on ("thirty four", "two hundred", "thirty-four"): the value and
/// how many pieces they take.
fn number_word_run(pieces: &[Piece], i: usize) -> Option<(f64, usize)> {
    let word = |k: usize| match pieces.get(k) {
        Some(Piece::Latin(w)) => Some(w.to_lowercase()),
        _ => None,
    };
    let first = word(i)?;
    let (mut value, mut used) = if let Some((a, b)) = first.split_once('-') {
        (number_word(a)? + number_word(b)?, 1)
    } else {
        (number_word(&first)?, 1)
    };
    while let Some(next) = word(i + used).and_then(|w| number_word(&w)) {
        value = if next == 100.0 || next == 1000.0 { value * next } else { value + next };
        used += 1;
    }
    Some((value, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<String> {
        tokens(text).into_iter().filter(Token::is_value).map(|t| t.text).collect()
    }

    #[test]
    fn quantities_written_differently_are_the_same_value() {
        assert_eq!(values("The TTL is 300 seconds."), values("Entries expire after five minutes."));
        assert_eq!(values("It has 64 GB of RAM."), values("It has 65536 MB of memory."));
        assert_eq!(values("构建服务器有 32 核 CPU。")[..1], values("打包机配置了三十二个 CPU 核心。")[..1]);
        assert_eq!(values("支付服务挂了 20 分钟。"), values("支付服务宕机了二十分钟。"));
        assert_eq!(values("At 2:05 PM the DB failed over."), values("At 14:05 the DB failed over."));
        assert_eq!(values("The user wakes up at 6 AM."), values("The user gets up at six in the morning."));
        assert_eq!(
            values("It times out after 45 minutes."),
            values("Killed after three quarters of an hour.")
        );
        assert_eq!(values("The user is thirty-four."), vec!["34"]);
        assert_eq!(values("About 1.5 TB of data."), values("Roughly 1536 GB of data."));
        assert_eq!(values("It tops out at 15k RPM."), values("It tops out at 15,000 RPM."));
        assert_eq!(values("Set to 20°C at night."), values("Set to 20 degrees Celsius at night."));
    }

    #[test]
    fn identifiers_names_and_dates_are_values() {
        assert_eq!(values("The office wifi password is tiger42."), vec!["tiger42"]);
        assert_eq!(values("Her phone number is 555-0142."), vec!["555-0142"]);
        assert_eq!(values("The dashboard is at grafana.internal/d/ops."), vec!["grafana.internal/d/ops"]);
        assert_eq!(values("Run `make release` from the root."), vec!["make release"]);
        assert_eq!(values("The release is on March 3."), vec!["month3", "3"]);
        assert_eq!(values("昨天的发布回滚了一次。"), vec!["day-1"]);
        assert_eq!(values("部署前端用 npm run build。"), vec!["npm", "run", "build"]);
    }

    #[test]
    fn words_are_stemmed_the_same_way() {
        assert_eq!(stem("freezes"), stem("freeze"));
        assert_eq!(stem("deploys"), stem("deploy"));
        assert_eq!(stem("entries"), "entry");
    }

    #[test]
    fn odd_text_does_not_panic() {
        for text in [
            "",
            "`",
            "`unclosed",
            "°",
            "...",
            "一",
            "十万万",
            "12:",
            ":30",
            "9999999999999999999999 years",
            "é'-'",
        ] {
            tokens(text);
        }
    }
}
