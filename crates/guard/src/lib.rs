//! Guardrails as pure functions. A [`Screen`] is the compiled rules of the
//! policies that apply to a request (literal lists, named regexes, the
//! built-in PII and secret [`detect`]ors), each rule with its policy's
//! action (`block`, `mask`, `flag`) and direction. It finds what a text
//! holds, masks it with per-request placeholders (`[EMAIL_1]`, the same
//! value the same placeholder: [`Masks`]), or says which rule blocks it.
//! [`stream::StreamMask`] does the same to a stream's text without ever
//! releasing text that could still become a match, and [`json`] applies it
//! to every string of a JSON body in any protocol. Rules read text folded
//! ([`fold`]: NFKC, default-ignorables removed), and what they match is
//! masked in the original. Nothing here does I/O.

pub mod detect;
mod fold;
pub mod json;
pub mod retention;
pub mod stream;

use std::collections::HashMap;
use std::sync::Arc;

use regex::Regex;
use regex_automata::meta;
use regex_automata::{Input, PatternSet};
use switchyard_codec::opaque::{Holds, Place};

use crate::fold::Folded;

/// Strings longer than this are screened in windows of it, held back as a
/// stream is ([`stream`]): a long document's folded copy and findings stay
/// this size.
const WINDOW: usize = 1 << 16;

/// What a policy does with a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The request (or reply) is refused, naming the policy and rule.
    Block,
    /// The match is replaced by a placeholder.
    Mask,
    /// Recorded only.
    Flag,
}

impl Action {
    /// The config and metric name.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Block => "block",
            Action::Mask => "mask",
            Action::Flag => "flag",
        }
    }
}

/// Which way a policy looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// The caller's request.
    Request,
    /// The reply.
    Response,
}

impl Direction {
    /// The metric name.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Request => "request",
            Direction::Response => "response",
        }
    }
}

/// A rule's pattern could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// It does not compile.
    #[error("not a valid regex: {0}")]
    Invalid(String),
    /// Its matches have no longest length, so a stream could not hold back
    /// enough to mask one split across chunks.
    #[error("its matches can be any length; bound every repetition (`{{1,64}}` rather than `+` or `*`)")]
    Unbounded,
}

/// The longest text `pattern` can match, in bytes.
pub fn reach(pattern: &str) -> Result<usize, RuleError> {
    let hir = regex_syntax::Parser::new().parse(pattern).map_err(|err| RuleError::Invalid(err.to_string()))?;
    hir.properties().maximum_len().ok_or(RuleError::Unbounded)
}

/// Whether `pattern` anchors to the start or end of its text (`^`, `$`):
/// such a rule can match a string alone and not the body around it.
fn anchored(pattern: &str) -> bool {
    use regex_syntax::hir::Look;
    regex_syntax::Parser::new().parse(pattern).map_or(true, |hir| {
        let looks = hir.properties().look_set();
        [Look::Start, Look::End, Look::StartLF, Look::EndLF, Look::StartCRLF, Look::EndCRLF]
            .into_iter()
            .any(|look| looks.contains(look))
    })
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Its policy's index in the screen.
    pub policy: usize,
    /// Its place among every configured policy's rules.
    pub id: usize,
    /// Its name in decisions (`email`, `ticket`, a literal list's policy).
    pub name: Arc<str>,
    /// The placeholder's kind (`EMAIL`, `TICKET`).
    pub label: Arc<str>,
    regex: Regex,
    check: Option<fn(&str) -> bool>,
    /// Its longest match, in bytes.
    pub reach: usize,
}

/// A policy as the config defines it.
#[derive(Debug, Clone)]
pub struct PolicySpec {
    /// Its name.
    pub name: Arc<str>,
    /// Its action.
    pub action: Action,
    /// Request, reply, or both.
    pub request: bool,
    /// Looks at replies.
    pub response: bool,
    /// Literal phrases, matched case-insensitively as whole text.
    pub literals: Vec<String>,
    /// Named regexes.
    pub regexes: Vec<(String, String)>,
    /// Built-in detectors, by [`detect::NAMES`].
    pub detect: Vec<String>,
    /// Its first rule's place among every policy's rules (the config's
    /// catalog, for metric labels): [`Rule::id`] counts on from it.
    pub first_rule: usize,
    /// An external moderator the request's text is sent to.
    pub moderator: Option<Moderator>,
    /// A mask's placeholders are pseudonyms the reply has put back: the
    /// upstream never sees the value, the caller gets it back (a tool
    /// call's arguments included).
    pub reversible: bool,
}

