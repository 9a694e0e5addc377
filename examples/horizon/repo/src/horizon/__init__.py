"""horizon: demand forecasts over HTTP, with every request stored in Postgres."""

__version__ = "0.3.0"
