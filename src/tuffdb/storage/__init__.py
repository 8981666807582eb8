"""The storage core shared by every face: files, locks, codecs, segmented logs, group commit."""
