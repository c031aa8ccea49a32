//! Who owns what a caller keeps (uploaded files, batches, stored
//! responses), its response-cache partition and its tool-call signatures:
//! the caller's key, or, for a key several callers share (a token's issuer
//! and group, a client certificate's group), that key and the caller's own
//! subject (a token's subject, a certificate's whole subject), so two
//! workloads of one group never read each other's.
//!
//! An owner is text the stores keep: `<key id>`, or `<key id>/<subject>`
//! with the subject percent-encoded (so it holds no `/`, and no subject is
//! read as another key's). The batch worker reads it back to run a line as
//! the caller that queued it.

use std::sync::Arc;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// What a subject keeps as it is in an owner (RFC 3986's unreserved
/// characters); anything else, `/` and `%` among them, is encoded.
const SUBJECT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// The owner of what key `key_id` keeps for the caller `subject` names
/// (`None`: the key is the caller's own).
pub fn owner_id(key_id: &str, subject: Option<&str>) -> Arc<str> {
    match subject {
        None => Arc::from(key_id),
        Some(subject) => Arc::from(format!("{key_id}/{}", utf8_percent_encode(subject, SUBJECT))),
    }
}

/// The key id and the subject (decoded) of `owner`: its key's alone when it
/// names no subject. `None`: not an owner this module made.
pub fn parse(owner: &str) -> Option<(&str, Option<String>)> {
    match owner.rsplit_once('/') {
        None => Some((owner, None)),
        Some((key_id, subject)) => {
            let subject = percent_decode_str(subject).decode_utf8().ok()?;
            (!key_id.is_empty() && !subject.is_empty()).then(|| (key_id, Some(subject.into_owned())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_names_its_key_and_subject_and_reads_back() {
        assert_eq!(&*owner_id("key_0a1b", None), "key_0a1b");
        assert_eq!(parse("key_0a1b"), Some(("key_0a1b", None)));
        let owner = owner_id("jwt:corp:research", Some("svc/batch 7%"));
        assert_eq!(&*owner, "jwt:corp:research/svc%2Fbatch%207%25");
        assert_eq!(parse(&owner), Some(("jwt:corp:research", Some("svc/batch 7%".to_owned()))));
        // A group name with a slash in it stays whole.
        let owner = owner_id("cert:ml/eu", Some("CN=job,O=Acme"));
        assert_eq!(parse(&owner), Some(("cert:ml/eu", Some("CN=job,O=Acme".to_owned()))));
    }

    #[test]
    fn two_subjects_of_one_key_are_two_owners() {
        let (a, b) = (owner_id("jwt:corp:research", Some("svc-a")), owner_id("jwt:corp:research", Some("svc-b")));
        assert_ne!(a, b);
        assert_ne!(owner_id("jwt:corp:research", Some("a/b")), owner_id("jwt:corp:research/a", Some("b")));
        assert_ne!(&*owner_id("jwt:corp:research", Some("x")), "jwt:corp:research");
    }
}
