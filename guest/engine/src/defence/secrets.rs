//! Secrets and credentials in text: API keys of the common providers, bearer and JSON web tokens,
//! private key blocks, passwords in URLs and `password=` pairs, card numbers (Luhn-checked), and
//! the personal data classes (e-mail addresses, phone numbers). Each finding is a byte range and
//! its kind, so a caller can redact it (`[redacted:kind]`) or refuse the text naming the kind.
//!
//! Hand-written scanners rather than regular expressions: the component carries no regex engine
//! of its own for this, and each pattern needs a check a regex cannot make (a Luhn sum, a JWT's
//! three base64url parts, an entropy floor for a generic `token=`).

/// What a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecretKind {
    /// A provider's API key (OpenAI, Anthropic, AWS, GitHub, GitLab, Slack, Stripe, Google).
    ApiKey,
    /// `Bearer <token>`.
    BearerToken,
    /// A JSON web token (`eyJ….eyJ….sig`).
    Jwt,
    /// A `-----BEGIN … PRIVATE KEY-----` block.
    PrivateKey,
    /// A password: `scheme://user:password@host`, `password=…`, `pwd: …`, "the password is …".
    Password,
    /// A payment card number that passes the Luhn check.
    CardNumber,
    /// An e-mail address (personal data; off unless configured).
    Email,
    /// A phone number (personal data; off unless configured).
    Phone,
}

impl SecretKind {
    /// The kind's name, as `[redacted:NAME]` and errors spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::ApiKey => "api-key",
            SecretKind::BearerToken => "bearer-token",
            SecretKind::Jwt => "jwt",
            SecretKind::PrivateKey => "private-key",
            SecretKind::Password => "password",
            SecretKind::CardNumber => "card-number",
            SecretKind::Email => "email",
            SecretKind::Phone => "phone",
        }
    }

    /// Personal data rather than a credential.
    pub fn is_personal(self) -> bool {
        matches!(self, SecretKind::Email | SecretKind::Phone)
    }
}

/// One secret found: `text[start..end]` is it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: SecretKind,
    pub start: usize,
    pub end: usize,
}

/// Every secret in `text`, credentials and personal data alike, in order, not overlapping (the
/// first to start wins; of two at one place, the longer).
pub fn find(text: &str) -> Vec<Finding> {
    let mut found = Vec::new();
    private_keys(text, &mut found);
    provider_keys(text, &mut found);
    jwts(text, &mut found);
    bearer_tokens(text, &mut found);
    url_passwords(text, &mut found);
    password_pairs(text, &mut found);
    card_numbers(text, &mut found);
    emails(text, &mut found);
    phones(text, &mut found);
    found.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut out: Vec<Finding> = Vec::with_capacity(found.len());
    for f in found {
        if out.last().is_none_or(|last| f.start >= last.end) {
            out.push(f);
        }
    }
    out
}

/// How a redacted secret starts in stored text: `[redacted:KIND]`.
pub const REDACTED_MARK: &str = "[redacted:";

/// `text` with each finding `keep` refuses replaced by `[redacted:kind]`.
pub fn redact(text: &str, findings: &[Finding], mut redacted: impl FnMut(SecretKind) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in findings {
        if !redacted(f.kind) {
            continue;
        }
        out.push_str(&text[at..f.start]);
        out.push_str(REDACTED_MARK);
        out.push_str(f.kind.as_str());
        out.push(']');
        at = f.end;
    }
    out.push_str(&text[at..]);
    out
}

fn is_token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_')
}

/// The end of the run of bytes from `start` that `ok` accepts.
fn run_end(bytes: &[u8], start: usize, ok: impl Fn(u8) -> bool) -> usize {
    let mut end = start;
    while end < bytes.len() && ok(bytes[end]) {
        end += 1;
    }
    end
}

/// Whether `bytes[at]` starts a word (nothing word-like before it).
fn word_start(bytes: &[u8], at: usize) -> bool {
    at == 0 || !is_token_char(bytes[at - 1])
}

/// Distinct characters and character classes: a real key is not `aaaaaaaaaaaaaaaa`.
fn looks_random(token: &[u8]) -> bool {
    let digits = token.iter().filter(|c| c.is_ascii_digit()).count();
    let letters = token.iter().filter(|c| c.is_ascii_alphabetic()).count();
    let mut seen = [false; 256];
    let distinct = token.iter().filter(|&&c| !std::mem::replace(&mut seen[c as usize], true)).count();
    distinct >= 8 && digits > 0 && letters > 0
}

