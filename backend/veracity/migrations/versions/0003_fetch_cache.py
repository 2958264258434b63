"""The fetch cache: one row per canonical URL (its SHA-256), raw bytes, extracted text, validators and TTL.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fetch_cache",
        sa.Column("url_hash", sa.String(64), nullable=False),
        sa.Column("canonical_url", sa.Text(), nullable=False),
        sa.Column("final_url", sa.Text(), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=False),
        sa.Column("content_type", sa.String(128), nullable=False),
        sa.Column("raw", sa.LargeBinary(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("author", sa.Text(), nullable=True),
        sa.Column("published", sa.String(32), nullable=True),
        sa.Column("paywalled", sa.Boolean(), nullable=False),
        sa.Column("etag", sa.Text(), nullable=True),
        sa.Column("last_modified", sa.Text(), nullable=True),
        sa.Column("extract_schema_version", sa.Integer(), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("url_hash", name=op.f("pk_fetch_cache")),
    )
    op.create_index(op.f("ix_fetch_cache_expires_at"), "fetch_cache", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_fetch_cache_expires_at"), table_name="fetch_cache")
    op.drop_table("fetch_cache")
