"""The desk: corpora as owned things (uploads from the browser), uploads and their progress events, follow-up
threads and refreshes of runs, and a short indexed key for "other runs of this question".

- ``corpora``: one row per corpus, ``user_id`` its owner (NULL: shared — made by the CLI or bundled — seen by
  everyone). Filled from the documents already stored, all shared. A user who owns a corpus cannot be deleted
  (RESTRICT): a corpus that lost its owner row would read as shared.
- ``uploads`` / ``upload_events``: an upload from the browser or the API, and the progress it reports (read by the
  same Last-Event-ID stream a run's events are).
- ``research_runs.parent_id``: the run a follow-up follows; ``refresh_of``: the run whose next artifact version this
  run writes; ``question_key``: the question's SHA-256, indexed with the template (a question is up to 2,000
  characters — too long for a plain B-tree entry on PostgreSQL).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "corpora",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_corpora"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_corpora_user_id_users", ondelete="RESTRICT"),
    )
    op.create_index("ix_corpora_user_id", "corpora", ["user_id"])
    op.execute(
        "INSERT INTO corpora (name, user_id, created_at) "
        "SELECT corpus, NULL, MIN(created_at) FROM documents GROUP BY corpus"
    )
    op.create_table(
        "uploads",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("corpus", sa.String(64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_uploads"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_uploads_user_id_users", ondelete="CASCADE"),
    )
    op.create_index("ix_uploads_user_id", "uploads", ["user_id"])
    op.create_index("ix_uploads_status", "uploads", ["status"])
    op.create_table(
        "upload_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("upload_id", sa.String(32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_upload_events"),
        sa.ForeignKeyConstraint(
            ["upload_id"], ["uploads.id"], name="fk_upload_events_upload_id_uploads", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("upload_id", "seq", name="uq_upload_events_upload_id"),
    )
    with op.batch_alter_table("research_runs") as batch:
        batch.add_column(sa.Column("parent_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("refresh_of", sa.String(32), nullable=True))
        batch.add_column(sa.Column("question_key", sa.String(64), nullable=True))
        batch.create_index("ix_research_runs_parent_id", ["parent_id"])
        batch.create_index("ix_research_runs_refresh_of", ["refresh_of"])
        batch.create_index("ix_research_runs_question_key", ["question_key", "template_id", "created_at"])
    bind = op.get_bind()
    runs = sa.table(
        "research_runs",
        sa.column("id", sa.String),
        sa.column("question", sa.Text),
        sa.column("question_key", sa.String),
    )
    rows = bind.execute(sa.select(runs.c.id, runs.c.question)).all()
    for run_id, question in rows:
        key = hashlib.sha256(question.encode("utf-8", "surrogatepass")).hexdigest()
        bind.execute(sa.update(runs).where(runs.c.id == run_id).values(question_key=key))


def downgrade() -> None:
    with op.batch_alter_table("research_runs") as batch:
        batch.drop_index("ix_research_runs_question_key")
        batch.drop_index("ix_research_runs_refresh_of")
        batch.drop_index("ix_research_runs_parent_id")
        batch.drop_column("question_key")
        batch.drop_column("refresh_of")
        batch.drop_column("parent_id")
    op.drop_table("upload_events")
    op.drop_table("uploads")
    op.drop_table("corpora")
