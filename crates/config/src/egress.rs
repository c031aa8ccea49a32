//! How a provider is reached beyond a base URL and a static key: a
//! credential fetched from a token endpoint (`auth:` — OAuth client
//! credentials, or a Google service account's key file), a path template
//! (`path:` — Vertex AI's and Azure OpenAI's URL shapes), and Claude on
//! Vertex's `anthropic_version` carried in the body. Parsed and checked
//! here; fetched and sent by the transport and the send step.

use std::sync::Arc;

use serde::Deserialize;

use crate::{check_outbound_url, Issue};

/// Google's token endpoint, when a key file names none.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The scope a Vertex AI call needs.
const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";

/// A credential a lane fetches rather than holds.
#[derive(Clone, PartialEq, Eq)]
pub enum EgressAuth {
    /// OAuth 2.0 client credentials (Entra ID for Azure OpenAI).
    ClientCredentials {
        /// The token endpoint.
        token_url: String,
        /// The client id.
        client_id: String,
        /// The client secret.
        client_secret: String,
        /// The scope asked for.
        scope: Option<String>,
    },
    /// A Google service account's key, exchanged for access tokens.
    ServiceAccount(ServiceAccount),
}

impl EgressAuth {
    /// Where tokens come from.
    pub fn token_url(&self) -> &str {
        match self {
            EgressAuth::ClientCredentials { token_url, .. } => token_url,
            EgressAuth::ServiceAccount(account) => &account.token_uri,
        }
    }
}

impl std::fmt::Debug for EgressAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets never reach logs, even through Debug.
        match self {
            EgressAuth::ClientCredentials { token_url, client_id, scope, .. } => f
                .debug_struct("ClientCredentials")
                .field("token_url", token_url)
                .field("client_id", client_id)
                .field("scope", scope)
                .finish_non_exhaustive(),
            EgressAuth::ServiceAccount(account) => f
                .debug_struct("ServiceAccount")
                .field("client_email", &account.client_email)
                .field("token_uri", &account.token_uri)
                .finish_non_exhaustive(),
        }
    }
}

/// What a service account's JSON key file holds that the exchange needs.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct ServiceAccount {
    /// The account (the assertion's issuer).
    pub client_email: String,
    /// Its RSA private key (PEM).
    pub private_key: String,
    /// The key's id (the assertion's `kid`).
    #[serde(default)]
    pub private_key_id: Option<String>,
    /// Where assertions are exchanged.
    #[serde(default = "google_token_uri")]
    pub token_uri: String,
    /// The project it belongs to (a path template's `{project}`).
    #[serde(default)]
    pub project_id: Option<String>,
    /// The scope asked for.
    #[serde(skip, default = "cloud_platform")]
    pub scope: String,
}

fn google_token_uri() -> String {
    GOOGLE_TOKEN_URI.to_owned()
}

fn cloud_platform() -> String {
    CLOUD_PLATFORM.to_owned()
}

/// `providers.<p>.auth`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEgressAuth {
    pub oauth_client_credentials: Option<RawClientCredentials>,
    pub google_service_account: Option<String>,
}

/// `providers.<p>.auth.oauth_client_credentials`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClientCredentials {
    pub token_url: String,
    pub client_id: String,
    pub client_secret: String,
    pub scope: Option<String>,
}

/// One piece of a path template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Model,
    Action,
}

/// A provider's upstream path with the lane's model and the call's action
/// put in (`/v1/projects/p/locations/l/publishers/google/models/{model}:{action}`);
/// `{project}` and `{location}` are filled in when the config is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathTemplate {
    parts: Vec<Part>,
}

impl PathTemplate {
    /// The path and query for `model` (path-segment encoded) and `action`
    /// (the protocol's: `generateContent`, `streamRawPredict`,
    /// `chat/completions`, which may carry a query of its own, `?alt=sse`).
    pub fn render(&self, model: &str, action: &str) -> String {
        let (action_path, action_query) = action.split_once('?').map_or((action, None), |(p, q)| (p, Some(q)));
        let mut out = String::with_capacity(128);
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                // Vertex names versions `claude-sonnet-4-5@20250929`: `@` may
                // stand in a path segment (RFC 3986 pchar), so it is kept.
                Part::Model if model.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~@".contains(&b)) => {
                    out.push_str(model);
                }
                Part::Model => out.push_str(&switchyard_codec::path_segment(model)),
                Part::Action => out.push_str(action_path),
            }
        }
        if let Some(query) = action_query {
            out.push(if out.contains('?') { '&' } else { '?' });
            out.push_str(query);
        }
        out
    }
}

/// What `providers.<p>` asks beyond a base URL and a static key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Egress {
    /// A fetched credential.
    pub auth: Option<EgressAuth>,
    /// The upstream path's template.
    pub path: Option<PathTemplate>,
    /// Claude on Vertex: this `anthropic_version` goes in the body, and the
    /// model (which the path carries) leaves it.
    pub anthropic_version: Option<Arc<str>>,
}

