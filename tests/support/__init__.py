"""Test infrastructure shared by tests and benchmarks: live servers and fake upstreams."""
