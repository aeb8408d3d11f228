"""The protocol as versioned, validated data (one YAML document per version)."""

from speculator_arena.protocol.model import (
    Protocol,
    TaskProtocol,
    available_versions,
    load_protocol,
    protocol_digest,
    target_task,
)

__all__ = ["Protocol", "TaskProtocol", "available_versions", "load_protocol", "protocol_digest", "target_task"]
