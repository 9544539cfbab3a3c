"""The storage interface the rest of the server depends on.

Records are plain frozen dataclasses, so nothing outside `backend/storage` knows
which database is behind them. A PostgreSQL adapter only has to implement `Store`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from backend.storage.data_sources import DataNote, DataSource, NoteStatus, VerifiedAnswer
from backend.storage.evals import EvalResultRow, EvalRunRow, EvalSetRow
from backend.storage.feedback import Feedback, FeedbackCounts, Rating
from backend.storage.groups import Group, Membership, Origin
from backend.storage.limit_values import UserLimits
from backend.storage.mcp_servers import McpServer
from backend.storage.openai_objects import Container, StoredFile
from backend.storage.sessions import SessionKey, client_id, session_key
from backend.storage.usage import UsageCounts, UsageDay


@dataclass(frozen=True)
class User:
    id: int
    username: str
    password_hash: str
    is_admin: bool
    created_at: float
    disabled: bool = False
    limits: UserLimits = field(default_factory=UserLimits)
    # Moved on when all the user's credentials end: tokens of an earlier epoch are refused.
    credentials_epoch: int = 0
    # As the identity provider last gave them (single sign-on); "" for local users.
    email: str = ""
    display_name: str = ""


@dataclass(frozen=True)
class ApiKey:
    """A personal API key as stored: its secret is not here, only its hash is kept."""

    id: int
    user_id: int
    name: str
    created_at: float
    last_used_at: float | None


@dataclass(frozen=True)
class Conversation:
    id: str
    user_id: int
    session_key: SessionKey  # `u<user id>-<session id>` (backend/storage/sessions.py)
    title: str
    created_at: float
    updated_at: float

    @classmethod
    def new(cls, user_id: int, title: str) -> Conversation:
        """A conversation for a new session, not stored yet (`Store.start_conversation`)."""
        now = time.time()
        key = session_key(user_id, uuid.uuid4().hex)
        return cls(uuid.uuid4().hex, user_id, key, title[:80], now, now)

    @property
    def session_id(self) -> str:
        """The session id as its owner knows it, for the wire."""
        return client_id(self.session_key)


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: str
    role: str
    content: str
    created_at: float
    metadata: dict[str, Any] = field(default_factory=dict)
    parent_id: int | None = None  # the message it follows; None for a conversation's first


# `parent_id` for a message that starts a new branch at the top of its conversation
# (an edit of the first message). A missing parent (None) means: after the latest message.
ROOT = 0


class SessionOwnedByAnotherUser(Exception):
    """The session id exists but belongs to someone else (callers answer 404)."""


class ConversationNotFound(Exception):
    """The conversation was deleted (for example while a turn was still running)."""


class UsernameTaken(Exception):
    """A user with this name already exists."""

    def __init__(self, username: str) -> None:
        super().__init__(username)
        self.username = username


class StoreBusy(Exception):
    """Another process held the database for longer than we wait (callers answer 503)."""


class StoreUnavailable(Exception):
    """The database server cannot be reached (callers answer 503)."""


class StoreFull(Exception):
    """The database's disk is full: nothing was written (callers answer 507)."""


