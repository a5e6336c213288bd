"""Judge layer: prompt templates, score parsing and the OpenAI-compatible async client."""
