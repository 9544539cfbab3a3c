"""HTTP layer: routes, dependencies, error shapes."""