class Store(Protocol):
    def get_user(self, username: str) -> User | None: ...

    def get_user_by_id(self, user_id: int) -> User | None: ...

    def create_user(self, username: str, password_hash: str, *, is_admin: bool = False) -> User: ...

    def set_password_hash(
        self, user_id: int, password_hash: str, *, end_credentials: bool = False
    ) -> User | None:
        """Set the user's password hash; with `end_credentials`, also `end_credentials`
        in the same transaction. The user as changed, or None if there is none."""
        ...

    def end_credentials(self, user_id: int) -> User | None:
        """Move the user's credentials epoch on and delete their API keys, so that every
        token and key issued so far is refused. The user as changed, or None."""
        ...

    def list_users(self) -> list[User]:
        """Every user, oldest first."""
        ...

    def update_user(
        self,
        user_id: int,
        *,
        disabled: bool | None = None,
        limits: UserLimits | None = None,
        email: str | None = None,
        display_name: str | None = None,
    ) -> User | None:
        """Set what is given (the limits as a whole); None if there is no such user."""
        ...

    def delete_user(self, user_id: int) -> bool:
        """Delete the user's row (their conversations and API keys go with it)."""
        ...

    # Signing in: tokens that were signed out, and personal API keys

    def user_for_token(self, user_id: int, token_id: str) -> User | None:
        """The user, unless there is none or the token `token_id` was revoked."""
        ...

    def revoke_token(self, token_id: str, expires_at: float) -> None:
        """Refuse `token_id` until `expires_at` (when it would expire anyway); ids past
        their expiry are forgotten."""
        ...

    def create_api_key(self, user_id: int, name: str, key_hash: str) -> ApiKey: ...

    def list_api_keys(self, user_id: int) -> list[ApiKey]:
        """The user's keys, oldest first."""
        ...

    def delete_api_key(self, user_id: int, key_id: int) -> bool:
        """Delete the key only if `user_id` owns it."""
        ...

    def user_for_api_key(self, key_hash: str, now: float) -> User | None:
        """The owner of the key with this hash (marking it used at `now`), or None."""
        ...

    def conversation_for_session(
        self, user_id: int, session_id: SessionKey, title: str
    ) -> Conversation:
        """Return the user's conversation for `session_id`, creating it if new.

        An untitled conversation (`title` was empty when it was created) takes `title`.
        """
        ...

    def begin_turn(
        self,
        user_id: int,
        session_id: SessionKey,
        title: str,
        text: str,
        *,
        history: bool,
        parent_id: int | None = None,
    ) -> tuple[Conversation, list[Message], Message | None]:
        """One transaction: the conversation (as `conversation_for_session`), all its
        messages so far if `history`, then `text` (if any) appended as the user's message
        after `parent_id` (`ROOT`: first; None: after the latest), which is returned."""
        ...

    def start_conversation(self, conversation: Conversation, text: str) -> Message | None:
        """One transaction: store a new conversation (`Conversation.new`) and `text`, if
        any, as its first user message (returned)."""
        ...

    def session_owner(self, session_id: SessionKey) -> int | None:
        """The user who owns `session_id`, or None if nobody has used it yet."""
        ...

    def legacy_sessions(self) -> list[tuple[str, str]]:
        """(old id, key) of the sessions stored before ids were namespaced by their owner
        whose workspaces may still need renaming (migration 4)."""
        ...

    def forget_legacy_session(self, old_id: str) -> None: ...

    def list_conversations(self, user_id: int) -> list[Conversation]: ...

    def get_conversation(self, user_id: int, conversation_id: str) -> Conversation | None:
        """Return the conversation only if `user_id` owns it."""
        ...

    def delete_conversation(self, user_id: int, conversation_id: str) -> bool: ...

    def add_message(
        self,
        conversation_id: str,
        role: str,
        content: str,
        metadata: dict[str, Any] | None = None,
        parent_id: int | None = None,
    ) -> Message:
        """Append a message after `parent_id` (`ROOT`: first; None: after the latest); it
        is durable once this returns."""
        ...

    def update_message(self, message_id: int, content: str, metadata: dict[str, Any]) -> None:
        """Replace a message's content and metadata (a turn's answer, once it is known)."""
        ...

    def interrupt_unfinished(self, server: str) -> int:
        """Mark answers that `server` (or no named server) left `running` when it died
        `interrupted`; returns how many. Other servers' running turns are theirs."""
        ...

    def list_messages(self, conversation_id: str) -> list[Message]: ...

    def response_message(self, conversation_id: str, response_id: str) -> int | None:
        """The id of the conversation's answer that the Responses API named `response_id`."""
        ...

    def add_session_step(self, session_id: SessionKey, step: dict[str, Any]) -> None:
        """Append a successful run to the session's steps (what its export replays);
        `ConversationNotFound` if the session has no conversation (any more)."""
        ...

    def list_session_steps(self, session_id: SessionKey) -> list[dict[str, Any]]:
        """The session's steps, oldest first."""
        ...

    # Failed logins (keys such as `user:alice`), shared by every server on the database.

    def locked_until(self, keys: Sequence[str]) -> float:
        """The latest time (epoch seconds) any of `keys` is locked until; 0 if none is."""
        ...

    def count_login_failure(self, key: str, now: float, forget_before: float) -> int:
        """Count one more failure of `key` (atomically, across servers) and return the
        count; keys whose last failure is older than `forget_before` are forgotten."""
        ...

    def lock_login(self, key: str, until: float) -> None: ...

    def clear_login_failures(self, keys: Sequence[str]) -> None: ...

    # Groups (backend/storage/groups.py) and single sign-on identities (identities.py)

    def list_groups(self) -> list[Group]: ...

    def get_group(self, group_id: int) -> Group | None: ...

    def create_group(self, **fields: Any) -> Group:
        """Raises `GroupNameTaken`."""
        ...

    def update_group(self, group_id: int, **fields: Any) -> Group | None:
        """Raises `GroupNameTaken`; None when there is no such group."""
        ...

    def delete_group(self, group_id: int) -> bool: ...

    def group_members(self, group_id: int) -> list[Membership]: ...

    def memberships(self, user_id: int | None = None) -> list[tuple[int, Membership]]:
        """(group id, membership) of one user, or of everyone (None)."""
        ...

    def groups_of(self, user_id: int) -> list[Group]: ...

    def add_group_member(self, group_id: int, user_id: int, origin: Origin = "admin") -> bool:
        """False when the group or the user does not exist."""
        ...

    def remove_group_member(self, group_id: int, user_id: int) -> bool: ...

    def sync_claimed_groups(self, user_id: int, names: Sequence[str]) -> list[Group]:
        """The user's claimed memberships become exactly `names` (missing groups made)."""
        ...

    def user_id_for_identity(self, issuer: str, subject: str) -> int | None: ...

    def link_identity(self, user_id: int, issuer: str, subject: str) -> None:
        """Raises `IdentityTaken`."""
        ...

    # MCP servers for the agents (backend/storage/mcp_servers.py)

    def list_mcp_servers(self) -> list[McpServer]: ...

    def get_mcp_server(self, server_id: int) -> McpServer | None: ...

    def create_mcp_server(self, **fields: Any) -> McpServer:
        """Raises `McpServerNameTaken`."""
        ...

    def update_mcp_server(self, server_id: int, **fields: Any) -> McpServer | None:
        """Raises `McpServerNameTaken`; None when there is no such server."""
        ...

    def delete_mcp_server(self, server_id: int) -> bool: ...

    # Data sources (backend/storage/data_sources.py)

    def visible_sources(self, user_id: int) -> list[DataSource]: ...

    def get_source(self, source_id: str) -> DataSource | None: ...

    def create_source(self, user_id: int, **fields: Any) -> DataSource:
        """Raises `SourceNameTaken`."""
        ...

    def update_source(self, source_id: str, **fields: Any) -> DataSource | None:
        """Raises `SourceNameTaken`; None when there is no such source."""
        ...

    def set_source_catalog(self, source_id: str, catalog: str) -> None: ...

    def set_source_shares(self, source_id: str, user_ids: Sequence[int]) -> None: ...

    def set_source_groups(self, source_id: str, group_ids: Sequence[int]) -> None: ...

    def delete_source(self, source_id: str) -> bool: ...

    def attach_sources(self, key: SessionKey, source_ids: Sequence[str]) -> None: ...

    def attached_sources(self, key: SessionKey) -> list[DataSource]: ...

    def forget_session_sources(self, key: SessionKey) -> None: ...

    def source_notes(self, source_id: str) -> list[DataNote]: ...

    def set_note(
        self, source_id: str, target: str, status: NoteStatus, note: str, author_id: int
    ) -> None: ...

    def add_verified_answer(
        self,
        source_id: str,
        user_id: int,
        question: str,
        answer: str,
        code: str,
        queries: Sequence[str],
    ) -> VerifiedAnswer: ...

    def verified_answers(self, source_ids: Sequence[str]) -> list[VerifiedAnswer]: ...

    def delete_verified_answer(self, source_id: str, answer_id: str) -> bool: ...

    # OpenAI's Files and Containers APIs (backend/storage/openai_objects.py): every read
    # takes the owner's id

    def add_file(
        self, user_id: int, file_id: str, filename: str, purpose: str, size: int
    ) -> StoredFile: ...

    def get_file(self, user_id: int, file_id: str) -> StoredFile | None: ...

    def list_files(self, user_id: int) -> list[StoredFile]: ...

    def delete_file(self, user_id: int, file_id: str) -> bool: ...

    def add_container(
        self,
        user_id: int,
        container_id: str,
        session_key: SessionKey,
        name: str,
        expires_minutes: int,
    ) -> Container: ...

    def get_container(self, user_id: int, container_id: str) -> Container | None: ...

    def container_of_session(self, session_key: SessionKey) -> Container | None: ...

    def list_containers(self, user_id: int) -> list[Container]: ...

    def live_containers(self) -> list[Container]: ...

    def touch_container(self, container_id: str, when: float) -> None: ...

    def expire_container(self, container_id: str, when: float) -> bool: ...

    def delete_container(self, user_id: int, container_id: str) -> bool: ...

    def forget_session_containers(self, session_key: SessionKey) -> None: ...

    # Usage per user and UTC day (backend/storage/usage.py)

    def add_usage(self, amounts: Sequence[tuple[int, str, UsageCounts]]) -> None:
        """Add each (user id, day, counts) to that day's row, atomically."""
        ...

    def usage_days(self, user_id: int, first_day: str) -> list[UsageDay]: ...

    def usage_totals(self, user_id: int | None = None) -> dict[int, UsageCounts]: ...

    def usage_on(self, day: str) -> dict[int, UsageCounts]: ...

    # Feedback on answers (backend/storage/feedback.py)

    def set_feedback(
        self, user_id: int, conversation_id: str, message_id: int, rating: Rating, note: str
    ) -> Feedback | None: ...

    def delete_feedback(self, user_id: int, conversation_id: str, message_id: int) -> bool: ...

    def feedback_in(self, user_id: int, conversation_id: str) -> dict[int, Feedback]: ...

    def feedback_counts(self, user_id: int | None = None) -> dict[str, FeedbackCounts]: ...

    # Evaluations (backend/storage/evals.py)

    def add_eval_set(
        self, user_id: int, set_id: str, name: str, source: str, questions: list[dict[str, Any]]
    ) -> EvalSetRow: ...

    def get_eval_set(self, user_id: int, set_id: str) -> EvalSetRow | None: ...

    def list_eval_sets(self, user_id: int) -> list[EvalSetRow]: ...

    def delete_eval_set(self, user_id: int, set_id: str) -> bool: ...

    def add_eval_run(
        self,
        user_id: int,
        run_id: str,
        eval_set: EvalSetRow,
        model: str,
        agent_type: str,
        server_id: str,
    ) -> EvalRunRow: ...

    def get_eval_run(self, user_id: int, run_id: str) -> EvalRunRow | None: ...

    def list_eval_runs(self, user_id: int) -> list[EvalRunRow]: ...

    def set_eval_run_status(
        self, run_id: str, status: str, error: str = "", *, finished: bool = False
    ) -> None: ...

    def add_eval_result(
        self,
        run_id: str,
        question_id: str,
        position: int,
        correct: bool,
        details: dict[str, Any],
        *,
        stopped: bool = False,
    ) -> None: ...

    def eval_results(self, user_id: int, run_id: str) -> list[EvalResultRow]: ...

    def delete_eval_run(self, user_id: int, run_id: str) -> bool: ...

    def interrupt_eval_runs(self, server_id: str) -> int: ...

    # The governor's places per user, shared by API servers (backend/storage/work_places.py)

    def take_work_place(
        self,
        place_id: str,
        kind: str,
        user_id: int,
        server_id: str,
        *,
        per_user: int,
        now: float,
        expires_at: float,
    ) -> bool:
        """A place of `kind` for the user if they hold fewer than `per_user` on all servers."""
        ...

    def release_work_place(self, place_id: str) -> None: ...

    def release_server_work_places(self, server_id: str) -> int: ...

    def close(self) -> None: ...
