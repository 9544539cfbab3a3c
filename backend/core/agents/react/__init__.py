"""The ReAct agent: thought, action, observation, until the final answer."""
