"""Resume: research_runs.resumes counts how many times another process took a run over after its executor died
(``runs/resume.py``), so a run that keeps dying is failed after ``VERACITY_LIMITS__MAX_RESUMES`` of them. The graph's
checkpoints themselves live in the checkpointer's own tables, created by ``db/checkpoints.setup_checkpoints``.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("research_runs") as batch:
        batch.add_column(sa.Column("resumes", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("research_runs") as batch:
        batch.drop_column("resumes")