/// An external moderator: an endpoint shaped like OpenAI's moderations
/// (`POST {"model"?, "input"}` → `{"results": [{"flagged"}]}`), a webhook
/// or a moderation pool of the gateway itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moderator {
    /// Where it is (SSRF-checked at boot).
    pub url: Arc<str>,
    /// The `model` sent, when the endpoint wants one.
    pub model: Option<Arc<str>>,
    /// How long to wait for its verdict.
    pub timeout: std::time::Duration,
    /// No verdict in time (or an error) refuses the request, rather than
    /// letting it pass.
    pub block_on_error: bool,
    /// Its place in the config's catalog of rules (after every regex rule).
    pub id: usize,
    /// An AWS Bedrock guardrail (`ApplyGuardrail`) asked with the
    /// credentials of this Bedrock provider, rather than a JSON endpoint.
    pub bedrock: Option<BedrockGuardrail>,
}

/// An AWS Bedrock guardrail: `POST {runtime}/guardrail/{id}/version/{version}/apply`,
/// SigV4-signed with a Bedrock provider's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BedrockGuardrail {
    /// The Bedrock provider whose endpoint and credentials are used.
    pub provider: Arc<str>,
    /// The guardrail's identifier (id or ARN).
    pub id: Arc<str>,
    /// Its version (`DRAFT` or a number).
    pub version: Arc<str>,
}

impl BedrockGuardrail {
    /// The body of an `ApplyGuardrail` call for `text` as the caller's input.
    pub fn body(text: &str) -> Vec<u8> {
        let body = serde_json::json!({ "source": "INPUT", "content": [{ "text": { "text": text } }] });
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

/// Whether a moderator's reply flags its input: OpenAI's
/// `{"results": [{"flagged": true}]}`, a webhook's `{"flagged": true}`, or
/// Bedrock `ApplyGuardrail`'s `{"action": "GUARDRAIL_INTERVENED"}` (`"NONE"`:
/// not flagged). `None`: the reply is not a verdict.
pub fn flagged(reply: &[u8]) -> Option<bool> {
    let value: serde_json::Value = serde_json::from_slice(reply).ok()?;
    match value.get("action").and_then(serde_json::Value::as_str) {
        Some("GUARDRAIL_INTERVENED") => return Some(true),
        Some("NONE") => return Some(false),
        _ => {}
    }
    if let Some(results) = value.get("results").and_then(|r| r.as_array()) {
        return Some(results.iter().any(|r| r.get("flagged").and_then(serde_json::Value::as_bool) == Some(true)));
    }
    value.get("flagged").and_then(serde_json::Value::as_bool)
}

/// A policy in a screen.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Its name.
    pub name: Arc<str>,
    /// Its action.
    pub action: Action,
    /// Its placeholders are restored in the reply.
    pub reversible: bool,
    request: bool,
    response: bool,
}

/// The compiled rules of a set of policies.
#[derive(Debug, Clone)]
pub struct Screen {
    /// The policies, in the order given.
    pub policies: Vec<Policy>,
    /// Their rules.
    pub rules: Vec<Rule>,
    /// Every rule at once: one pass tells which rules may match at all.
    /// Built without a literal prefilter: rules like `TCK-[0-9]{6}` expand
    /// to so many literals that the prefilter's scan costs more than the
    /// lazy DFA's (measured: 3× on a chat body).
    set: meta::Regex,
    /// The longest match of any rule that looks at replies.
    pub response_reach: usize,
    /// The longest match of any rule that looks at requests.
    request_reach: usize,
    /// No rule anchors to its text's ends: a body whose strings hold no
    /// escapes can be asked once, whole ([`Screen::may_match`]).
    whole_body: bool,
    /// The moderators of its policies (by policy index); they screen requests.
    pub moderators: Vec<(usize, Moderator)>,
    /// Whether any policy looks at requests, and at replies.
    pub on_request: bool,
    /// See `on_request`.
    pub on_response: bool,
}

/// One match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule's index in the screen.
    pub rule: usize,
    /// Where, in bytes.
    pub start: usize,
    /// Where it ends.
    pub end: usize,
}

/// A decision to record: which policy and rule, what was done, which way.
/// Never the matched text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// The rule's index in its screen.
    pub rule: usize,
    /// What its policy does.
    pub action: Action,
    /// Which way.
    pub direction: Direction,
}

