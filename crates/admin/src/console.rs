//! The operator's console at `/ui/` on the admin listener: a login form,
//! the session it opens, and the console's files, all embedded in the
//! binary (no network needed). The pages are one small script that reads
//! and changes things through the admin API with the session cookie, so
//! the console can show and do exactly what the API can, under the same
//! scopes and audit.
//!
//! Security: the admin token is typed into a form once and becomes a
//! random session id in an `HttpOnly; SameSite=Strict` cookie (the token
//! never reaches the browser's storage); every mutation echoes the
//! session's anti-CSRF token in a header; every answer carries a
//! Content-Security-Policy that allows no inline script and nothing from
//! another origin, and may not be framed.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde::Deserialize;
use switchyard_governance::key::secrets_match;
use switchyard_governance::KeyHash;

use crate::api::{audit_entry, csrf_ok, signed_in};
use switchyard_state::audit::Attempt;
use switchyard_state::sign_ins::{cookie_value, hex, random, SignIn, COOKIE, LIFETIME};
use switchyard_state::Gateway;

/// What a console page may load: its own script, style and images, and
/// calls to its own origin; nothing inline, nothing framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The console's pages (each is the same document; the script draws the
/// page its path names).
const PAGES: [&str; 16] = [
    "",
    "pools",
    "keys",
    "groups",
    "spend",
    "usage",
    "requests",
    "alerts",
    "mcp",
    "playground",
    "config",
    "my-keys",
    // The views of wave 4's surfaces (views.js).
    "budgets",
    "reconciliation",
    "sessions",
    "runs",
];

/// An embedded file: its bytes, type and validator.
struct Asset {
    body: &'static str,
    content_type: &'static str,
    etag: LazyLock<String>,
}

macro_rules! asset {
    ($file:literal, $type:literal) => {
        Asset {
            body: include_str!(concat!("../console/", $file)),
            content_type: $type,
            etag: LazyLock::new(|| {
                format!("\"{}\"", &KeyHash::of(include_str!(concat!("../console/", $file))).to_hex()[..16])
            }),
        }
    };
}

static APP_JS: Asset = asset!("app.js", "text/javascript; charset=utf-8");
static STYLE_CSS: Asset = asset!("style.css", "text/css; charset=utf-8");
static FAVICON: Asset = asset!("favicon.svg", "image/svg+xml");
static VIEWS_JS: Asset = asset!("views.js", "text/javascript; charset=utf-8");
static VIEWS_CSS: Asset = asset!("views.css", "text/css; charset=utf-8");
static INDEX_HTML: &str = include_str!("../console/index.html");
/// The document with each file's URL carrying its hash.
static INDEX_VERSIONED: LazyLock<String> = LazyLock::new(|| versioned(INDEX_HTML));
static LOGIN_VERSIONED: LazyLock<String> = LazyLock::new(|| versioned(LOGIN_HTML));

fn versioned(html: &str) -> String {
    let tag = |asset: &Asset| asset.etag.trim_matches('"').to_owned();
    html.replace("/ui/assets/app.js", &format!("/ui/assets/app.js?v={}", tag(&APP_JS)))
        .replace("/ui/assets/style.css", &format!("/ui/assets/style.css?v={}", tag(&STYLE_CSS)))
        .replace("/ui/assets/favicon.svg", &format!("/ui/assets/favicon.svg?v={}", tag(&FAVICON)))
        .replace("/ui/assets/views.js", &format!("/ui/assets/views.js?v={}", tag(&VIEWS_JS)))
        .replace("/ui/assets/views.css", &format!("/ui/assets/views.css?v={}", tag(&VIEWS_CSS)))
}
static LOGIN_HTML: &str = include_str!("../console/login.html");

/// The console's routes (outside the admin token check: the login form is
/// how a browser gets in; the pages send a browser without a session there).
pub fn routes(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(page_root))
        .route("/ui/{page}", get(page))
        .route("/ui/login", get(login_page).post(login))
        .route("/ui/login/oidc", get(crate::oidc::start))
        .route("/ui/oidc/callback", get(crate::oidc::callback))
        .route("/ui/logout", post(logout))
        .route("/ui/assets/{file}", get(asset))
        .with_state(gateway)
        .layer(axum::middleware::from_fn(secure_headers))
}

/// Headers every console answer carries.
async fn secure_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

