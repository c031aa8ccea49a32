//! Console sign-in through the operator's OpenID Connect provider
//! (`admin.oidc`): `/ui/login/oidc` sends the browser to the provider with
//! a binding cookie of its own, `/ui/oidc/callback` takes it back (only in
//! the browser holding that cookie: an answer carried to another browser
//! signs nobody in there), and a sign-in whose ID token holds and whose
//! claims a role binding matches becomes a console session like a token's
//! (HttpOnly, SameSite=Strict, its own anti-CSRF token), audited under the
//! name the provider gave.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use switchyard_state::oidc::OidcError;
use switchyard_state::oidc::PENDING_FOR;
use switchyard_state::sign_ins::{cookie_value, hex, random, SignIn, COOKIE, LIFETIME};
use switchyard_state::Gateway;

use crate::api::audit_entry;
use switchyard_state::audit::Attempt;

/// The cookie binding a sign-in in progress to the browser that started
/// it. `SameSite=Lax`: the provider sends the browser back with a
/// cross-site navigation, which a Strict cookie would not ride.
const BINDING: &str = "switchyard_sso";

/// The binding cookie's `Set-Cookie` (an empty value with no life clears it).
fn binding_cookie(gateway: &Gateway, value: &str, max_age: u64) -> String {
    let secure = if gateway.config.admin.tls.is_some() { "; Secure" } else { "" };
    format!("{BINDING}={value}; Path=/ui/oidc; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}")
}

/// `/ui/login/oidc`: off to the provider, the browser bound to the sign-in.
pub(crate) async fn start(State(gateway): State<Arc<Gateway>>) -> Response {
    let Some(oidc) = &gateway.oidc else {
        return (StatusCode::NOT_FOUND, "single sign-on is not configured (admin.oidc)").into_response();
    };
    let Some(browser) = random::<32>().map(|bytes| hex(&bytes)) else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the OS random source failed").into_response();
    };
    match oidc.start(&browser, Instant::now()).await {
        Ok(location) => {
            let cookie = binding_cookie(&gateway, &browser, PENDING_FOR.as_secs());
            ([(header::SET_COOKIE, cookie)], Redirect::to(&location)).into_response()
        }
        Err(err) => {
            tracing::warn!(error = %err, "single sign-on could not start");
            Redirect::to("/ui/login?sso=unavailable").into_response()
        }
    }
}

/// The provider's answer.
#[derive(Debug, Deserialize)]
pub(crate) struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// `/ui/oidc/callback`: the browser back from the provider.
pub(crate) async fn callback(
    State(gateway): State<Arc<Gateway>>,
    peer: Option<axum::Extension<switchyard_state::Peer>>,
    headers: axum::http::HeaderMap,
    Query(answer): Query<Callback>,
) -> Response {
    let source = peer.map(|axum::Extension(peer)| peer.0);
    let Some(oidc) = &gateway.oidc else {
        return (StatusCode::NOT_FOUND, "single sign-on is not configured (admin.oidc)").into_response();
    };
    let action = "GET /ui/oidc/callback".to_owned();
    let (Some(code), Some(state), None) = (&answer.code, &answer.state, &answer.error) else {
        tracing::info!(error = ?answer.error, "single sign-on refused by the provider");
        audit_entry(&gateway, source, "unauthenticated", action, None, 401, Attempt::Refused).await;
        return Redirect::to("/ui/login?sso=refused").into_response();
    };
    let browser =
        headers.get(header::COOKIE).and_then(|v| v.to_str().ok()).and_then(|cookies| cookie_value(cookies, BINDING));
    let signed = match oidc.finish(state, code, browser, Instant::now()).await {
        Ok(signed) => signed,
        Err(err) => {
            tracing::info!(error = %err, "single sign-on failed");
            audit_entry(&gateway, source, "unauthenticated", action, None, 401, Attempt::Refused).await;
            let why = match err {
                OidcError::NoRole(_) => "no_role",
                OidcError::UnknownState => "expired",
                OidcError::OtherBrowser => "browser",
                _ => "failed",
            };
            return Redirect::to(&format!("/ui/login?sso={why}")).into_response();
        }
    };
    let (Some(id), Some(csrf)) = (random::<32>(), random::<32>()) else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the OS random source failed").into_response();
    };
    let name: Arc<str> = Arc::from(signed.name.as_str());
    let sign_in = SignIn {
        name: name.clone(),
        scope: signed.scope,
        token: oidc.federation(),
        csrf: Arc::from(hex(&csrf)),
        subject: Some(Arc::from(signed.subject.as_str())),
        tenancy: oidc.config().binding_of(&signed.claims).and_then(|binding| binding.tenancy.clone()),
        claims: Some(Arc::new(signed.claims)),
    };
    let cookie = gateway.sign_ins.open(&id, sign_in, Instant::now());
    audit_entry(&gateway, source, &name, action, None, 200, Attempt::SignIn).await;
    let secure = if gateway.config.admin.tls.is_some() { "; Secure" } else { "" };
    let set_cookie =
        format!("{COOKIE}={cookie}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}", LIFETIME.as_secs());
    // A page that moves on by itself: the navigation from the provider is
    // cross-site, so a redirect would arrive without the Strict cookie.
    let page = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url=/ui/\">\
                <title>Signed in · Switchyard console</title></head><body><p><a href=\"/ui/\">Continue to the console</a></p></body></html>";
    // The binding is spent with the sign-in it bound.
    let spent = binding_cookie(&gateway, "", 0);
    let html = "text/html; charset=utf-8".to_owned();
    let headers = axum::response::AppendHeaders([
        (header::SET_COOKIE, set_cookie),
        (header::SET_COOKIE, spent),
        (header::CONTENT_TYPE, html),
    ]);
    (headers, page).into_response()
}
