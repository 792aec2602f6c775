//! The sign-in page a gateway that requires its access token serves instead
//! of the dashboard to a browser without a session. It is rendered here, not
//! by the app: it carries no figures, no script and no app bundle, only a
//! form that posts the admin token to `/ui/login`.

use axum::http::StatusCode;
use axum::response::Response;

/// Nothing but the page's own inline style, and a form posting to this gateway.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; \
                   base-uri 'none'";

const HEAD: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta name=\"color-scheme\" content=\"light dark\"><title>Sign in · Switchyard</title>\
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:30rem;margin:15vh auto;padding:0 1rem}\
input{display:block;width:100%;box-sizing:border-box;font:inherit;padding:.4rem;margin:.25rem 0 .75rem}\
button{font:inherit;padding:.4rem 1.2rem}.notice{color:#c5221f}</style></head><body>\
<h1>Switchyard</h1><p>This gateway requires sign-in. On its machine, <code>switchyard open</code> \
signs a browser in; or paste the admin token (<code>&lt;data dir&gt;/admin-token</code>, or \
<code>SWITCHYARD_ADMIN_TOKEN</code>).</p>";

const FORM: &str = "<form method=\"post\" action=\"/ui/login\"><label for=\"token\">Admin token</label>\
<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required autofocus>\
<button type=\"submit\">Sign in</button></form></body></html>";

/// Why the page is shown again, in words for the person at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    None,
    /// A sign-in link that was used already or is too old.
    Expired,
    /// A pasted token that is not this gateway's.
    WrongToken,
    /// The gateway has no admin token, so no one can sign in.
    AdminDisabled,
}

impl Notice {
    fn text(self) -> Option<&'static str> {
        match self {
            Notice::None => None,
            Notice::Expired => Some("That sign-in link has expired or was used already."),
            Notice::WrongToken => Some("That is not this gateway's admin token."),
            Notice::AdminDisabled => Some("The admin API is not enabled on this gateway, so its dashboard is closed."),
        }
    }

    fn status(self) -> StatusCode {
        match self {
            Notice::AdminDisabled => StatusCode::NOT_FOUND,
            _ => StatusCode::UNAUTHORIZED,
        }
    }
}

/// The page, with a 401 (404 when no one can sign in). Every notice is a
/// fixed text: nothing from the request is echoed.
pub fn page(notice: Notice) -> Response {
    let mut html = String::with_capacity(HEAD.len() + FORM.len() + 100);
    html.push_str(HEAD);
    if let Some(text) = notice.text() {
        html.push_str("<p class=\"notice\" role=\"alert\">");
        html.push_str(text);
        html.push_str("</p>");
    }
    html.push_str(FORM);
    super::guarded(notice.status(), ("text/html; charset=utf-8", "no-store"), CSP, html)
}
