"""PYTHON_EXECUTOR_MODE=openinterpreter: open-interpreter writes the code, our sandbox runs it.

open-interpreter pins packages that current FastAPI cannot live beside, so it is
installed into its own venv (`make openinterpreter`) and driven as a worker
process: `worker.py` runs there, `bridge.py` talks to it from the server.
"""
