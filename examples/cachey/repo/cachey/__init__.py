"""cachey: prices per item and currency, served over HTTP, cached in Redis."""
