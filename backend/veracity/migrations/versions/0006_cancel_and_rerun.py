"""Cancel and re-run: a run can be asked to stop (``cancel_requested``, read by its executor's fence on every
write, whichever process executes it), and a run can name the run it re-runs (``rerun_of``).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("research_runs") as batch:
        batch.add_column(sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("rerun_of", sa.String(32), nullable=True))
        batch.create_index("ix_research_runs_rerun_of", ["rerun_of"])


def downgrade() -> None:
    with op.batch_alter_table("research_runs") as batch:
        batch.drop_index("ix_research_runs_rerun_of")
        batch.drop_column("rerun_of")
        batch.drop_column("cancel_requested")
