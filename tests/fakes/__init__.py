"""Loopback fakes of external services (OpenAI-compatible LLM, Kubernetes API) that tests start and stop."""