/// The raw fields [`egress`] reads.
pub(crate) struct RawEgress<'a> {
    pub auth: Option<&'a RawEgressAuth>,
    pub path: Option<&'a str>,
    pub project: Option<&'a str>,
    pub location: Option<&'a str>,
    pub anthropic_version: Option<&'a str>,
    pub base_url: &'a str,
    pub anthropic: bool,
    pub has_static_key: bool,
}

/// Reads `providers.<name>`'s egress settings, reading a service account's
/// key file; every problem is an issue naming its key and the fix.
pub(crate) fn egress(name: &str, raw: &RawEgress<'_>, issues: &mut Vec<Issue>) -> Egress {
    let at = format!("providers.{name}");
    let auth = raw.auth.and_then(|auth| egress_auth(&at, auth, raw.has_static_key, issues));
    let path = raw.path.and_then(|template| {
        let project = raw.project.map(str::to_owned).or_else(|| match &auth {
            Some(EgressAuth::ServiceAccount(account)) => account.project_id.clone(),
            _ => None,
        });
        let location = raw.location.map(str::to_owned).or_else(|| vertex_location(raw.base_url));
        parse_template(&format!("{at}.path"), template, project.as_deref(), location.as_deref(), issues)
    });
    let anthropic_version = raw.anthropic_version.map(|version| {
        if !raw.anthropic {
            issues.push(Issue::new(
                &format!("{at}.anthropic_version"),
                "anthropic_version in the body is for anthropic providers (Claude on Vertex)",
                "remove it, or set protocol: anthropic",
            ));
        }
        Arc::from(version)
    });
    Egress { auth, path, anthropic_version }
}

fn egress_auth(at: &str, auth: &RawEgressAuth, has_static_key: bool, issues: &mut Vec<Issue>) -> Option<EgressAuth> {
    let at = format!("{at}.auth");
    if has_static_key {
        issues.push(Issue::new(&at, "both api_key (or aws) and auth are set", "keep one way to authenticate"));
    }
    let outbound = |key: &str, url: &str, issues: &mut Vec<Issue>| {
        if let Err(message) = check_outbound_url(url) {
            issues.push(Issue::new(key, message, "use the identity provider's https token endpoint"));
        }
    };
    match (&auth.oauth_client_credentials, &auth.google_service_account) {
        (Some(client), None) => {
            let key = format!("{at}.oauth_client_credentials");
            outbound(&format!("{key}.token_url"), &client.token_url, issues);
            for (field, value) in [("client_id", &client.client_id), ("client_secret", &client.client_secret)] {
                if value.trim().is_empty() {
                    issues.push(Issue::new(
                        &format!("{key}.{field}"),
                        format!("{field} is empty (a `${{VAR}}` set to an empty string?)"),
                        "set it to the app registration's value",
                    ));
                }
            }
            Some(EgressAuth::ClientCredentials {
                token_url: client.token_url.clone(),
                client_id: client.client_id.clone(),
                client_secret: client.client_secret.clone(),
                scope: client.scope.clone(),
            })
        }
        (None, Some(file)) => {
            let key = format!("{at}.google_service_account");
            let text = match std::fs::read_to_string(file) {
                Ok(text) => text,
                Err(err) => {
                    issues.push(Issue::new(
                        &key,
                        format!("`{file}` cannot be read: {err}"),
                        "point it at the service account's JSON key file",
                    ));
                    return None;
                }
            };
            match serde_json::from_str::<ServiceAccount>(&text) {
                Ok(account) => {
                    if !account.private_key.contains("PRIVATE KEY") {
                        issues.push(Issue::new(
                            &key,
                            format!("`{file}` holds no PEM private key"),
                            "download a JSON key for the service account",
                        ));
                    }
                    outbound(&format!("{key} (token_uri)"), &account.token_uri, issues);
                    Some(EgressAuth::ServiceAccount(account))
                }
                Err(err) => {
                    issues.push(Issue::new(
                        &key,
                        format!("`{file}` is not a service account key file: {err}"),
                        "download a JSON key for the service account (it has client_email and private_key)",
                    ));
                    None
                }
            }
        }
        (Some(_), Some(_)) => {
            issues.push(Issue::new(
                &at,
                "both oauth_client_credentials and google_service_account are set",
                "keep one",
            ));
            None
        }
        (None, None) => {
            issues.push(Issue::new(
                &at,
                "auth names no credential",
                "set oauth_client_credentials { token_url, client_id, client_secret, scope } or google_service_account: FILE",
            ));
            None
        }
    }
}

