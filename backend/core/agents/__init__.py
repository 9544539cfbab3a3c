"""Agents that answer a turn. Each yields `AgentEvent`s."""
