"""What the server tells its operators: Prometheus metrics and OpenTelemetry traces.

The lowest layer: any module may record here, and this package imports none of the
others (see .importlinter).
"""
