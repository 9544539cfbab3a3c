"""The request path's middle: router, agents, LLM clients and credentials."""
