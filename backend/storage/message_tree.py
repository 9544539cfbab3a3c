"""A conversation's messages as a tree: each follows its parent, and an edited message or
a regenerated answer is a sibling of the one it replaces.

A branch is the path from the first message to a leaf. Where a client names no
branch, the conversation shows the one that ends with its latest message, so the
branch a user last wrote in is the one they come back to.
"""

from __future__ import annotations

from collections.abc import Sequence

from backend.storage.base import Message


class MessageTree:
    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = {m.id: m for m in messages}
        self.children: dict[int | None, list[int]] = {}
        for message in sorted(messages, key=lambda m: m.id):
            parent = message.parent_id if message.parent_id in self.messages else None
            self.children.setdefault(parent, []).append(message.id)

    def __contains__(self, message_id: int) -> bool:
        return message_id in self.messages

    @property
    def latest(self) -> int | None:
        return max(self.messages, default=None)

    def path(self, leaf: int | None) -> list[Message]:
        """The messages from the first to `leaf`, in order (empty for None)."""
        path: list[Message] = []
        seen: set[int] = set()
        while leaf is not None and leaf in self.messages and leaf not in seen:
            seen.add(leaf)
            message = self.messages[leaf]
            path.append(message)
            leaf = message.parent_id
        return path[::-1]

    def latest_leaf(self, under: int) -> int:
        """The newest message in `under`'s subtree: the end of the branch shown for it."""
        newest, stack = under, [under]
        while stack:
            current = stack.pop()
            newest = max(newest, current)
            stack.extend(self.children.get(current, []))
        return newest

    def siblings(self, message_id: int) -> list[int]:
        """The messages with the same parent as `message_id` (itself included), oldest first."""
        parent = self.messages[message_id].parent_id
        return list(self.children.get(parent if parent in self.messages else None, []))

    def leaves(self) -> list[int]:
        """Each branch's last message, oldest first."""
        return [m for m in sorted(self.messages) if not self.children.get(m)]

    def forks(self) -> bool:
        """Whether the conversation has more than one branch."""
        return any(len(children) > 1 for children in self.children.values())
