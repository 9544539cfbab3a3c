"""Wire encoders: each turns a turn's typed events (backend/core/events.py) into one
API's format, and keeps no state beyond what that format needs.

- `chat.py`: `/api/chat` (typed SSE, or one JSON body) and `/api/runs`' replay;
- `completions.py`: `/v1/chat/completions` (OpenAI chunks, or one completion);
- `responses.py`: `/v1/responses` (the Responses API's typed events, or one response).
"""