/// A text blocked by a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The policy's name.
    pub policy: Arc<str>,
    /// The rule's name.
    pub rule: Arc<str>,
    /// The rule masks, and what it would mask is text a vendor's signature
    /// covers (signed reasoning): never rewritten, so refused instead.
    pub signed: bool,
}

impl Screen {
    /// Compiles `specs`; the error names the policy and rule at fault.
    pub fn compile(specs: &[PolicySpec]) -> Result<Screen, (String, RuleError)> {
        let mut policies = Vec::new();
        let mut rules = Vec::new();
        for (index, spec) in specs.iter().enumerate() {
            policies.push(Policy {
                name: spec.name.clone(),
                action: spec.action,
                reversible: spec.reversible,
                request: spec.request,
                response: spec.response,
            });
            let mut local = 0;
            let mut add = |name: &str, label: &str, pattern: &str, check| {
                let reach = reach(pattern).map_err(|err| (format!("{}.{name}", spec.name), err))?;
                let regex = Regex::new(pattern)
                    .map_err(|err| (format!("{}.{name}", spec.name), RuleError::Invalid(err.to_string())))?;
                let id = spec.first_rule + local;
                local += 1;
                rules.push(Rule {
                    policy: index,
                    id,
                    name: Arc::from(name),
                    label: Arc::from(label),
                    regex,
                    check,
                    reach,
                });
                Ok(())
            };
            if !spec.literals.is_empty() {
                let alternation: Vec<String> = spec.literals.iter().map(|l| regex::escape(l)).collect();
                let pattern = format!("(?i){}", alternation.join("|"));
                add(&spec.name, &spec.name.to_ascii_uppercase(), &pattern, None)?;
            }
            for (name, pattern) in &spec.regexes {
                add(name, &name.to_ascii_uppercase(), pattern, None)?;
            }
            for name in &spec.detect {
                let detectors = detect::named(name).ok_or_else(|| {
                    (format!("{}.detect", spec.name), RuleError::Invalid(format!("unknown detector `{name}`")))
                })?;
                for detector in detectors {
                    add(detector.name, detector.label, detector.pattern, detector.check)?;
                }
            }
        }
        let set = meta::Regex::builder()
            .configure(meta::Config::new().auto_prefilter(false).match_kind(regex_automata::MatchKind::All))
            .build_many(&rules.iter().map(|r| r.regex.as_str()).collect::<Vec<_>>())
            .map_err(|err| ("policies".to_owned(), RuleError::Invalid(err.to_string())))?;
        let response_reach = rules.iter().filter(|r| policies[r.policy].response).map(|r| r.reach).max().unwrap_or(0);
        let request_reach = rules.iter().filter(|r| policies[r.policy].request).map(|r| r.reach).max().unwrap_or(0);
        let whole_body = !rules.iter().any(|r| anchored(r.regex.as_str()));
        let moderators =
            specs.iter().enumerate().filter_map(|(at, spec)| spec.moderator.clone().map(|m| (at, m))).collect();
        Ok(Screen {
            moderators,
            whole_body,
            on_request: policies.iter().any(|p| p.request),
            // A reversible mask's placeholders are put back in the reply.
            on_response: policies.iter().any(|p| p.response || p.reversible),
            policies,
            rules,
            set,
            response_reach,
            request_reach,
        })
    }

    fn applies(&self, rule: usize, direction: Direction) -> bool {
        let policy = &self.policies[self.rules[rule].policy];
        match direction {
            Direction::Request => policy.request,
            Direction::Response => policy.response,
        }
    }

    /// The longest match of the rules that look `direction`, in bytes of
    /// folded text.
    pub fn reach(&self, direction: Direction) -> usize {
        match direction {
            Direction::Request => self.request_reach,
            Direction::Response => self.response_reach,
        }
    }

    /// Every match in `text` (read folded: fullwidth, look-alike and
    /// zero-width characters do not hide one) of the rules that look
    /// `direction`, in order of position in `text`, overlaps dropped (the
    /// earlier, then the longer, wins).
    pub fn find(&self, text: &str, direction: Direction) -> Vec<Finding> {
        self.find_folded(&Folded::new(text), direction)
    }

