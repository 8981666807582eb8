"""Backup, point-in-time restore and continuous archiving (design: docs/design/backup.md).

Built on the log-shipping seam (``tuffdb.storage.shipping``): a backup is a snapshot of
every store copied to a target with a manifest; an archive is base backups plus every
change after them, shipped in chunks; a restore rebuilds a data directory from either.
"""
