"""horizonui: a forecast page backed by Postgres, and passkeys."""