    /// [`Screen::find`] in a text folded already; the findings are places
    /// in the original.
    pub(crate) fn find_folded(&self, folded: &Folded<'_>, direction: Direction) -> Vec<Finding> {
        let found = self.find_plain(folded.as_str(), direction);
        if folded.is_original() {
            return found;
        }
        let mut kept: Vec<Finding> = Vec::with_capacity(found.len());
        for finding in found {
            let (start, end) = (folded.start(finding.start), folded.end(finding.end));
            if kept.last().is_none_or(|last| start >= last.end) {
                kept.push(Finding { rule: finding.rule, start, end });
            }
        }
        kept
    }

    /// The matches in `text` as it is.
    fn find_plain(&self, text: &str, direction: Direction) -> Vec<Finding> {
        // Most text matches nothing: the set's cheapest question first.
        if !self.set.is_match(text) {
            return Vec::new();
        }
        let mut which = PatternSet::new(self.set.pattern_len());
        self.set.which_overlapping_matches(&Input::new(text), &mut which);
        let mut found = Vec::new();
        for rule in which.iter().map(|id| id.as_usize()) {
            if !self.applies(rule, direction) {
                continue;
            }
            let compiled = &self.rules[rule];
            for m in compiled.regex.find_iter(text) {
                if compiled.check.is_none_or(|check| check(m.as_str())) {
                    found.push(Finding { rule, start: m.start(), end: m.end() });
                }
            }
        }
        found.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
        let mut kept: Vec<Finding> = Vec::with_capacity(found.len());
        for finding in found {
            if kept.last().is_none_or(|last| finding.start >= last.end) {
                kept.push(finding);
            }
        }
        kept
    }

    /// Whether any rule may match a string of the JSON `body`, whose media
    /// and signed state sit at `places`: `false` is certain. A body without
    /// escapes whose text reads the same folded holds each string's text as
    /// it is, so one question of the whole body answers for all its strings
    /// (unless a rule anchors to a text's ends); a body naming a media
    /// member may hold text in base64. Otherwise, `true`.
    pub fn may_match(&self, body: &[u8], places: &[Place]) -> bool {
        if !self.whole_body || memchr::memchr(b'\\', body).is_some() {
            return true;
        }
        if names_any(body, places, Some(Holds::Media)) {
            return true;
        }
        match std::str::from_utf8(body) {
            Ok(text) => !fold::is_folded(text) || self.set.is_match(text),
            Err(_) => true,
        }
    }

    /// Whether `rule`'s policy restores its placeholders in the reply.
    pub fn reversible(&self, rule: usize) -> bool {
        self.policies[self.rules[rule].policy].reversible
    }

    /// The action of `finding`'s policy.
    pub fn action(&self, rule: usize) -> Action {
        self.policies[self.rules[rule].policy].action
    }

    /// The block `rule` makes.
    pub fn blocked(&self, rule: usize) -> Blocked {
        let rule = &self.rules[rule];
        Blocked { policy: self.policies[rule.policy].name.clone(), rule: rule.name.clone(), signed: false }
    }

