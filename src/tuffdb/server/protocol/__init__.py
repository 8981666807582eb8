"""Generated protobuf modules for the wire protocols tuffdb serves (see README.md)."""
