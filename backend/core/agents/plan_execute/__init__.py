"""The Plan-and-Execute agent: plan, run each step, revise the plan, answer."""
