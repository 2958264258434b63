"""Initial schema: runs, events, artifact versions, corpus documents and chunks with full-text search.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "research_runs",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("template_id", sa.String(64), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("corpus", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("budgets", sa.JSON(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_research_runs")),
    )
    op.create_index(op.f("ix_research_runs_status"), "research_runs", ["status"])
    op.create_index(op.f("ix_research_runs_created_at"), "research_runs", ["created_at"])

    op.create_table(
        "run_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["research_runs.id"],
            name=op.f("fk_run_events_run_id_research_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_events")),
        sa.UniqueConstraint("run_id", "seq", name=op.f("uq_run_events_run_id")),
    )
    op.create_index(op.f("ix_run_events_run_id"), "run_events", ["run_id"])

    op.create_table(
        "artifact_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("markdown", sa.Text(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["research_runs.id"],
            name=op.f("fk_artifact_versions_run_id_research_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifact_versions")),
        sa.UniqueConstraint("run_id", "version", name=op.f("uq_artifact_versions_run_id")),
    )
    op.create_index(op.f("ix_artifact_versions_run_id"), "artifact_versions", ["run_id"])

    op.create_table(
        "documents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("corpus", sa.String(64), nullable=False),
        sa.Column("doc_id", sa.String(512), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("source_path", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("published", sa.String(32), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_documents")),
        sa.UniqueConstraint("corpus", "doc_id", name=op.f("uq_documents_corpus")),
    )
    op.create_index(op.f("ix_documents_corpus"), "documents", ["corpus"])

    op.create_table(
        "chunks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("corpus", sa.String(64), nullable=False),
        sa.Column("ord", sa.Integer(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("end", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["document_id"],
            ["documents.id"],
            name=op.f("fk_chunks_document_id_documents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chunks")),
    )
    op.create_index(op.f("ix_chunks_document_id"), "chunks", ["document_id"])
    op.create_index(op.f("ix_chunks_corpus"), "chunks", ["corpus"])

    if op.get_bind().dialect.name == "sqlite":
        # External-content FTS5 index over chunks; triggers keep it in step with the table.
        op.execute(
            "CREATE VIRTUAL TABLE chunks_fts USING fts5("
            "title, text, content='chunks', content_rowid='id', tokenize='porter unicode61')"
        )
        op.execute(
            "CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN "
            "INSERT INTO chunks_fts(rowid, title, text) VALUES (new.id, new.title, new.text); END"
        )
        op.execute(
            "CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN "
            "INSERT INTO chunks_fts(chunks_fts, rowid, title, text) VALUES ('delete', old.id, old.title, old.text); END"
        )
        op.execute(
            "CREATE TRIGGER chunks_au AFTER UPDATE ON chunks BEGIN "
            "INSERT INTO chunks_fts(chunks_fts, rowid, title, text) VALUES ('delete', old.id, old.title, old.text); "
            "INSERT INTO chunks_fts(rowid, title, text) VALUES (new.id, new.title, new.text); END"
        )
    else:
        op.execute(
            "ALTER TABLE chunks ADD COLUMN tsv tsvector GENERATED ALWAYS AS ("
            "setweight(to_tsvector('english', coalesce(title, '')), 'A') || "
            "setweight(to_tsvector('english', coalesce(text, '')), 'B')) STORED"
        )
        op.execute("CREATE INDEX ix_chunks_tsv ON chunks USING gin (tsv)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS chunks_au")
        op.execute("DROP TRIGGER IF EXISTS chunks_ad")
        op.execute("DROP TRIGGER IF EXISTS chunks_ai")
        op.execute("DROP TABLE IF EXISTS chunks_fts")
    op.drop_table("chunks")
    op.drop_table("documents")
    op.drop_table("artifact_versions")
    op.drop_table("run_events")
    op.drop_table("research_runs")