async fn page_root(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    document(&gateway, &headers, "")
}

/// Why the login form is shown again.
#[derive(Debug, Deserialize)]
struct LoginQuery {
    failed: Option<String>,
    ended: Option<String>,
    /// How a single sign-on ended (a fixed word; never echoed).
    sso: Option<String>,
}

async fn page(State(gateway): State<Arc<Gateway>>, Path(page): Path<String>, headers: HeaderMap) -> Response {
    document(&gateway, &headers, &page)
}

/// The login form, with why it is shown again (or why nobody can sign in).
async fn login_page(State(gateway): State<Arc<Gateway>>, Query(query): Query<LoginQuery>) -> Response {
    let sso = match query.sso.as_deref() {
        Some("no_role") => Some(
            "You signed in, but your account has no role on this console: ask an operator to bind one of your groups.",
        ),
        Some("expired") => Some("That sign-in expired or was already used: sign in again."),
        Some("browser") => Some("That sign-in was started in another browser: sign in again here."),
        Some("refused") => Some("The identity provider did not sign you in."),
        Some("unavailable") => Some("The identity provider cannot be reached right now."),
        Some(_) => Some("Single sign-on failed: sign in again, or use an admin token."),
        None => None,
    };
    let message = if let Some(sso) = sso {
        sso
    } else if gateway.config.admin.tokens.is_empty() && gateway.oidc.is_none() {
        "This gateway has no admin tokens, so nobody can sign in: add one under admin.tokens in the config and reload."
    } else if query.failed.is_some() {
        "That token is not one of this gateway's admin tokens."
    } else if query.ended.is_some() {
        "You are signed out."
    } else {
        ""
    };
    let role = if message.is_empty() { "" } else { " role=\"alert\"" };
    let mut html =
        LOGIN_VERSIONED.replace("<p class=\"message\"></p>", &format!("<p class=\"message\"{role}>{message}</p>"));
    if gateway.oidc.is_some() {
        html = html.replace(
            "<!-- sso -->",
            "<p class=\"sso\"><a class=\"button\" href=\"/ui/login/oidc\">Sign in with single sign-on</a></p>",
        );
    }
    html_response(html)
}

/// The console document for `page`, or the login form for a browser that
/// is not signed in.
fn document(gateway: &Gateway, headers: &HeaderMap, page: &str) -> Response {
    let Some(sign_in) = signed_in(gateway, headers) else {
        return Redirect::to("/ui/login").into_response();
    };
    // An unknown page is the console's own 404 page (its links lead on).
    let status = if PAGES.contains(&page) { StatusCode::OK } else { StatusCode::NOT_FOUND };
    // Who is signed in rides in the document (a meta element, not a
    // script), so the page needs no round trip before it asks for data.
    let meta = format!(
        "<meta name=\"switchyard-session\" content=\"{}\">",
        html_attribute(&session_json(gateway, &sign_in).to_string())
    );
    (status, html_response(INDEX_VERSIONED.replacen("<meta name=\"switchyard-session\">", &meta, 1))).into_response()
}

fn html_response(html: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let asset = match file.as_str() {
        "app.js" => &APP_JS,
        "style.css" => &STYLE_CSS,
        "favicon.svg" => &FAVICON,
        "views.js" => &VIEWS_JS,
        "views.css" => &VIEWS_CSS,
        _ => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    let etag = asset.etag.as_str();
    // The pages name each file with its hash (`?v=`), so a named version
    // never changes and the browser need not ask again.
    let cache = [(header::ETAG, etag.to_owned()), (header::CACHE_CONTROL, "max-age=31536000, immutable".to_owned())];
    if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag) {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (cache, [(header::CONTENT_TYPE, asset.content_type)], asset.body).into_response()
}

/// The login form's fields.
#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

/// True when a form post comes from this origin: a browser says so in
/// `Sec-Fetch-Site`, an older one in `Origin` (a client that sends neither
/// is not a browser another site can drive).
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return site == "same-origin" || site == "none";
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()).is_none_or(|origin| {
        host.is_some_and(|host| {
            origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")).is_some_and(|o| o == host)
        })
    })
}