fn private_keys(text: &str, found: &mut Vec<Finding>) {
    let mut from = 0;
    while let Some(rel) = text[from..].find("-----BEGIN ") {
        let start = from + rel;
        let header_end = match text[start + 11..].find("-----") {
            Some(e) => start + 11 + e + 5,
            None => break,
        };
        let label = &text[start + 11..header_end - 5];
        if !label.ends_with("PRIVATE KEY") {
            from = header_end;
            continue;
        }
        let footer = format!("-----END {label}-----");
        let end = match text[header_end..].find(&footer) {
            Some(e) => header_end + e + footer.len(),
            // A truncated block is still a key: up to the end of the text.
            None => text.len(),
        };
        found.push(Finding { kind: SecretKind::PrivateKey, start, end });
        from = end;
    }
}

/// Prefixes of provider keys and the least length of what follows them.
const PROVIDER_PREFIXES: &[(&str, usize)] = &[
    ("sk-ant-", 20),
    ("sk-proj-", 16),
    ("sk-", 20),
    ("AKIA", 16),
    ("ASIA", 16),
    ("ghp_", 30),
    ("gho_", 30),
    ("ghu_", 30),
    ("ghs_", 30),
    ("ghr_", 30),
    ("github_pat_", 30),
    ("glpat-", 20),
    ("xoxb-", 20),
    ("xoxp-", 20),
    ("xoxa-", 20),
    ("sk_live_", 16),
    ("rk_live_", 16),
    ("pk_live_", 16),
    ("AIza", 30),
];

fn provider_keys(text: &str, found: &mut Vec<Finding>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !word_start(bytes, i) {
            i += 1;
            continue;
        }
        let hit = PROVIDER_PREFIXES.iter().find(|(p, _)| bytes[i..].starts_with(p.as_bytes()));
        if let Some((prefix, min)) = hit {
            let body = i + prefix.len();
            let end = run_end(bytes, body, is_token_char);
            // AWS access key ids are exactly 16 upper-case letters and digits after the prefix.
            let aws = matches!(*prefix, "AKIA" | "ASIA");
            let ok = if aws {
                end - body >= 16
                    && bytes[body..body + 16].iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            } else {
                end - body >= *min && looks_random(&bytes[body..end])
            };
            if ok {
                let end = if aws { body + 16 } else { end };
                found.push(Finding { kind: SecretKind::ApiKey, start: i, end });
                i = end;
                continue;
            }
        }
        i += 1;
    }
}

fn is_base64url(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'=')
}

fn jwts(text: &str, found: &mut Vec<Finding>) {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(rel) = text[from..].find("eyJ") {
        let start = from + rel;
        from = start + 3;
        if !word_start(bytes, start) {
            continue;
        }
        // header.payload.signature, each base64url; the header is JSON ("eyJ" is `{"`).
        let mut end = start;
        let mut parts = 0;
        loop {
            let part_end = run_end(bytes, end, is_base64url);
            if part_end - end < 4 {
                break;
            }
            parts += 1;
            end = part_end;
            if parts == 3 || end >= bytes.len() || bytes[end] != b'.' {
                break;
            }
            end += 1;
        }
        if parts == 3 {
            found.push(Finding { kind: SecretKind::Jwt, start, end });
            from = end;
        }
    }
}

fn bearer_tokens(text: &str, found: &mut Vec<Finding>) {
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(rel) = lower[from..].find("bearer") {
        let start = from + rel;
        from = start + 6;
        if !word_start(bytes, start) {
            continue;
        }
        let token_start = run_end(bytes, start + 6, |c| c == b' ' || c == b'\t' || c == b':');
        if token_start == start + 6 {
            continue;
        }
        let end = run_end(bytes, token_start, |c| is_base64url(c) || matches!(c, b'.' | b'+' | b'/'));
        if end - token_start >= 16 && looks_random(&bytes[token_start..end]) {
            found.push(Finding { kind: SecretKind::BearerToken, start: token_start, end });
            from = end;
        }
    }
}

fn url_passwords(text: &str, found: &mut Vec<Finding>) {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(rel) = text[from..].find("://") {
        let at = from + rel + 3;
        from = at;
        // user:password@host, before the first `/`, `?` or space.
        let authority_end =
            run_end(bytes, at, |c| !matches!(c, b'/' | b'?' | b'#' | b' ' | b'\t' | b'\n' | b'"' | b'\''));
        let authority = &text[at..authority_end];
        let (Some(colon), Some(amp)) = (authority.find(':'), authority.rfind('@')) else { continue };
        if colon < amp && amp > colon + 1 {
            found.push(Finding { kind: SecretKind::Password, start: at + colon + 1, end: at + amp });
        }
    }
}

/// Words that name a password or another secret value, in the languages memories come in.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "api_key",
    "apikey",
    "api-key",
    "access_key",
    "secret_key",
    "client_secret",
    "token",
    "密码",
    "口令",
    "密钥",
];

