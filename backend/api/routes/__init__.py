"""Route modules, one per resource; `backend.api.main` combines them."""
