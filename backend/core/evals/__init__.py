"""Evaluations: a set of questions over files with known answers, asked through the real
agents on a chosen model, and scored (questions.py, scoring.py, dabench.py, starter.py,
jobs.py)."""
