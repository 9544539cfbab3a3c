"""Background tasks that run beside the request path (idle-worker reaping, clean-up)."""
