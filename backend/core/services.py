"""The long-lived objects a running server shares, built once at start-up.

Building them is where configuration problems surface (bad DATABASE_URL, a
missing model file, SANDBOX=bwrap without bubblewrap), so they stop start-up
with a one-line `ConfigError` instead of failing on the first request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool

from backend.config import ConfigError, Settings
from backend.core.accounts import ensure_admin
from backend.core.agents.runner import AgentRunner
from backend.core.branches import BranchStates
from backend.core.chat_service import ChatService
from backend.core.containers import Containers
from backend.core.data_sources import DataSources
from backend.core.disk_shares import DiskShares
from backend.core.disk_usage import DiskUsage
from backend.core.evals.jobs import EvalJobs
from backend.core.evals.sets import EvalSets
from backend.core.governor import Governor
from backend.core.instance import server_id
from backend.core.limits import Limits
from backend.core.mcp_registry import McpRegistry
from backend.core.oidc import OidcClient
from backend.core.purge import SessionPurge
from backend.core.python_coder_service import PythonCoderService
from backend.core.runs import RunRegistry
from backend.core.security import dummy_password_hash, load_or_create_secret_key
from backend.core.shared_places import SharedPlaces
from backend.core.source_queries import WORK_KIND
from backend.core.step_log import StoreStepLog
from backend.core.throttle import LoginThrottle
from backend.core.usage import UsageMeter
from backend.core.user_files import UserFiles
from backend.files.catalog import WorkspaceCatalog
from backend.files.conversion import ParquetConversions
from backend.files.isolation import IsolatedRunner
from backend.files.s3_source import S3Source
from backend.files.tables import close_engines
from backend.llm import LLMBackend, create_llm_backend
from backend.storage import Store, is_postgres, open_store
from backend.storage.audit import AuditLog
from backend.storage.eval_files import EvalSetFiles
from backend.storage.file_blobs import FileBlobs
from backend.storage.legacy_sessions import adopt_legacy_workspaces
from backend.storage.mirror import WorkspaceMirror
from backend.storage.resumable import ResumableUploads
from backend.storage.s3_objects import S3Config
from backend.storage.shared import SharedWorkspaces
from backend.storage.snapshots import TurnSnapshots
from backend.storage.workspaces import Workspaces
from backend.tools.data_sources.readers import SourceReaders
from backend.tools.mcp_client import McpLinks, ProgramBounds, hidden_paths
from backend.tools.python_coder.coder import PythonCoder
from backend.tools.sandbox import SandboxStatus, resolve_sandbox
from backend.tools.sandbox.command import helper_command
from backend.tools.sandbox.pool import ExecutorPool, SessionExecutors
from backend.tools.sandbox.ray_pool import RayExecutorPool
from backend.tools.sandbox.self_check import SandboxSelfCheck

logger = logging.getLogger(__name__)

LOGIN_MAX_BACKOFF = 900.0  # seconds: a throttled login is never locked out for longer
UPLOAD_RETENTION_SECONDS = 7 * 24 * 3600  # an unfinished tus upload is deleted after this


@dataclass
class Services:
    settings: Settings
    secret_key: str
    store: Store
    llm: LLMBackend
    chat: ChatService
    sandbox: SandboxStatus
    sandbox_check: SandboxSelfCheck  # one real sandbox at start-up (run by the lifespan)
    workspaces: Workspaces
    shared: SharedWorkspaces  # S3's copy of the workspaces, with EXECUTOR_BACKEND=ray
    uploads: ResumableUploads  # tus uploads in progress
    executors: SessionExecutors
    audit: AuditLog
    catalog: WorkspaceCatalog
    coder: PythonCoder
    python_coder: PythonCoderService  # POST /api/tools/python_coder
    steps: StoreStepLog  # each session's successful runs, for its export
    runs: RunRegistry
    login_throttle: LoginThrottle
    limits: Limits  # per user: agent runs, disk, warm sandboxes, daily usage (its meter)
    governor: Governor  # places for expensive server work: per user, in all, for how long
    mcp: McpRegistry  # the MCP servers an admin registered for the agents
    data_sources: DataSources  # users' read-only databases, and the queries on them
    files: UserFiles  # OpenAI's Files API
    containers: Containers  # OpenAI's containers: sessions by another name
    eval_sets: EvalSets  # evaluation sets: questions over files, with their answers
    evals: EvalJobs  # evaluation runs, in the background
    purge: SessionPurge  # deletes a session, or a user, from every place that keeps it
    oidc: OidcClient | None  # single sign-on's identity provider (None: OIDC_ISSUER unset)

    async def close(self) -> None:
        await self.evals.close()  # before the runs: their questions' turns end first
        await self.runs.close()
        await self.mcp.links.close()  # stdio servers' child processes stop
        await self.executors.close_all()
        if self.chat.agents is not None:
            await self.chat.agents.aclose()
        await self.limits.usage.close()  # what the last seconds used, written
        self.catalog.runner.close()
        await run_in_threadpool(self.data_sources.readers.close)  # held connections
        if self.catalog.conversions is not None:
            self.catalog.conversions.close()
        close_engines()  # the table queries' DuckDB
        await self.llm.aclose()
        if self.governor.shared is not None:
            self.governor.shared.close()  # the places' last releases, before the store goes
        self.store.close()


def build_services(settings: Settings) -> Services:
    settings.DATA_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret_key = load_or_create_secret_key(settings.SECRET_KEY, settings.DATA_DIR)
    sandbox = resolve_sandbox("bwrap" if settings.SANDBOX_REQUIRED else settings.SANDBOX)
    store = open_store(settings.DATABASE_URL, settings.DATA_DIR)
    server = server_id(settings.DATA_DIR)
    try:
        interrupted = store.interrupt_unfinished(server)
        if interrupted:
            logger.warning(
                "%d agent turn(s) were cut off by the last stop: marked interrupted", interrupted
            )
        if evals_cut := store.interrupt_eval_runs(server):
            logger.warning("%d evaluation run(s) were cut off by the last stop", evals_cut)
        ensure_admin(store, settings)
        dummy_password_hash(settings.PASSWORD_HASH_ROUNDS)  # made now: see auth's login
        llm = create_llm_backend(settings)
    except BaseException:
        store.close()
        raise
    workspaces = Workspaces(settings.DATA_DIR)
    usage = UsageMeter(store)
    limits = Limits(settings, store, DiskUsage(workspaces.root), usage)
    adopt_legacy_workspaces(store, workspaces)
    shared = SharedWorkspaces(workspaces, workspace_mirror(settings))
    uploads = ResumableUploads(settings.DATA_DIR)
    uploads.remove_expired(UPLOAD_RETENTION_SECONDS)
    audit = AuditLog(settings.DATA_DIR)
    conversions = ParquetConversions(
        workspaces,
        int(settings.PARQUET_CONVERSION_MB * 1024**2),
        quota_left=limits.disk_left_for,  # a copy lands in its owner's workspace
        confine=helper_command if sandbox.isolated else None,  # as the metadata reader
    )
    runner = metadata_runner(sandbox)
    s3_config = S3Config.from_settings(settings)
    s3 = None
    if s3_config is not None:
        s3 = S3Source(s3_config, workspaces, runner, int(settings.MAX_UPLOAD_SIZE_MB * 1024**2))
    catalog = WorkspaceCatalog(workspaces, runner, conversions=conversions, s3=s3)
    steps = StoreStepLog(store)
    coder = PythonCoder(settings, workspaces, catalog, steps)
    # A user's runs, and what the server writes for them, share what their quota leaves.
    disk_shares = DiskShares(limits.disk, limits.quota_bytes)
    executors: SessionExecutors
    if settings.EXECUTOR_BACKEND == "ray":  # sandboxes on the cluster's nodes (docs/scale-out.md)
        executors = RayExecutorPool(settings, workspaces, shared.mirror, limits.max_sandboxes)
    else:
        executors = ExecutorPool(settings, sandbox, workspaces, limits.max_sandboxes)
        executors.room = disk_shares.held
    executors.on_run = usage.add_run  # each run's seconds, to its session's owner
    sandbox_check = SandboxSelfCheck(settings.DATA_DIR, sandbox, executors.limits())
    if settings.EXECUTOR_BACKEND == "ray":
        sandbox_check.skip("sandboxes run on the Ray cluster's nodes, not on this server")
    elif not settings.SANDBOX_SELF_CHECK:
        sandbox_check.skip("the start-up check is off (SANDBOX_SELF_CHECK=false)")
    mcp = McpRegistry(
        store,
        secret_key,
        McpLinks(
            ProgramBounds(
                hidden_paths(settings.DATA_DIR, settings.DATABASE_URL), confine=sandbox.isolated
            ),
            connect_timeout=settings.MCP_CONNECT_TIMEOUT,
            call_timeout=settings.MCP_TOOL_TIMEOUT,
            max_chars=settings.MCP_TOOL_MAX_CHARS,
        ),
        settings.mcp_stdio_programs(),
    )
    # Several API servers share only PostgreSQL: there, a user's places count on all.
    shared_places = SharedPlaces(store, server) if is_postgres(settings.DATABASE_URL) else None
    governor = Governor(settings, shared_places)
    data_sources = DataSources(
        store,
        secret_key,
        SourceReaders(
            confine=helper_command if sandbox.isolated else None,
            file_timeout=settings.work_share(WORK_KIND).seconds,
        ),
        governor,
        settings,
        disk_left=lambda user_id: limits.quota_bytes(user_id) - limits.disk.used(user_id),
    )
    if isinstance(executors, ExecutorPool):  # Ray's sandboxes run on other nodes
        executors.answer_query = data_sources.answer_run
    coder.sources_context = data_sources.prompt_context
    agents = AgentRunner(settings, shared, catalog, coder, executors, llm.name, mcp, governor)
    agents.data_sources = data_sources
    branches = BranchStates(
        TurnSnapshots(settings.DATA_DIR, workspaces),
        executors,
        shared,
        disk_shares.writing,
        governor,
    )
    files = UserFiles(store, FileBlobs(settings.DATA_DIR), limits.disk)
    containers = Containers(
        store,
        workspaces,
        shared,
        executors,
        files,
        int(settings.PYTHON_CODE_MAX_FILE_SIZE * 1024**2),
    )
    python_coder = PythonCoderService(
        settings=settings,
        store=store,
        llm=llm,
        audit=audit,
        executors=executors,
        shared=shared,
        workspaces=workspaces,
        catalog=catalog,
        coder=coder,
        steps=steps,
        limits=limits,
    )
    chat = ChatService(store, llm, audit, agents, server, limits, branches, governor)
    upload_bytes = int(settings.MAX_UPLOAD_SIZE_MB * 1024**2)
    eval_sets = EvalSets(store, EvalSetFiles(settings.DATA_DIR), limits, upload_bytes)
    evals = EvalJobs(
        store,
        chat,
        eval_sets,
        workspaces,
        shared,
        server,
        max_running=settings.EVAL_MAX_RUNNING,
        max_file_bytes=upload_bytes,
    )
    runs = RunRegistry()
    purge = SessionPurge(
        store=store,
        runs=runs,
        executors=executors,
        agents=agents,
        catalog=catalog,
        shared=shared,
        uploads=uploads,
        files=files,
        evals=evals,
        eval_set_files=eval_sets.files,
        data_dir=settings.DATA_DIR,
    )
    return Services(
        settings=settings,
        secret_key=secret_key,
        store=store,
        llm=llm,
        chat=chat,
        sandbox=sandbox,
        sandbox_check=sandbox_check,
        workspaces=workspaces,
        shared=shared,
        uploads=uploads,
        executors=executors,
        audit=audit,
        catalog=catalog,
        coder=coder,
        python_coder=python_coder,
        steps=steps,
        runs=runs,
        limits=limits,
        governor=governor,
        mcp=mcp,
        data_sources=data_sources,
        files=files,
        containers=containers,
        eval_sets=eval_sets,
        evals=evals,
        purge=purge,
        oidc=OidcClient(settings) if settings.OIDC_ISSUER else None,
        login_throttle=LoginThrottle(
            store, settings.LOGIN_FREE_ATTEMPTS, settings.LOGIN_BACKOFF_SECONDS, LOGIN_MAX_BACKOFF
        ),
    )


def metadata_runner(sandbox: SandboxStatus) -> IsolatedRunner:
    """The helper that parses uploads: in bubblewrap when the sandbox has it."""
    if sandbox.isolated:
        return IsolatedRunner(confine=helper_command)
    logger.warning("File metadata is read without bubblewrap (rlimits only): %s", sandbox.detail)
    return IsolatedRunner()


def workspace_mirror(settings: Settings) -> WorkspaceMirror | None:
    """S3's copy of the workspaces: required with Ray, where sandboxes run on other nodes."""
    if settings.EXECUTOR_BACKEND != "ray":
        if settings.WORKSPACE_BUCKET:
            raise ConfigError("WORKSPACE_BUCKET: used only with EXECUTOR_BACKEND=ray")
        return None
    if not settings.WORKSPACE_BUCKET:
        raise ConfigError(
            "WORKSPACE_BUCKET: required with EXECUTOR_BACKEND=ray (an S3 bucket, or "
            "bucket/prefix, that every API server and Ray node reaches with the S3_* settings)"
        )
    try:
        return WorkspaceMirror.from_settings(settings, settings.DATA_DIR / "mirror")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
