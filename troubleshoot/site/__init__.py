"""The knowledge base as a static website: `llmfix site build OUT` / `llmfix site serve`."""
