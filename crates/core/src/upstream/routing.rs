//! Routing: which providers, in which order, may serve a model.
//!
//! An explicit `[[routes]]` entry gives the chain; otherwise every provider
//! that lists the model, in config order, then those that accept any model.
//! Providers that cannot serve the request are skipped with a reason.

use std::fmt;
use std::sync::Arc;

use crate::config::RouteConfig;
use crate::policy::order::Routing;
use crate::protocol::{Endpoint, Protocol};
use crate::upstream::provider::Provider;

/// A provider to try and the model name to send it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub provider: &'a Arc<Provider>,
    pub upstream_model: &'a str,
    /// Its place in the chain as configured (a route's weights go by it).
    pub position: usize,
    /// What the route's strategy weighed to put it where it is; none in
    /// chain order (`ordered`).
    pub routing: Option<Routing>,
}

/// A provider left out of a plan, and why.
#[derive(Debug, Clone)]
pub struct Skip {
    pub provider: String,
    pub reason: SkipReason,
}

#[derive(Debug, Clone)]
pub enum SkipReason {
    Disabled,
    /// The provider's kind cannot serve this endpoint, even translated.
    WrongProtocol {
        speaks: Protocol,
        endpoint: Endpoint,
    },
    Key(String),
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            SkipReason::Disabled => write!(f, "{} is disabled", self.provider),
            SkipReason::WrongProtocol { speaks, endpoint } => {
                write!(f, "{} speaks the {speaks} protocol, and {endpoint} is served only in its own", self.provider)
            }
            SkipReason::Key(reason) => f.write_str(reason),
        }
    }
}

#[derive(Debug)]
pub struct Plan<'a> {
    pub candidates: Vec<Candidate<'a>>,
    pub skipped: Vec<Skip>,
}

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("the model `{0}` does not exist or is not routed by this gateway")]
    UnknownModel(String),
    #[error("no provider can serve `{model}`: {}", join(.skipped))]
    NoneAvailable { model: String, skipped: Vec<Skip> },
}

fn join(skipped: &[Skip]) -> String {
    skipped.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// Builds the ordered plan for `model` requested at `endpoint`. A provider
/// of another kind stays in the plan when the request can be translated
/// for it.
pub fn plan<'a>(
    providers: &'a [Arc<Provider>],
    routes: &'a [RouteConfig],
    endpoint: Endpoint,
    model: &'a str,
) -> Result<Plan<'a>, RouteError> {
    let listed = chain_for(providers, routes, model);
    if listed.is_empty() {
        return Err(RouteError::UnknownModel(model.to_string()));
    }
    let mut plan = Plan { candidates: Vec::new(), skipped: Vec::new() };
    for candidate in listed {
        let provider = candidate.provider;
        let reason = if !provider.is_enabled() {
            Some(SkipReason::Disabled)
        } else if !provider.config.reaches(endpoint) {
            Some(SkipReason::WrongProtocol { speaks: provider.config.kind, endpoint })
        } else {
            provider.keys.problem().map(SkipReason::Key)
        };
        match reason {
            Some(reason) => plan.skipped.push(Skip { provider: provider.name().to_string(), reason }),
            None => plan.candidates.push(candidate),
        }
    }
    if plan.candidates.is_empty() {
        return Err(RouteError::NoneAvailable { model: model.to_string(), skipped: plan.skipped });
    }
    Ok(plan)
}

fn chain_for<'a>(providers: &'a [Arc<Provider>], routes: &'a [RouteConfig], model: &'a str) -> Vec<Candidate<'a>> {
    let find = |name: &str| providers.iter().find(|p| p.name() == name);
    if let Some(route) = routes.iter().find(|r| r.model == model) {
        return route
            .chain
            .iter()
            .enumerate()
            .filter_map(|(position, name)| find(name).map(|provider| (position, provider)))
            .map(|(position, provider)| Candidate {
                provider,
                upstream_model: provider.config.models.explicit(model).unwrap_or(model),
                position,
                routing: None,
            })
            .collect();
    }
    let explicit = providers
        .iter()
        .filter_map(|provider| provider.config.models.explicit(model).map(|upstream_model| (provider, upstream_model)));
    let wildcard = providers
        .iter()
        .filter(|p| p.config.models.has_wildcard() && p.config.models.explicit(model).is_none())
        .map(|provider| (provider, model));
    explicit
        .chain(wildcard)
        .enumerate()
        .map(|(position, (provider, upstream_model))| Candidate { provider, upstream_model, position, routing: None })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::protocol::Endpoint;
    use crate::secrets::MemoryStore;
    use crate::telemetry::Telemetry;
    use std::path::Path;

    fn setup(text: &str) -> (Vec<Arc<Provider>>, Config) {
        let config = Config::parse(text, Path::new("t.toml")).unwrap();
        let store = MemoryStore::new().with("a", "k", "ka").with("b", "k", "kb").with("c", "k", "kc");
        let providers = config
            .providers
            .iter()
            .cloned()
            .map(|p| Arc::new(Provider::load(p, &store, Arc::new(Telemetry::new(None)))))
            .collect();
        (providers, config)
    }

    const PROVIDERS: &str = r#"
