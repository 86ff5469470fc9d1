"""Register the schema with Hydra's ConfigStore (once per process)."""
from hydra.core.config_store import ConfigStore

from .schema import RunConfig

_done = False


def register() -> None:
    global _done
    if not _done:
        ConfigStore.instance().store(name="arena_schema", node=RunConfig)
        _done = True