    /// `text` screened `direction`: `Err` when a blocking rule matches,
    /// else the text with every masking rule's matches replaced (`None`:
    /// unchanged) and the decisions made.
    pub fn screen(
        &self,
        text: &str,
        direction: Direction,
        masks: &mut Masks,
        decisions: &mut Vec<Decision>,
    ) -> Result<Option<String>, Blocked> {
        if text.len() > WINDOW {
            return self.screen_in_windows(text, direction, masks, decisions, WINDOW);
        }
        let folded = Folded::new(text);
        let findings = self.find_plain(folded.as_str(), direction);
        if findings.is_empty() {
            return Ok(None);
        }
        for finding in &findings {
            let decision = Decision { rule: finding.rule, action: self.action(finding.rule), direction };
            if !decisions.contains(&decision) {
                decisions.push(decision);
            }
            if decision.action == Action::Block {
                return Err(self.blocked(finding.rule));
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut changed = false;
        for finding in findings.iter().filter(|f| self.action(f.rule) == Action::Mask) {
            // Found in the folded text, masked in the original; a match
            // inside one masked already (a private key's) goes with it.
            let start = folded.start(finding.start);
            let end = folded.end(self.masked_end(folded.as_str(), finding));
            if start < at {
                continue;
            }
            out.push_str(&text[at..start]);
            let reversible = self.reversible(finding.rule);
            out.push_str(&masks.placeholder(&self.rules[finding.rule].label, &text[start..end], reversible));
            at = end;
            changed = true;
        }
        if !changed {
            return Ok(None);
        }
        out.push_str(&text[at..]);
        Ok(Some(out))
    }

    /// Text a vendor's signature covers (signed reasoning) screened
    /// `direction` without changing it: `Err` when a blocking rule matches,
    /// or, failing that, when a masking rule would change it
    /// ([`Blocked::signed`]); a flag only records. The decisions made are
    /// recorded as [`Screen::screen`] records them.
    pub fn screen_signed(
        &self,
        text: &str,
        direction: Direction,
        decisions: &mut Vec<Decision>,
    ) -> Result<(), Blocked> {
        let findings = self.find(text, direction);
        let mut masked = None;
        for finding in &findings {
            let decision = Decision { rule: finding.rule, action: self.action(finding.rule), direction };
            if !decisions.contains(&decision) {
                decisions.push(decision);
            }
            match decision.action {
                Action::Block => return Err(self.blocked(finding.rule)),
                Action::Mask => masked = masked.or(Some(finding.rule)),
                Action::Flag => {}
            }
        }
        match masked {
            Some(rule) => Err(Blocked { signed: true, ..self.blocked(rule) }),
            None => Ok(()),
        }
    }

    /// [`Screen::screen`] of a long `text`, `window` bytes at a time, each
    /// held back as a stream's text is: the same outcome as whole.
    fn screen_in_windows(
        &self,
        text: &str,
        direction: Direction,
        masks: &mut Masks,
        decisions: &mut Vec<Decision>,
        window: usize,
    ) -> Result<Option<String>, Blocked> {
        let mut held = stream::Held::new(direction);
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + window.max(1)).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            held.push(self, &text[at..end], masks, decisions, &mut out)?;
            at = end;
        }
        held.flush(self, masks, decisions, &mut out)?;
        Ok((out != text).then_some(out))
    }

    /// Where a masked match ends: a private key's header takes the key
    /// with it, to its footer (or the text's end).
    fn masked_end(&self, text: &str, finding: &Finding) -> usize {
        if &*self.rules[finding.rule].name != "private_key" {
            return finding.end;
        }
        match text[finding.end..].find("PRIVATE KEY-----") {
            Some(at) => finding.end + at + "PRIVATE KEY-----".len(),
            None => text.len(),
        }
    }
}

/// Whether `body` names the member that marks one of `places` (of what
/// `holds`, when given: [`Place::marker`]): a string `"name"` followed by
/// a colon. One pass over the body's colons, no searcher built: this is
/// the common path.
pub(crate) fn names_any(body: &[u8], places: &[Place], holds: Option<Holds>) -> bool {
    let wanted = |place: &&Place| holds.is_none_or(|h| place.holds == h);
    // The names' lengths as bits (63: that long or longer): most members
    // are told apart by one test, before any name is compared.
    let length_bit = |len: usize| 1u64 << len.min(63);
    let lengths =
        places.iter().filter(wanted).filter_map(Place::marker).fold(0, |bits, name| bits | length_bit(name.len()));
    if lengths == 0 {
        return false;
    }
    memchr::memchr_iter(b':', body).any(|colon| {
        let Some(key) = body[..colon].trim_ascii_end().strip_suffix(b"\"") else { return false };
        // The name runs from the quote before it (a name holds no quote).
        let Some(open) = memchr::memrchr(b'"', key) else { return false };
        let name = &key[open + 1..];
        lengths & length_bit(name.len()) != 0
            && places.iter().filter(wanted).filter_map(Place::marker).any(|wanted| wanted.as_bytes() == name)
    })
}

/// One request's placeholders: a value masked twice gets the same one, and
/// each kind counts from 1. Those of reversible policies are remembered
/// both ways, so the reply can have them restored ([`Masks::restore`]).
#[derive(Debug, Default, Clone)]
pub struct Masks {
    given: HashMap<String, String>,
    counts: HashMap<Arc<str>, u32>,
    /// Placeholder → the value it stands for (reversible masks only).
    reverse: HashMap<String, String>,
}

/// The longest placeholder a reply can hold back for restoring.
pub const MAX_PLACEHOLDER: usize = 64;

