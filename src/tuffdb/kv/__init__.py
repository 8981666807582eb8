"""Face 1: the hash-log KV engine with an in-memory hot tier (see docs/design/kv.md)."""
