"""Maintenance scripts run by hand (docs/development.md)."""
