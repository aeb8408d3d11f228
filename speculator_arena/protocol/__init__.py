"""The protocol as versioned, validated data (one YAML document per version): the speculator arena's
(model.py, versions/vN.yaml) and LowBArena's (lowb.py, lowb_versions/pN.yaml), versioned apart."""

from speculator_arena.protocol.lowb import (
    LowbProtocol,
    is_lowb_task,
    load_lowb_protocol,
    lowb_protocol_document,
    lowb_task_ids,
)
from speculator_arena.protocol.model import Protocol, TaskProtocol, load_protocol, target_task
from speculator_arena.protocol.version_files import available_versions, protocol_digest

__all__ = [
    "LowbProtocol",
    "Protocol",
    "TaskProtocol",
    "available_versions",
    "is_lowb_task",
    "load_lowb_protocol",
    "load_protocol",
    "lowb_protocol_document",
    "lowb_task_ids",
    "protocol_digest",
    "target_task",
]
