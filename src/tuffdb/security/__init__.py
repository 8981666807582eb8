"""Authentication (API keys, JWT) shared by the served faces."""