/// Values not to mistake for secrets: a sentence about a password, not one.
const NOT_VALUES: &[&str] = &[
    "is", "was", "the", "a", "an", "has", "have", "for", "of", "to", "and", "or", "in", "on", "with",
    "changed", "reset", "rotated", "expired", "now", "manager", "policy", "field", "required", "be", "must",
    "should", "will", "it", "this", "that", "same", "new", "old", "empty", "not", "from",
];

fn password_pairs(text: &str, found: &mut Vec<Finding>) {
    let lower = text.to_lowercase();
    // Lower-casing keeps byte offsets only for ASCII; other text is searched as it is.
    let hay = if lower.len() == text.len() { lower.as_str() } else { text };
    let bytes = text.as_bytes();
    for word in SECRET_WORDS {
        let mut from = 0;
        while let Some(rel) = hay[from..].find(word) {
            let start = from + rel;
            from = start + word.len();
            let ascii_word = word.is_ascii();
            if ascii_word
                && (!word_start(bytes, start) || bytes.get(from).copied().is_some_and(is_token_char))
            {
                continue;
            }
            // `word=value`, `word: value`, `word is value`, `word：value`.
            let mut at = from;
            let rest = &text[at..];
            let sep = ["=", ":", "：", " is ", " was ", " 是", "是", " "]
                .iter()
                .find(|s| rest.starts_with(*s))
                .copied();
            let Some(sep) = sep else { continue };
            at += sep.len();
            at = run_end(bytes, at, |c| c == b' ' || c == b'"' || c == b'\'' || c == b'`');
            let end = run_end(bytes, at, |c| {
                !matches!(c, b' ' | b'\t' | b'\n' | b'"' | b'\'' | b'`' | b',' | b';' | b')')
            });
            let mut value = &text[at..end];
            value = value.trim_end_matches(['.', '!', '?', '。', '，']);
            let end = at + value.len();
            if value.chars().count() < 6 || NOT_VALUES.contains(&value.to_lowercase().as_str()) {
                continue;
            }
            // A value that is a word of the sentence ("password protected") is not a secret:
            // require a digit, a symbol or mixed case — what passwords and keys are made of.
            let has_digit = value.chars().any(|c| c.is_ascii_digit());
            let has_symbol = value.chars().any(|c| !c.is_alphanumeric());
            let mixed = value.chars().any(char::is_uppercase) && value.chars().any(char::is_lowercase);
            if !(has_digit || has_symbol || mixed) {
                continue;
            }
            let kind = if *word == "token" || word.contains("key") || *word == "secret" || *word == "密钥" {
                SecretKind::ApiKey
            } else {
                SecretKind::Password
            };
            found.push(Finding { kind, start: at, end });
        }
    }
}

fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(*d);
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

fn card_numbers(text: &str, found: &mut Vec<Finding>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit()
            || (i > 0 && (bytes[i - 1].is_ascii_digit() || bytes[i - 1].is_ascii_alphabetic()))
        {
            i += 1;
            continue;
        }
        // Digits with single spaces or dashes between groups.
        let mut digits = Vec::new();
        let mut end = i;
        let mut j = i;
        while j < bytes.len() {
            if bytes[j].is_ascii_digit() {
                digits.push(bytes[j] - b'0');
                j += 1;
                end = j;
            } else if matches!(bytes[j], b' ' | b'-') && j + 1 < bytes.len() && bytes[j + 1].is_ascii_digit()
            {
                j += 1;
            } else {
                break;
            }
        }
        let next_is_word = bytes.get(end).is_some_and(|c| c.is_ascii_alphanumeric());
        if (13..=19).contains(&digits.len())
            && !next_is_word
            && luhn(&digits)
            && digits.iter().any(|&d| d != digits[0])
        {
            found.push(Finding { kind: SecretKind::CardNumber, start: i, end });
        }
        i = end.max(i + 1);
    }
}

fn emails(text: &str, found: &mut Vec<Finding>) {
    let bytes = text.as_bytes();
    for (at, _) in text.match_indices('@') {
        let local = at
            - (0..at)
                .rev()
                .take_while(|&k| {
                    bytes[k].is_ascii_alphanumeric() || matches!(bytes[k], b'.' | b'_' | b'%' | b'+' | b'-')
                })
                .count();
        let domain_end = run_end(bytes, at + 1, |c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-'));
        let domain = text[at + 1..domain_end].trim_end_matches('.');
        let domain_end = at + 1 + domain.len();
        let tld_ok = domain.rsplit_once('.').is_some_and(|(host, tld)| {
            !host.is_empty() && tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic())
        });
        // user:password@host is a URL's credentials, not an address.
        let in_url = text[..local].ends_with(':');
        if local < at && tld_ok && !in_url {
            found.push(Finding { kind: SecretKind::Email, start: local, end: domain_end });
        }
    }
}