impl Masks {
    /// The placeholder of `value`, a `label` match (`reversible`: restored
    /// in the reply). Values that read the same folded (a fullwidth
    /// spelling, a zero-width character) share one.
    pub fn placeholder(&mut self, label: &Arc<str>, value: &str, reversible: bool) -> String {
        let folded = Folded::new(value);
        if let Some(given) = self.given.get(folded.as_str()) {
            return given.clone();
        }
        let count = self.counts.entry(label.clone()).or_insert(0);
        *count += 1;
        let placeholder = format!("[{label}_{count}]");
        self.given.insert(folded.as_str().to_owned(), placeholder.clone());
        if reversible && placeholder.len() <= MAX_PLACEHOLDER {
            self.reverse.insert(placeholder.clone(), value.to_owned());
        }
        placeholder
    }

    /// Whether any placeholder is to be restored.
    pub fn restores(&self) -> bool {
        !self.reverse.is_empty()
    }

    /// `text` with every reversible placeholder put back (`None`: none in it).
    pub fn restore(&self, text: &str) -> Option<String> {
        if self.reverse.is_empty() || !text.contains('[') {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        let mut changed = false;
        while let Some(open) = rest.find('[') {
            let Some(close) = rest[open..].find(']').map(|c| open + c + 1) else { break };
            match self.reverse.get(&rest[open..close]) {
                Some(value) => {
                    out.push_str(&rest[..open]);
                    out.push_str(value);
                    changed = true;
                }
                None => out.push_str(&rest[..close]),
            }
            rest = &rest[close..];
        }
        out.push_str(rest);
        changed.then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn spec(name: &str, action: Action) -> PolicySpec {
        PolicySpec {
            name: Arc::from(name),
            action,
            request: true,
            response: true,
            literals: Vec::new(),
            regexes: Vec::new(),
            detect: Vec::new(),
            first_rule: 0,
            moderator: None,
            reversible: false,
        }
    }

    pub(crate) fn pii() -> Screen {
        let mut pii = spec("pii", Action::Mask);
        pii.detect = vec!["email".into(), "phone".into(), "card".into(), "iban".into(), "secrets".into()];
        let mut words = spec("words", Action::Block);
        words.literals = vec!["forbidden-phrase".into()];
        let mut ids = spec("ids", Action::Mask);
        ids.regexes = vec![("ticket".into(), "TCK-[0-9]{6}".into())];
        ids.request = false;
        Screen::compile(&[pii, words, ids]).unwrap_or_else(|(at, err)| unreachable!("{at}: {err}"))
    }

    fn masked(screen: &Screen, text: &str, direction: Direction) -> String {
        let mut masks = Masks::default();
        let mut decisions = Vec::new();
        match screen.screen(text, direction, &mut masks, &mut decisions) {
            Ok(Some(text)) => text,
            Ok(None) => text.to_owned(),
            Err(blocked) => format!("blocked by {}/{}", blocked.policy, blocked.rule),
        }
    }

    #[test]
    fn pii_and_secrets_are_masked_with_counted_placeholders() {
        let screen = pii();
        let text = "Mail ann@example.com or bob@example.org, again ann@example.com; card 4111 1111 1111 1111, \
                    not 4111 1111 1111 1112; key AKIAIOSFODNN7EXAMPLE; IBAN GB82 WEST 1234 5698 7654 32.";
        assert_eq!(
            masked(&screen, text, Direction::Request),
            "Mail [EMAIL_1] or [EMAIL_2], again [EMAIL_1]; card [CARD_1], not 4111 1111 1111 1112; \
             key [SECRET_1]; IBAN [IBAN_1]."
        );
    }

    #[test]
    fn a_rule_looks_only_its_way_and_a_block_names_policy_and_rule() {
        let screen = pii();
        assert_eq!(masked(&screen, "ticket TCK-123456", Direction::Request), "ticket TCK-123456");
        assert_eq!(masked(&screen, "ticket TCK-123456", Direction::Response), "ticket [TICKET_1]");
        assert_eq!(masked(&screen, "say the Forbidden-Phrase now", Direction::Request), "blocked by words/words");
    }

    #[test]
    fn a_private_key_is_masked_whole() {
        let screen = pii();
        let text = "here:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nthanks";
        assert_eq!(masked(&screen, text, Direction::Request), "here:\n[SECRET_1]\nthanks");
    }

    #[test]
    fn a_body_without_matches_is_cleared_in_one_question() {
        let screen = pii();
        assert!(!screen.may_match(br#"{"messages":[{"content":"nothing here"}]}"#, &[]));
        assert!(screen.may_match(br#"{"messages":[{"content":"mail ann@example.com"}]}"#, &[]));
        // Escapes could hide a match from the raw bytes: the walk decides.
        assert!(screen.may_match(br#"{"messages":[{"content":"line\none"}]}"#, &[]));
        // So could look-alikes, and base64 in a media member.
        assert!(screen.may_match("{\"content\":\"ａnn@example.com\"}".as_bytes(), &[]));
        assert!(!screen.may_match("{\"content\":\"déjà vu\"}".as_bytes(), &[]));
        let media = [Place::at(&["source", "data"], Holds::Media)];
        assert!(screen.may_match(br#"{"source":{"data":"Zm9yYmlkZGVu"}}"#, &media));
        assert!(!screen.may_match(br#"{"source":{"text":"data"}}"#, &media));
        let mut anchored = spec("anchored", Action::Mask);
        anchored.regexes = vec![("head".into(), "^TCK-[0-9]{6}".into())];
        let screen = Screen::compile(&[anchored]).unwrap_or_else(|(at, err)| unreachable!("{at}: {err}"));
        assert!(screen.may_match(br#"{"content":"nothing"}"#, &[]), "an anchored rule is asked string by string");
    }

    #[test]
    fn look_alikes_and_zero_width_characters_hide_nothing() {
        let screen = pii();
        assert_eq!(masked(&screen, "mail ａｎｎ@ｅｘａｍｐｌｅ.ｃｏｍ now", Direction::Request), "mail [EMAIL_1] now");
        assert_eq!(
            masked(&screen, "say the forbid\u{200B}den-phr\u{00AD}ase", Direction::Request),
            "blocked by words/words"
        );
        assert_eq!(masked(&screen, "say the 𝐟𝐨𝐫𝐛𝐢𝐝𝐝𝐞𝐧-phrase", Direction::Request), "blocked by words/words");
        assert_eq!(masked(&screen, "key AKIA\u{2060}IOSFODNN7EXAMPLE.", Direction::Request), "key [SECRET_1].");
    }

    #[test]
    fn a_long_text_is_screened_in_windows_as_whole() {
        let screen = pii();
        let text = "lorem ipsum ann@example.com dolor ｂｏｂ@example.org sit ".repeat(40);
        for window in [1, 7, 64, 333] {
            let (mut masks, mut decisions) = (Masks::default(), Vec::new());
            let windowed = screen.screen_in_windows(&text, Direction::Request, &mut masks, &mut decisions, window);
            assert_eq!(windowed.map(|t| t.unwrap_or_default()), Ok(masked(&screen, &text, Direction::Request)));
        }
        let long = format!("{}forbidden-phrase", "x ".repeat(WINDOW));
        assert_eq!(masked(&screen, &long, Direction::Request), "blocked by words/words");
    }

    #[test]
    fn reversible_placeholders_are_put_back_and_others_stay() {
        let label: Arc<str> = Arc::from("EMAIL");
        let mut masks = Masks::default();
        assert_eq!(masks.placeholder(&label, "ann@example.com", true), "[EMAIL_1]");
        assert_eq!(masks.placeholder(&Arc::from("CARD"), "4111 1111 1111 1111", false), "[CARD_1]");
        assert_eq!(
            masks.restore("to [EMAIL_1], not [CARD_1] nor [x] or [EMAIL_2]").as_deref(),
            Some("to ann@example.com, not [CARD_1] nor [x] or [EMAIL_2]")
        );
        assert_eq!(masks.restore("nothing [to] restore"), None);
    }

    #[test]
    fn a_moderators_verdict_is_read_in_either_shape() {
        assert_eq!(flagged(br#"{"results":[{"flagged":false},{"flagged":true}]}"#), Some(true));
        assert_eq!(flagged(br#"{"id":"m","results":[{"flagged":false}]}"#), Some(false));
        assert_eq!(flagged(br#"{"flagged":true}"#), Some(true));
        assert_eq!(flagged(b"ok"), None);
    }

    #[test]
    fn unbounded_rules_are_refused() {
        let mut loose = spec("loose", Action::Mask);
        loose.regexes = vec![("any".into(), "[A-Z]+".into())];
        let err = Screen::compile(&[loose]).map(|_| ()).unwrap_err();
        assert_eq!(err, ("loose.any".to_owned(), RuleError::Unbounded));
        assert!(reach("TCK-[0-9]{6}").is_ok_and(|n| n == 10));
    }
}