/// The location of a Vertex AI regional host (`us-central1-aiplatform.googleapis.com`).
fn vertex_location(base_url: &str) -> Option<String> {
    let host = base_url.split("://").nth(1)?.split(['/', ':']).next()?;
    host.strip_suffix("-aiplatform.googleapis.com").filter(|l| !l.is_empty()).map(str::to_owned)
}

fn parse_template(
    key: &str,
    template: &str,
    project: Option<&str>,
    location: Option<&str>,
    issues: &mut Vec<Issue>,
) -> Option<PathTemplate> {
    if !template.starts_with('/') {
        issues.push(Issue::new(
            key,
            format!("`{template}` does not start with /"),
            "write the path after base_url, from its /",
        ));
        return None;
    }
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    let mut ok = true;
    while let Some(open) = rest.find('{') {
        text.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            issues.push(Issue::new(
                key,
                "a `{` is never closed",
                "write placeholders as {model}, {action}, {project} or {location}",
            ));
            return None;
        };
        let name = &rest[open + 1..open + close];
        // The placeholders filled in now, with where their value comes from.
        let fixed = match name {
            "project" => {
                Some((project, "add project: to the provider (or use a service account key file, which names it)"))
            }
            "location" => {
                Some((location, "add location: to the provider (or use a REGION-aiplatform.googleapis.com base_url)"))
            }
            _ => None,
        };
        match (name, fixed) {
            ("model" | "action", _) => {
                if !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                parts.push(if name == "model" { Part::Model } else { Part::Action });
            }
            (_, Some((Some(value), _))) => text.push_str(&switchyard_codec::path_segment(value)),
            (_, Some((None, fix))) => {
                issues.push(Issue::new(key, format!("{{{name}}} has no value"), fix));
                ok = false;
            }
            (other, None) => {
                issues.push(Issue::new(
                    key,
                    format!("`{{{other}}}` is not a placeholder"),
                    "use {model}, {action}, {project} or {location}",
                ));
                ok = false;
            }
        }
        rest = &rest[open + close + 1..];
    }
    text.push_str(rest);
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    if !parts.contains(&Part::Model) && !parts.contains(&Part::Action) {
        issues.push(Issue::new(
            key,
            "the template has neither {model} nor {action}",
            "a fixed path needs no template: put it in base_url",
        ));
        ok = false;
    }
    ok.then_some(PathTemplate { parts })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(text: &str, project: Option<&str>, location: Option<&str>) -> Result<PathTemplate, Vec<Issue>> {
        let mut issues = Vec::new();
        parse_template("p", text, project, location, &mut issues).ok_or(issues)
    }

    #[test]
    fn vertex_and_azure_paths_render_with_their_actions() {
        let vertex = template(
            "/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:{action}",
            Some("acme"),
            Some("us-central1"),
        )
        .unwrap();
        assert_eq!(
            vertex.render("gemini-2.0-flash", "generateContent"),
            "/v1/projects/acme/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent"
        );
        assert_eq!(
            vertex.render("gemini-2.0-flash", "streamGenerateContent?alt=sse"),
            "/v1/projects/acme/locations/us-central1/publishers/google/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
        );
        let azure = template("/deployments/{model}/{action}?api-version=2024-10-21", None, None).unwrap();
        assert_eq!(
            azure.render("gpt-4o", "chat/completions"),
            "/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
        );
        // An action's own query joins the template's.
        assert_eq!(azure.render("x", "a?alt=sse"), "/deployments/x/a?api-version=2024-10-21&alt=sse");
        assert_eq!(
            azure.render("claude-sonnet-4-5@20250929", "rawPredict"),
            "/deployments/claude-sonnet-4-5@20250929/rawPredict?api-version=2024-10-21"
        );
        // A model is one path segment, whatever it holds.
        assert_eq!(
            azure.render("a/../b", "chat/completions"),
            "/deployments/a%2F..%2Fb/chat/completions?api-version=2024-10-21"
        );
    }

    #[test]
    fn a_template_names_what_it_lacks() {
        let issues = template("/v1/projects/{project}/models/{model}:{action}", None, None).unwrap_err();
        assert!(issues[0].message.contains("{project}") && issues[0].fix.contains("project:"), "{issues:?}");
        assert!(template("/x/{deployment}/{model}", None, None).unwrap_err()[0].message.contains("{deployment}"));
        assert!(template("no-slash/{model}", None, None).is_err());
        assert!(template("/fixed/path", None, None).is_err());
        assert!(template("/open/{model", None, None).is_err());
    }

    #[test]
    fn a_vertex_host_names_its_location() {
        assert_eq!(vertex_location("https://us-central1-aiplatform.googleapis.com"), Some("us-central1".into()));
        assert_eq!(vertex_location("https://europe-west4-aiplatform.googleapis.com/"), Some("europe-west4".into()));
        assert_eq!(vertex_location("https://aiplatform.googleapis.com"), None);
        assert_eq!(vertex_location("https://example.openai.azure.com/openai"), None);
    }
}
