"""Chunk vectors: each passage's dense vector (its head, embedded by the semantic model), for hybrid retrieval.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "chunk_vectors",
        sa.Column("chunk_id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chunk_id"], ["chunks.id"], name=op.f("fk_chunk_vectors_chunk_id_chunks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("chunk_id", name=op.f("pk_chunk_vectors")),
    )


def downgrade() -> None:
    op.drop_table("chunk_vectors")