[[providers]]
name = "a"
kind = "openai"
base_url = "http://127.0.0.1:1/v1"
models = ["m", "only-a"]

[[providers]]
name = "b"
kind = "openai"
base_url = "http://127.0.0.1:2/v1"
models = { "m" = "b-m" }

[[providers]]
name = "c"
kind = "anthropic"
base_url = "http://127.0.0.1:3/v1"
models = ["claude"]

[[providers]]
name = "nokey"
kind = "openai"
base_url = "http://127.0.0.1:4/v1"
models = ["m"]

[[providers]]
name = "any"
kind = "openai"
base_url = "http://127.0.0.1:5/v1"
auth = "none"
models = ["*"]
"#;

    fn names(plan: &Plan<'_>) -> Vec<(String, String)> {
        plan.candidates.iter().map(|c| (c.provider.name().to_string(), c.upstream_model.to_string())).collect()
    }

    #[test]
    fn implicit_chain_follows_config_order_then_wildcards() {
        let (providers, config) = setup(PROVIDERS);
        let plan = plan(&providers, &config.routes, Endpoint::ChatCompletions, "m").unwrap();
        assert_eq!(names(&plan), [("a".into(), "m".into()), ("b".into(), "b-m".into()), ("any".into(), "m".into())]);
        assert_eq!(plan.skipped.len(), 1);
        assert!(plan.skipped[0].to_string().contains("no key for nokey"));
    }

    #[test]
    fn explicit_route_sets_the_order() {
        let text = format!("{PROVIDERS}\n[[routes]]\nmodel = \"m\"\nchain = [\"b\", \"a\"]\n");
        let (providers, config) = setup(&text);
        let plan = plan(&providers, &config.routes, Endpoint::ChatCompletions, "m").unwrap();
        assert_eq!(names(&plan), [("b".into(), "b-m".into()), ("a".into(), "m".into())]);
    }

    #[test]
    fn another_kind_is_planned_when_translated_and_skipped_when_not() {
        let text = PROVIDERS.replace("name = \"any\"", "name = \"any\"\nenabled = false");
        let (providers, config) = setup(&text);
        let plan_for = |endpoint| plan(&providers, &config.routes, endpoint, "claude");
        let translated = plan_for(Endpoint::ChatCompletions).unwrap();
        assert_eq!(names(&translated), [("c".into(), "claude".into())], "chat is translated for anthropic-kind c");
        match plan_for(Endpoint::Embeddings) {
            Err(RouteError::NoneAvailable { skipped, .. }) => {
                let text: Vec<String> = skipped.iter().map(ToString::to_string).collect();
                assert_eq!(
                    text,
                    [
                        "c speaks the anthropic protocol, and /v1/embeddings is served only in its own",
                        "any is disabled"
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn upstream_urls_join_base_path_and_query() {
        let (providers, _) = setup(PROVIDERS);
        let a = &providers[0];
        assert_eq!(a.url(Endpoint::ChatCompletions, "m", None).to_string(), "http://127.0.0.1:1/v1/chat/completions");
        assert_eq!(
            a.url(Endpoint::Messages, "m", Some("beta=true")).to_string(),
            "http://127.0.0.1:1/v1/messages?beta=true"
        );
        assert_eq!(
            a.url(Endpoint::CountTokens, "m", Some("")).to_string(),
            "http://127.0.0.1:1/v1/messages/count_tokens"
        );
        assert_eq!(
            a.url(Endpoint::Messages, "m", Some("beta=true&key=sy-1&api%5Fkey=sy-2&api-key=sy-3&keys=k")).to_string(),
            "http://127.0.0.1:1/v1/messages?beta=true&keys=k",
            "no credential in the query goes upstream"
        );
        assert_eq!(a.url(Endpoint::Messages, "m", Some("key=sy-1")).to_string(), "http://127.0.0.1:1/v1/messages");
        assert_eq!(
            a.url(Endpoint::GeminiStream, "gemini-2.5-pro", Some("alt=sse&key=sy-1")).to_string(),
            "http://127.0.0.1:1/v1/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            "a Gemini path names the provider's model; its key goes in a header, not the query"
        );
    }

    #[test]
    fn unknown_model_without_wildcard() {
        let text = PROVIDERS.replace("models = [\"*\"]", "models = [\"z\"]");
        let (providers, config) = setup(&text);
        assert!(matches!(
            plan(&providers, &config.routes, Endpoint::ChatCompletions, "nope"),
            Err(RouteError::UnknownModel(m)) if m == "nope"
        ));
    }
}
