"""The python_coder tool: turn a question about the session's data into checked, executed code."""
