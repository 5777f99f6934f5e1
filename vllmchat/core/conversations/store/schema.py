"""The SQLite schema of the conversation store, versioned with migrations."""

from __future__ import annotations

import sqlite3

from vllmchat.core.attachments.index import SCHEMA as ATTACHMENTS_SCHEMA
from vllmchat.core.attachments.vectors import SCHEMA as VECTORS_SCHEMA

TOOL_STEPS_SCHEMA = """
CREATE TABLE tool_steps (
    id INTEGER PRIMARY KEY,
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    call_id TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    result TEXT NOT NULL,
    truncated INTEGER NOT NULL DEFAULT 0,
    elapsed_s REAL NOT NULL DEFAULT 0
);
CREATE INDEX tool_steps_by_message ON tool_steps(message_id, position);
"""

TOOL_PROMPTS_SCHEMA = """
CREATE TABLE tool_prompts (  -- a reply's tool steps as the model was given them
    message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    messages TEXT NOT NULL
);
ALTER TABLE conversations ADD COLUMN tool_pick TEXT;  -- tools turned off (JSON), NULL: unset
CREATE TABLE tool_pick_last (  -- the user's last pick: a new conversation's
    id INTEGER PRIMARY KEY CHECK (id = 1),
    off TEXT NOT NULL
);
"""

MIGRATIONS: list[str] = [
    # 1: conversations, a tree of messages (branches), summaries, full-text search.
    """
    CREATE TABLE conversations (
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        system_prompt TEXT NOT NULL DEFAULT '',
        created REAL NOT NULL,
        updated REAL NOT NULL,
        leaf_id INTEGER
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
        content TEXT NOT NULL,
        created REAL NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0,
        token_ids TEXT,
        model TEXT NOT NULL DEFAULT '',
        settings TEXT NOT NULL DEFAULT '{}',
        stats TEXT NOT NULL DEFAULT '{}',
        partial INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
    CREATE INDEX messages_by_parent ON messages(parent_id);
    CREATE TABLE summaries (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        content TEXT NOT NULL,
        first_message_id INTEGER NOT NULL,
        last_message_id INTEGER NOT NULL,
        created REAL NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0,
        edited INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX summaries_by_conversation ON summaries(conversation_id, last_message_id);
    CREATE VIRTUAL TABLE messages_fts USING fts5(
        content, content='messages', content_rowid='id', tokenize='unicode61'
    );
    CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
    END;
    CREATE TRIGGER messages_au AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    END;
    """,
    # 2: pinned messages stay verbatim in every prompt and are never summarized.
    """
    ALTER TABLE messages ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
    """,
    # 3: a reasoning model's thinking, kept apart from the answer (never in a prompt).
    """
    ALTER TABLE messages ADD COLUMN thinking TEXT NOT NULL DEFAULT '';
    """,
    # 4: facts kept through summaries: taken from the user's messages or written by the user.
    """
    CREATE TABLE facts (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        message_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
        text TEXT NOT NULL,
        edited INTEGER NOT NULL DEFAULT 0,
        created REAL NOT NULL
    );
    CREATE INDEX facts_by_conversation ON facts(conversation_id, id);
    CREATE TABLE facts_taken (  -- the user messages already read for facts (id: the message's)
        id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE
    );
    """,
    # 5: attached documents and images, their chunks in a full-text index, and the
    # passages each reply was given (the text lives with the code that uses it).
    ATTACHMENTS_SCHEMA,
    # 6: the tool steps of a reply: each call, how it ended, what the model was shown.
    TOOL_STEPS_SCHEMA,
    # 7: a reply's tool steps as prompted (calls as sampled, results as shown), and the
    # tools picked for each conversation.
    TOOL_PROMPTS_SCHEMA,
    # 8: chunk vectors from an embedding model, for hybrid retrieval (FTS5 and cosine).
    VECTORS_SCHEMA,
]


class NewerStoreError(RuntimeError):
    """The database was written by a newer vllmchat."""


def migrate(db: sqlite3.Connection) -> int:
    """Bring the database to the newest schema; returns the version.

    The version is read again under the write lock, so two vllmchats starting at
    once migrate once; a busy lock is left to the caller to wait out.
    """
    if _check(_version(db)) == len(MIGRATIONS):
        return len(MIGRATIONS)  # no write, so no lock to wait for
    db.execute("BEGIN IMMEDIATE")
    try:
        version = _check(_version(db))  # another vllmchat may have migrated meanwhile
        for number in range(version + 1, len(MIGRATIONS) + 1):
            for statement in _statements(MIGRATIONS[number - 1]):
                db.execute(statement)
            db.execute(f"PRAGMA user_version={number}")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return len(MIGRATIONS)


def _version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def _check(version: int) -> int:
    if version > len(MIGRATIONS):
        raise NewerStoreError(
            f"The conversation store is version {version}, newer than this vllmchat "
            f"({len(MIGRATIONS)}); update vllmchat."
        )
    return version


def _statements(script: str) -> list[str]:
    """The statements of a migration, one by one (a trigger's body stays whole)."""
    statements, pending = [], ""
    for part in script.split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                statements.append(pending.strip())
            pending = ""
    return statements
