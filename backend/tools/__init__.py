"""Tools the agents call, and the sandbox they run code in."""