async fn login(
    State(gateway): State<Arc<Gateway>>,
    peer: Option<axum::Extension<switchyard_state::Peer>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let source = peer.map(|axum::Extension(peer)| peer.0);
    if !same_origin(&headers) {
        return (StatusCode::FORBIDDEN, "a sign-in must come from the console's own page").into_response();
    }
    // Every configured token is compared (no early exit), in constant time.
    let presented = form.token.trim();
    let mut matched = None;
    for token in &gateway.config.admin.tokens {
        if secrets_match(presented, &token.token) && matched.is_none() {
            matched = Some(token);
        }
    }
    let Some(token) = matched else {
        audit_entry(&gateway, source, "unauthenticated", "POST /ui/login".into(), None, 401, Attempt::Refused).await;
        // A wrong guess costs the guesser time.
        tokio::time::sleep(Duration::from_millis(250)).await;
        return Redirect::to("/ui/login?failed=1").into_response();
    };
    let (Some(id), Some(csrf)) = (random::<32>(), random::<32>()) else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the OS random source failed").into_response();
    };
    let sign_in = SignIn {
        name: token.name.clone(),
        scope: token.scope,
        token: KeyHash::of(&token.token),
        csrf: Arc::from(hex(&csrf)),
        subject: None,
        claims: None,
        tenancy: token.tenancy.clone(),
    };
    let cookie = gateway.sign_ins.open(&id, sign_in, Instant::now());
    audit_entry(&gateway, source, &token.name, "POST /ui/login".into(), None, 303, Attempt::SignIn).await;
    let secure = if gateway.config.admin.tls.is_some() { "; Secure" } else { "" };
    let set_cookie =
        format!("{COOKIE}={cookie}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}", LIFETIME.as_secs());
    ([(header::SET_COOKIE, set_cookie)], Redirect::to("/ui/")).into_response()
}

async fn logout(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    let Some(sign_in) = signed_in(&gateway, &headers) else {
        return (StatusCode::UNAUTHORIZED, "not signed in").into_response();
    };
    if !csrf_ok(&headers, &sign_in.csrf) {
        return (StatusCode::FORBIDDEN, "the anti-CSRF token is missing or wrong").into_response();
    }
    if let Some(cookie) =
        headers.get(header::COOKIE).and_then(|v| v.to_str().ok()).and_then(|c| cookie_value(c, COOKIE))
    {
        gateway.sign_ins.close(cookie);
    }
    let clear = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    ([(header::SET_COOKIE, clear)], StatusCode::NO_CONTENT).into_response()
}

/// Who is signed in, and the anti-CSRF token the page echoes.
fn session_json(gateway: &Gateway, sign_in: &SignIn) -> serde_json::Value {
    serde_json::json!({
        "name": &*sign_in.name,
        "scope": sign_in.scope.as_str(),
        // A tenant admin's group: the page shows that subtree and hides
        // what the gateway's admin alone may do.
        "tenant": sign_in.tenancy.as_ref().filter(|_| sign_in.scope != switchyard_config::Scope::Member).and_then(|t| t.group.as_deref()),
        "csrf": &*sign_in.csrf,
        "governance": gateway.governance.is_some(),
        "metrics": gateway.metrics().is_some(),
    })
}

/// `text` escaped for a double-quoted HTML attribute.
fn html_attribute(text: &str) -> String {
    text.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_post_must_come_from_this_origin() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (k, v) in pairs {
                map.insert(*k, HeaderValue::from_static(v));
            }
            map
        };
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8081")])));
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8081"), ("origin", "http://127.0.0.1:8081")])));
        assert!(same_origin(&headers(&[("sec-fetch-site", "same-origin"), ("host", "h")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8081"), ("origin", "http://evil.example")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "cross-site"), ("host", "h")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "same-site"), ("host", "h")])));
    }

    #[test]
    fn the_pages_allow_no_inline_script_or_style() {
        for html in [INDEX_HTML, LOGIN_HTML] {
            assert!(!html.contains("<script>"), "inline script");
            assert!(!html.contains("style="), "inline style");
            assert!(!html.contains("<style"), "inline style element");
            assert!(!html.contains("http://") && !html.contains("https://"), "a file from elsewhere");
        }
        for script in [&APP_JS, &VIEWS_JS] {
            assert!(!script.body.contains("innerHTML"), "the script builds nodes, it never parses HTML");
            assert!(!script.body.contains("localStorage") && !script.body.contains("sessionStorage"));
        }
    }
}
