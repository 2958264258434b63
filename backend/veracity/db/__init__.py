"""Storage: SQLAlchemy 2 async on SQLite (default) or PostgreSQL; one Alembic history for both."""
