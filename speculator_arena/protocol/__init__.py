"""The protocol as versioned, validated data (one YAML document per version)."""

from speculator_arena.protocol.model import Protocol, TaskProtocol, load_protocol, target_task
from speculator_arena.protocol.version_files import available_versions, protocol_digest

__all__ = ["Protocol", "TaskProtocol", "available_versions", "load_protocol", "protocol_digest", "target_task"]
