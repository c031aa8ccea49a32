//! Console sign-in through the operator's OpenID Connect provider
//! (`admin.oidc`): `/ui/login/oidc` sends the browser to the provider,
//! `/ui/oidc/callback` takes it back, and a sign-in whose ID token holds
//! and whose claims a role binding matches becomes a console session like
//! a token's (HttpOnly, SameSite=Strict, its own anti-CSRF token), audited
//! under the name the provider gave.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use switchyard_state::oidc::OidcError;
use switchyard_state::sign_ins::{hex, random, SignIn, COOKIE, LIFETIME};
use switchyard_state::Gateway;

use crate::api::audit_entry;

/// `/ui/login/oidc`: off to the provider.
pub(crate) async fn start(State(gateway): State<Arc<Gateway>>) -> Response {
    let Some(oidc) = &gateway.oidc else {
        return (StatusCode::NOT_FOUND, "single sign-on is not configured (admin.oidc)").into_response();
    };
    match oidc.start(Instant::now()).await {
        Ok(location) => Redirect::to(&location).into_response(),
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
    Query(answer): Query<Callback>,
) -> Response {
    let source = peer.map(|axum::Extension(peer)| peer.0);
    let Some(oidc) = &gateway.oidc else {
        return (StatusCode::NOT_FOUND, "single sign-on is not configured (admin.oidc)").into_response();
    };
    let action = "GET /ui/oidc/callback".to_owned();
    let (Some(code), Some(state), None) = (&answer.code, &answer.state, &answer.error) else {
        tracing::info!(error = ?answer.error, "single sign-on refused by the provider");
        audit_entry(&gateway, source, "unauthenticated", action, None, 401).await;
        return Redirect::to("/ui/login?sso=refused").into_response();
    };
    let signed = match oidc.finish(state, code, Instant::now()).await {
        Ok(signed) => signed,
        Err(err) => {
            tracing::info!(error = %err, "single sign-on failed");
            audit_entry(&gateway, source, "unauthenticated", action, None, 401).await;
            let why = match err {
                OidcError::NoRole(_) => "no_role",
                OidcError::UnknownState => "expired",
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
    };
    let cookie = gateway.sign_ins.open(&id, sign_in, Instant::now());
    audit_entry(&gateway, source, &name, action, None, 200).await;
    let secure = if gateway.config.admin.tls.is_some() { "; Secure" } else { "" };
    let set_cookie =
        format!("{COOKIE}={cookie}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}", LIFETIME.as_secs());
    // A page that moves on by itself: the navigation from the provider is
    // cross-site, so a redirect would arrive without the Strict cookie.
    let page = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url=/ui/\">\
                <title>Signed in · Switchyard console</title></head><body><p><a href=\"/ui/\">Continue to the console</a></p></body></html>";
    ([(header::SET_COOKIE, set_cookie), (header::CONTENT_TYPE, "text/html; charset=utf-8".to_owned())], page)
        .into_response()
}
