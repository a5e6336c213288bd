"""Database layer: models, engine and session scope, migrations, queries."""
