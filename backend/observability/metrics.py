"""The server's Prometheus metrics, in a registry of their own (served at /metrics).

Every label has a bounded set of values: a route's template (never its path), an HTTP
status class, an agent, an LLM stage, an outcome, and a model name among the first
`MAX_MODELS` the server has seen (later ones are `other`, as a client may send any
name). Never a user, a session, a file or a path.

Recording costs a dictionary lookup and an add whether or not anyone scrapes; the
gauges that need a look at the server (warm sandboxes, turns in progress, disk free)
are read only when scraped, through the `Gauges` collector the app registers.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series: one sample per counter, not two
REGISTRY = CollectorRegistry(auto_describe=True)
MAX_MODELS = 16
OTHER = "other"

# Latency buckets from 5 ms to 10 min: an HTTP request, a turn, an LLM call, a run.
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

HTTP_REQUESTS = Counter(
    "pda_http_requests",
    "HTTP requests by route template, method and status class.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
HTTP_SECONDS = Histogram(
    "pda_http_request_duration_seconds",
    "Time to a response's last byte, by route template and method.",
    ["route", "method"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
TURNS = Counter(
    "pda_turns",
    "Turns by agent (react, plan_execute, chat) and outcome (answered, failed, cancelled).",
    ["agent", "outcome"],
    registry=REGISTRY,
)
ANSWER_FEEDBACK = Counter(
    "pda_answer_feedback",
    "Thumbs given on answers, by the model that answered and rating (up, down).",
    ["model", "rating"],
    registry=REGISTRY,
)
EVAL_QUESTIONS = Counter(
    "pda_eval_questions",
    "Evaluation questions asked, by model and result (right, wrong, error).",
    ["model", "result"],
    registry=REGISTRY,
)
TURN_SECONDS = Histogram(
    "pda_turn_duration_seconds",
    "A turn's time from its request to its end, by agent.",
    ["agent"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
LLM_CALLS = Counter(
    "pda_llm_calls",
    "LLM calls by stage (react, plan, generate, review, answer, chat, ...), model and outcome.",
    ["stage", "model", "outcome"],
    registry=REGISTRY,
)
LLM_TOKENS = Counter(
    "pda_llm_tokens",
    "LLM tokens by stage, model and kind (prompt, completion), as the backend reported them.",
    ["stage", "model", "kind"],
    registry=REGISTRY,
)
LLM_SECONDS = Histogram(
    "pda_llm_call_duration_seconds",
    "An LLM call's time, by stage and model.",
    ["stage", "model"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
LLM_FIRST_TOKEN_SECONDS = Histogram(
    "pda_llm_time_to_first_token_seconds",
    "Time from a streamed LLM call's start to its first token, by stage and model.",
    ["stage", "model"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
SANDBOX_RUNS = Counter(
    "pda_sandbox_runs",
    "Sandbox runs by outcome (ok, error, timeout, restarted, refused).",
    ["outcome"],
    registry=REGISTRY,
)
SANDBOX_RUN_SECONDS = Histogram(
    "pda_sandbox_run_duration_seconds",
    "A sandbox run's time.",
    buckets=_SECONDS,
    registry=REGISTRY,
)
SANDBOX_EVICTIONS = Counter(
    "pda_sandbox_evictions",
    "Warm sandboxes stopped by the server, by reason (idle, room: to start another's).",
    ["reason"],
    registry=REGISTRY,
)
SANDBOX_OOM_KILLS = Counter(
    "pda_sandbox_oom_kills",
    "Processes the kernel killed in a sandbox for its memory limit (its cgroup's oom_kill).",
    registry=REGISTRY,
)
UPLOAD_BYTES = Counter(
    "pda_upload_bytes",
    "Bytes of files uploaded (forms, streamed PUTs, tus, OpenAI's Files API).",
    registry=REGISTRY,
)

_models: set[str] = set()
_models_lock = threading.Lock()


def model_label(name: str) -> str:
    """`name`, if it is among the first `MAX_MODELS` names seen, else `other`."""
    if name in _models:
        return name
    with _models_lock:
        if len(_models) < MAX_MODELS and len(name) <= 128:
            _models.add(name)
            return name
    return OTHER


def status_class(status: int) -> str:
    return f"{status // 100}xx"


class Gauges(Collector):
    """What the server is now, read when scraped: warm sandboxes, turns in progress (the
    run queue: turns started and not yet ended) and the data disk's free bytes."""

    def __init__(
        self,
        warm_sandboxes: Callable[[], int],
        turns_in_progress: Callable[[], int],
        data_dir: Path,
    ) -> None:
        self.warm_sandboxes = warm_sandboxes
        self.turns_in_progress = turns_in_progress
        self.data_dir = data_dir

    def collect(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(
            "pda_sandboxes_warm", "Warm sandboxes (a worker running).", self.warm_sandboxes()
        )
        yield GaugeMetricFamily(
            "pda_run_queue_depth",
            "Agent turns in progress (started, not yet ended), all users.",
            self.turns_in_progress(),
        )
        try:
            disk = os.statvfs(self.data_dir)
        except OSError:
            return
        yield GaugeMetricFamily(
            "pda_disk_free_bytes",
            "Free bytes on DATA_DIR's disk (for unprivileged writers).",
            disk.f_bavail * disk.f_frsize,
        )


def register_gauges(gauges: Gauges) -> None:
    """Once per process (the app's start): a second app in one process replaces the first's."""
    for collector in list(_gauges):
        REGISTRY.unregister(collector)
        _gauges.remove(collector)
    REGISTRY.register(gauges)
    _gauges.append(gauges)


_gauges: list[Gauges] = []