fn phones(text: &str, found: &mut Vec<Finding>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i] == b'+' || bytes[i] == b'(' || bytes[i].is_ascii_digit();
        if !starts || (i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.')) {
            i += 1;
            continue;
        }
        let end =
            run_end(bytes, i, |c| c.is_ascii_digit() || matches!(c, b' ' | b'-' | b'(' | b')' | b'+' | b'.'));
        let candidate = text[i..end].trim_end_matches([' ', '-', '.', '(']);
        let digits = candidate.bytes().filter(u8::is_ascii_digit).count();
        let separated = candidate.bytes().any(|c| matches!(c, b' ' | b'-' | b'(' | b')' | b'.'))
            || candidate.starts_with('+');
        // 10 to 15 digits with a phone's separators; a version has dots only, a date a
        // four-digit year before a dash.
        let dotted_only = candidate.bytes().all(|c| c.is_ascii_digit() || c == b'.');
        let dated =
            candidate.as_bytes().windows(5).any(|w| w[..4].iter().all(u8::is_ascii_digit) && w[4] == b'-');
        if (10..=15).contains(&digits) && separated && !dotted_only && !dated {
            found.push(Finding { kind: SecretKind::Phone, start: i, end: i + candidate.len() });
        }
        i = end.max(i + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(SecretKind, &str)> {
        find(text).into_iter().map(|f| (f.kind, &text[f.start..f.end])).collect()
    }

    #[test]
    fn provider_keys_are_found() {
        let text =
            "The OpenAI API key is sk-proj-AbCdEf0123456789XyZ and the AWS key is AKIAIOSFODNN7EXAMPLE";
        assert_eq!(
            kinds(text),
            vec![
                (SecretKind::ApiKey, "sk-proj-AbCdEf0123456789XyZ"),
                (SecretKind::ApiKey, "AKIAIOSFODNN7EXAMPLE")
            ]
        );
        assert_eq!(kinds("github token ghp_abcdefghijklmnopqrstuvwxyz0123456789")[0].0, SecretKind::ApiKey);
    }

    #[test]
    fn tokens_keys_and_passwords_are_found() {
        assert_eq!(
            kinds("Authorization: Bearer abcDEF123456ghiJKL789")[0],
            (SecretKind::BearerToken, "abcDEF123456ghiJKL789")
        );
        let jwt =
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(kinds(&format!("token {jwt} expired"))[0], (SecretKind::Jwt, jwt));
        assert_eq!(
            kinds("connect to postgres://admin:hunter2x@db.internal:5432/app")[0],
            (SecretKind::Password, "hunter2x")
        );
        assert_eq!(kinds("set password=S3cret!pass in the env")[0], (SecretKind::Password, "S3cret!pass"));
        assert_eq!(
            kinds("The backup NAS root password is WOMBAT-4490")[0],
            (SecretKind::Password, "WOMBAT-4490")
        );
        assert_eq!(kinds("数据库密码是Abc12345xyz")[0].0, SecretKind::Password);
        let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----";
        assert_eq!(kinds(&format!("key: {key} done"))[0], (SecretKind::PrivateKey, key));
    }

    #[test]
    fn card_numbers_need_a_luhn_sum() {
        assert_eq!(
            kinds("card 4111 1111 1111 1111 on file")[0],
            (SecretKind::CardNumber, "4111 1111 1111 1111")
        );
        assert!(kinds("order 4111 1111 1111 1112 shipped").iter().all(|(k, _)| *k != SecretKind::CardNumber));
    }

    #[test]
    fn personal_data_is_found_and_marked_personal() {
        let found = kinds("Mail ana.lopez@example.com or call +1 (555) 010-4477.");
        assert_eq!(
            found,
            vec![(SecretKind::Email, "ana.lopez@example.com"), (SecretKind::Phone, "+1 (555) 010-4477")]
        );
        assert!(found.iter().all(|(k, _)| k.is_personal()));
    }

    #[test]
    fn ordinary_text_has_no_secrets() {
        for text in [
            "The user's password was changed yesterday",
            "Reset the password policy for the team",
            "pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV",
            "Version 2024.10.15 of the SDK fixed the retry bug",
            "The deploy took 1234567 ms on build 42",
            "Use a password manager for every service",
            "the token bucket refills 100 requests per second",
            "Customer ACME's VPN secret is now changed",
        ] {
            assert_eq!(kinds(text), vec![], "{text}");
        }
    }

    #[test]
    fn redact_replaces_what_it_is_asked_to() {
        let text = "key sk-proj-AbCdEf0123456789XyZ mail a@example.com";
        let found = find(text);
        assert_eq!(redact(text, &found, |k| !k.is_personal()), "key [redacted:api-key] mail a@example.com");
        assert_eq!(redact(text, &found, |_| true), "key [redacted:api-key] mail [redacted:email]");
    }
}
