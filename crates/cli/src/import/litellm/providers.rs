//! What LiteLLM knows about a provider that a `.sr` backend must be told: the provider prefix of
//! `litellm_params.model`, the base URL LiteLLM uses when `api_base` is absent, the API the
//! provider speaks, and the environment variable LiteLLM reads its key from by default.

/// A provider LiteLLM names in a model prefix (`openai/gpt-4o`).
pub struct Provider {
    pub prefix: &'static str,
    /// The OpenAI-compatible (or Anthropic) base URL used without `api_base`; `None` when the
    /// provider has no such endpoint (Bedrock, Vertex AI) or needs `api_base` (vLLM, Azure).
    pub default_url: Option<&'static str>,
    /// Whether the provider speaks Anthropic's Messages API rather than OpenAI's.
    pub anthropic: bool,
    /// The variable LiteLLM reads the key from when `api_key` is absent.
    pub key_env: Option<&'static str>,
    /// Whether the provider speaks an OpenAI- or Anthropic-compatible API at all.
    pub compatible: bool,
}

const fn p(
    prefix: &'static str,
    default_url: Option<&'static str>,
    key_env: Option<&'static str>,
) -> Provider {
    Provider {
        prefix,
        default_url,
        anthropic: false,
        key_env,
        compatible: true,
    }
}

const fn foreign(prefix: &'static str) -> Provider {
    Provider {
        prefix,
        default_url: None,
        anthropic: false,
        key_env: None,
        compatible: false,
    }
}

pub const PROVIDERS: &[Provider] = &[
    p(
        "openai",
        Some("https://api.openai.com/v1"),
        Some("OPENAI_API_KEY"),
    ),
    p(
        "text-completion-openai",
        Some("https://api.openai.com/v1"),
        Some("OPENAI_API_KEY"),
    ),
    p("custom_openai", None, None),
    p("openai_like", None, None),
    p("hosted_vllm", None, None),
    p("vllm", None, None),
    p("ollama", Some("http://localhost:11434/v1"), None),
    p("ollama_chat", Some("http://localhost:11434/v1"), None),
    p("lm_studio", Some("http://localhost:1234/v1"), None),
    p("azure", None, Some("AZURE_API_KEY")),
    p("azure_ai", None, Some("AZURE_AI_API_KEY")),
    Provider {
        prefix: "anthropic",
        default_url: Some("https://api.anthropic.com/v1"),
        anthropic: true,
        key_env: Some("ANTHROPIC_API_KEY"),
        compatible: true,
    },
    p(
        "groq",
        Some("https://api.groq.com/openai/v1"),
        Some("GROQ_API_KEY"),
    ),
    p(
        "mistral",
        Some("https://api.mistral.ai/v1"),
        Some("MISTRAL_API_KEY"),
    ),
    p(
        "deepseek",
        Some("https://api.deepseek.com/v1"),
        Some("DEEPSEEK_API_KEY"),
    ),
    p(
        "together_ai",
        Some("https://api.together.xyz/v1"),
        Some("TOGETHERAI_API_KEY"),
    ),
    p(
        "openrouter",
        Some("https://openrouter.ai/api/v1"),
        Some("OPENROUTER_API_KEY"),
    ),
    p(
        "fireworks_ai",
        Some("https://api.fireworks.ai/inference/v1"),
        Some("FIREWORKS_AI_API_KEY"),
    ),
    p("xai", Some("https://api.x.ai/v1"), Some("XAI_API_KEY")),
    p(
        "perplexity",
        Some("https://api.perplexity.ai"),
        Some("PERPLEXITYAI_API_KEY"),
    ),
    p(
        "deepinfra",
        Some("https://api.deepinfra.com/v1/openai"),
        Some("DEEPINFRA_API_KEY"),
    ),
    p(
        "gemini",
        Some("https://generativelanguage.googleapis.com/v1beta/openai"),
        Some("GEMINI_API_KEY"),
    ),
    p(
        "nvidia_nim",
        Some("https://integrate.api.nvidia.com/v1"),
        Some("NVIDIA_NIM_API_KEY"),
    ),
    p(
        "cerebras",
        Some("https://api.cerebras.ai/v1"),
        Some("CEREBRAS_API_KEY"),
    ),
    foreign("bedrock"),
    foreign("bedrock_converse"),
    foreign("vertex_ai"),
    foreign("vertex_ai_beta"),
    foreign("sagemaker"),
    foreign("cohere"),
    foreign("cohere_chat"),
    foreign("huggingface"),
    foreign("replicate"),
    foreign("watsonx"),
    foreign("databricks"),
    foreign("cloudflare"),
    foreign("ai21"),
    foreign("palm"),
];

/// The provider a LiteLLM model string names, and the model id without its prefix. Ids that
/// contain `/` without a known provider prefix (`meta-llama/Llama-3.1-8B`) are kept whole and
/// read as OpenAI's, as LiteLLM does.
pub fn split(model: &str) -> (&'static Provider, &str) {
    if let Some((prefix, rest)) = model.split_once('/') {
        if let Some(provider) = PROVIDERS.iter().find(|p| p.prefix == prefix) {
            return (provider, rest);
        }
    }
    (&PROVIDERS[0], model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_split_only_for_known_providers() {
        let (p, id) = split("openai/gpt-4o");
        assert_eq!((p.prefix, id), ("openai", "gpt-4o"));
        let (p, id) = split("hosted_vllm/meta-llama/Llama-3.1-8B");
        assert_eq!((p.prefix, id), ("hosted_vllm", "meta-llama/Llama-3.1-8B"));
        let (p, id) = split("meta-llama/Llama-3.1-8B");
        assert_eq!((p.prefix, id), ("openai", "meta-llama/Llama-3.1-8B"));
        let (p, _) = split("anthropic/claude-3-5-sonnet");
        assert!(p.anthropic);
        assert!(!split("bedrock/anthropic.claude-v2").0.compatible);
    }
}
