"""Run ownership: which worker executes a run (``owner``) under which claim (``lease_generation``).

Every write a run's executor makes checks both in the same transaction (a fence); a sweep that fails a stale run
bumps the generation, so a writer that was frozen past its lease writes nothing more when it wakes.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("research_runs") as batch:
        batch.add_column(sa.Column("owner", sa.String(96), nullable=True))
        batch.add_column(sa.Column("lease_generation", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("research_runs") as batch:
        batch.drop_column("lease_generation")
        batch.drop_column("owner")
