"""`python -m backend.evals`: evaluation runs from a terminal, through a server's API."""
